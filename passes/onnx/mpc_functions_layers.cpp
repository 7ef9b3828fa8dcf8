// Function bodies of the layer gradients: the mpc backward ops of the
// normalization, activation, convolution, pooling and gather families
// (passes/gradients/<category>.cpp), in standard ONNX ops, for the table of
// mpc_functions.cpp.
//
// They follow the CPU kernels (kernels/cpu/<category>.cpp) as the other
// bodies do:
//  - element-wise rules, sums and statistics compute in double and round once
//    to the kernel's result type, so a body is at least as precise as the
//    kernel's fp32 (fp64 for fp64) arithmetic; selections (ClipGrad) copy dY;
//  - the convolutions (ConvGradInput, ConvGradWeight, AveragePoolGrad's
//    spread) compute in fp32 (ONNX Runtime's CPU Conv and ConvTranspose
//    have no double kernel): fp16/bf16 widen exactly, products
//    accumulate in fp32 and round once, the kernel's numerics; an fp64
//    convolution's body is only as precise as an fp32 one, as Gelu's Erf is;
//  - scatters (GatherGrad, GatherElementsGrad, SliceGrad, MaxPoolGrad) go
//    through a flat position map: the op's own forward applied to an iota
//    of the data's shape (Gather, GatherElements, Slice) or MaxPool's
//    Indices says where each dY element goes, and ScatterElements
//    (reduction "add", opset 16, where positions repeat) accumulates in
//    double.
// A body cannot branch on a string attribute or on the input's rank, so a
// completion makes such attributes explicit on the node before it is
// written: auto_pad becomes explicit pads (from X's static sizes for SAME_*),
// every window attribute is written, and GeluGrad's approximate is mirrored
// by the int attribute approximate_tanh. A node a body cannot express
// (BatchNormalizationGrad with running statistics, SAME_* pads of unknown
// sizes) makes the completion throw an error naming it: the step export
// fails with it, a training model keeps the op without a function
// (appendMpcFunctions).
// tests/unit/mpc_functions_test.cpp runs every body against its kernel.
#include "passes/onnx/mpc_function_defs.h"

#include "ir/mpc_ops.h"
#include "ir/window_geometry.h"
#include "support/diagnostics.h"

#include <algorithm>
#include <limits>

namespace mpc {
namespace {

// --- element-wise gradients --------------------------------------------------

// dX = dY * sigmoid(-X): e / (1 + e) for X >= 0 and 1 / (1 + e) for X < 0,
// e = exp(-|X|), as the kernel.
const char *kLogSigmoidGrad = R"(
LogSigmoidGrad (dY, X) => (dX) {
  g = Cast <to = 11> (dY)
  x = Cast <to = 11> (X)
  zero = Constant <value = double {0.0}> ()
  one = Constant <value = double {1.0}> ()
  abs_x = Abs (x)
  neg_abs = Neg (abs_x)
  e = Exp (neg_abs)
  w = Add (one, e)
  negative = Less (x, zero)
  num = Where (negative, one, e)
  s = Div (num, w)
  dx = Mul (g, s)
  dX = CastLike (dx, dY)
}
)";

// dX = dY * 2/sqrt(pi) * exp(-X^2).
const char *kErfGrad = R"(
ErfGrad (dY, X) => (dX) {
  g = Cast <to = 11> (dY)
  x = Cast <to = 11> (X)
  two_over_sqrt_pi = Constant <value = double {1.1283791670955126}> ()
  x_sq = Mul (x, x)
  neg_x_sq = Neg (x_sq)
  e = Exp (neg_x_sq)
  g_scaled = Mul (g, two_over_sqrt_pi)
  dx = Mul (g_scaled, e)
  dX = CastLike (dx, dY)
}
)";

// dX = dY * Gelu'(X), both forms computed and the flag choosing (a body
// cannot test approximate's string): "none": Phi(x) + x phi(x), Erf in fp32
// as in Gelu's body; "tanh": 0.5 (1 + t) + 0.5 x (1 - t^2) beta (1 + 3
// kappa x^2), t = tanh(beta (x + kappa x^3)).
const char *kGeluGrad = R"(
GeluGrad <approximate_tanh> (dY, X) => (dX) {
  g = Cast <to = 11> (dY)
  x = Cast <to = 11> (X)
  half = Constant <value = double {0.5}> ()
  one = Constant <value = double {1.0}> ()
  x_sq = Mul (x, x)
  inv_sqrt2 = Constant <value = double {0.7071067811865476}> ()
  scaled = Mul (x, inv_sqrt2)
  scaled_f = Cast <to = 1> (scaled)
  erf_f = Erf (scaled_f)
  erf = Cast <to = 11> (erf_f)
  one_plus_erf = Add (one, erf)
  cdf = Mul (half, one_plus_erf)
  neg_half = Constant <value = double {-0.5}> ()
  exponent = Mul (neg_half, x_sq)
  gauss = Exp (exponent)
  inv_sqrt_2pi = Constant <value = double {0.3989422804014327}> ()
  pdf = Mul (inv_sqrt_2pi, gauss)
  x_pdf = Mul (x, pdf)
  d_erf = Add (cdf, x_pdf)
  beta = Constant <value = double {0.7978845608028654}> ()
  kappa = Constant <value = double {0.044715}> ()
  three_kappa = Constant <value = double {0.134145}> ()
  x_cube = Mul (x_sq, x)
  kappa_cube = Mul (kappa, x_cube)
  inner_sum = Add (x, kappa_cube)
  inner = Mul (beta, inner_sum)
  t = Tanh (inner)
  one_plus_t = Add (one, t)
  right = Mul (half, one_plus_t)
  left = Mul (half, x)
  t_sq = Mul (t, t)
  sech_sq = Sub (one, t_sq)
  three_kappa_sq = Mul (three_kappa, x_sq)
  one_plus_k = Add (one, three_kappa_sq)
  inner_d = Mul (beta, one_plus_k)
  left_sech = Mul (left, sech_sq)
  left_d = Mul (left_sech, inner_d)
  d_tanh = Add (right, left_d)
  flag_i = Constant <value_int: int = @approximate_tanh> ()
  flag = Cast <to = 9> (flag_i)
  d = Where (flag, d_tanh, d_erf)
  dx = Mul (g, d)
  dX = CastLike (dx, dY)
}
)";

