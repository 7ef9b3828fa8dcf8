// Accepting models of opsets older than kMinSupportedOpset whose ops did not
// change since (see old_opsets.h).
#include "passes/onnx/old_opsets.h"

#include "support/diagnostics.h"

#include "onnx/defs/schema.h"

#include <string>

namespace mpc {

void requireSemanticsUnchangedSince(const Graph &g, int64_t opset) {
  for (const auto &n : g.nodes()) {
    if (!n->domain().empty() && n->domain() != "ai.onnx")
      continue;
    const std::string &op = n->opType();
    // Schema(op, v) is the operator version in effect at opset v.
    const onnx::OpSchema *then =
        onnx::OpSchemaRegistry::Schema(op, int(opset), "");
    const onnx::OpSchema *now =
        onnx::OpSchemaRegistry::Schema(op, int(kMinSupportedOpset), "");
    if (!then)
      errorAt(*n) << op << " is not an ONNX op at opset " << opset
                  << ", the opset the model imports";
    if (!now || now->since_version() != then->since_version())
      errorAt(*n) << "the model imports opset " << opset << ", older than the "
                  << "oldest supported (" << kMinSupportedOpset << "), and "
                  << op << " changed since (" << op << "-"
                  << then->since_version() << " at opset " << opset << ", "
                  << op << "-" << (now ? now->since_version() : 0)
                  << " at opset " << kMinSupportedOpset << ")";
  }
}

} // namespace mpc
