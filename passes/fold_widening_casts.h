// The part of fold-widening-casts that other passes reuse: a softmax
// island's Cast down for the next matrix product written by the island
// itself (its Ylow). recompute calls it on the islands it copies into the
// backward, whose Y the backward's products read through a Cast that
// shrink-saved made (the forward's Ylow is no longer saved).
#pragma once

#include "ir/graph.h"

#include <cstdint>
#include <vector>

namespace mpc {

/// For each of `islands` (mpc.SoftmaxTo / DivSoftmaxTo nodes of g; others
/// are skipped) whose fp32 Y is read by Casts down to fp16/bf16: the
/// island writes that copy as its Ylow (or as Y, when the Cast was Y's only
/// reader) and the Casts are removed, the same bits. Returns how many Casts
/// were folded.
int64_t foldCastsDownIntoSoftmaxes(Model &model, Graph &g,
                                   const std::vector<Node *> &islands);

} // namespace mpc