// dX = X > 0 ? dY : alpha dY (alpha dY of a float alpha is exact in double,
// so rounding once gives the kernel's fp32 product).
const char *kLeakyReluGrad = R"(
LeakyReluGrad <alpha> (dY, X) => (dX) {
  g = Cast <to = 11> (dY)
  x = Cast <to = 11> (X)
  alpha_f = Constant <value_float: float = @alpha> ()
  alpha = Cast <to = 11> (alpha_f)
  zero = Constant <value = double {0.0}> ()
  positive = Greater (x, zero)
  scaled = Mul (alpha, g)
  dx = Where (positive, g, scaled)
  dX = CastLike (dx, dY)
}
)";

// dX = min <= X <= max ? dY : 0, where a NaN X or bound compares false;
// omitted bounds are filled with -inf / +inf. The tests select dY or 0 one
// after the other (ONNX Runtime's Where has no bool kernel to combine them,
// and the CPU backend has no And).
const char *kClipGrad = R"(
ClipGrad (dY, X, min, max) => (dX) {
  x = Cast <to = 11> (X)
  lo = Cast <to = 11> (min)
  hi = Cast <to = 11> (max)
  zero_f = Constant <value = float {0.0}> ()
  zero = CastLike (zero_f, dY)
  below = Less (x, lo)
  not_below = Where (below, zero, dY)
  above = Greater (x, hi)
  inside = Where (above, zero, not_below)
  x_number = Equal (x, x)
  lo_number = Equal (lo, lo)
  hi_number = Equal (hi, hi)
  finite_x = Where (x_number, inside, zero)
  with_lo = Where (lo_number, finite_x, zero)
  dX = Where (hi_number, with_lo, zero)
}
)";

// training_mode: dX = mask ? dY * scale : 0, scale = float(1 / (1 - ratio))
// (0 for ratio 1), as the forward scaled; otherwise dX = dY.
const char *kDropoutGrad = R"(
DropoutGrad (dY, mask, ratio, training_mode) => (dX) {
  r = Cast <to = 11> (ratio)
  one = Constant <value = double {1.0}> ()
  zero = Constant <value = double {0.0}> ()
  keep = Sub (one, r)
  inv_keep = Div (one, keep)
  inv_keep_f = Cast <to = 1> (inv_keep)
  inv_keep_d = Cast <to = 11> (inv_keep_f)
  all_dropped = Equal (r, one)
  scale = Where (all_dropped, zero, inv_keep_d)
  g = Cast <to = 11> (dY)
  scaled = Mul (g, scale)
  kept = Where (mask, scaled, zero)
  dropped = CastLike (kept, dY)
  dX = Where (training_mode, dropped, dY)
}
)";

// Each reduced group's dY split evenly among the elements of X equal to the
// group's Y (NaN equals nothing). Y and dY are brought to the kept shape
// (1s on the reduced axes, whatever keepdims) through a reduction of X over
// the same axes, as ReduceGrad's body does.
const char *kReduceExtremumGrad = R"(
ReduceExtremumGrad <noop_with_empty_axes> (dY, X, Y, axes) => (dX) {
  x = Cast <to = 11> (X)
  x_sum = ReduceSum <keepdims = 1, noop_with_empty_axes: int = @noop_with_empty_axes> (x, axes)
  kept_shape = Shape (x_sum)
  y = Cast <to = 11> (Y)
  y_kept = Reshape <allowzero = 1> (y, kept_shape)
  g = Cast <to = 11> (dY)
  g_kept = Reshape <allowzero = 1> (g, kept_shape)
  hit = Equal (x, y_kept)
  hit_d = Cast <to = 11> (hit)
  ties = ReduceSum <keepdims = 1, noop_with_empty_axes: int = @noop_with_empty_axes> (hit_d, axes)
  share = Div (g_kept, ties)
  zero = Constant <value = double {0.0}> ()
  dx = Where (hit, share, zero)
  dX = CastLike (dx, dY)
}
)";

