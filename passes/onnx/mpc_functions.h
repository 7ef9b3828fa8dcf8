// Model-local functions for mpc's custom ops, written in standard ONNX ops.
//
// SPEC: every op of domain "mpc" in a written model is also a function of the
// model, so any ONNX runtime (and a reader) knows what it computes.
#pragma once

#include "passes/ir/graph.h"

#include <string>
#include <vector>

namespace onnx {
class ModelProto;
}

namespace mpc {

/// Adds a FunctionProto (domain "mpc") for each op in `ops` that has a
/// standard-ONNX body, and the opset imports the bodies need.
void appendMpcFunctions(const std::vector<std::string> &ops, const Model &model,
                        onnx::ModelProto &proto);

/// The mpc ops that have function bodies.
std::vector<std::string> mpcOpsWithFunctions();

} // namespace mpc
