// Function bodies of mpc's ops in standard ONNX ops, their export as
// model-local functions, and their inlining into the IR.
//
// Bodies are written in the ONNX text syntax and parsed with ONNX's own
// parser, so they read like the formulas of ir/mpc_ops.h. They follow
// the CPU reference kernels (kernels/cpu/<category>.cpp, optimizer.cpp):
//  - Backward ops compute in double and round once to the kernel's result
//    type (CastLike), so a body is at least as precise as the kernel, whose
//    compute type is fp32 (fp64 for fp64 operands); mixed-precision operands
//    (an fp32 gradient into an fp16 activation's rule) are fine.
//  - Optimizer and loss-scale ops repeat the kernels' fp32 operations one by
//    one (scalars computed in double where torch computes them in double), so
//    on an IEEE runtime without fused multiply-adds they give the kernels'
//    bits; a skipped step (found_inf) selects the inputs with Where, which
//    copies them bit for bit.
// Variadic ops (UnscaleGradients, ClipGradNorm, ExtremumGrad, AllReduce) have
// no body: a FunctionProto has a fixed list of formal inputs and outputs; the
// --emit=step model writes them inline in standard ops instead
// (passes/onnx/expand_variadic.h). The layer gradients' bodies are in
// mpc_functions_layers.cpp.
// tests/unit/mpc_functions_test.cpp runs every body against its kernel.
#include "passes/onnx/mpc_functions.h"

#include "passes/onnx/mpc_function_defs.h"

#include "passes/onnx/onnx_io.h"

#include "ir/mpc_ops.h"
#include "ir/tensor_pb.h"
#include "kernels/lr_schedule_attrs.h"
#include "support/diagnostics.h"

#include "onnx/defs/parser.h"
#include "onnx/onnx_pb.h"

#include <algorithm>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace mpc {
namespace {

/// Oldest default-domain opset the bodies can import: CastLike, Pow with
/// bf16 and Shape's start/end are opset 15.
constexpr int64_t kMinFunctionOpset = 15;

const char *kHeader = R"(<domain: "mpc", opset_import: ["" : 17]>
)";

// dX = Y > 0 ? dY : 0.
const char *kReluGrad = R"(
ReluGrad (dY, Y) => (dX) {
  zero_f = Constant <value = float {0.0}> ()
  zero_y = CastLike (zero_f, Y)
  positive = Greater (Y, zero_y)
  zero = CastLike (zero_f, dY)
  dX = Where (positive, dY, zero)
}
)";

// dX = Y * (dY - sum_axis(dY * Y)).
const char *kSoftmaxGrad = R"(
SoftmaxGrad <axis> (dY, Y) => (dX) {
  g = Cast <to = 11> (dY)
  y = Cast <to = 11> (Y)
  axis_i = Constant <value_int: int = @axis> ()
  axis0 = Constant <value = int64[1] {0}> ()
  axes = Unsqueeze (axis_i, axis0)
  gy = Mul (g, y)
  gy_sum = ReduceSum <keepdims = 1> (gy, axes)
  centered = Sub (g, gy_sum)
  dx = Mul (y, centered)
  dX = CastLike (dx, dY)
}
)";

// Softmax of X widened exactly to `to` (fold-widening-casts' Cast + Softmax),
// and optionally that cast down to `low` (the next product's operand).
const char *kSoftmaxTo = R"(
SoftmaxTo <axis, to, low> (X) => (Y, Ylow) {
  x = Cast <to: int = @to> (X)
  Y = Softmax <axis: int = @axis> (x)
  Ylow = Cast <to: int = @low> (Y)
}
)";

// A + B added in fp32 (each widened exactly) and stored in `to`, and
// optionally that cast down to `low` (mpc.AddTo).
const char *kAddTo = R"(
AddTo <to, low> (A, B) => (C, Clow) {
  a = Cast <to = 1> (A)
  b = Cast <to = 1> (B)
  sum = Add (a, b)
  C = Cast <to: int = @to> (sum)
  Clow = Cast <to: int = @low> (C)
}
)";

// Softmax of X divided by D (in X's dtype) and widened to `to` (and `low`).
const char *kDivSoftmaxTo = R"(
DivSoftmaxTo <axis, to, low> (X, D) => (Y, Ylow) {
  q = Div (X, D)
  x = Cast <to: int = @to> (q)
  Y = Softmax <axis: int = @axis> (x)
  Ylow = Cast <to: int = @low> (Y)
}
)";

// dX = dY - exp(Y) * sum_axis(dY).
const char *kLogSoftmaxGrad = R"(
LogSoftmaxGrad <axis> (dY, Y) => (dX) {
  g = Cast <to = 11> (dY)
  y = Cast <to = 11> (Y)
  axis_i = Constant <value_int: int = @axis> ()
  axis0 = Constant <value = int64[1] {0}> ()
  axes = Unsqueeze (axis_i, axis0)
  g_sum = ReduceSum <keepdims = 1> (g, axes)
  p = Exp (y)
  p_sum = Mul (p, g_sum)
  dx = Sub (g, p_sum)
  dX = CastLike (dx, dY)
}
)";

// The part both loss gradients share; $S is the scores input [N, C, d...].
//  - w [N, d...]: w[label] per position, 0 where the label is ignore_index,
//    from NegativeLogLikelihoodLoss itself on all -1 scores, which also
//    checks the labels and treats `weights` and `ignore_index` as optional
//    exactly as the kernel does. kept: the position is not ignored.
//  - is_mean: the reduction attribute, decoded by a probe: the loss of two
//    positions of score -1 is 1 only when reduction is "mean".
//  - coef = w * s, s = dL / sum(w) for "mean", dL for "sum" and "none" (then
//    dL is [N, d...]); shaped [N, 1, d...] to broadcast over the classes.
//  - hot [N, C, d...]: labels == class index.
const char *kLossCommon = R"(
  neg_one_f = Constant <value = float {-1.0}> ()
  neg_one = CastLike (neg_one_f, $S)
  scores_shape = Shape ($S)
  neg_ones = Expand (neg_one, scores_shape)
  w = NegativeLogLikelihoodLoss <reduction = "none", ignore_index: int = @ignore_index> (neg_ones, labels, weights)
  counted = NegativeLogLikelihoodLoss <reduction = "none", ignore_index: int = @ignore_index> (neg_ones, labels)
  zero_f = Constant <value = float {0.0}> ()
  zero_s = CastLike (zero_f, $S)
  kept = Greater (counted, zero_s)
  probe_x = Constant <value = float[2,1] {-1.0, -1.0}> ()
  probe_t = Constant <value = int64[2] {0, 0}> ()
  probe = NegativeLogLikelihoodLoss <reduction: string = @reduction> (probe_x, probe_t)
  probe_sum = ReduceSum <keepdims = 0> (probe)
  one_f = Constant <value = float {1.0}> ()
  is_mean = Equal (probe_sum, one_f)
  wd = Cast <to = 11> (w)
  total = ReduceSum <keepdims = 0> (wd)
  dl = Cast <to = 11> (dL)
  dl_mean = Div (dl, total)
  s = Where (is_mean, dl_mean, dl)
  coef = Mul (wd, s)
  one_1d = Constant <value = int64[1] {1}> ()
  coef_c = Unsqueeze (coef, one_1d)
  kept_c = Unsqueeze (kept, one_1d)
  zero_i = Constant <value = int64 {0}> ()
  one_i = Constant <value = int64 {1}> ()
  axis0 = Constant <value = int64[1] {0}> ()
  classes_1d = Shape <start = 1, end = 2> ($S)
  num_classes = Squeeze (classes_1d, axis0)
  classes = Range (zero_i, num_classes, one_i)
  tail = Shape <start = 2> ($S)
  tail_rank = Shape (tail)
  tail_ones = ConstantOfShape <value = int64[1] {1}> (tail_rank)
  classes_shape = Concat <axis = 0> (one_1d, classes_1d, tail_ones)
  classes_c = Reshape (classes, classes_shape)
  labels64 = Cast <to = 7> (labels)
  labels_c = Unsqueeze (labels64, one_1d)
  hot = Equal (labels_c, classes_c)
  zero_d = Constant <value = double {0.0}> ()
)";

// dLogits = (exp(log_prob) - onehot(labels)) * w[label] * s; 0 if ignored.
const char *kSoftmaxCrossEntropyLossGrad = R"(
SoftmaxCrossEntropyLossGrad <reduction, ignore_index> (dL, log_prob, labels, weights) => (dLogits) {$COMMON
  lp = Cast <to = 11> (log_prob)
  p = Exp (lp)
  hot_d = Cast <to = 11> (hot)
  diff = Sub (p, hot_d)
  v = Mul (diff, coef_c)
  masked = Where (kept_c, v, zero_d)
  dLogits = CastLike (masked, log_prob)
}
)";

// dX = -w[label] * s at [n, label, d...], 0 elsewhere and where ignored
// (two selections of doubles: ONNX Runtime's Where has no bool kernel to
// combine the masks with).
const char *kNegativeLogLikelihoodLossGrad = R"(
NegativeLogLikelihoodLossGrad <reduction, ignore_index> (dL, X, labels, weights) => (dX) {$COMMON
  neg_coef = Neg (coef_c)
  at_label = Where (hot, neg_coef, zero_d)
  masked = Where (kept_c, at_label, zero_d)
  dX = CastLike (masked, X)
}
)";