// --- scatter-adds ------------------------------------------------------------

// dData: zeros of data's shape plus every dY element at the flat position
// $GATHER reads it from ($GATHER applied to an iota of data's shape; it
// checks and wraps the indices as the forward did).
const char *kGatherGrad = R"(
$OP <axis> (dY, indices, data) => (dData) {
  data_shape = Shape (data)
  flat = Constant <value = int64[1] {-1}> ()
  data_flat = Reshape (data, flat)
  numel_1d = Shape (data_flat)
  axis0 = Constant <value = int64[1] {0}> ()
  numel = Squeeze (numel_1d, axis0)
  zero_i = Constant <value = int64 {0}> ()
  one_i = Constant <value = int64 {1}> ()
  positions = Range (zero_i, numel, one_i)
  iota = Reshape (positions, data_shape)
  read = $GATHER <axis: int = @axis> (iota, indices)
  read_flat = Reshape (read, flat)
  g = Cast <to = 11> (dY)
  g_flat = Reshape (g, flat)
  zeros = ConstantOfShape <value = double[1] {0.0}> (numel_1d)
  sums = ScatterElements <axis = 0, reduction = "add"> (zeros, read_flat, g_flat)
  dd = Reshape (sums, data_shape)
  dData = CastLike (dd, dY)
}
)";

// dData: zeros of data's shape with dY written where Slice reads (Slice
// applied to an iota of data's shape, with its own clamping), a copy: Slice
// reads each position at most once. Omitted axes and steps are filled as
// Slice defaults them (0..n-1, ones).
const char *kSliceGrad = R"(
SliceGrad (dY, data, starts, ends, axes, steps) => (dData) {
  data_shape = Shape (data)
  flat = Constant <value = int64[1] {-1}> ()
  data_flat = Reshape (data, flat)
  numel_1d = Shape (data_flat)
  axis0 = Constant <value = int64[1] {0}> ()
  numel = Squeeze (numel_1d, axis0)
  zero_i = Constant <value = int64 {0}> ()
  one_i = Constant <value = int64 {1}> ()
  positions = Range (zero_i, numel, one_i)
  iota = Reshape (positions, data_shape)
  read = Slice (iota, starts, ends, axes, steps)
  read_flat = Reshape (read, flat)
  g_flat = Reshape (dY, flat)
  zero_f = Constant <value = float {0.0}> ()
  zero = CastLike (zero_f, dY)
  zeros = Expand (zero, numel_1d)
  written = ScatterElements <axis = 0> (zeros, read_flat, g_flat)
  dData = Reshape (written, data_shape)
}
)";

// Each window's dY goes to the element MaxPool's Indices names (the first
// maximum in window order, flat over X), added up where windows overlap. X
// is widened to double, exactly, so the maxima are X's. A window without an
// element (index -1; the window checks make it impossible) would add into a
// spare slot that is dropped.
const char *kMaxPoolGrad = R"(
MaxPoolGrad <kernel_shape, pads, strides, dilations, ceil_mode> (dY, X) => (dX) {
  x = Cast <to = 11> (X)
  pooled, argmax = MaxPool <kernel_shape: ints = @kernel_shape, pads: ints = @pads, strides: ints = @strides, dilations: ints = @dilations, ceil_mode: int = @ceil_mode> (x)
  x_shape = Shape (X)
  flat = Constant <value = int64[1] {-1}> ()
  x_flat = Reshape (X, flat)
  numel_1d = Shape (x_flat)
  axis0 = Constant <value = int64[1] {0}> ()
  numel = Squeeze (numel_1d, axis0)
  one_1d = Constant <value = int64[1] {1}> ()
  slots = Add (numel_1d, one_1d)
  zeros = ConstantOfShape <value = double[1] {0.0}> (slots)
  argmax_flat = Reshape (argmax, flat)
  zero_i = Constant <value = int64 {0}> ()
  no_element = Less (argmax_flat, zero_i)
  target = Where (no_element, numel, argmax_flat)
  g = Cast <to = 11> (dY)
  g_flat = Reshape (g, flat)
  sums = ScatterElements <axis = 0, reduction = "add"> (zeros, target, g_flat)
  zero_1d = Constant <value = int64[1] {0}> ()
  kept = Slice (sums, zero_1d, numel_1d)
  dx = Reshape (kept, x_shape)
  dX = CastLike (dx, dY)
}
)";

