// FLOP counts of a compiled step: per node, and split into the forward, the
// backward and the recomputation that --recompute adds to the backward.
#pragma once

#include "ir/graph.h"

#include "support/saturating.h"

#include <cstdint>

namespace mpc {

/// The FLOPs of one node, from its values' static shapes (0 when a shape it
/// needs is not concrete; saturated at the largest int64). One rule for every
/// op:
///  - matrix products (MatMul, Gemm, mpc.FusedMatMul): 2 x multiply-adds,
///    2*M*N*K per product (Gemm's C adds one per output element);
///  - convolutions (Conv, ConvTranspose, mpc.ConvGradInput,
///    mpc.ConvGradWeight): 2 x multiply-adds;
///  - ops that only move or view bytes (Reshape, Transpose, Gather, Slice,
///    Concat, Expand, ...) and constants: 0;
///  - everything else (elementwise math, casts, reductions, softmax, norms,
///    optimizer updates): 1 per element of its largest input or output.
int64_t nodeFlops(const Node &n);

/// A training step's FLOPs: `forward` up to and including the loss,
/// `recompute` the backward's copies of forward nodes that --recompute made
/// (the extra forward work), `backward` everything else after the loss
/// (gradients and the optimizer update).
struct StepFlops {
  int64_t forward = 0, backward = 0, recompute = 0;
  int64_t total() const {
    return saturatingAdd(saturatingAdd(forward, backward), recompute);
  }
};

/// The FLOPs of the model's training step (all forward for a model without
/// one).
StepFlops countStepFlops(const Model &model);

/// The name --recompute gives a node's backward copy (its nodes are
/// counted as recompute by countStepFlops).
std::string recomputeNodeName(const Node &original);

} // namespace mpc
