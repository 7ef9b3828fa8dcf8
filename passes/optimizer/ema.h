// Exponential moving average of the parameters (mpc-opt --ema-decay=D):
// the optimizer pass's shadow copy of every trainable parameter, as torch's
// AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(D)) keeps it with
// update_parameters(model) called after every optimizer step:
//   the first call copies the parameters; every later one
//   ema.lerp_(param, 1 - D) (torch._foreach_lerp_, ATen's lerp formulas on
//   fp32, weight float(1 - D)).
// Buffers are not averaged (AveragedModel's default, use_buffers=False):
// an evaluation with the average reads the model's own batch-norm
// statistics. The average follows optimizer steps, skipped ones included
// (a training loop calls update_parameters after every scaler.step, which
// leaves the parameters as they were on an overflow), once per --grad-accum
// window.
//
// State: `P_ema` per parameter P (its shape, fp32, zeros until the first
// copy) and `ema_count` (int64, AveragedModel's n_averaged). Standard ONNX
// ops only (Equal, Sub, Mul, Add, Where), so every backend and runtime runs
// them. mpc.ema records "P=P_ema" pairs for mpc-run (--eval-ema,
// --export-ema).
#pragma once

#include "passes/pass.h"

#include <string>
#include <utility>
#include <vector>

namespace mpc {

/// Throws the one-line error for a --ema-decay outside [0, 1).
void checkEmaDecay(double decay);

/// Adds the average of `params`, whose values after this step are
/// `updated` (the optimizer's outputs), to the training algorithm.
/// `boundary`: --grad-accum's "last micro-batch of the window" flag
/// (nullptr: every run of the step is an optimizer step).
void addParameterEma(Model &model, const std::vector<Value *> &params,
                     const std::vector<Value *> &updated, Value *boundary,
                     double decay, Statistics &stats);

/// mpc.ema's (parameter, average) state names; empty without one.
std::vector<std::pair<std::string, std::string>> emaPairs(const Model &model);

} // namespace mpc