// Sums dY over the axes where X, its shape left-padded with 1s to dY's
// rank, has size 1 (summing where dY has size 1 too changes nothing).
// ReduceSum wants a list of distinct axes: axis i stands for itself where
// it is summed and for the spare size-1 axis r + i (dY gets r trailing 1s)
// where it is not, so no compaction (NonZero) is needed.
const char *kSumToShape = R"(
SumToShape (dY, X) => (dX) {
  y_shape = Shape (dY)
  x_shape = Shape (X)
  y_rank = Shape (y_shape)
  x_rank = Shape (x_shape)
  pad_rank = Sub (y_rank, x_rank)
  pad = ConstantOfShape <value = int64[1] {1}> (pad_rank)
  x_aligned = Concat <axis = 0> (pad, x_shape)
  one_i = Constant <value = int64 {1}> ()
  summed_axis = Equal (x_aligned, one_i)
  axis0 = Constant <value = int64[1] {0}> ()
  rank = Squeeze (y_rank, axis0)
  zero_i = Constant <value = int64 {0}> ()
  all_axes = Range (zero_i, rank, one_i)
  spare_axes = Add (all_axes, rank)
  axes = Where (summed_axis, all_axes, spare_axes)
  spare_ones = ConstantOfShape <value = int64[1] {1}> (y_rank)
  y_spare_shape = Concat <axis = 0> (y_shape, spare_ones)
  g = Cast <to = 11> (dY)
  g_spare = Reshape <allowzero = 1> (g, y_spare_shape)
  g_sum = ReduceSum <keepdims = 1, noop_with_empty_axes = 1> (g_spare, axes)
  dx = Reshape <allowzero = 1> (g_sum, x_shape)
  dX = CastLike (dx, dY)
}
)";

// dY brought back to X's shape: counts = the reduction of ones of X's shape
// over the same axes (its shape is X's with 1s on the reduced axes, its
// entries the reduced counts), so keepdims needs no case of its own.
// `axes` is the input (appendMpcFunctions turns the attribute into it);
// omitted, it reduces every axis, or none with noop_with_empty_axes.
const char *kReduceGrad = R"(
ReduceGrad <keepdims, noop_with_empty_axes, mean> (dY, X, axes) => (dX) {
  x_shape = Shape (X)
  ones = ConstantOfShape <value = double[1] {1.0}> (x_shape)
  counts = ReduceSum <keepdims = 1, noop_with_empty_axes: int = @noop_with_empty_axes> (ones, axes)
  kept_shape = Shape (counts)
  g = Cast <to = 11> (dY)
  g_kept = Reshape <allowzero = 1> (g, kept_shape)
  g_mean = Div (g_kept, counts)
  mean_i = Constant <value_int: int = @mean> ()
  is_mean = Cast <to = 9> (mean_i)
  g_scaled = Where (is_mean, g_mean, g_kept)
  dx = Expand (g_scaled, x_shape)
  dX = CastLike (dx, dY)
}
)";

// torch's _amp_update_scale_: the products are float * double rounded to
// float; grown - grown == 0 is the finiteness test (false for inf and NaN).
const char *kUpdateLossScale = R"(
UpdateLossScale <growth_factor, backoff_factor, growth_interval> (scale, growth_tracker, found_inf) => (new_scale, new_growth_tracker) {
  s = Cast <to = 11> (scale)
  growth_f = Constant <value_float: float = @growth_factor> ()
  growth = Cast <to = 11> (growth_f)
  backoff_f = Constant <value_float: float = @backoff_factor> ()
  backoff = Cast <to = 11> (backoff_f)
  backed_off_d = Mul (s, backoff)
  backed_off = Cast <to = 1> (backed_off_d)
  grown_d = Mul (s, growth)
  grown = Cast <to = 1> (grown_d)
  grown_diff = Sub (grown, grown)
  zero_f = Constant <value = float {0.0}> ()
  grown_finite = Equal (grown_diff, zero_f)
  grown_or_kept = Where (grown_finite, grown, scale)
  one_i = Constant <value = int64 {1}> ()
  one = CastLike (one_i, growth_tracker)
  successful = Add (growth_tracker, one)
  interval_i = Constant <value_int: int = @growth_interval> ()
  interval = CastLike (interval_i, growth_tracker)
  at_interval = Equal (successful, interval)
  zero_i = Constant <value = int64 {0}> ()
  zero = CastLike (zero_i, growth_tracker)
  clean_scale = Where (at_interval, grown_or_kept, scale)
  clean_tracker = Where (at_interval, zero, successful)
  new_scale = Where (found_inf, backed_off, clean_scale)
  new_growth_tracker = Where (found_inf, zero, clean_tracker)
}
)";

// torch's _single_tensor_sgd (kernels/common/optimizer_math.h sgdUpdate).
// Without momentum the buffer is neither read nor written. The rate is the
// `lr` input (a node without one gets its `lr` attribute there), converted
// as torch converts a Python float: -lr rounded once to fp32. The buffer
// may be bf16 (--optimizer-state-dtype=bf16): read widened to the
// parameter's type, selected there (runtimes lack a bf16 Where; the widened
// input rounds back to its own bits) and stored rounded back (CastLike:
// identities for fp32). The gradient may be fp16/bf16 (fold-widening-casts):
// widened first, as the kernels widen it, then unscaled by the loss scale
// `grad_scale` (fold-unscale; filled with 1 when omitted, a multiply that
// changes no finite value): g * float(1 / double(scale)), UnscaleGradients'
// bits.
const char *kSGD = R"(
SGD <lr, momentum, dampening, weight_decay, nesterov, low> (found_inf, step, param, grad_in, momentum_buffer, lr, grad_scale) => (new_param, new_momentum_buffer, new_param_low) {
  grad_wide = CastLike (grad_in, param)
  one_d = Constant <value = double {1.0}> ()
  scale_d = Cast <to = 11> (grad_scale)
  inv_d = Div (one_d, scale_d)
  inv_f = Cast <to = 1> (inv_d)
  inv = CastLike (inv_f, param)
  grad = Mul (grad_wide, inv)
  lr_d = Cast <to = 11> (lr)
  neg_lr_d = Neg (lr_d)
  neg_lr = Cast <to = 1> (neg_lr_d)
  mom = Constant <value_float: float = @momentum> ()
  dampening_f = Constant <value_float: float = @dampening> ()
  dampening = Cast <to = 11> (dampening_f)
  keep_d = Sub (one_d, dampening)
  keep = Cast <to = 1> (keep_d)
  wd = Constant <value_float: float = @weight_decay> ()
  nesterov_i = Constant <value_int: int = @nesterov> ()
  nesterov = Cast <to = 9> (nesterov_i)
  zero_f = Constant <value = float {0.0}> ()
  no_momentum = Equal (mom, zero_f)
  no_wd = Equal (wd, zero_f)
  zero_i = Constant <value = int64 {0}> ()
  zero_step = CastLike (zero_i, step)
  first_step = Equal (step, zero_step)
  decay = Mul (wd, param)
  grad_wd = Add (grad, decay)
  d = Where (no_wd, grad, grad_wd)
  buf_in = CastLike (momentum_buffer, param)
  buf_scaled = Mul (buf_in, mom)
  d_kept = Mul (keep, d)
  buf_next = Add (buf_scaled, d_kept)
  buf = Where (first_step, d, buf_next)
  buf_mom = Mul (mom, buf)
  d_nesterov = Add (d, buf_mom)
  d_momentum = Where (nesterov, d_nesterov, buf)
  d_final = Where (no_momentum, d, d_momentum)
  delta = Mul (neg_lr, d_final)
  updated = Add (param, delta)
  buf_updated = Where (no_momentum, buf_in, buf)
  new_param = Where (found_inf, param, updated)
  buf_kept = Where (found_inf, buf_in, buf_updated)
  new_momentum_buffer = CastLike (buf_kept, momentum_buffer)
  new_param_low = Cast <to: int = @low> (new_param)
}
)";

// torch's _single_tensor_adam (kernels/common/optimizer_math.h adamUpdate):
// the step scalars in double, then one fp32 op per ATen op; lerp_ takes
// ATen's two formulas by |weight| < 0.5. The rate is the `lr` input, as in
// SGD. bf16 moments are widened, and the new ones rounded back after the
// parameter has moved by their fp32 values (as the kernels' *Stored forms);
// the skip selects among fp32 values, as SGD's does. An fp16/bf16 gradient
// is widened first, and unscaled by grad_scale (1 when omitted), as SGD's.
const char *kAdam = R"(
Adam <lr, beta1, beta2, epsilon, weight_decay, decoupled, low> (found_inf, step, param, grad_in, exp_avg, exp_avg_sq, lr_in, grad_scale) => (new_param, new_exp_avg, new_exp_avg_sq, new_param_low) {
  grad_wide = CastLike (grad_in, param)
  one_d = Constant <value = double {1.0}> ()
  scale_d = Cast <to = 11> (grad_scale)
  inv_d = Div (one_d, scale_d)
  inv_f = Cast <to = 1> (inv_d)
  inv = CastLike (inv_f, param)
  grad = Mul (grad_wide, inv)
  lr = Cast <to = 11> (lr_in)
  beta1_f = Constant <value_float: float = @beta1> ()
  beta1 = Cast <to = 11> (beta1_f)
  beta2_f = Constant <value_float: float = @beta2> ()
  beta2 = Cast <to = 11> (beta2_f)
  eps = Constant <value_float: float = @epsilon> ()
  wd_f = Constant <value_float: float = @weight_decay> ()
  wd = Cast <to = 11> (wd_f)
  decoupled_i = Constant <value_int: int = @decoupled> ()
  decoupled = Cast <to = 9> (decoupled_i)
  step_d = Cast <to = 11> (step)
  t = Add (step_d, one_d)
  beta1_t = Pow (beta1, t)
  bias_correction1 = Sub (one_d, beta1_t)
  beta2_t = Pow (beta2, t)
  bias_correction2 = Sub (one_d, beta2_t)
  step_size = Div (lr, bias_correction1)
  neg_step_size_d = Neg (step_size)
  neg_step_size = Cast <to = 1> (neg_step_size_d)
  bc2_sqrt_d = Sqrt (bias_correction2)
  bc2_sqrt = Cast <to = 1> (bc2_sqrt_d)
  lr_wd = Mul (lr, wd)
  decay_factor_d = Sub (one_d, lr_wd)
  decay_factor = Cast <to = 1> (decay_factor_d)
  lerp_weight_d = Sub (one_d, beta1)
  lerp_weight = Cast <to = 1> (lerp_weight_d)
  one_minus_beta2_d = Sub (one_d, beta2)
  one_minus_beta2 = Cast <to = 1> (one_minus_beta2_d)
  zero_f = Constant <value = float {0.0}> ()
  no_wd = Equal (wd_f, zero_f)
  param_decayed = Mul (param, decay_factor)
  wd_param = Mul (wd_f, param)
  grad_wd = Add (grad, wd_param)
  p_decay = Where (decoupled, param_decayed, param)
  g_decay = Where (decoupled, grad, grad_wd)
  p = Where (no_wd, param, p_decay)
  g = Where (no_wd, grad, g_decay)
  m_in = CastLike (exp_avg, param)
  v_in = CastLike (exp_avg_sq, param)
  diff = Sub (g, m_in)
  abs_weight = Abs (lerp_weight)
  half = Constant <value = float {0.5}> ()
  small_weight = Less (abs_weight, half)
  w_diff = Mul (lerp_weight, diff)
  lerp_small = Add (m_in, w_diff)
  one_f = Constant <value = float {1.0}> ()
  one_minus_weight = Sub (one_f, lerp_weight)
  diff_w = Mul (diff, one_minus_weight)
  lerp_large = Sub (g, diff_w)
  m = Where (small_weight, lerp_small, lerp_large)
  v_scaled = Mul (v_in, beta2_f)
  g_scaled = Mul (one_minus_beta2, g)
  g_sq = Mul (g_scaled, g)
  v = Add (v_scaled, g_sq)
  v_sqrt = Sqrt (v)
  v_corrected = Div (v_sqrt, bc2_sqrt)
  denom = Add (v_corrected, eps)
  m_step = Mul (neg_step_size, m)
  delta = Div (m_step, denom)
  updated = Add (p, delta)
  new_param = Where (found_inf, param, updated)
  m_kept = Where (found_inf, m_in, m)
  v_kept = Where (found_inf, v_in, v)
  new_exp_avg = CastLike (m_kept, exp_avg)
  new_exp_avg_sq = CastLike (v_kept, exp_avg_sq)
  new_param_low = Cast <to: int = @low> (new_param)
}
)";