// Each window's dY / count added to every X element of the window, in fp32
// as the convolutions. count is a Conv of ones over X (count_include_pad =
// 0: zeros in the pads) or over X and its pads (1), extended by `strides`
// zeros so that ceil_mode's extra windows exist (the part of a window past
// the end pad never counts), cut to dY's size. The spread is a ConvTranspose
// with a ones kernel per [N C] plane, cut to X and zero-padded where no
// window reaches, as in ConvGradInput.
const char *kAveragePoolGrad = R"(
AveragePoolGrad <kernel_shape, pads, strides, dilations, count_include_pad> (dY, x_shape) => (dX) {$WINDOW_ON_X
  g = Cast <to = 1> (dY)
  strides = Constant <value_ints: ints = @strides> ()
  kernel = Constant <value_ints: ints = @kernel_shape> ()
  ends = Slice (pads, spatial, pads_len)
  one_one = Constant <value = int64[2] {1, 1}> ()
  zero_zero = Constant <value = int64[2] {0, 0}> ()
  plane_shape = Concat <axis = 0> (one_one, x_spatial)
  ones_x = ConstantOfShape <value = float[1] {1.0}> (plane_shape)
  around_x = Concat <axis = 0> (zero_zero, begins, zero_zero, ends)
  inside = Pad (ones_x, around_x)
  region_shape = Shape (inside)
  region = ConstantOfShape <value = float[1] {1.0}> (region_shape)
  include_pad_i = Constant <value_int: int = @count_include_pad> ()
  include_pad = Cast <to = 9> (include_pad_i)
  cover = Where (include_pad, region, inside)
  tail = Concat <axis = 0> (zero_zero, strides)
  past_end = Concat <axis = 0> (no_pad, tail)
  cover_ext = Pad (cover, past_end)
  kernel_dims = Concat <axis = 0> (one_one, kernel)
  ones_k = ConstantOfShape <value = float[1] {1.0}> (kernel_dims)
  counts_all = Conv <strides: ints = @strides, dilations: ints = @dilations> (cover_ext, ones_k)
  y_spatial = Shape <start = 2> (dY)
  window_starts = ConstantOfShape <value = int64[1] {0}> (spatial)
  counts = Slice (counts_all, window_starts, y_spatial, axes)
  share = Div (g, counts)
  rest = Constant <value = int64[1] {-1}> ()
  one_1d = Constant <value = int64[1] {1}> ()
  planes_shape = Concat <axis = 0> (rest, one_1d, y_spatial)
  planes = Reshape (share, planes_shape)
  full = ConvTranspose <kernel_shape: ints = @kernel_shape, strides: ints = @strides, dilations: ints = @dilations> (planes, ones_k)
  plane_count = Shape <end = 1> (planes)
  planes_x_shape = Concat <axis = 0> (plane_count, one_1d, x_spatial)$CROP_TO_X
  dx = Reshape (spread, x_shape)
  dX = CastLike (dx, dY)
}
)";

// --- convolution -------------------------------------------------------------

// The window's begin pads and X's spatial sizes, for the bodies that spread
// dY through a ConvTranspose without pads ($CROP_TO_X cuts its result to X):
// begins [r], x_spatial [r], axes = 2..rank-1, no_pad = zeros [rank].
const char *kWindowOnX = R"(
  pads = Constant <value_ints: ints = @pads> ()
  pads_len = Shape (pads)
  two_1d = Constant <value = int64[1] {2}> ()
  spatial = Div (pads_len, two_1d)
  zero_1d = Constant <value = int64[1] {0}> ()
  begins = Slice (pads, zero_1d, spatial)
  rank_1d = Shape (x_shape)
  x_spatial = Slice (x_shape, two_1d, rank_1d)
  axis0 = Constant <value = int64[1] {0}> ()
  rank = Squeeze (rank_1d, axis0)
  two_i = Constant <value = int64 {2}> ()
  one_i = Constant <value = int64 {1}> ()
  axes = Range (two_i, rank, one_i)
  no_pad = ConstantOfShape <value = int64[1] {0}> (rank_1d))";

// A ConvTranspose without pads reaches s (o - 1) + d (k - 1) + 1 positions
// per spatial dim, from -pad_begin on: `full` from pad_begin on, cut to X's
// size and zero-padded to $TARGET where no window reaches (the last
// positions when X + pads - d (k - 1) - 1 is not a multiple of s).
const char *kCropToX = R"(
  x_ends = Add (begins, x_spatial)
  cropped = Slice (full, begins, x_ends, axes)
  cropped_shape = Shape (cropped)
  missing = Sub ($TARGET, cropped_shape)
  pad_amounts = Concat <axis = 0> (no_pad, missing)
  spread = Pad (cropped, pad_amounts))";

// dX: dY spread back through the window by ConvTranspose, cut to X.
const char *kConvGradInput = R"(
ConvGradInput <kernel_shape, pads, strides, dilations, group> (dY, W, x_shape) => (dX) {$WINDOW_ON_X
  dy = Cast <to = 1> (dY)
  w = Cast <to = 1> (W)
  full = ConvTranspose <kernel_shape: ints = @kernel_shape, strides: ints = @strides, dilations: ints = @dilations, group: int = @group> (dy, w)$CROP_TO_X
  dX = CastLike (spread, dY)
}
)";

