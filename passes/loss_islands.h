// Loss islands: the decomposed losses autocast runs in fp32 as a whole.
//
// PyTorch autocast runs binary_cross_entropy_with_logits, log_softmax,
// logsumexp, mse_loss, l1_loss, smooth_l1_loss and huber_loss in fp32
// (torch/csrc/autocast_mode.cpp's fp32 list). torch's exporter writes them
// as arithmetic (Sub, Abs, Mul, Where, ...), which the policy table alone
// runs in the dtype of its inputs: fp16 when both operands come from fp16
// matrix products. findLossIslands recognises the arithmetic of each loss
// in the forward (the nodes the loss depends on) and names the nodes to run
// in fp32; autocast's Follow rule then carries fp32 to the rest of the loss.
// Each island kind is one --explain rule, "island:<kind>".
//
// Kinds (the graphs torch 2.x's dynamo exporter writes, after import):
//   log-of-sigmoid   Sigmoid(x) read only by Log, through 1 - s, -s + 1 or
//                    s + eps: the sigmoid (and that arithmetic) in fp32
//                    (F.binary_cross_entropy of a sigmoid, whose clamp keeps
//                    fuse-log-sigmoid away, and log(sigmoid(x) + eps))
//   bce-with-logits  Sub(Mul(w, z), [Mul(p,] LogSigmoid(z)[)]): the product
//                    with the logits and the difference
//   logsumexp        Sub(x, ReduceMax(x, keepdims)) read only by Exp: the
//                    shift of logsumexp, softmax or log_softmax spelled out
//   mse-loss         Sub(a, b) squared (Mul(d, d), Pow(d, 2), or the
//                    exporter's two equal Subs multiplied) and fully reduced
//   l1-loss          Abs(Sub(a, b)) fully reduced
//   huber-loss       Abs(Sub(a, b)) into a Where (huber_loss, smooth_l1_loss)
//                    fully reduced
// "Fully reduced": the element-wise tail ends in ReduceMean or ReduceSum
// over all axes, the loss's mean or sum. A Sub squared and averaged over
// some axes only (a variance) is not a loss.
#pragma once

#include "ir/graph.h"

#include <unordered_map>

namespace mpc {

/// One island kind: its --explain rule suffix and why it is fp32.
struct LossIslandKind {
  const char *name;
  const char *reason;
};

/// The nodes of g that a recognised loss runs in fp32, each with its kind.
/// `loss` (may be null: all of g counts) limits the search to the nodes the
/// loss depends on, and only their uses count: a backward node reading a
/// forward value does not make it something else's.
std::unordered_map<const Node *, const LossIslandKind *>
findLossIslands(const Graph &g, const Value *loss);

} // namespace mpc