// kernels/common/lr_schedule_math.h in double: every schedule's factor,
// the node's chosen by its flags (complete: LearningRate's `schedule` as
// linear / cosine / restarts / polynomial / inverse_sqrt / stepped;
// exponential is stepped with step_size 1). The branches not chosen may
// compute a NaN (a root or power of a negative number), which Where drops.
const char *kLearningRate = R"(
LearningRate <base_lr, warmup_steps, total_steps, min_lr_ratio, step_size, gamma, cycles, lr_end, power, timescale, stable_steps, decay_steps, linear, cosine, restarts, polynomial, inverse_sqrt, stepped, wsd, warm_cos, warm_sqrt, decay_cos, decay_sqrt> (step) => (lr) {
  s = Cast <to = 11> (step)
  base = Constant <value: tensor = @base_lr> ()
  one = Constant <value = double {1.0}> ()
  zero = Constant <value = double {0.0}> ()
  half = Constant <value = double {0.5}> ()
  pi = Constant <value = double {3.141592653589793}> ()
  w_i = Constant <value_int: int = @warmup_steps> ()
  w = Cast <to = 11> (w_i)
  t_i = Constant <value_int: int = @total_steps> ()
  t = Cast <to = 11> (t_i)
  warm_div = Max (w, one)
  warm = Div (s, warm_div)
  in_warmup = Less (s, w)
  after = Sub (s, w)
  span = Sub (t, w)
  horizon = Max (span, one)
  left = Sub (t, s)
  linear_f = Div (left, horizon)
  linear_factor = Max (linear_f, zero)
  progress = Div (after, horizon)
  angle = Mul (pi, progress)
  cos_v = Cos (angle)
  cos_1 = Add (one, cos_v)
  cos_f = Mul (half, cos_1)
  r = Constant <value: tensor = @min_lr_ratio> ()
  keep = Sub (one, r)
  cos_kept = Mul (cos_f, keep)
  cos_min = Add (cos_kept, r)
  cosine_factor = Max (cos_min, zero)
  size_i = Constant <value_int: int = @step_size> ()
  size = Cast <to = 11> (size_i)
  decays_f = Div (after, size)
  decays = Floor (decays_f)
  gamma = Constant <value: tensor = @gamma> ()
  step_factor = Pow (gamma, decays)
  cycles_i = Constant <value_int: int = @cycles> ()
  cycles = Cast <to = 11> (cycles_i)
  turn = Mul (cycles, progress)
  turn_whole = Floor (turn)
  turn_part = Sub (turn, turn_whole)
  restart_angle = Mul (pi, turn_part)
  restart_cos = Cos (restart_angle)
  restart_1 = Add (one, restart_cos)
  restart_f = Mul (half, restart_1)
  restart_pos = Max (restart_f, zero)
  ended = GreaterOrEqual (progress, one)
  restarts_factor = Where (ended, zero, restart_pos)
  lr_end = Constant <value: tensor = @lr_end> ()
  power = Constant <value: tensor = @power> ()
  poly_part = Div (after, span)
  remaining = Sub (one, poly_part)
  lr_range = Sub (base, lr_end)
  remaining_pow = Pow (remaining, power)
  ranged = Mul (lr_range, remaining_pow)
  decayed = Add (ranged, lr_end)
  poly_inside = Div (decayed, base)
  poly_past = Div (lr_end, base)
  past_total = Greater (s, t)
  polynomial_factor = Where (past_total, poly_past, poly_inside)
  timescale_i = Constant <value_int: int = @timescale> ()
  timescale = Cast <to = 11> (timescale_i)
  shift = Sub (timescale, w)
  shifted = Add (s, shift)
  scaled_time = Div (shifted, timescale)
  root = Sqrt (scaled_time)
  inverse_sqrt_factor = Div (one, root)
  linear_i = Constant <value_int: int = @linear> ()
  is_linear = Cast <to = 9> (linear_i)
  cosine_i = Constant <value_int: int = @cosine> ()
  is_cosine = Cast <to = 9> (cosine_i)
  stepped_i = Constant <value_int: int = @stepped> ()
  is_stepped = Cast <to = 9> (stepped_i)
  restarts_i = Constant <value_int: int = @restarts> ()
  is_restarts = Cast <to = 9> (restarts_i)
  polynomial_i = Constant <value_int: int = @polynomial> ()
  is_polynomial = Cast <to = 9> (polynomial_i)
  inverse_sqrt_i = Constant <value_int: int = @inverse_sqrt> ()
  is_inverse_sqrt = Cast <to = 9> (inverse_sqrt_i)
  d_step = Where (is_stepped, step_factor, one)
  d_inverse_sqrt = Where (is_inverse_sqrt, inverse_sqrt_factor, d_step)
  d_polynomial = Where (is_polynomial, polynomial_factor, d_inverse_sqrt)
  d_restarts = Where (is_restarts, restarts_factor, d_polynomial)
  d_cosine = Where (is_cosine, cosine_factor, d_restarts)
  decay = Where (is_linear, linear_factor, d_cosine)
  factor = Where (in_warmup, warm, decay)
  warm_angle = Mul (pi, warm)
  warm_cos_v = Cos (warm_angle)
  warm_1_cos = Sub (one, warm_cos_v)
  warm_cos_f = Mul (half, warm_1_cos)
  warm_rest = Sub (one, warm)
  warm_rest_sqrt = Sqrt (warm_rest)
  warm_sqrt_f = Sub (one, warm_rest_sqrt)
  warm_cos_i = Constant <value_int: int = @warm_cos> ()
  is_warm_cos = Cast <to = 9> (warm_cos_i)
  warm_sqrt_i = Constant <value_int: int = @warm_sqrt> ()
  is_warm_sqrt = Cast <to = 9> (warm_sqrt_i)
  warm_shape_s = Where (is_warm_sqrt, warm_sqrt_f, warm)
  warm_shape = Where (is_warm_cos, warm_cos_f, warm_shape_s)
  warm_kept = Mul (warm_shape, keep)
  warm_min = Add (warm_kept, r)
  wsd_warm = Max (warm_min, zero)
  stable_i = Constant <value_int: int = @stable_steps> ()
  stable = Cast <to = 11> (stable_i)
  decay_steps_i = Constant <value_int: int = @decay_steps> ()
  decay_steps = Cast <to = 11> (decay_steps_i)
  stable_end = Add (w, stable)
  decay_end = Add (stable_end, decay_steps)
  decay_done = Sub (s, stable_end)
  decay_div = Max (decay_steps, one)
  q = Div (decay_done, decay_div)
  q_lin = Sub (one, q)
  q_angle = Mul (pi, q)
  q_cos_v = Cos (q_angle)
  q_1_cos = Add (one, q_cos_v)
  q_cos = Mul (half, q_1_cos)
  q_sqrt_v = Sqrt (q)
  q_sqrt = Sub (one, q_sqrt_v)
  decay_cos_i = Constant <value_int: int = @decay_cos> ()
  is_decay_cos = Cast <to = 9> (decay_cos_i)
  decay_sqrt_i = Constant <value_int: int = @decay_sqrt> ()
  is_decay_sqrt = Cast <to = 9> (decay_sqrt_i)
  q_shape_s = Where (is_decay_sqrt, q_sqrt, q_lin)
  q_shape = Where (is_decay_cos, q_cos, q_shape_s)
  q_kept = Mul (q_shape, keep)
  q_min = Add (q_kept, r)
  wsd_decay = Max (q_min, zero)
  in_stable = Less (s, stable_end)
  in_decay = Less (s, decay_end)
  wsd_late = Where (in_decay, wsd_decay, r)
  wsd_after = Where (in_stable, one, wsd_late)
  wsd_factor = Where (in_warmup, wsd_warm, wsd_after)
  wsd_i = Constant <value_int: int = @wsd> ()
  is_wsd = Cast <to = 9> (wsd_i)
  chosen = Where (is_wsd, wsd_factor, factor)
  lr = Mul (base, chosen)
}
)";

// step + (found_inf ? 0 : 1).
const char *kIncrementStep = R"(
IncrementStep (step, found_inf) => (new_step) {
  one_i = Constant <value = int64 {1}> ()
  one = CastLike (one_i, step)
  incremented = Add (step, one)
  new_step = Where (found_inf, step, incremented)
}
)";

// --- fused forward ops (fuse-gelu, fuse-log-sigmoid, fold-transpose) ---------
// Like the backward ops they compute in double and round once.

