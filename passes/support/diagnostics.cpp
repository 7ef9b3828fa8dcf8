// Diagnostics helpers.
#include "passes/support/diagnostics.h"

#include "passes/ir/graph.h"

namespace mpc {

std::string describeNode(const Node &n) {
  std::string op =
      n.domain().empty() ? n.opType() : n.domain() + "." + n.opType();
  return "node '" + n.name() + "' (" + op + ")";
}

ErrorBuilder::ErrorBuilder(const Node &n) { os_ << describeNode(n) << ": "; }

} // namespace mpc