// dW[m, c, k] = sum over n, o of dY[n, m, o] X[n, c, o s - pad_begin + k d]:
// a convolution of X (batch and channels swapped) with dY as the kernel,
// stride and dilation exchanging roles, grouped as the forward: X [N, C, S]
// becomes [C/g, g N, S] and dY [N, M, O] becomes [M, N, O], so group g
// pairs X's channel group g with dY's; the result [C/g, M, K'] (K' >= K:
// the input may extend past the last window) is cut to the kernel and
// swapped to [M, C/g, K]. The transposes go through 3-D/4-D views, so one
// body serves every spatial rank.
const char *kConvGradWeight = R"(
ConvGradWeight <kernel_shape, pads, strides, dilations, group> (dY, X) => (dW) {
  dy = Cast <to = 1> (dY)
  x = Cast <to = 1> (X)
  axis0 = Constant <value = int64[1] {0}> ()
  group_i = Constant <value_int: int = @group> ()
  groups = Unsqueeze (group_i, axis0)
  batch = Shape <end = 1> (X)
  channels = Shape <start = 1, end = 2> (X)
  filters = Shape <start = 1, end = 2> (dY)
  x_spatial = Shape <start = 2> (X)
  y_spatial = Shape <start = 2> (dY)
  rest = Constant <value = int64[1] {-1}> ()
  cg = Div (channels, groups)
  mg = Div (filters, groups)
  x4_shape = Concat <axis = 0> (batch, groups, cg, rest)
  x4 = Reshape (x, x4_shape)
  x4_t = Transpose <perm = [2, 1, 0, 3]> (x4)
  group_batch = Mul (groups, batch)
  xt_shape = Concat <axis = 0> (cg, group_batch, x_spatial)
  xt = Reshape (x4_t, xt_shape)
  y4_shape = Concat <axis = 0> (batch, groups, mg, rest)
  y4 = Reshape (dy, y4_shape)
  y4_t = Transpose <perm = [1, 2, 0, 3]> (y4)
  yt_shape = Concat <axis = 0> (filters, batch, y_spatial)
  yt = Reshape (y4_t, yt_shape)
  corr = Conv <strides: ints = @dilations, dilations: ints = @strides, pads: ints = @pads, group: int = @group> (xt, yt)
  kernel = Constant <value_ints: ints = @kernel_shape> ()
  kernel_rank = Shape (kernel)
  starts = ConstantOfShape <value = int64[1] {0}> (kernel_rank)
  two_i = Constant <value = int64 {2}> ()
  one_i = Constant <value = int64 {1}> ()
  kernel_rank_s = Squeeze (kernel_rank, axis0)
  axes_end = Add (kernel_rank_s, two_i)
  axes = Range (two_i, axes_end, one_i)
  cropped = Slice (corr, starts, kernel, axes)
  c3_shape = Concat <axis = 0> (cg, filters, rest)
  c3 = Reshape (cropped, c3_shape)
  c3_t = Transpose <perm = [1, 0, 2]> (c3)
  dw_shape = Concat <axis = 0> (filters, cg, kernel)
  dw = Reshape (c3_t, dw_shape)
  dW = CastLike (dw, dY)
}
)";

// --- normalisation -----------------------------------------------------------

// $NORM_RANK of the normalisation bodies: the normalised shape, the rank and
// the count of leading axes, from X and the axis attribute.
const char *kNormRank = R"(  norm_shape = Shape <start: int = @axis> (X)
  x_shape = Shape (X)
  rank_1d = Shape (x_shape)
  norm_rank_1d = Shape (norm_shape)
  lead_1d = Sub (rank_1d, norm_rank_1d)
  axis0 = Constant <value = int64[1] {0}> ()
  rank = Squeeze (rank_1d, axis0)
  lead = Squeeze (lead_1d, axis0)
)";

// ONNX's LayerNormalization with Y stored in `to` and cast to `low` (the
// forward of autocast's layer-norm island and its Cast down, folded).
const char *kLayerNormalizationTo = R"(
LayerNormalizationTo <axis, epsilon, to, low> (X, Scale, B) => (Y, Mean, InvStdDev, Ylow) {
  y, Mean, InvStdDev = LayerNormalization <axis: int = @axis, epsilon: float = @epsilon> (X, Scale, B)
  Y = Cast <to: int = @to> (y)
  Ylow = Cast <to: int = @low> (Y)
}
)";

// Over the normalised axes [axis, rank) of n elements, xhat = (X - mean)
// inv_std and g = dY scale: dX = inv_std (g - mean(g) - xhat mean(g xhat));
// dScale = sum of dY xhat and dBias = sum of dY over the leading axes
// (none when axis is 0: noop_with_empty_axes).
const char *kLayerNormalizationGrad = R"(
LayerNormalizationGrad <axis> (dY, X, scale, mean, inv_std) => (dX, dScale, dBias) {
  g = Cast <to = 11> (dY)
  x = Cast <to = 11> (X)
  sc = Cast <to = 11> (scale)
  m = Cast <to = 11> (mean)
  is = Cast <to = 11> (inv_std)
$NORM_RANK  zero_i = Constant <value = int64 {0}> ()
  one_i = Constant <value = int64 {1}> ()
  norm_axes = Range (lead, rank, one_i)
  lead_axes = Range (zero_i, lead, one_i)
  ones = ConstantOfShape <value = double[1] {1.0}> (norm_shape)
  n = ReduceSum <keepdims = 0> (ones)
  centered = Sub (x, m)
  xhat = Mul (centered, is)
  gs = Mul (g, sc)
  sum_g = ReduceSum <keepdims = 1> (gs, norm_axes)
  gs_xhat = Mul (gs, xhat)
  sum_gx = ReduceSum <keepdims = 1> (gs_xhat, norm_axes)
  mean_g = Div (sum_g, n)
  mean_gx = Div (sum_gx, n)
  xhat_mean_gx = Mul (xhat, mean_gx)
  minus_mean = Sub (gs, mean_g)
  inner = Sub (minus_mean, xhat_mean_gx)
  dx = Mul (is, inner)
  dX = CastLike (dx, X)
  g_xhat = Mul (g, xhat)
  ds = ReduceSum <keepdims = 0, noop_with_empty_axes = 1> (g_xhat, lead_axes)
  dScale = CastLike (ds, X)
  db = ReduceSum <keepdims = 0, noop_with_empty_axes = 1> (g, lead_axes)
  dBias = CastLike (db, X)
}
)";