// Y = 0.5 X (1 + erf(X / sqrt(2))). Erf is taken in fp32: ONNX Runtime's
// CPU Erf has no double kernel (so an fp64 GELU is only as precise as an
// fp32 one).
const char *kGelu = R"(
Gelu (X) => (Y) {
  x = Cast <to = 11> (X)
  inv_sqrt2 = Constant <value = double {0.7071067811865476}> ()
  half = Constant <value = double {0.5}> ()
  one = Constant <value = double {1.0}> ()
  scaled = Mul (x, inv_sqrt2)
  scaled_f = Cast <to = 1> (scaled)
  erf_f = Erf (scaled_f)
  erf = Cast <to = 11> (erf_f)
  one_plus = Add (erf, one)
  half_x = Mul (x, half)
  y = Mul (half_x, one_plus)
  Y = CastLike (y, X)
}
)";

// Y = log(sigmoid(X)) = min(X, 0) - log1p(exp(-|X|)) (fuse-log-sigmoid).
// ONNX has no Log1p: log1p(e) is e log(1 + e) / ((1 + e) - 1), exact in
// double (Goldberg's), and e itself where 1 + e rounds to 1.
const char *kLogSigmoid = R"(
LogSigmoid (X) => (Y) {
  x = Cast <to = 11> (X)
  zero = Constant <value = double {0.0}> ()
  one = Constant <value = double {1.0}> ()
  abs_x = Abs (x)
  neg_abs = Neg (abs_x)
  e = Exp (neg_abs)
  w = Add (one, e)
  d = Sub (w, one)
  l = Log (w)
  d_zero = Equal (d, zero)
  safe_d = Where (d_zero, one, d)
  ratio = Div (l, safe_d)
  scaled = Mul (e, ratio)
  log1p = Where (d_zero, e, scaled)
  low = Min (x, zero)
  y = Sub (low, log1p)
  Y = CastLike (y, X)
}
)";

// Y = 0.5 X (1 + tanh(sqrt(2/pi) (X + 0.044715 X^3))).
const char *kGeluTanh = R"(
GeluTanh (X) => (Y) {
  x = Cast <to = 11> (X)
  beta = Constant <value = double {0.7978845608028654}> ()
  kappa = Constant <value = double {0.044715}> ()
  half = Constant <value = double {0.5}> ()
  one = Constant <value = double {1.0}> ()
  square = Mul (x, x)
  cube = Mul (square, x)
  kappa_cube = Mul (kappa, cube)
  inner = Add (x, kappa_cube)
  scaled = Mul (beta, inner)
  tanh = Tanh (scaled)
  one_plus = Add (tanh, one)
  half_x = Mul (x, half)
  y = Mul (half_x, one_plus)
  Y = CastLike (y, X)
}
)";

// op(X) for FusedMatMul, $X the operand, $x its result, $FLAG the
// attribute: the last two axes swapped when the flag is 1. A body cannot
// branch on an attribute and Transpose's perm cannot depend on the rank, so
// both layouts are computed through a 3-D view [batch, rows, cols] and the
// flag selects one, flattened (both have the same element count).
const char *kTransposeOperand = R"(
  $x_batch = Shape <end = -2> ($X)
  $x_rows = Shape <start = -2, end = -1> ($X)
  $x_cols = Shape <start = -1> ($X)
  $x_d = Cast <to = 11> ($X)
  $x_flat = Constant <value = int64[1] {-1}> ()
  $x_3d_shape = Concat <axis = 0> ($x_flat, $x_rows, $x_cols)
  $x_3d = Reshape ($x_d, $x_3d_shape)
  $x_swapped = Transpose <perm = [0, 2, 1]> ($x_3d)
  $x_swapped_flat = Reshape ($x_swapped, $x_flat)
  $x_plain_flat = Reshape ($x_d, $x_flat)
  $x_flag_i = Constant <value_int: int = @$FLAG> ()
  $x_flag = Cast <to = 9> ($x_flag_i)
  $x_sel = Where ($x_flag, $x_swapped_flat, $x_plain_flat)
  $x_r = Where ($x_flag, $x_cols, $x_rows)
  $x_c = Where ($x_flag, $x_rows, $x_cols)
  $x_shape = Concat <axis = 0> ($x_batch, $x_r, $x_c)
  $x = Reshape ($x_sel, $x_shape))";

// Y = MatMul(op(A), op(B)), the product in double rounded once to A's type.
const char *kFusedMatMul = R"(
FusedMatMul <transA, transB> (A, B) => (Y) {$OPERAND_A$OPERAND_B
  y = MatMul (a, b)
  Y = CastLike (y, A)
}
)";

std::string fusedMatMulText() {
  auto operand = [](const char *input, const char *out, const char *flag) {
    std::string t = replaceAll(kTransposeOperand, "$X", input);
    t = replaceAll(t, "$FLAG", flag);
    return replaceAll(t, "$x", out);
  };
  std::string body =
      replaceAll(kFusedMatMul, "$OPERAND_A", operand("A", "a", "transA"));
  return kHeader + replaceAll(body, "$OPERAND_B", operand("B", "b", "transB"));
}

std::string lossText(const char *body, const char *scores) {
  std::string common = replaceAll(kLossCommon, "$S", scores);
  if (!common.empty() && common.back() == '\n')
    common.pop_back();
  return kHeader + replaceAll(body, "$COMMON", common);
}

/// op -> body. UnscaleGradients, ClipGradNorm, ExtremumGrad and AllReduce are
/// variadic (any number of inputs) and so have no entry: a FunctionProto's
/// inputs are fixed (--emit=step expands them inline, expand_variadic.h).
/// LearningRate's schedule, checked as the kernels check it, as the flags
/// its body reads.
void completeLearningRate(NodeView &v) {
  LrSchedule s;
  auto lookup = [&](std::string_view name) -> const Attribute * {
    auto it = v.attrs.find(std::string(name));
    return it == v.attrs.end() ? nullptr : &it->second;
  };
  if (auto p = readLrSchedule(lookup, s, false))
    throw Error(v.what + ": attribute '" + p->attr + "' " + p->message);
  auto real = [](double x) {
    return Attribute::ofTensor(Tensor::scalar(DType::F64, x));
  };
  v.attrs["base_lr"] = real(s.baseLr);
  v.attrs["warmup_steps"] = Attribute::ofInt(s.warmupSteps);
  v.attrs["total_steps"] = Attribute::ofInt(s.totalSteps);
  v.attrs["min_lr_ratio"] = real(s.minLrRatio);
  v.attrs["step_size"] = Attribute::ofInt(s.stepSize);
  v.attrs["gamma"] = real(s.gamma);
  v.attrs["cycles"] = Attribute::ofInt(s.cycles);
  v.attrs["lr_end"] = real(s.lrEnd);
  v.attrs["power"] = real(s.power);
  v.attrs["timescale"] = Attribute::ofInt(s.timescale);
  v.attrs["restarts"] =
      Attribute::ofInt(s.kind == LrScheduleKind::CosineRestarts);
  v.attrs["polynomial"] =
      Attribute::ofInt(s.kind == LrScheduleKind::Polynomial);
  v.attrs["inverse_sqrt"] =
      Attribute::ofInt(s.kind == LrScheduleKind::InverseSqrt);
  v.attrs["stable_steps"] = Attribute::ofInt(s.stableSteps);
  v.attrs["decay_steps"] = Attribute::ofInt(s.decaySteps);
  v.attrs["wsd"] =
      Attribute::ofInt(s.kind == LrScheduleKind::WarmupStableDecay);
  v.attrs["warm_cos"] = Attribute::ofInt(s.warmupShape == LrShape::Cosine);
  v.attrs["warm_sqrt"] =
      Attribute::ofInt(s.warmupShape == LrShape::OneMinusSqrt);
  v.attrs["decay_cos"] = Attribute::ofInt(s.decayShape == LrShape::Cosine);
  v.attrs["decay_sqrt"] =
      Attribute::ofInt(s.decayShape == LrShape::OneMinusSqrt);
  v.attrs["linear"] = Attribute::ofInt(s.kind == LrScheduleKind::Linear);
  v.attrs["cosine"] = Attribute::ofInt(s.kind == LrScheduleKind::Cosine);
  v.attrs["stepped"] = Attribute::ofInt(s.kind == LrScheduleKind::Step);
}

