// The custom ops of domain "mpc": names and exact semantics.
//
// Passes emit these, the backends run them, and the exporter writes each as a
// model-local function in standard ONNX ops (passes/onnx/mpc_functions.cpp) so
// the written model is self-describing. This header is the contract between
// those three; a change here changes all of them.
//
// Backward ops (emitted by autodiff):
//   ReluGrad(dY, Y) -> dX                     dX = Y > 0 ? dY : 0
//   SoftmaxGrad(dY, Y) <axis> -> dX           dX = Y * (dY - sum_axis(dY * Y))
//   LogSoftmaxGrad(dY, Y) <axis> -> dX        dX = dY - exp(Y) * sum_axis(dY)
//   SoftmaxCrossEntropyLossGrad(dL, log_prob, labels [, weights])
//       <reduction, ignore_index> -> dLogits
//       log_prob is the forward node's second output, shape [N, C, d1...];
//       dLogits = (exp(log_prob) - onehot(labels)) * w[label] * s, where s is
//       dL / sum(w[label] over non-ignored) for "mean", dL for "sum", dL[n,...]
//       for "none"; ignored positions get 0.
//   NegativeLogLikelihoodLossGrad(dL, X, labels [, weights])
//       <reduction, ignore_index> -> dX
//       dX = 0 except dX[n, label, ...] = -w[label] * s (s as above).
//   SumToShape(dY, X) -> dX                   sums dY over the axes that
//       numpy broadcasting expanded to reach dY's shape from X's shape; dX has
//       X's shape and dY's dtype (accumulation in fp32 for fp16/bf16).
//   ReduceGrad(dY, X [, axes]) <axes, keepdims, noop_with_empty_axes, mean>
//       -> dX                                  broadcasts dY back over the
//       reduced axes to X's shape; divides by the reduced count when mean=1.
//   (Other rules use standard ops: Gemm, MatMul, Transpose, Reshape, Mul,
//   Div, Neg, Cast, ... .)
//
// Loss scaling (emitted by loss-scale):
//   UnscaleGradients(scale, g1..gn) -> (found_inf, g1'..gn')
//       inv = float(1 / double(scale)); gi' = gi * inv (fp32);
//       found_inf (bool scalar) = some element of some gi is not finite.
//   UpdateLossScale(scale, growth_tracker, found_inf)
//       <growth_factor, backoff_factor, growth_interval>
//       -> (scale', growth_tracker')          exactly torch's _amp_update_scale_:
//       found_inf: scale *= backoff, tracker = 0; else tracker+1 ==
//       growth_interval: scale *= growth (kept only if finite), tracker = 0;
//       else tracker += 1. scale fp32 [], tracker int64 [].
//
// Optimizer (emitted by optimizer); `found_inf` may be omitted (""), then no
// step is ever skipped. When found_inf is true every output equals its input.
//   ClipGradNorm(g1..gn) <max_norm> -> (g1'..gn', total_norm)
//       total_norm = sqrt(sum of squares, accumulated in fp32);
//       coef = min(1, max_norm / (total_norm + 1e-6)); gi' = gi * coef.
//   SGD(found_inf, step, p, g [, buf])
//       <lr, momentum, dampening, weight_decay, nesterov> -> (p' [, buf'])
//   Adam(found_inf, step, p, g, m, v)
//       <lr, beta1, beta2, epsilon, weight_decay, decoupled> -> (p', m', v')
//       decoupled=1 is AdamW. `step` (int64 []) is the number of updates
//       applied before this one; PyTorch's formulas, see
//       kernels/common/optimizer_math.h.
//   IncrementStep(step, found_inf) -> step'    step + (found_inf ? 0 : 1)
#pragma once

namespace mpc {

/// Domain name of mpc's custom ops.
inline constexpr const char *kMpcDomain = "mpc";

} // namespace mpc
