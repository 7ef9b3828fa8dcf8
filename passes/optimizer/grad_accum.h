// Gradient accumulation (--grad-accum=K): the step graph runs once per
// micro-batch and updates the parameters on every K-th run.
//
// Two rewrites, by the two passes that own the values involved:
//   loss-scale  seeds the backward with loss_scale / K instead of loss_scale
//               (divideScaledSeed), so each micro-batch's scaled gradients
//               are those of its loss divided by K, as PyTorch's `loss / K`
//               before `scaler.scale(loss).backward()`;
//   optimizer   adds the accumulation (accumulateGradients): fp32 buffers as
//               state, a micro-step counter, the boundary flag, and the skip
//               flag the updates take instead of found_inf.
// Everything stays in the graph (standard ONNX Add/Equal/Where/Not/Div), so
// one captured step serves every micro-batch with no host decision.
#pragma once

#include "passes/pass.h"
#include "passes/training_support.h"

namespace mpc {

/// The most micro-batches per optimizer step: far above any real window
/// (PyTorch recipes use up to a few hundred), low enough that a step's
/// count, seeds and sample indices stay small and a run cannot be asked
/// for an effectively endless window (K = 2^63-1).
constexpr int64_t kMaxGradAccum = 65536;

/// Throws the one-line error for a --grad-accum below 1 or above
/// kMaxGradAccum (also when a pass is given it through --passes options).
void checkGradAccum(const CompileOptions &options);

/// loss-scale, with K > 1: a Div(scale, K) inserted before `before`, to seed
/// the backward with; records mpc.grad_accum = K ("the seed is divided").
Value *divideScaledSeed(Model &model, Graph &g, Value *scale, int64_t k,
                        Node *before);

/// optimizer, with K > 1. Divides the grad seed by K where loss-scale did
/// not (an unscaled step's seed is the constant 1); adds per gradient an fp32
/// state buffer `<param>_grad_accum` (zeros) and sum = buffer + gradient,
/// taken before the unscale when there is loss scaling (the sums are
/// unscaled and checked together, so an inf of any micro-batch reaches
/// found_inf) and the new buffer Where(boundary, 0, sum); a counter state
/// `grad_accum_step` (int64, 0) with boundary = (counter + 1 == K) and the
/// new counter Where(boundary, 0, counter + 1); gates the loss scaler's new
/// scale and tracker to change only at the boundary. tv.grads become the
/// accumulated gradients (mpc.grads follows). Returns the skip flag for the
/// updates: Where(boundary, found_inf, true), or Not(boundary) without
/// found_inf. `boundary`, when given, gets the boundary flag (true on the
/// K-th micro-batch).
Value *accumulateGradients(Model &model, TrainingValues &tv, Value *foundInf,
                           int64_t k, Statistics &stats,
                           Value **boundary = nullptr);

} // namespace mpc