const std::map<std::string, FunctionDef> &functionTable() {
  static const std::map<std::string, FunctionDef> table = [] {
    using A = Attribute;
    std::map<std::string, FunctionDef> t;
    auto plain = [](const char *body) { return kHeader + std::string(body); };
    const std::vector<std::pair<std::string, Attribute>> lossDefaults = {
        {"reduction", A::ofString("mean")}};
    const std::vector<InputFill> lossFills = {{3, Fill::UnitWeights, 1}};
    t["ReluGrad"] = {plain(kReluGrad), {}, {}};
    t["SoftmaxGrad"] = {plain(kSoftmaxGrad), {{"axis", A::ofInt(-1)}}, {}};
    t["LogSoftmaxGrad"] = {
        plain(kLogSoftmaxGrad), {{"axis", A::ofInt(-1)}}, {}};
    // SoftmaxGrad with its result in Y's dtype instead of dY's.
    t["SoftmaxGradAs"] = {
        replaceAll(replaceAll(plain(kSoftmaxGrad), "SoftmaxGrad <axis>",
                              "SoftmaxGradAs <axis>"),
                   "dX = CastLike (dx, dY)", "dX = CastLike (dx, Y)"),
        {{"axis", A::ofInt(-1)}},
        {}};
    t["AddTo"] = {
        plain(kAddTo), {{"low", A::ofInt(toOnnxDataType(DType::F16))}}, {}};
    t["SoftmaxTo"] = {
        plain(kSoftmaxTo),
        {{"axis", A::ofInt(-1)}, {"low", A::ofInt(toOnnxDataType(DType::F16))}},
        {}};
    t["DivSoftmaxTo"] = {
        plain(kDivSoftmaxTo),
        {{"axis", A::ofInt(-1)}, {"low", A::ofInt(toOnnxDataType(DType::F16))}},
        {}};
    // SoftmaxGradAs, then divided by D in Y's dtype and cast to `to`.
    t["SoftmaxGradDiv"] = {
        replaceAll(replaceAll(plain(kSoftmaxGrad), "SoftmaxGrad <axis> (dY, Y)",
                              "SoftmaxGradDiv <axis, to> (dY, Y, D)"),
                   "dX = CastLike (dx, dY)",
                   "dx_y = CastLike (dx, Y)\n  q = Div (dx_y, D)\n"
                   "  dX = Cast <to: int = @to> (q)"),
        {{"axis", A::ofInt(-1)}},
        {}};
    t["SoftmaxCrossEntropyLossGrad"] = {
        lossText(kSoftmaxCrossEntropyLossGrad, "log_prob"), lossDefaults,
        lossFills};
    t["NegativeLogLikelihoodLossGrad"] = {
        lossText(kNegativeLogLikelihoodLossGrad, "X"), lossDefaults, lossFills};
    t["SumToShape"] = {plain(kSumToShape), {}, {}};
    // The same sum, its result in X's dtype instead of dY's.
    t["SumToShapeAs"] = {
        replaceAll(replaceAll(plain(kSumToShape), "SumToShape (dY, X)",
                              "SumToShapeAs (dY, X)"),
                   "dX = CastLike (dx, dY)", "dX = CastLike (dx, X)"),
        {},
        {}};
    t["ReduceGrad"] = {plain(kReduceGrad),
                       {{"keepdims", A::ofInt(1)},
                        {"noop_with_empty_axes", A::ofInt(0)},
                        {"mean", A::ofInt(0)}},
                       {{2, Fill::AxesFromAttr}}};
    t["UpdateLossScale"] = {plain(kUpdateLossScale),
                            {{"growth_factor", A::ofFloat(2.0f)},
                             {"backoff_factor", A::ofFloat(0.5f)},
                             {"growth_interval", A::ofInt(2000)}},
                            {{2, Fill::FalseFlag}}};
    t["SGD"] = {
        plain(kSGD),
        {{"lr", A::ofFloat(1e-3f)},
         {"momentum", A::ofFloat(0.0f)},
         {"dampening", A::ofFloat(0.0f)},
         {"weight_decay", A::ofFloat(0.0f)},
         {"nesterov", A::ofInt(0)},
         {"low", A::ofInt(toOnnxDataType(DType::F16))}},
        {{0, Fill::FalseFlag},
         {4, Fill::SameAs, 2},
         {5, Fill::ScalarFromAttr, InputFill::kNoSource, "lr", 1e-3},
         {6, Fill::ScalarFromAttr, InputFill::kNoSource, nullptr, 1.0}}};
    t["Adam"] = {
        plain(kAdam),
        {{"lr", A::ofFloat(1e-3f)},
         {"beta1", A::ofFloat(0.9f)},
         {"beta2", A::ofFloat(0.999f)},
         {"epsilon", A::ofFloat(1e-8f)},
         {"weight_decay", A::ofFloat(0.0f)},
         {"decoupled", A::ofInt(0)},
         {"low", A::ofInt(toOnnxDataType(DType::F16))}},
        {{0, Fill::FalseFlag},
         {6, Fill::ScalarFromAttr, InputFill::kNoSource, "lr", 1e-3},
         {7, Fill::ScalarFromAttr, InputFill::kNoSource, nullptr, 1.0}}};
    t["IncrementStep"] = {plain(kIncrementStep), {}, {{1, Fill::FalseFlag}}};
    // No defaults: an attribute the schedule does not take is an error,
    // so completeLearningRate sees the node's own and writes them all.
    t["LearningRate"] = {plain(kLearningRate), {}, {}, completeLearningRate};
    t["Gelu"] = {plain(kGelu), {}, {}};
    t["GeluTanh"] = {plain(kGeluTanh), {}, {}};
    t["LogSigmoid"] = {plain(kLogSigmoid), {}, {}};
    t["FusedMatMul"] = {fusedMatMulText(),
                        {{"transA", A::ofInt(0)}, {"transB", A::ofInt(0)}},
                        {}};
    addLayerGradientFunctions(t);
    return t;
  }();
  return table;
}

const FunctionDef *findDef(const std::string &op) {
  auto it = functionTable().find(op);
  return it == functionTable().end() ? nullptr : &it->second;
}

/// Every body, parsed once; a body that does not parse keeps its error.
struct ParsedFunction {
  onnx::FunctionProto fn;
  std::string error;
};

const ParsedFunction &parsed(const std::string &op) {
  // Each body is parsed on its first use: a model uses a few of the ops,
  // and parsing every body cost more than writing a large step's nodes.
  struct Lazy {
    std::once_flag once;
    ParsedFunction parsed;
  };
  static std::map<std::string, Lazy> all = [] {
    std::map<std::string, Lazy> m;
    for (const auto &kv : functionTable())
      m[kv.first];
    return m;
  }();
  auto it = all.find(op);
  if (it == all.end())
    throw Error("mpc op '" + op + "' has no function body");
  Lazy &lazy = it->second;
  std::call_once(lazy.once, [&] {
    ParsedFunction &p = lazy.parsed;
    auto status = onnx::OnnxParser::Parse(p.fn, findDef(op)->text.c_str());
    if (!status.IsOK())
      p.error = status.ErrorMessage();
    else if (p.fn.name() != op || p.fn.domain() != kMpcDomain)
      p.error = "the text defines " + p.fn.domain() + "." + p.fn.name();
  });
  return lazy.parsed;
}

/// The node's value of each attribute the body reads: its own, else the
/// kernels' default, converted to the default's kind (an int lr is a float).
std::map<std::string, Attribute>
effectiveAttributes(const FunctionDef &def,
                    const std::vector<std::pair<std::string, Attribute>> &own) {
  std::map<std::string, Attribute> attrs(own.begin(), own.end());
  for (const auto &d : def.defaults) {
    auto it = attrs.find(d.first);
    if (it == attrs.end()) {
      attrs.emplace(d.first, d.second);
    } else if (d.second.kind == Attribute::Kind::Float &&
               it->second.kind == Attribute::Kind::Int) {
      it->second = Attribute::ofFloat(float(it->second.i));
    }
  }
  return attrs;
}

/// The value of an attribute written in a body or on a node (no reference).
Attribute attributeFromProto(const onnx::AttributeProto &a) {
  if (std::optional<Attribute> plain = plainAttributeFromProto(a))
    return std::move(*plain);
  if (a.type() != onnx::AttributeProto::TENSOR)
    throw Error("attribute '" + a.name() + "' has an unsupported type");
  Tensor t;
  std::string error;
  if (!tensorFromProto(a.t(), t, error))
    throw Error("attribute '" + a.name() + "': " + error);
  return Attribute::ofTensor(std::move(t));
}

// --- export ------------------------------------------------------------------

onnx::AttributeProto attributeProto(const std::string &name,
                                    const Attribute &a) {
  onnx::AttributeProto p;
  exportAttribute(name, a, p);
  return p;
}

/// A GraphProto as WrittenGraph. completeGraph takes its nodes out while it
/// completes them (takeNodes); they still count as the graph's.
class ProtoGraph : public WrittenGraph {
public:
  explicit ProtoGraph(onnx::GraphProto &g) : graph_(g) {}

  onnx::GraphProto &graph() { return graph_; }
  /// The nodes, taken out of the graph to be put back one by one. They move
  /// as pointers (a proto without an arena owns heap-allocated messages):
  /// moving each message was a copy of the graph.
  std::vector<std::unique_ptr<onnx::NodeProto>> &takeNodes() {
    std::vector<onnx::NodeProto *> taken(size_t(graph_.node_size()));
    graph_.mutable_node()->ExtractSubrange(0, graph_.node_size(), taken.data());
    pending_.resize(taken.size());
    for (size_t i = 0; i < taken.size(); ++i)
      pending_[i].reset(taken[i]);
    return pending_;
  }

  int elemType(const std::string &name) const override {
    auto fromInfo = [&](const auto &list) -> int {
      for (const auto &vi : list)
        if (vi.name() == name && vi.type().has_tensor_type())
          return vi.type().tensor_type().elem_type();
      return 0;
    };
    int t = fromInfo(graph_.value_info());
    if (!t)
      t = fromInfo(graph_.input());
    if (!t)
      t = fromInfo(graph_.output());
    for (const auto &init : graph_.initializer())
      if (!t && init.name() == name)
        t = init.data_type();
    return t;
  }

  std::vector<int64_t> dims(const std::string &name) const override {
    for (const auto *list :
         {&graph_.value_info(), &graph_.input(), &graph_.output()})
      for (const auto &vi : *list)
        if (vi.name() == name && vi.type().has_tensor_type() &&
            vi.type().tensor_type().has_shape()) {
          std::vector<int64_t> dims;
          for (const auto &d : vi.type().tensor_type().shape().dim())
            dims.push_back(d.has_dim_value() ? d.dim_value() : -1);
          return dims;
        }
    return {};
  }

  /// The set is built on the first question: most graphs need no new name,
  /// and hashing every name of a big step cost more than the rest of
  /// completing it.
  bool uses(const std::string &name) const override {
    if (!built_)
      build();
    return used_.count(name) > 0;
  }

  void forEachMpcNode(const std::function<void(const MpcNode &)> &f) override {
    for (const onnx::NodeProto &n : graph_.node())
      if (n.domain() == kMpcDomain)
        f({n.op_type(), size_t(n.input_size()),
           [&n](size_t i) { return !n.input(int(i)).empty(); },
           [&n]() -> const onnx::NodeProto & { return n; }});
  }

  bool usesDefaultOp(const std::string &op) const override {
    return usesOp(graph_, op);
  }

private:
  /// Whether a default-domain node of `g` or of a graph nested in it has
  /// op type `op`.
  static bool usesOp(const onnx::GraphProto &g, const std::string &op) {
    for (const auto &n : g.node()) {
      if ((n.domain().empty() || n.domain() == "ai.onnx") && n.op_type() == op)
        return true;
      for (const auto &a : n.attribute()) {
        if (a.has_g() && usesOp(a.g(), op))
          return true;
        for (const auto &sub : a.graphs())
          if (usesOp(sub, op))
            return true;
      }
    }
    return false;
  }

