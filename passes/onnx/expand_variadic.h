// Expands mpc's variadic ops (UnscaleGradients, ClipGradNorm, ExtremumGrad)
// into standard ONNX ops in place, for models that other runtimes execute
// (--emit=step).
#pragma once

#include "passes/ir/graph.h"

#include <cstddef>

namespace mpc {

/// Replaces every mpc.UnscaleGradients, mpc.ClipGradNorm and
/// mpc.ExtremumGrad node of g by standard ops computing the same outputs
/// under the same names. Returns the number of nodes expanded.
size_t expandVariadicMpcOps(Graph &g);

} // namespace mpc
