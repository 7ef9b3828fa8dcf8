// Expands mpc's variadic ops (UnscaleGradients, ClipGradNorm, ExtremumGrad,
// AllReduce), and BatchNormalizationGrad with its statistics given, into
// standard ONNX ops in place, for models that other runtimes execute
// (--emit=step).
#pragma once

#include "ir/graph.h"

#include <cstddef>

namespace mpc {

/// Replaces every mpc.UnscaleGradients, mpc.ClipGradNorm, mpc.ExtremumGrad,
/// mpc.AllReduce and 5-input mpc.BatchNormalizationGrad node of g by
/// standard ops computing the same outputs under the same names. `opset`
/// is g's default-domain opset (ReduceSum takes its axes as an input from
/// 13). Returns the number of nodes expanded.
size_t expandVariadicMpcOps(Graph &g, int64_t opset = 17);

} // namespace mpc