  void build() const {
    built_ = true;
    const onnx::GraphProto &g = graph_;
    for (const auto &v : g.input())
      used_.insert(v.name());
    for (const auto &v : g.output())
      used_.insert(v.name());
    for (const auto &v : g.value_info())
      used_.insert(v.name());
    for (const auto &t : g.initializer())
      used_.insert(t.name());
    auto addNode = [&](const onnx::NodeProto &n) {
      used_.insert(n.name());
      for (const auto &o : n.output())
        used_.insert(o);
    };
    for (const auto &n : g.node())
      addNode(n);
    for (const auto &n : pending_)
      if (n) // null once moved back into g
        addNode(*n);
  }

  onnx::GraphProto &graph_;
  std::vector<std::unique_ptr<onnx::NodeProto>> pending_;
  mutable bool built_ = false;
  mutable std::unordered_set<std::string> used_;
};

/// Element type of a value of the graph (FLOAT when unknown).
int elemTypeOf(const WrittenGraph &g, const std::string &name) {
  int t = g.elemType(name);
  return t ? t : onnx::TensorProto::FLOAT;
}

/// Size of dimension `axis` of a value of the graph, or -1 when unknown.
int64_t dimOf(const WrittenGraph &g, const std::string &name, int axis) {
  std::vector<int64_t> dims = g.dims(name);
  return axis < int(dims.size()) ? dims[size_t(axis)] : -1;
}

/// A ScalarFromAttr fill: the node's attribute `f.attr` when set (the
/// opset-6 forms), else the kernel's default, as a scalar of `type`.
Tensor scalarFill(const InputFill &f, DType type,
                  const std::map<std::string, Attribute> &attrs) {
  double v = f.value;
  if (auto it = f.attr ? attrs.find(f.attr) : attrs.end(); it != attrs.end())
    v = it->second.kind == Attribute::Kind::Int ? double(it->second.i)
                                                : double(it->second.f);
  return Tensor::scalar(type, v);
}

/// A RangeOfLength / OnesOfLength fill for a node `what` whose input
/// `source` has `dims` (empty: unknown rank) and dtype `type`.
Tensor lengthFill(const InputFill &f, const std::string &what,
                  const std::vector<int64_t> &dims, DType type) {
  if (dims.size() != 1 || dims[0] < 0)
    throw Error(what + ": the omitted optional input " +
                std::to_string(f.index) +
                " is written for its function body from the length of input " +
                std::to_string(f.source) + ", which is not static");
  Tensor t(type, {dims[0]});
  for (int64_t i = 0; i < dims[0]; ++i)
    t.setFromDouble(i, f.fill == Fill::RangeOfLength ? double(i) : 1.0);
  return t;
}

/// "mpc.Op 'name'", for errors.
std::string describeNode(const onnx::NodeProto &n) {
  return "mpc." + n.op_type() + " '" + n.name() + "'";
}

/// Throws when the node sets an input its body has no formal input for.
void requireFormalInputs(const FunctionDef &def, const std::string &what,
                         size_t formal, size_t count,
                         const std::function<bool(size_t)> &given) {
  for (size_t i = formal; i < count; ++i)
    if (given(i))
      throw Error(what + ": no function body for it in standard ONNX ops: " +
                  def.extraInputs);
}

/// requireFormalInputs for a written node (its description made only to
/// throw).
void requireFormalInputs(const FunctionDef &def, const onnx::NodeProto &n,
                         size_t formal) {
  for (size_t i = formal; i < size_t(n.input_size()); ++i)
    if (!n.input(int(i)).empty())
      requireFormalInputs(def, describeNode(n), formal, size_t(n.input_size()),
                          [&n](size_t j) { return !n.input(int(j)).empty(); });
}

onnx::NodeProto constantNode(const std::string &output, const Tensor &value) {
  onnx::NodeProto n;
  n.set_op_type("Constant");
  n.set_name(output);
  n.add_output(output);
  auto *a = n.add_attribute();
  a->set_name("value");
  a->set_type(onnx::AttributeProto::TENSOR);
  tensorToProto(value, "", *a->mutable_t());
  return n;
}

/// The attributes node `n` of `g` is written with for its body `def`
/// (defaults, then the completion). Throws Error naming the node when the
/// body cannot express it.
NodeView completedView(const onnx::NodeProto &n, const WrittenGraph &g,
                       const FunctionDef &def, const onnx::FunctionProto &fn) {
  requireFormalInputs(def, n, size_t(fn.input_size()));
  const std::string what = describeNode(n);
  std::vector<std::pair<std::string, Attribute>> own;
  for (const auto &a : n.attribute())
    own.emplace_back(a.name(), attributeFromProto(a));
  NodeView view{what, effectiveAttributes(def, own),
                [&n, &g](bool output, size_t i) {
                  int size = output ? n.output_size() : n.input_size();
                  if (int(i) >= size)
                    return std::vector<int64_t>();
                  return g.dims(output ? n.output(int(i)) : n.input(int(i)));
                }};
  if (def.complete)
    def.complete(view);
  for (const InputFill &f : def.fills)
    if ((f.fill == Fill::RangeOfLength || f.fill == Fill::OnesOfLength) &&
        (n.input_size() <= int(f.index) || n.input(int(f.index)).empty()))
      lengthFill(f, what, g.dims(n.input(int(f.source))), DType::I64);
  return view;
}

/// Whether the completion of a node's attributes depends only on its op and
/// attributes (its body's completion reads no shapes).
bool dependsOnAttributesOnly(const FunctionDef &def) {
  if (def.complete)
    return false;
  for (const InputFill &f : def.fills)
    if (f.fill == Fill::RangeOfLength || f.fill == Fill::OnesOfLength)
      return false;
  return true;
}

} // namespace

/// The completed attributes of each signature seen (op and attributes, for
/// the ops whose completion reads nothing else), and what completing needs
/// of each op.
struct MpcNodeCompleter::Memo {
  /// An op as the completer sees it, looked up once. Every mpc node asks
  /// about its op a few times (2,400 nodes in a 64-block step): findDef's
  /// and parsed()'s lookups in maps of ~40 names were most of the cost of
  /// the first look over the graphs.
  struct Op {
    std::string name;
    const FunctionDef *def = nullptr; ///< null: the op has no body
    bool attributesOnly = false;      ///< dependsOnAttributesOnly(*def)
    bool written = false;             ///< its function is written
    /// The parsed body (def only), parsed on first use as parsed() does.
    const onnx::FunctionProto &body() {
      if (!fn)
        fn = &parsed(name).fn;
      return *fn;
    }

  private:
    const onnx::FunctionProto *fn = nullptr;
  };
  /// Few ops per model: a list beats hashing names. A deque keeps the
  /// entries in place as it grows.
  std::deque<Op> ops;
  Op *lastOp = nullptr; ///< nodes of one op often follow each other

  Op &op(const std::string &name) {
    if (lastOp && lastOp->name == name)
      return *lastOp;
    for (Op &o : ops)
      if (o.name == name)
        return *(lastOp = &o);
    Op &o = ops.emplace_back();
    o.name = name;
    o.def = findDef(name);
    o.attributesOnly = o.def && dependsOnAttributesOnly(*o.def);
    return *(lastOp = &o);
  }

  struct Entry {
    const FunctionDef *def = nullptr;
    const onnx::FunctionProto *fn = nullptr;
    /// The node's attributes as written, in order.
    std::vector<onnx::AttributeProto> attrs;
    /// The values its body reads (for the fills).
    std::map<std::string, Attribute> view;
  };
  std::unordered_map<std::string, Entry> bySignature;
  Entry scratch; ///< the entry of a node whose completion reads shapes
  std::string key;

  /// The completed attributes of `n` of `g`, an mpc node of an op with a
  /// body (throws as completedView).
  const Entry &completed(const onnx::NodeProto &n, const WrittenGraph &g) {
    // The signature: the op, then each attribute's size and bytes. Only
    // ops whose completion reads nothing else are ever stored under it.
    key = n.op_type();
    for (const auto &a : n.attribute()) {
      size_t size = a.ByteSizeLong();
      key += '\0';
      key.append(reinterpret_cast<const char *>(&size), sizeof size);
      size_t at = key.size();
      key.resize(at + size);
      a.SerializeWithCachedSizesToArray(reinterpret_cast<uint8_t *>(&key[at]));
    }
    if (auto found = bySignature.find(key); found != bySignature.end()) {
      // Inputs are checked per node: they are no part of the signature.
      requireFormalInputs(*found->second.def, n,
                          size_t(found->second.fn->input_size()));
      return found->second;
    }
    // Made in scratch and kept only once made: a node that cannot be
    // completed throws, and its signature must not look done.
    Op &nodeOp = op(n.op_type());
    const FunctionDef &def = *nodeOp.def;
    NodeView view = completedView(n, g, def, nodeOp.body());
    // Written in the node's order, then the defaults' order, then what the
    // completion added.
    std::vector<std::string> order;
    for (const auto &a : n.attribute())
      order.push_back(a.name());
    for (const auto &d : def.defaults)
      order.push_back(d.first);
    for (const auto &kv : view.attrs)
      order.push_back(kv.first);
    std::map<std::string, Attribute> pending = view.attrs;
    scratch.def = &def;
    scratch.fn = &nodeOp.body();
    scratch.attrs.clear();
    for (const std::string &name : order)
      if (auto it = pending.find(name); it != pending.end()) {
        scratch.attrs.push_back(attributeProto(name, it->second));
        pending.erase(it);
      }
    scratch.view = std::move(view.attrs);
    if (!dependsOnAttributesOnly(def))
      return scratch;
    return bySignature.emplace(key, scratch).first->second;
  }
};

