// Diagnostics helpers.
#include "support/diagnostics.h"

#include "ir/graph.h"

namespace mpc {

std::string oneLine(const std::string &message) {
  static const char *kHex = "0123456789abcdef";
  std::string out;
  out.reserve(message.size());
  for (unsigned char c : message) {
    if (c == '\n')
      out += "\\n";
    else if (c == '\r')
      out += "\\r";
    else if (c < 0x20 || c == 0x7f)
      out += std::string("\\x") + kHex[c >> 4] + kHex[c & 15];
    else
      out += char(c);
  }
  if (out.size() <= kMaxErrorLine)
    return out;
  // A name from the input can be any length (a 50 000-character node name
  // quoted in a message listing eight of them): keep the line's start,
  // which names the flag or node, and its end, which says what to do, cut
  // at UTF-8 character boundaries.
  auto boundary = [&](size_t at) {
    while (at > 0 && (static_cast<unsigned char>(out[at]) & 0xC0) == 0x80)
      --at;
    return at;
  };
  size_t head = boundary(kMaxErrorLine * 2 / 3);
  size_t tail = boundary(out.size() - kMaxErrorLine / 4);
  return out.substr(0, head) + " ... [" + std::to_string(tail - head) +
         " characters left out] ... " + out.substr(tail);
}

std::string describeNode(const Node &n) {
  std::string op =
      n.domain().empty() ? n.opType() : n.domain() + "." + n.opType();
  return "node '" + n.name() + "' (" + op + ")";
}

ErrorBuilder::ErrorBuilder(const Node &n) { os_ << describeNode(n) << ": "; }

} // namespace mpc
