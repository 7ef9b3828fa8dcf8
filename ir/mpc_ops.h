// The custom ops of domain "mpc": names and exact semantics.
//
// Passes emit these, the backends run them, and the exporter writes each as a
// model-local function in standard ONNX ops (passes/onnx/mpc_functions.cpp) so
// the written model is self-describing. This header is the contract between
// those three; a change here changes all of them.
//
// Fused forward ops (emitted by the fusion passes):
//   Gelu(X) -> Y                 Y = 0.5 X (1 + erf(X / sqrt(2))): ONNX's
//       Gelu (approximate = "none") for models importing opset < 20, made
//       by fuse-gelu from the exported arithmetic; computed in fp32 for
//       fp16/bf16 (fp64 for fp64), like Gelu.
//   GeluTanh(X) -> Y             Y = 0.5 X (1 + tanh(sqrt(2/pi) (X +
//       0.044715 X^3))): Gelu's approximate = "tanh" likewise. Two ops, not
//       one with an attribute: each needs a function body, and a body cannot
//       branch on a string attribute.
//   RMSNormalization(X, Scale) <axis, epsilon> -> Y
//       Y = X * inv_std * Scale over the axes [axis, rank) (default -1),
//       inv_std = 1 / sqrt(mean(X^2) + epsilon) (default 1e-5) per row,
//       computed in fp32 for fp16/bf16 (fp64 for fp64). ONNX's
//       RMSNormalization (opset 23, stash_type 1), made by fuse-rmsnorm
//       from the exported arithmetic (LlamaRMSNorm's, and the
//       RMSNormalization import lowering's) for models of any opset.
//   LayerNormalizationTo(X, Scale, B) <axis, epsilon, to, low>
//       -> (Y, Mean, InvStdDev [, Ylow])
//       ONNX's LayerNormalization (stash_type 1) with Y stored in the float
//       type `to` (rounded once from the fp32 result: Cast(Y, to)'s bits)
//       and, when asked for, Ylow = Cast(Y, low) (`low` default fp16).
//       Made by fold-widening-casts from autocast's fp32 layer-norm island
//       and the Cast down to the next matrix product: a pre-LN block's norm
//       writes the fp16 operand alone (`to` fp16), a post-LN block's writes
//       the fp32 residual and the fp16 operand in one pass.
//   RMSNormalizationTo(X, Scale) <axis, epsilon, to, low> -> (Y [, Ylow])
//       RMSNormalization with Y stored in `to` and Ylow = Cast(Y, low), as
//       LayerNormalizationTo (a Llama block's norm and the Cast down to its
//       projections).
//   LogSigmoid(X) -> Y           Y = log(sigmoid(X)) = min(X, 0) -
//       log1p(exp(-|X|)), exact for every X (PyTorch's log_sigmoid), computed
//       in fp32 for fp16/bf16 (fp64 for fp64). Made by fuse-log-sigmoid from
//       the exported Log(Sigmoid(x)) of binary_cross_entropy_with_logits,
//       logsigmoid and multilabel_soft_margin_loss, and from Log(1 -
//       Sigmoid(x)) as LogSigmoid(-x).
//   FusedMatMul(A, B) <transA, transB> -> Y    Y = MatMul(op(A), op(B)),
//       op swapping the last two axes where its flag (int 0/1, default 0) is
//       1, numpy batch broadcasting; A and B have rank >= 2 and one dtype;
//       fp16/bf16 multiply with fp32 accumulation and round once, like
//       MatMul, with MatMul-of-a-Transpose's bits on the CPU; fp32/fp64
//       pass the flags to BLAS, whose summation order for a transposed
//       layout may differ in the last bits (ONNX Runtime's
//       com.microsoft.FusedMatMul without alpha). Made by fold-transpose.
//   SoftmaxTo(X) <axis, to, low> -> (Y [, Ylow])
//       Y = Softmax(Cast(X, to)): X's elements are widened exactly to the
//       float type `to` (at least X's width) and the softmax is taken and
//       stored in it; the same bits as the two nodes without the cast copy.
//       Ylow, when asked for, is Cast(Y, low) (`low` default fp16): the
//       island's Cast down for the next matrix product, written in the same
//       pass. Made by fold-widening-casts from autocast's fp32 island.
//   DivSoftmaxTo(X, D) <axis, to, low> -> (Y [, Ylow])
//       SoftmaxTo(Div(X, D)): the attention's scaling Div (D one element of
//       X's dtype, the quotient rounded to X's dtype) and its softmax island
//       in one node, the same bits without the quotient tensor
//       (passes/fold_widening_casts.cpp).
//   AddTo(A, B) <to, low> -> (C [, Clow])
//       C = Cast(Add(Cast(A, fp32), Cast(B, fp32)), to): A and B of one
//       shape (no broadcasting), each fp32, fp16 or bf16, widened exactly
//       and added in fp32, C rounded once to `to` (fp32, fp16 or bf16);
//       Clow, when asked for, is Cast(C, low) (`low` default fp16). The
//       same bits as an fp32 Add of the widened inputs and its Casts, in one
//       pass without the copies. Made by fold-widening-casts from a residual
//       Add of an fp32 stream and a Cast up of an fp16 branch, and from an
//       fp32 gradient sum and its Cast down to the next matrix product.
//
// Backward ops (emitted by autodiff):
//   ReluGrad(dY, Y) -> dX                     dX = Y > 0 ? dY : 0
//   SoftmaxGrad(dY, Y) <axis> -> dX           dX = Y * (dY - sum_axis(dY * Y))
//   LogSoftmaxGrad(dY, Y) <axis> -> dX        dX = dY - exp(Y) * sum_axis(dY)
//   SoftmaxGradAs(dY, Y) <axis> -> dX         SoftmaxGrad with dX of Y's
//       dtype: dY's elements are widened exactly to it, the same bits as
//       SoftmaxGrad(Cast(dY, Y's dtype), Y) without the cast copy
//       (passes/fold_widening_casts.cpp); Y must be at least as wide.
//   SoftmaxGradDiv(dY, Y, D) <axis, to> -> dX   Cast(Div(SoftmaxGradAs(dY,
//       Y), D), to): the attention's gradient through its scaling Div, D one
//       element of Y's dtype (the Div rounds to Y's dtype, the Cast to
//       `to`), the same bits as the three nodes without their two
//       intermediate tensors (passes/fold_widening_casts.cpp).
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
//   SumToShapeAs(dY, X) -> dX                 SumToShape with dX of X's
//       dtype: dY's elements are widened exactly to it and summed in it, the
//       same bits as SumToShape(Cast(dY, X's dtype), X) without the cast
//       copy (passes/fold_widening_casts.cpp); X must be at least as wide.
//   ReduceGrad(dY, X [, axes]) <axes, keepdims, noop_with_empty_axes, mean>
//       -> dX                                  broadcasts dY back over the
//       reduced axes to X's shape; divides by the reduced count when mean=1.
//   Normalization, activation and elementwise gradients
//   (passes/gradients/<category>.cpp, kernels/cpu/<category>.cpp); every sum
//   accumulates in fp32 for fp16/bf16 (fp64 for fp64), results take dY's dtype:
//   LayerNormalizationGrad(dY, X, scale, mean, inv_std) <axis>
//       -> (dX [, dScale, dBias])      mean, inv_std: the forward node's
//       outputs 1 and 2 (X's shape with 1s from `axis` on). Over the
//       normalised axes [axis, rank) of N elements, with xhat = (X - mean) *
//       inv_std and g = dY * scale: dX = inv_std * (g - mean(g) - xhat *
//       mean(g * xhat)); dScale = sum of dY * xhat and dBias = sum of dY over
//       the leading axes, both shaped X.dims[axis:]. Omitted outputs are not
//       computed. Unlike the other gradients here, the results take X's
//       dtype: dY may be narrower (fp16/bf16 dY, fp32 X), read as stored and
//       widened exactly, the same bits as with Cast(dY, X's dtype) and
//       without the cast copy (fold-widening-casts).
//   RMSNormalizationGrad(dY, X, scale) <axis, epsilon> -> (dX [, dScale])
//       LayerNormalizationGrad with the mean taken as 0 and inv_std
//       recomputed from X as the forward computes it (one pass over a row,
//       instead of a saved output): xhat = X * inv_std, g = dY * scale,
//       dX = inv_std * (g - xhat * mean(g * xhat)), dScale = sum of dY *
//       xhat over the leading axes. Results in X's dtype, dY as in
//       LayerNormalizationGrad.
//   GatherGrad(dY, indices, data) <axis> -> dData
//       zeros of data's shape, then every slice of dY added at the position
//       its index names (negative indices count from the end, repeated
//       indices accumulate); data is read for its shape only.
//   GatherElementsGrad(dY, indices, data) <axis> -> dData
//       zeros of data's shape, then dY[i] added at data[i with i[axis] =
//       indices[i]] for every index position i (negative indices count from
//       the end, repeated indices accumulate); dY has the indices' shape,
//       data is read for its shape only.
//   SliceGrad(dY, data, starts, ends [, axes, steps]) -> dData
//       zeros of data's shape with dY written where Slice(data, starts, ends,
//       axes, steps) reads (bounds clamped as Slice clamps them; before opset
//       10 starts/ends/axes are attributes); data is read for its shape only.
//   GeluGrad(dY, X) <approximate> -> dX      dX = dY * Gelu'(X): "none":
//       Phi(x) + x phi(x); "tanh": the derivative of 0.5 x (1 + tanh(u)),
//       u = sqrt(2/pi) (x + 0.044715 x^3).
//   LogSigmoidGrad(dY, X) -> dX              dX = dY * sigmoid(-X), from
//       exp(-|X|) (no overflow, no cancellation), in fp32 for fp16/bf16.
//   ErfGrad(dY, X) -> dX                     dX = dY * 2/sqrt(pi) * exp(-X^2):
//       one op, not Mul/Neg/Exp, so that the exp of a non-positive number
//       (at most 1, it cannot overflow) is not taken for an fp32 island.
//   LeakyReluGrad(dY, X) <alpha> -> dX       dX = X > 0 ? dY : alpha * dY
//       (PyTorch's leaky_relu_backward, so X = 0 takes alpha).
//   ClipGrad(dY, X [, min, max]) -> dX       dX = min <= X <= max ? dY : 0
//       (PyTorch's clamp backward); an omitted bound does not bound.
//   ExtremumGrad(dY, Y, X0 .. Xn-1) <index> -> dXi
//       gradient of Max/Min (Y) w.r.t. input `index`, in dY's (the broadcast)
//       shape: dY * [Xi == Y] / #{j : Xj == Y}. Ties split evenly, which is
//       PyTorch's rule for maximum/minimum (half each) extended to n inputs.
//   ReduceExtremumGrad(dY, X, Y [, axes]) <axes, keepdims,
//       noop_with_empty_axes> -> dX    gradient of ReduceMax/ReduceMin: each
//       reduced group's dY is split evenly among the elements of X equal to
//       the group's Y (PyTorch's amax/amin backward); others get 0.
//   DropoutGrad(dY, mask [, ratio, training_mode]) -> dX
//       training_mode true: dX = mask ? dY / (1 - ratio) : 0 (all 0 for
//       ratio 1); otherwise dX = dY. mask is the forward Dropout's second
//       output, so the backward reuses the forward's mask bit for bit. The
//       CPU kernel draws the mask as keep(i) = u(i) >= ratio, where u(i) is
//       the top 24 bits of splitmix64(step seed ^ hash(node name, seed
//       attribute) + i) / 2^24: counter-based, so any element is
//       reproducible from (seed, i) alone.
//   Convolution, pooling and batch-norm family
//   (passes/gradients/conv_pool.cpp, normalization.cpp;
//   kernels/cpu/conv_pool.cpp, normalization.cpp). The window ops carry the
//   forward node's attributes (auto_pad, pads, strides, dilations,
//   kernel_shape, group, ceil_mode, count_include_pad) and resolve the window
//   from them exactly as the forward does (ir/window_geometry.h); X is [N, C,
//   D1..Dr], o and i are spatial positions, k kernel offsets, and input
//   coordinate i = o * stride - pad_begin + k * dilation (outside X: zero / no
//   element). Sums accumulate in fp32 for fp16/bf16 (fp64 for fp64) and are
//   rounded once; results take dY's dtype.
//   ConvGradInput(dY, W, x_shape) -> dX        gradient of Conv's X; x_shape
//       (int64 [r+2]) is X's shape. dX[n, g*Cg+c, i] = sum over m < Mg, o,
//       k with o*stride - pad_begin + k*dilation = i of
//       dY[n, g*Mg+m, o] * W[g*Mg+m, c, k] (group g, Cg = C/group,
//       Mg = M/group): ConvTranspose's arithmetic, positions no window
//       reads get 0.
//   ConvGradWeight(dY, X) -> dW                dW[g*Mg+m, c, k] = sum over
//       n, o of dY[n, g*Mg+m, o] * X[n, g*Cg+c, o*stride - pad_begin +
//       k*dilation], shape [M, C/group, kernel...]. ConvTranspose's weight
//       gradient is the same op with the roles swapped: ConvGradWeight(X,
//       dY) with the ConvTranspose's resolved pads.
//   MaxPoolGrad(dY, X) -> dX                   each window's dY goes to the
//       element MaxPool took: the first maximum in row-major window order
//       (a NaN wins, the first one), as PyTorch's max_pool backward; windows
//       that overlap add up. Only X's elements are candidates, never pads.
//   AveragePoolGrad(dY, x_shape) -> dX         each window's dY / count
//       added to every X element of the window; count is the forward's
//       divisor: the window positions inside X (count_include_pad = 0) or
//       inside X plus its pads (1; with ceil_mode the part of a window past
//       the end pad never counts, as in PyTorch).
//   BatchNormalizationGrad(dY, X, scale [, mean, var]) <epsilon>
//       -> (dX, dScale, dBias)                 per channel c (axis 1), over
//       the count elements of all other axes, xhat = (X - mean) * inv_std,
//       inv_std = 1 / sqrt(var + epsilon): dBias = sum(dY), dScale =
//       sum(dY * xhat). Without mean/var (training mode) mean and var are
//       X's batch mean and biased variance, computed by the same code as
//       the forward's, and dX = scale * inv_std * (dY - (dBias + xhat *
//       dScale) / count); with them (inference mode, constant statistics)
//       dX = scale * inv_std * dY. dScale/dBias take scale's dtype; omitted
//       outputs are not computed. Recomputing the statistics costs one pass
//       over X and needs no extra forward outputs (ONNX's BatchNormalization
//       has none from opset 14).
//   (Other rules use standard ops: Gemm, MatMul, Transpose, Reshape, Mul,
//   Div, Neg, Cast, ... .)
//
// Standard ops whose semantics mpc pins down where ONNX leaves a choice:
//   BatchNormalization in training mode (training_mode = 1, or before opset
//       14 asking for the running-statistics outputs; ir/
//       batch_norm_mode.h): Y normalises with the batch mean and the BIASED
//       batch variance; running_mean' = mean_in * momentum + batch_mean *
//       (1 - momentum) and running_var' = var_in * momentum +
//       UNBIASED_batch_var * (1 - momentum) (default momentum 0.9). The
//       unbiased variance (count / (count - 1)) is PyTorch's rule, which
//       torch.onnx exports of BatchNorm*d are compared against; ONNX's
//       reference implementation uses the biased one. count must be > 1.
//       X may be fp16/bf16 with fp32 scale/B/mean/var: Y has X's dtype,
//       the running statistics the statistics' dtype; the arithmetic runs
//       in fp32 (fp64 when any operand is fp64).
//       autodiff binds running_mean'/running_var' onto the running-mean/var
//       state (update_binding) and never trains those initializers; like
//       PyTorch's forward they update on every step, also on a step the
//       loss scaler skips. saved_mean / saved_var (outputs 3, 4 before
//       opset 14) are the batch mean and biased variance.
//
// Loss scaling (emitted by loss-scale):
//   UnscaleGradients(scale, g1..gn) -> (found_inf, g1'..gn')
//       inv = float(1 / double(scale)); gi' = gi * inv (fp32);
//       found_inf (bool scalar) = some element of some gi is not finite.
//   UpdateLossScale(scale, growth_tracker, found_inf)
//       <growth_factor, backoff_factor, growth_interval>
//       -> (scale', growth_tracker')          exactly torch's
//       _amp_update_scale_: found_inf: scale *= backoff, tracker = 0; else
//       tracker+1 == growth_interval: scale *= growth (kept only if finite),
//       tracker = 0; else tracker += 1. scale fp32 [], tracker int64 [].
//
// Optimizer (emitted by optimizer); `found_inf` may be omitted (""), then no
// step is ever skipped. When found_inf is true every output equals its input.
// Under --grad-accum it is the skip flag "found_inf or not the K-th
// micro-batch" (passes/optimizer/grad_accum.h), built from standard ops.
//   ClipGradNorm(g1..gn) <max_norm> -> (g1'..gn', total_norm)
//       total_norm = sqrt(sum of squares, accumulated in fp32);
//       coef = min(1, max_norm / (total_norm + 1e-6)); gi' = gi * coef.
//   SGD(found_inf, step, p, g [, buf [, lr [, grad_scale]]])
//       <lr, momentum, dampening, weight_decay, nesterov [, low]>
//       -> (p' [, buf' [, p_low']])
//   Adam(found_inf, step, p, g, m, v [, lr [, grad_scale]])
//       <lr, beta1, beta2, epsilon, weight_decay, decoupled [, low]>
//       -> (p', m', v' [, p_low'])
//       decoupled=1 is AdamW. `step` (int64 []) is the number of updates
//       applied before this one; PyTorch's formulas, see
//       kernels/common/optimizer_math.h. The optional `lr` input (an fp64
//       or fp32 scalar, as torch's Python float) replaces the attribute.
//       p and the moments are fp32 (moments also bf16); SGD's and Adam's
//       g is fp32, or fp16/bf16 widened exactly as it is read
//       (fold-widening-casts), the arithmetic fp32 either way. The optional
//       p_low' = Cast<to = low>(p') (fp16 by default, or bf16) is the
//       master's 16-bit working copy (passes/weight_copies.h), written as
//       p' is made. The optional `grad_scale` (the loss scale, fp32 []) is
//       UnscaleGradients' multiply done as g is read: the update uses
//       float(g) * float(1 / double(grad_scale)) (passes/fold_unscale.h), the
//       bits of the unscaled gradient it replaces.
//   LearningRate(step) <schedule, base_lr, warmup_steps, total_steps,
//       min_lr_ratio, step_size, gamma> -> lr (fp64 [])
//       --lr-schedule: the rate of the update after `step` applied updates
//       (kernels/common/lr_schedule_math.h; attributes checked by
//       kernels/lr_schedule_attrs.h), read by every SGD/Adam node.
//   IncrementStep(step, found_inf) -> step'    step + (found_inf ? 0 : 1)
//
// Data parallelism (emitted by optimizer with --data-parallel,
// passes/data_parallel.h):
//   AllReduce(x1..xn) <reduction = "mean" | "sum" | "max"> -> (y1..yn)
//       yi = the reduction of xi over the ranks of the data-parallel world
//       (kernels/collective.h); every rank holds the same dtype and shape.
//       Floating point: the ranks' values summed in double in rank order,
//       divided by the number of ranks for "mean", rounded once to xi's
//       type; "max" of bool is OR. Every rank gets the same bits. In a world
//       of one rank (any runtime but mpc-run under mpirun) yi = xi.
//   AllReduce(gate, x1..xn) <reduction, gated = 1> -> (y1..yn)
//       --grad-accum's form: where the bool scalar `gate` (the window's
//       boundary, the same on every rank) is false, yi = xi without any
//       communication; where true, as above. A backend may also reduce where
//       it is false (the CUDA graph cannot branch): the outputs are not read
//       inside the window.
//
// Sharded optimizer state (emitted by optimizer with --shard-optimizer,
// passes/optimizer/shard_optimizer.h). A value x of n elements is cut into
// world_size chunks of c = ceil(n / world_size) elements of its flattened
// (row-major) form; chunk r (elements r*c .. r*c+c-1, zeros past n) is
// rank r's. Every op refuses to run in a world of another size.
//   ReduceScatter([gate,] x1..xn) <reduction, world_size [, gated,
//       wire_dtype]> -> (s1..sn)
//       si = this rank's chunk of AllReduce(xi) (fp [c]), each element
//       reduced as AllReduce reduces it (the same bits); the gated form as
//       AllReduce's (where the gate is false, si = this rank's chunk of xi).
//   RankShard(x1..xn) <world_size> -> (s1..sn)    si = this rank's chunk of xi.
//   AllGather(s1..sn, like1..liken) <world_size> -> (y1..yn)
//       yi (likei's dtype and shape; likei's values are not read) = the
//       ranks' chunks si in rank order, the padding dropped.
//   AllGather(s1..sn) <world_size, shapes> -> (y1..yn)
//       the same with each yi's shape in `shapes` (per output its rank,
//       then its dims, all flattened into one ints list; yi has si's
//       dtype): the step's gather of sharded fp32 masters (or of their
//       16-bit casts), which are kept only as chunks and have no whole
//       value to name as `like`.
//   ShardedClipGradNorm(s1..sn) <max_norm, world_size> -> (s1'..sn', norm)
//       ClipGradNorm of the whole gradients whose chunks the si are: each
//       gradient's fp32 sum of squares runs in element order across the
//       ranks (rank r continues rank r-1's partial sum), so the norm and
//       the clipped chunks have ClipGradNorm's bits.
#pragma once