namespace {

/// Completes the mpc nodes of `g` whose ops have functions (see
/// appendMpcFunctions), inserting the nodes that make the missing inputs
/// just before their users.
void completeGraph(ProtoGraph &pg, MpcNodeCompleter &completer) {
  onnx::GraphProto &g = pg.graph();
  for (std::unique_ptr<onnx::NodeProto> &owned : pg.takeNodes()) {
    if (completer.completes(*owned))
      completer.complete(*owned, pg, [&g](const onnx::NodeProto &before) {
        *g.add_node() = before;
      });
    g.mutable_node()->AddAllocated(owned.release());
  }
}

int64_t defaultOpset(const onnx::ModelProto &proto) {
  for (const auto &op : proto.opset_import())
    if (op.domain().empty() || op.domain() == "ai.onnx")
      return op.version();
  return -1;
}

/// Raises an opset-15 proto to 16 for bodies that need 16 (ScatterElements'
/// reduction) when that changes no node's meaning: of the ops opset 16
/// revised, only RoiAlign computes something else (its default
/// coordinate_transformation_mode); Where, LeakyRelu, PRelu,
/// GreaterOrEqual, LessOrEqual, ScatterND, ScatterElements, Identity, If
/// and Loop only gained types or attributes whose defaults keep opset 15's
/// behaviour. Returns the default opset the functions then import.
int64_t raiseOpsetForBodies(const std::vector<std::string> &ops,
                            onnx::ModelProto &proto,
                            const std::vector<WrittenGraph *> &graphs,
                            int64_t opset) {
  int64_t needed = opset;
  for (const std::string &op : ops)
    if (const FunctionDef *def = findDef(op))
      needed = std::max(needed, def->minOpset);
  if (opset != 15 || needed != 16)
    return opset;
  for (const WrittenGraph *g : graphs)
    if (g->usesDefaultOp("RoiAlign"))
      return opset;
  for (auto &op : *proto.mutable_opset_import())
    if (op.domain().empty() || op.domain() == "ai.onnx") {
      op.set_version(needed);
      return needed;
    }
  return opset; // no import to raise (printModelText's collection)
}

// --- inlining ----------------------------------------------------------------

std::optional<Attribute>
bodyAttribute(const onnx::AttributeProto &a,
              const std::map<std::string, Attribute> &nodeAttrs) {
  if (a.ref_attr_name().empty())
    return attributeFromProto(a);
  auto it = nodeAttrs.find(a.ref_attr_name());
  if (it == nodeAttrs.end())
    return std::nullopt; // an optional attribute the node does not set
  Attribute v = it->second;
  if (a.type() == onnx::AttributeProto::FLOAT && v.kind == Attribute::Kind::Int)
    v = Attribute::ofFloat(float(v.i));
  return v;
}

} // namespace

std::string replaceAll(std::string s, const std::string &from,
                       const std::string &to) {
  for (size_t at = s.find(from); at != std::string::npos;
       at = s.find(from, at + to.size()))
    s.replace(at, from.size(), to);
  return s;
}

const char *mpcFunctionHeader() { return kHeader; }

std::vector<std::string> mpcOpsWithFunctions() {
  std::vector<std::string> ops;
  for (const auto &kv : functionTable())
    ops.push_back(kv.first);
  return ops;
}

const char *mpcFunctionText(const std::string &op) {
  const FunctionDef *def = findDef(op);
  return def ? def->text.c_str() : nullptr;
}

void parseMpcFunction(const std::string &op, onnx::FunctionProto &fn) {
  const ParsedFunction &p = parsed(op);
  if (!p.error.empty())
    throw Error("the function body of mpc." + op +
                " does not parse: " + p.error);
  fn = p.fn;
}

std::string WrittenGraph::fresh(const std::string &hint) {
  std::string name = hint;
  for (int i = 1; handedOut_.count(name) || uses(name); ++i)
    name = hint + "_" + std::to_string(i);
  handedOut_.insert(name);
  return name;
}

MpcNodeCompleter::MpcNodeCompleter(const std::vector<std::string> &ops,
                                   const Model &model, onnx::ModelProto &proto,
                                   const std::vector<WrittenGraph *> &graphs,
                                   bool stepModel)
    : memo_(std::make_unique<Memo>()) {
  if (ops.empty())
    return;
  // Any mpc op, with or without a body, needs the domain imported.
  bool hasMpc = false;
  for (const auto &op : proto.opset_import())
    hasMpc |= op.domain() == kMpcDomain;
  if (!hasMpc) {
    auto *op = proto.add_opset_import();
    op->set_domain(kMpcDomain);
    op->set_version(1);
  }
  // A proto without imports (printModelText collects functions in one) uses
  // the model's.
  int64_t opset = defaultOpset(proto);
  if (opset < 0)
    opset = model.opsetVersion("");
  if (opset < kMinFunctionOpset)
    return;
  opset = raiseOpsetForBodies(ops, proto, graphs, opset);
  // A node its op's body cannot express: the step model, written for any
  // runtime, fails with the node's error; the training model, which mpc
  // runs on its own kernels, keeps that op without a function (the node
  // cannot call one of another signature).
  std::set<std::string> inexpressible;
  for (WrittenGraph *g : graphs)
    g->forEachMpcNode([&](const WrittenGraph::MpcNode &n) {
      Memo::Op &op = memo_->op(n.opType);
      if (!op.def || inexpressible.count(n.opType))
        return;
      try {
        if (op.attributesOnly) {
          // Only an input beyond the body's can fail such a node: its
          // attributes complete the same way whatever they are.
          size_t formal = size_t(op.body().input_size());
          for (size_t i = formal; i < n.numInputs; ++i)
            if (n.given(i))
              requireFormalInputs(*op.def, n.proto(), formal);
        } else {
          memo_->completed(n.proto(), *g);
        }
      } catch (const Error &) {
        if (stepModel)
          throw;
        inexpressible.insert(n.opType);
      }
    });
  for (const std::string &op : ops) {
    // A body needing newer ops than the model imports is left out: the
    // node then names an op no runtime knows, which fails loudly.
    const FunctionDef *def = findDef(op);
    if (!def || opset < def->minOpset || inexpressible.count(op) ||
        !written_.insert(op).second)
      continue;
    memo_->op(op).written = true;
    onnx::FunctionProto fn;
    parseMpcFunction(op, fn);
    // Same version as the model: ONNX's checker requires that a function's
    // ops resolve to the model's versions of them.
    fn.mutable_opset_import(0)->set_version(opset);
    *proto.add_functions() = std::move(fn);
  }
  if (written_.empty())
    return;
  if (proto.ir_version() < 8)
    proto.set_ir_version(8);
}

MpcNodeCompleter::~MpcNodeCompleter() = default;

bool MpcNodeCompleter::completes(const onnx::NodeProto &n) const {
  return completes(n.domain(), n.op_type());
}

bool MpcNodeCompleter::completes(const std::string &domain,
                                 const std::string &opType) const {
  // Most nodes are of the default domain (""): the size tells first.
  constexpr size_t kMpcDomainSize = std::char_traits<char>::length(kMpcDomain);
  return domain.size() == kMpcDomainSize &&
         std::memcmp(domain.data(), kMpcDomain, kMpcDomainSize) == 0 &&
         memo_->op(opType).written;
}

bool MpcNodeCompleter::completesInPlace(
    const std::string &opType, const WrittenGraph &g,
    std::vector<const std::string *> &inputs, size_t numOutputs,
    bool outputsNamed) const {
  Memo::Op &op = memo_->op(opType);
  if (!op.def || !op.attributesOnly)
    return false;
  const FunctionDef *def = op.def;
  const onnx::FunctionProto &fn = op.body();
  // An input beyond the body's (complete() throws), an output to name.
  if (inputs.size() > size_t(fn.input_size()) || !outputsNamed ||
      numOutputs < size_t(fn.output_size()))
    return false;
  // As complete() fills them, in the same order.
  static const std::string omitted;
  for (const InputFill &f : def->fills) {
    while (inputs.size() <= f.index)
      inputs.push_back(&omitted);
    if (!inputs[f.index]->empty())
      continue;
    switch (f.fill) {
    case Fill::FalseFlag:
      if (g.falseFlag.empty())
        return false; // the Constant is made with the first such node
      inputs[f.index] = &g.falseFlag;
      break;
    case Fill::SameAs:
      if (f.source >= inputs.size())
        return false;
      inputs[f.index] = inputs[f.source];
      break;
    default:
      return false; // makes a Constant (or more) for the node
    }
  }
  return true;
}

