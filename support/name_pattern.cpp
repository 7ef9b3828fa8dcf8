// Name patterns of mpc-opt's flags (support/name_pattern.h).
#include "support/name_pattern.h"

#include "support/diagnostics.h"

#include <re2/re2.h>

namespace mpc {
namespace {

/// A pattern can be any length, and RE2's error quotes the part at fault:
/// the line keeps the start of either.
std::string shorten(const std::string &s) {
  return s.size() > 80 ? s.substr(0, 77) + "..." : s;
}

} // namespace

bool NamePattern::search(std::string_view name) const {
  return RE2::PartialMatch(re2::StringPiece(name.data(), name.size()), *re_);
}

std::optional<NamePattern> compileNamePattern(const std::string &pattern,
                                              const char *flag) {
  if (pattern.empty())
    return std::nullopt;
  RE2::Options options;
  // The error is the tool's one line, not RE2's log on stderr.
  options.set_log_errors(false);
  auto re = std::make_shared<const RE2>(pattern, options);
  if (!re->ok()) {
    error() << "--" << flag << ": invalid regular expression '"
            << shorten(pattern) << "': " << shorten(re->error());
  }
  NamePattern p;
  p.text_ = pattern;
  p.re_ = std::move(re);
  return p;
}

} // namespace mpc