#include <string_view>

namespace mpc {

/// Domain name of mpc's custom ops.
inline constexpr const char *kMpcDomain = "mpc";

/// The domain of ONNX's training operators (Gradient, Adam, Momentum,
/// Adagrad), which the importer and the CPU and CUDA kernels name.
inline constexpr const char *kOnnxPreviewTrainingDomain =
    "ai.onnx.preview.training";

/// Whether `domain` is mpc's; most nodes are of the default domain (""),
/// which the length tells without comparing bytes.
inline bool isMpcDomain(std::string_view domain) {
  return domain == std::string_view(kMpcDomain);
}

/// The output at which an op that writes the Cast down of its output 0
/// beside it writes that copy (its `low` attribute's type): an island's
/// Ylow (SoftmaxTo, DivSoftmaxTo, LayerNormalizationTo, RMSNormalizationTo,
/// AddTo)
/// or an update's 16-bit working copy of the new master (SGD, Adam); -1
/// for every other op.
inline int lowCopyOutput(std::string_view domain, std::string_view op) {
  if (!isMpcDomain(domain))
    return -1;
  if (op == "SoftmaxTo" || op == "DivSoftmaxTo" || op == "RMSNormalizationTo" ||
      op == "AddTo")
    return 1;
  if (op == "SGD")
    return 2; // after the momentum buffer
  return op == "LayerNormalizationTo" || op == "Adam"
             ? 3 // after Mean, InvStdDev; after the moments
             : -1;
}

/// The input of an update (SGD, Adam) that holds the loss scale it unscales
/// its gradient by (`grad_scale`, after the optional `lr`); -1 for every
/// other op.
inline int gradScaleInput(std::string_view domain, std::string_view op) {
  if (!isMpcDomain(domain))
    return -1;
  return op == "SGD" ? 6 : op == "Adam" ? 7 : -1;
}

} // namespace mpc