// RMS normalisation (mpc.RMSNormalization, fuse-rmsnorm) over the axes
// [axis, rank): inv_std = 1 / sqrt(mean(X^2) + epsilon) per row,
// Y = X inv_std Scale. Computed in double here, as the layer-norm bodies;
// the mean as a ReduceSum over n (ReduceMean takes axes as an input only
// from opset 18). $RMS_STATISTICS (x, norm_axes, n, is, xhat from X, after
// $NORM_RANK) is shared by the forward and the gradient, which recomputes
// them.
const char *kRmsStatistics =
    R"($NORM_RANK  one_i = Constant <value = int64 {1}> ()
  norm_axes = Range (lead, rank, one_i)
  ones = ConstantOfShape <value = double[1] {1.0}> (norm_shape)
  n = ReduceSum <keepdims = 0> (ones)
  x = Cast <to = 11> (X)
  squares = Mul (x, x)
  sum_sq = ReduceSum <keepdims = 1> (squares, norm_axes)
  mean_sq = Div (sum_sq, n)
  eps_f = Constant <value_float: float = @epsilon> ()
  eps = Cast <to = 11> (eps_f)
  var_eps = Add (mean_sq, eps)
  rms = Sqrt (var_eps)
  one = Constant <value = double {1.0}> ()
  is = Div (one, rms)
  xhat = Mul (x, is)
)";

const char *kRMSNormalization = R"(
RMSNormalization <axis, epsilon> (X, Scale) => (Y) {
$RMS_STATISTICS  sc = Cast <to = 11> (Scale)
  y = Mul (xhat, sc)
  Y = CastLike (y, X)
}
)";

// The same with Y rounded to X's dtype and cast to `to` (and `low`): the
// RMS-norm island and its Cast down, folded (fold-widening-casts).
const char *kRMSNormalizationTo = R"(
RMSNormalizationTo <axis, epsilon, to, low> (X, Scale) => (Y, Ylow) {
$RMS_STATISTICS  sc = Cast <to = 11> (Scale)
  y = Mul (xhat, sc)
  yx = CastLike (y, X)
  Y = Cast <to: int = @to> (yx)
  Ylow = Cast <to: int = @low> (Y)
}
)";

// Its gradient, with inv_std recomputed from X and g = dY scale:
// dX = inv_std (g - xhat mean(g xhat)); dScale = sum of dY xhat over the
// leading axes (none when axis is 0: noop_with_empty_axes).
const char *kRMSNormalizationGrad = R"(
RMSNormalizationGrad <axis, epsilon> (dY, X, scale) => (dX, dScale) {
$RMS_STATISTICS  g = Cast <to = 11> (dY)
  sc = Cast <to = 11> (scale)
  zero_i = Constant <value = int64 {0}> ()
  lead_axes = Range (zero_i, lead, one_i)
  gs = Mul (g, sc)
  gs_xhat = Mul (gs, xhat)
  sum_gx = ReduceSum <keepdims = 1> (gs_xhat, norm_axes)
  mean_gx = Div (sum_gx, n)
  xhat_mean_gx = Mul (xhat, mean_gx)
  inner = Sub (gs, xhat_mean_gx)
  dx = Mul (is, inner)
  dX = CastLike (dx, X)
  g_xhat = Mul (g, xhat)
  ds = ReduceSum <keepdims = 0, noop_with_empty_axes = 1> (g_xhat, lead_axes)
  dScale = CastLike (ds, X)
}
)";

