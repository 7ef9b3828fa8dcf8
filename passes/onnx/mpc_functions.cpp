// Function bodies for mpc ops (standard ONNX ops), parsed from ONNX text.
//
// Bodies are written in the ONNX text syntax and parsed once with ONNX's own
// parser, so they read like the spec in passes/ir/mpc_ops.h.
#include "passes/onnx/mpc_functions.h"

#include "onnx/defs/parser.h"
#include "onnx/onnx_pb.h"

#include <map>

namespace mpc {
namespace {

/// op -> function text. Filled in op by op; ops without an entry are written
/// without a body (documented in README as a known gap).
const std::map<std::string, const char *> &functionTexts() {
  static const std::map<std::string, const char *> texts = {
      {"ReluGrad", R"(<domain: "mpc", opset_import: ["" : 17]>
ReluGrad (dY, Y) => (dX) {
  zero = Constant <value = float {0.0}> ()
  zero_t = CastLike (zero, Y)
  pos = Greater (Y, zero_t)
  zeros = Mul (dY, zero_t)
  dX = Where (pos, dY, zeros)
}
)"},
  };
  return texts;
}

} // namespace

std::vector<std::string> mpcOpsWithFunctions() {
  std::vector<std::string> ops;
  for (const auto &kv : functionTexts())
    ops.push_back(kv.first);
  return ops;
}

void appendMpcFunctions(const std::vector<std::string> &ops, const Model &model,
                        onnx::ModelProto &proto) {
  (void)model;
  bool any = false;
  for (const std::string &op : ops) {
    auto it = functionTexts().find(op);
    if (it == functionTexts().end())
      continue;
    onnx::FunctionProto fn;
    auto status = onnx::OnnxParser::Parse(fn, it->second);
    if (!status.IsOK())
      continue; // a bug in the table; tests/unit/mpc_functions_test checks it
    *proto.add_functions() = fn;
    any = true;
  }
  (void)any;
  // Any mpc op, with or without a body, needs the domain imported.
  if (ops.empty())
    return;
  bool hasMpc = false;
  for (const auto &op : proto.opset_import())
    hasMpc |= op.domain() == "mpc";
  if (!hasMpc) {
    auto *op = proto.add_opset_import();
    op->set_domain("mpc");
    op->set_version(1);
  }
}

} // namespace mpc
