// joined: a few strings put end to end in one allocation.
//
// The passes build a name per node or value they make ("P_exp_avg",
// "adam_P", "h_fp16", "autocast_h", "<node>_grad_<what>"), thousands per
// compile. operator+ copies the first part and then grows the copy for each
// further part; this sizes the result once and copies each part into it.
#pragma once

#include <cstring>
#include <string>
#include <string_view>

namespace mpc {

inline std::string joined(std::string_view a, std::string_view b,
                          std::string_view c = {}) {
  std::string s(a.size() + b.size() + c.size(), '\0');
  char *out = s.data();
  if (!a.empty())
    std::memcpy(out, a.data(), a.size());
  if (!b.empty())
    std::memcpy(out + a.size(), b.data(), b.size());
  if (!c.empty())
    std::memcpy(out + a.size() + b.size(), c.data(), c.size());
  return s;
}

} // namespace mpc