// Training mode: per channel (axis 1) over the count elements of the other
// axes, the batch mean and biased variance of X, xhat = (X - mean) inv_std,
// inv_std = 1 / sqrt(var + epsilon); dBias = sum(dY), dScale = sum(dY
// xhat), dX = scale inv_std (dY - (dBias + xhat dScale) / count). dScale and
// dBias take scale's dtype and shape.
const char *kBatchNormalizationGrad = R"(
BatchNormalizationGrad <epsilon> (dY, X, scale) => (dX, dScale, dBias) {
  g = Cast <to = 11> (dY)
  x = Cast <to = 11> (X)
  sc = Cast <to = 11> (scale)
  x_shape = Shape (X)
  rank_1d = Shape (x_shape)
  axis0 = Constant <value = int64[1] {0}> ()
  rank = Squeeze (rank_1d, axis0)
  two_i = Constant <value = int64 {2}> ()
  one_i = Constant <value = int64 {1}> ()
  inner_axes = Range (two_i, rank, one_i)
  axes = Concat <axis = 0> (axis0, inner_axes)
  flat = Constant <value = int64[1] {-1}> ()
  x_flat = Reshape (X, flat)
  numel = Shape (x_flat)
  channels = Shape <start = 1, end = 2> (X)
  count_i = Div (numel, channels)
  count = Cast <to = 11> (count_i)
  sum_x = ReduceSum <keepdims = 1> (x, axes)
  mean = Div (sum_x, count)
  centered = Sub (x, mean)
  sq = Mul (centered, centered)
  sum_sq = ReduceSum <keepdims = 1> (sq, axes)
  var = Div (sum_sq, count)
  eps_f = Constant <value_float: float = @epsilon> ()
  eps = Cast <to = 11> (eps_f)
  var_eps = Add (var, eps)
  std = Sqrt (var_eps)
  one = Constant <value = double {1.0}> ()
  inv_std = Div (one, std)
  xhat = Mul (centered, inv_std)
  sum_g = ReduceSum <keepdims = 1> (g, axes)
  g_xhat = Mul (g, xhat)
  sum_gx = ReduceSum <keepdims = 1> (g_xhat, axes)
  stats_shape = Shape (sum_g)
  sc_c = Reshape (sc, stats_shape)
  factor = Mul (sc_c, inv_std)
  mean_g = Div (sum_g, count)
  mean_gx = Div (sum_gx, count)
  xhat_mean_gx = Mul (xhat, mean_gx)
  minus_mean = Sub (g, mean_g)
  inner = Sub (minus_mean, xhat_mean_gx)
  dx = Mul (factor, inner)
  dX = CastLike (dx, dY)
  scale_shape = Shape (scale)
  ds = Reshape (sum_gx, scale_shape)
  dScale = CastLike (ds, scale)
  db = Reshape (sum_g, scale_shape)
  dBias = CastLike (db, scale)
}
)";

// --- completions -------------------------------------------------------------

/// The window attributes of a conv- or pool-gradient node, written out for
/// its body: pads explicit (auto_pad resolved against X's spatial sizes,
/// read from input or output `x` of the node), strides, dilations and (by
/// kind) group or ceil_mode; auto_pad removed, as the explicit pads say
/// the same.
void completeWindow(NodeView &v, WindowKind kind, bool xIsOutput, size_t x) {
  Graph scratch;
  Node *n = scratch.createNode("Window", {}, 0, v.what, kMpcDomain);
  for (const auto &[name, a] : v.attrs)
    n->setAttr(name, a);
  auto kernel = v.attrs.find("kernel_shape");
  if (kernel == v.attrs.end() || kernel->second.ints.empty())
    throw Error(v.what + ": needs attribute 'kernel_shape' for its function "
                         "body");
  size_t rank = kernel->second.ints.size();
  WindowAttrs a = readWindowAttrs(*n, kind, rank);
  std::vector<int64_t> pads = a.pads;
  if (a.autoPad == "VALID") {
    pads.assign(2 * rank, 0);
  } else if (a.autoPad != "NOTSET") {
    std::vector<int64_t> dims = v.dims(xIsOutput, x), in;
    for (size_t d = 2; d < dims.size(); ++d)
      in.push_back(dims[d]);
    bool known =
        in.size() == rank &&
        std::none_of(in.begin(), in.end(), [](int64_t s) { return s < 0; });
    if (!known)
      throw Error(v.what + ": auto_pad " + a.autoPad +
                  " needs X's static spatial sizes to write explicit pads "
                  "for its function body, and they are unknown");
    WindowGeometry g = resolveWindow(*n, a, in);
    pads = g.padBegin;
    pads.insert(pads.end(), g.padEnd.begin(), g.padEnd.end());
  }
  v.attrs.erase("auto_pad");
  v.attrs["kernel_shape"] = Attribute::ofInts(a.kernel);
  v.attrs["pads"] = Attribute::ofInts(pads);
  v.attrs["strides"] = Attribute::ofInts(a.strides);
  v.attrs["dilations"] = Attribute::ofInts(a.dilations);
  if (kind == WindowKind::Conv)
    v.attrs["group"] = Attribute::ofInt(a.group);
  else
    v.attrs["ceil_mode"] = Attribute::ofInt(a.ceilMode ? 1 : 0);
}

/// GeluGrad's approximate as the int flag its body reads.
void completeGeluGrad(NodeView &v) {
  auto it = v.attrs.find("approximate");
  std::string form = it == v.attrs.end() ? "none" : it->second.s;
  if (form != "none" && form != "tanh")
    throw Error(v.what +
                ": attribute 'approximate' must be \"none\" or "
                "\"tanh\", got \"" +
                form + "\"");
  v.attrs["approximate_tanh"] = Attribute::ofInt(form == "tanh" ? 1 : 0);
}

} // namespace