void MpcNodeCompleter::complete(
    onnx::NodeProto &n, WrittenGraph &g,
    const std::function<void(const onnx::NodeProto &)> &emit) {
  const std::string base = n.output_size() ? n.output(0) : n.op_type();
  // The node carries every attribute its body reads: the kernels' defaults
  // where it has none, and what the completion makes explicit.
  const Memo::Entry &done = memo_->completed(n, g);
  const FunctionDef &def = *done.def;
  const onnx::FunctionProto &fn = *done.fn;
  n.clear_attribute();
  for (const onnx::AttributeProto &a : done.attrs)
    *n.add_attribute() = a;
  for (const InputFill &f : def.fills) {
    while (n.input_size() <= int(f.index))
      n.add_input("");
    if (!n.input(int(f.index)).empty())
      continue;
    std::string value;
    switch (f.fill) {
    case Fill::FalseFlag:
      if (g.falseFlag.empty()) {
        g.falseFlag = g.fresh("mpc_found_inf_false");
        emit(constantNode(g.falseFlag, Tensor(DType::Bool, {})));
      }
      value = g.falseFlag;
      break;
    case Fill::SameAs:
      value = n.input(int(f.source));
      break;
    case Fill::ScalarFromAttr: {
      DType type = DType::F32;
      if (f.source != InputFill::kNoSource)
        type = fromOnnxDataType(elemTypeOf(g, n.input(int(f.source))))
                   .value_or(DType::F32);
      value = g.fresh(base + "_" + fn.input(int(f.index)));
      emit(constantNode(value, scalarFill(f, type, done.view)));
      break;
    }
    case Fill::RangeOfLength:
    case Fill::OnesOfLength: {
      const std::string &source = n.input(int(f.source));
      DType type = fromOnnxDataType(elemTypeOf(g, source)).value_or(DType::I64);
      value = g.fresh(base + "_" + fn.input(int(f.index)));
      emit(constantNode(value,
                        lengthFill(f, describeNode(n), g.dims(source), type)));
      break;
    }
    case Fill::AxesFromAttr: {
      std::vector<int64_t> axes;
      auto *attrs = n.mutable_attribute();
      for (auto it = attrs->begin(); it != attrs->end(); ++it)
        if (it->name() == "axes") {
          axes.assign(it->ints().begin(), it->ints().end());
          attrs->erase(it);
          break;
        }
      value = g.fresh(base + "_axes");
      emit(constantNode(value,
                        Tensor::fromInt64s({int64_t(axes.size())}, axes)));
      break;
    }
    case Fill::UnitWeights: {
      const std::string &scores = n.input(int(f.source));
      DType type = fromOnnxDataType(elemTypeOf(g, scores)).value_or(DType::F32);
      // A known class count gives a constant, which keeps every tensor of
      // the step sized at compile time (the memory plan needs that).
      if (int64_t numClasses = dimOf(g, scores, 1); numClasses > 0) {
        value = g.fresh(base + "_unit_weights");
        Tensor ones(type, {numClasses});
        for (int64_t k = 0; k < numClasses; ++k)
          ones.setFromDouble(k, 1.0);
        emit(constantNode(value, ones));
        break;
      }
      std::string classes = g.fresh(base + "_num_classes");
      onnx::NodeProto shape;
      shape.set_op_type("Shape");
      shape.set_name(classes);
      shape.add_input(scores);
      shape.add_output(classes);
      for (auto [attr, v] : {std::pair("start", 1), std::pair("end", 2)}) {
        auto *a = shape.add_attribute();
        a->set_name(attr);
        a->set_type(onnx::AttributeProto::INT);
        a->set_i(v);
      }
      emit(shape);
      value = g.fresh(base + "_unit_weights");
      onnx::NodeProto ones;
      ones.set_op_type("ConstantOfShape");
      ones.set_name(value);
      ones.add_input(classes);
      ones.add_output(value);
      auto *a = ones.add_attribute();
      a->set_name("value");
      a->set_type(onnx::AttributeProto::TENSOR);
      DType t = fromOnnxDataType(elemTypeOf(g, scores)).value_or(DType::F32);
      Tensor one(t, {1});
      one.setFromDouble(0, 1.0);
      tensorToProto(one, "", *a->mutable_t());
      emit(ones);
      break;
    }
    }
    n.set_input(int(f.index), value);
  }
  // Outputs the node omits (SGD's buffer without momentum) get names that
  // nothing reads.
  for (int j = 0; j < fn.output_size(); ++j) {
    if (n.output_size() <= j)
      n.add_output("");
    if (n.output(j).empty())
      n.set_output(j, g.fresh(base + "_unused_" + fn.output(j)));
  }
}

void appendMpcFunctions(const std::vector<std::string> &ops, const Model &model,
                        onnx::ModelProto &proto) {
  if (ops.empty())
    return;
  std::vector<std::unique_ptr<ProtoGraph>> graphs;
  if (proto.has_graph())
    graphs.push_back(std::make_unique<ProtoGraph>(*proto.mutable_graph()));
  for (auto &ti : *proto.mutable_training_info()) {
    if (ti.has_algorithm())
      graphs.push_back(std::make_unique<ProtoGraph>(*ti.mutable_algorithm()));
    if (ti.has_initialization())
      graphs.push_back(
          std::make_unique<ProtoGraph>(*ti.mutable_initialization()));
  }
  std::vector<WrittenGraph *> views;
  for (auto &g : graphs)
    views.push_back(g.get());
  const bool stepModel = proto.has_graph() && proto.training_info_size() == 0;
  MpcNodeCompleter completer(ops, model, proto, views, stepModel);
  for (auto &g : graphs)
    completeGraph(*g, completer);
}

std::unique_ptr<Graph> inlineMpcFunction(const Node &node) {
  const FunctionDef *def =
      node.domain() == kMpcDomain ? findDef(node.opType()) : nullptr;
  if (!def)
    throw Error(node.describe() + ": mpc op has no function body");
  onnx::FunctionProto fn;
  parseMpcFunction(node.opType(), fn);
  auto g = std::make_unique<Graph>(node.opType() + "_body");
  const std::string prefix =
      (node.name().empty() ? node.opType() : node.name()) + "/";

  std::unordered_map<const Value *, Value *> inputOf;
  auto graphInput = [&](const Value *v) -> Value * {
    if (!v)
      return nullptr;
    auto it = inputOf.find(v);
    if (it != inputOf.end())
      return it->second;
    Value *in = g->addInput(v->name(), v->dtype, v->dims);
    in->hasShape = v->hasShape;
    return inputOf[v] = in;
  };
  auto constant = [&](const std::string &hint, Tensor t) {
    Node *c = g->createNode("Constant", {}, 1, prefix + hint);
    c->setAttr("value", Attribute::ofTensor(t));
    c->output(0)->setType(t.dtype, toDims(t.dims));
    return c->output(0);
  };

  requireFormalInputs(*def, node.describe(), size_t(fn.input_size()),
                      node.numInputs(),
                      [&](size_t i) { return node.input(i) != nullptr; });
  NodeView view{node.describe(), effectiveAttributes(*def, node.attributes()),
                [&](bool output, size_t i) {
                  const Value *v = output ? node.output(i) : node.input(i);
                  std::vector<int64_t> dims;
                  if (v && v->hasShape)
                    for (const Dim &d : v->dims)
                      dims.push_back(d.isKnown() ? d.value : -1);
                  return dims;
                }};
  if (def->complete)
    def->complete(view);
  const std::map<std::string, Attribute> &attrs = view.attrs;

  std::unordered_map<std::string, Value *> env;
  for (int i = 0; i < fn.input_size(); ++i)
    env[fn.input(i)] = graphInput(node.input(size_t(i)));
  for (const InputFill &f : def->fills) {
    Value *&v = env[fn.input(int(f.index))];
    if (v)
      continue;
    switch (f.fill) {
    case Fill::FalseFlag:
      v = constant("found_inf_false", Tensor(DType::Bool, {}));
      break;
    case Fill::SameAs:
      v = env[fn.input(int(f.source))];
      break;
    case Fill::ScalarFromAttr: {
      DType type = DType::F32;
      if (f.source != InputFill::kNoSource)
        type = env[fn.input(int(f.source))]->dtype;
      v = constant(fn.input(int(f.index)), scalarFill(f, type, attrs));
      break;
    }
    case Fill::AxesFromAttr:
      if (const Attribute *a = node.attr("axes"))
        v = constant("axes",
                     Tensor::fromInt64s({int64_t(a->ints.size())}, a->ints));
      break;
    case Fill::RangeOfLength:
    case Fill::OnesOfLength: {
      const Value *source = env[fn.input(int(f.source))];
      std::vector<int64_t> dims;
      if (source && source->hasShape)
        for (const Dim &d : source->dims)
          dims.push_back(d.isKnown() ? d.value : -1);
      v = constant(fn.input(int(f.index)),
                   lengthFill(f, node.describe(), dims,
                              source ? source->dtype : DType::I64));
      break;
    }
    case Fill::UnitWeights:
      break; // the body treats omitted weights as the kernel does
    }
  }

  std::map<std::string, std::string> outputName;
  for (int j = 0; j < fn.output_size(); ++j)
    if (const Value *o = node.output(size_t(j)))
      outputName[fn.output(j)] = o->name();

  for (const onnx::NodeProto &bn : fn.node()) {
    std::vector<Value *> ins;
    for (const std::string &name : bn.input()) {
      if (name.empty()) {
        ins.push_back(nullptr);
        continue;
      }
      auto it = env.find(name);
      if (it == env.end())
        throw Error("the function body of mpc." + node.opType() + " reads '" +
                    name + "' before defining it");
      ins.push_back(it->second);
    }
    std::vector<std::string> outs;
    for (const std::string &name : bn.output()) {
      auto it = outputName.find(name);
      outs.push_back(it != outputName.end()
                         ? it->second
                         : g->uniqueValueName(prefix + name));
    }
    Node *m = g->createNodeWithOutputs(bn.op_type(), ins, outs,
                                       g->uniqueNodeName(prefix + bn.op_type()),
                                       bn.domain());
    for (const onnx::AttributeProto &a : bn.attribute())
      if (auto v = bodyAttribute(a, attrs))
        m->setAttr(a.name(), *v);
    for (int k = 0; k < bn.output_size(); ++k)
      env[bn.output(k)] = m->output(size_t(k));
  }
  for (int j = 0; j < fn.output_size(); ++j) {
    const Value *o = node.output(size_t(j));
    if (!o)
      continue;
    Value *v = env.at(fn.output(j));
    v->copyTypeFrom(*o);
    g->addOutput(v);
  }
  return g;
}

size_t inlineMpcFunctions(Graph &graph) {
  size_t replaced = 0;
  for (Node *n : graph.nodeList()) {
    if (n->domain() != kMpcDomain || !findDef(n->opType()))
      continue;
    std::unique_ptr<Graph> body = inlineMpcFunction(*n);
    std::unordered_map<const Value *, Value *> map;
    for (Value *in : body->inputs())
      map[in] = graph.findValue(in->name());
    for (const auto &bn : body->nodes()) {
      std::vector<Value *> ins;
      for (Value *v : bn->inputs())
        ins.push_back(v ? map.at(v) : nullptr);
      std::vector<std::string> outs;
      for (Value *o : bn->outputs())
        outs.push_back(o ? graph.uniqueValueName(o->name()) : "");
      Node *m = graph.createNodeWithOutputs(bn->opType(), ins, outs,
                                            graph.uniqueNodeName(bn->name()),
                                            bn->domain(), n);
      for (const auto &kv : bn->attributes())
        m->setAttr(kv.first, kv.second);
      for (size_t k = 0; k < bn->numOutputs(); ++k)
        if (Value *o = bn->output(k)) {
          m->output(k)->copyTypeFrom(*o);
          map[o] = m->output(k);
        }
    }
    // The body's outputs take over the node's outputs and their names.
    std::vector<std::pair<Value *, std::string>> renames;
    for (Value *o : n->outputs()) {
      if (!o)
        continue;
      Value *v = map.at(body->findValue(o->name()));
      graph.replaceAllUsesWith(o, v);
      renames.emplace_back(v, o->name());
    }
    graph.removeNode(n);
    for (auto &[v, name] : renames)
      graph.renameValue(v, name);
    ++replaced;
  }
  return replaced;
}

} // namespace mpc
