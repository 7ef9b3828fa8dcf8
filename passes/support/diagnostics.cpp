// Diagnostics helpers.
#include "passes/support/diagnostics.h"

#include "passes/ir/graph.h"

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
  return out;
}

std::string describeNode(const Node &n) {
  std::string op =
      n.domain().empty() ? n.opType() : n.domain() + "." + n.opType();
  return "node '" + n.name() + "' (" + op + ")";
}

ErrorBuilder::ErrorBuilder(const Node &n) { os_ << describeNode(n) << ": "; }

} // namespace mpc