void addLayerGradientFunctions(std::map<std::string, FunctionDef> &t) {
  using A = Attribute;
  auto plain = [](const char *body) {
    return mpcFunctionHeader() + std::string(body);
  };
  // The bodies that spread dY through a ConvTranspose and cut it to X.
  auto spread = [&](const char *body, const char *target) {
    return replaceAll(replaceAll(plain(body), "$WINDOW_ON_X", kWindowOnX),
                      "$CROP_TO_X", replaceAll(kCropToX, "$TARGET", target));
  };
  auto gather = [&](const char *op, const char *forward) {
    return replaceAll(replaceAll(plain(kGatherGrad), "$OP", op), "$GATHER",
                      forward);
  };
  const double inf = std::numeric_limits<double>::infinity();

  t["ErfGrad"] = {plain(kErfGrad), {}, {}};
  t["LogSigmoidGrad"] = {plain(kLogSigmoidGrad), {}, {}};
  t["GeluGrad"] = {plain(kGeluGrad), {}, {}, completeGeluGrad};
  t["LeakyReluGrad"] = {
      plain(kLeakyReluGrad), {{"alpha", A::ofFloat(0.01f)}}, {}};
  t["ClipGrad"] = {plain(kClipGrad),
                   {},
                   {{2, Fill::ScalarFromAttr, 1, "min", -inf},
                    {3, Fill::ScalarFromAttr, 1, "max", inf}}};
  t["DropoutGrad"] = {
      plain(kDropoutGrad),
      {},
      {{2, Fill::ScalarFromAttr, InputFill::kNoSource, "ratio", 0.5},
       {3, Fill::FalseFlag}}};

  t["ReduceExtremumGrad"] = {plain(kReduceExtremumGrad),
                             {{"noop_with_empty_axes", A::ofInt(0)}},
                             {{3, Fill::AxesFromAttr}}};

  FunctionDef slice{plain(kSliceGrad),
                    {},
                    {{4, Fill::RangeOfLength, 2}, {5, Fill::OnesOfLength, 2}}};
  t["SliceGrad"] = slice;

  FunctionDef gatherGrad{
      gather("GatherGrad", "Gather"), {{"axis", A::ofInt(0)}}, {}};
  gatherGrad.minOpset = 16;
  t["GatherGrad"] = gatherGrad;
  gatherGrad.text = gather("GatherElementsGrad", "GatherElements");
  t["GatherElementsGrad"] = gatherGrad;

  FunctionDef maxPool{plain(kMaxPoolGrad), {}, {}, [](NodeView &v) {
                        completeWindow(v, WindowKind::Pool, false, 1);
                      }};
  maxPool.minOpset = 16;
  t["MaxPoolGrad"] = maxPool;
  t["AveragePoolGrad"] = {
      spread(kAveragePoolGrad, "planes_x_shape"),
      {{"count_include_pad", A::ofInt(0)}},
      {},
      [](NodeView &v) { completeWindow(v, WindowKind::Pool, true, 0); }};
  t["ConvGradInput"] = {
      spread(kConvGradInput, "x_shape"), {}, {}, [](NodeView &v) {
        completeWindow(v, WindowKind::Conv, true, 0);
      }};
  t["ConvGradWeight"] = {plain(kConvGradWeight), {}, {}, [](NodeView &v) {
                           completeWindow(v, WindowKind::Conv, false, 1);
                         }};

  auto norm = [&](const char *body) {
    return replaceAll(
        replaceAll(plain(body), "$RMS_STATISTICS", kRmsStatistics),
        "$NORM_RANK", kNormRank);
  };
  t["LayerNormalizationTo"] = {plain(kLayerNormalizationTo),
                               {{"axis", A::ofInt(-1)},
                                {"epsilon", A::ofFloat(1e-5f)},
                                {"low", A::ofInt(toOnnxDataType(DType::F16))}},
                               {}};
  t["LayerNormalizationGrad"] = {
      norm(kLayerNormalizationGrad), {{"axis", A::ofInt(-1)}}, {}};
  t["RMSNormalization"] = {
      norm(kRMSNormalization),
      {{"axis", A::ofInt(-1)}, {"epsilon", A::ofFloat(1e-5f)}},
      {}};
  t["RMSNormalizationTo"] = {norm(kRMSNormalizationTo),
                             {{"axis", A::ofInt(-1)},
                              {"epsilon", A::ofFloat(1e-5f)},
                              {"low", A::ofInt(toOnnxDataType(DType::F16))}},
                             {}};
  t["RMSNormalizationGrad"] = {
      norm(kRMSNormalizationGrad),
      {{"axis", A::ofInt(-1)}, {"epsilon", A::ofFloat(1e-5f)}},
      {}};
  FunctionDef batchNorm{
      plain(kBatchNormalizationGrad), {{"epsilon", A::ofFloat(1e-5f)}}, {}};
  batchNorm.extraInputs =
      "with mean and var inputs (an inference-mode batch norm) dX differs "
      "from the training-mode rule, and a body cannot test whether an "
      "input was given";
  t["BatchNormalizationGrad"] = batchNorm;
}

} // namespace mpc
