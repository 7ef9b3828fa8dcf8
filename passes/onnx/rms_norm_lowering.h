// ONNX's RMSNormalization (opset 23), lowered at import to the ops mpc
// trains.
//
// RMSNormalization(X, scale) <axis, epsilon, stash_type> normalises X by
// the root mean square over axes axis..rank-1: what torch's dynamo
// exporter writes for torch.nn.RMSNorm at opset 23 (LLaMA-style models
// written with it). It becomes
//
//   Xs = Cast(X, fp32)                  (only for an fp16/bf16 X, stash_type 1)
//   Y  = Mul(Div(Xs, Sqrt(Add(ReduceMean(Mul(Xs, Xs), axes), epsilon))), scale)
//
// with a Cast back to X's type before the scale where X was widened: the
// statistics in the stash type, as the spec computes them, and the
// arithmetic transformers' LlamaRMSNorm exports as, so both take the same
// gradients and autocast's fp32 island for the mean and Sqrt. The lowered
// nodes are named after the RMSNormalization node, and its output keeps its
// name.
#pragma once

#include "ir/graph.h"

#include <vector>

namespace mpc {

/// Replaces n, an RMSNormalization node whose input types are known, by its
/// lowering; returns the nodes it inserted, in order.
std::vector<Node *> lowerRMSNormalization(Graph &g, Node *n, int64_t opset);

} // namespace mpc
