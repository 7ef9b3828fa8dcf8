// CUDA runners of the normalizations: BatchNormalization and
// mpc.BatchNormalizationGrad on cuDNN, LayerNormalization and
// mpc.LayerNormalizationGrad, mpc.RMSNormalization and
// mpc.RMSNormalizationGrad on mpc's own kernels.
//
// Batch norm:
//
// Semantics are the CPU kernel's (kernels/cpu/normalization.cpp): X is
// [N, C, ...] (seen by cuDNN as [N, C, inner, 1]); training mode normalises
// with the batch mean and biased variance, and the running statistics
// become input * momentum + batch * (1 - momentum) with the unbiased batch
// variance (PyTorch's rule, which is also cuDNN's). cuDNN's own running
// average weights the new value by its exponentialAverageFactor, in its own
// rounding; instead the forward asks cuDNN for the batch statistics alone
// (factor 1 over zeroed buffers gives the batch mean and unbiased variance)
// and launchBatchNormStats applies the CPU's formula and writes the
// statistics in their own dtype, with the saved batch mean and biased
// variance (outputs 3 and 4) where the node has them.
//
// Dtypes: cuDNN takes fp16 or fp32 X with fp32 scale, bias and statistics
// (which are widened on the device when they are fp16/bf16). bf16 X, and a
// backward whose dY and X differ in dtype, run in fp32 on widened copies,
// the results rounded once to their dtype: the CPU computes in fp32 too.
// The backward with given statistics (mean and var inputs: the gradient of
// an inference-mode batch norm) is mpc's own kernel, since cuDNN's backward
// always differentiates through the batch statistics. Epsilon must be at
// least CUDNN_BN_MIN_EPSILON (the check refuses others).
//
// Layer norm and RMS norm:
// Operands are validated with the CPU kernels' rules and messages
// (kernels/cpu/normalization.cpp). A layer norm's scale and bias that are
// smaller than the normalised shape are broadcast to it on the device
// first, so the kernels index them per column. Dropout's ratio and
// training_mode are read on the host (graph constants in compiled steps);
// its mask is drawn on the device from the shared generator.
#include "ir/batch_norm_mode.h"
#include "ir/mpc_ops.h"
#include "kernels/cpu/cpu_util.h"
#include "kernels/cpu/node_geometry.h"
#include "kernels/cuda/batch_norm.h"
#include "kernels/cuda/cast.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/layer_norm.h"
#include "runtime/cuda/cuda_ops.h"
#include "runtime/cuda/cudnn_util.h"
#include "runtime/cuda/node_staging.h"

#include <initializer_list>
#include <optional>

namespace mpc {
namespace cuda {
namespace {

using cpu::fail;
using cpu::shapeString;

using cpu::ChannelLayout;
using cpu::channelLayout;

/// X's [N, C, inner] as the 4-D NCHW shape cuDNN's descriptors take.
std::vector<int64_t> cudnnDims(const ChannelLayout &l) {
  return {l.n, l.c, l.inner, 1};
}

/// Per-channel input i ([C]) as fp32 on the device.
const float *channelInput(NodeStaging &s, size_t i, const char *what,
                          int64_t channels) {
  const Tensor &t = s.in(i, what);
  if (t.dims.size() != 1 || t.dims[0] != channels)
    fail(s.node(), what, " of shape ", shapeString(t.dims), " must be [",
         channels, "] (one entry per channel)");
  requireDeviceFloat(s.node(), t, what);
  return s.deviceF32(i);
}

float *floats(NodeStaging &s, int64_t n) {
  return static_cast<float *>(s.scratch(size_t(n) * sizeof(float)));
}

/// cuDNN runs fp16 and fp32 X natively; bf16 through fp32.
DType cudnnDataType(DType t) { return t == DType::F16 ? t : DType::F32; }

const float kOne = 1.0f, kZero = 0.0f;

void runBatchNorm(NodeStaging &s) {
  const Node &node = s.node();
  const Tensor &x = s.in(0, "X");
  requireDeviceFloat(node, x, "X");
  ChannelLayout l = channelLayout(node, x);
  const float *scale = channelInput(s, 1, "scale", l.c);
  const float *bias = channelInput(s, 2, "B", l.c);
  const float *inMean = channelInput(s, 3, "input_mean", l.c);
  const float *inVar = channelInput(s, 4, "input_var", l.c);
  DType statType = s.in(3, "input_mean").dtype;
  bool training = isBatchNormTraining(node);
  if (training && l.count() < 2)
    fail(node,
         "training mode needs more than one value per channel, X has "
         "shape ",
         shapeString(x.dims), " (as in PyTorch)");
  double epsilon = node.attrFloat("epsilon", 1e-5f);
  DType t = cudnnDataType(x.dtype);
  void *yOut = s.out(0, x.dtype, x.dims);
  void *y = t == x.dtype ? yOut : floats(s, x.numel());
  float *batchMean = nullptr, *batchVar = nullptr;
  if (x.numel() > 0 && l.c > 0) {
    cudnnHandle_t h = s.cudnn();
    TensorDesc xDesc(node, t, cudnnDims(l));
    TensorDesc bnDesc(node, DType::F32, {1, l.c, 1, 1});
    const void *xIn = deviceAs(s, 0, x, t);
    if (training) {
      // Factor 1 over zeroed buffers: cuDNN's "running" outputs are then
      // the batch mean and unbiased variance themselves.
      batchMean = floats(s, 2 * l.c);
      batchVar = batchMean + l.c;
      MPC_CUDA_CHECK(cudaMemsetAsync(
          batchMean, 0, size_t(2 * l.c) * sizeof(float), s.stream()));
      checkCudnn(cudnnBatchNormalizationForwardTraining(
                     h, CUDNN_BATCHNORM_SPATIAL, &kOne, &kZero, xDesc.get(),
                     xIn, xDesc.get(), y, bnDesc.get(), scale, bias, 1.0,
                     batchMean, batchVar, epsilon, nullptr, nullptr),
                 node, "cudnnBatchNormalizationForwardTraining");
    } else {
      checkCudnn(cudnnBatchNormalizationForwardInference(
                     h, CUDNN_BATCHNORM_SPATIAL, &kOne, &kZero, xDesc.get(),
                     xIn, xDesc.get(), y, bnDesc.get(), scale, bias, inMean,
                     inVar, epsilon),
                 node, "cudnnBatchNormalizationForwardInference");
    }
    if (y != yOut)
      launchCast(t, x.dtype, y, yOut, x.numel(), s.stream());
  }
  if (!training)
    return;
  BatchNormStatsArgs a;
  a.batchMean = batchMean;
  a.batchVarUnbiased = batchVar;
  a.inMean = inMean;
  a.inVar = inVar;
  a.statType = statType;
  a.runMean = s.optionalOut(1, statType, {l.c});
  a.runVar = s.optionalOut(2, statType, {l.c});
  a.savedMean = s.optionalOut(3, statType, {l.c});
  a.savedVar = s.optionalOut(4, statType, {l.c});
  a.channels = l.c;
  a.count = l.count();
  a.momentum = node.attrFloat("momentum", 0.9f);
  if (batchMean)
    launchBatchNormStats(a, s.stream());
}

void runBatchNormGradGiven(NodeStaging &s, const ChannelLayout &l,
                           const Tensor &dy, const Tensor &x,
                           const float *scale, DType paramType) {
  BatchNormGradGivenArgs a;
  a.dyType = dy.dtype;
  a.xType = x.dtype;
  a.paramType = paramType;
  a.dy = s.device(0);
  a.x = s.device(1);
  a.scale = scale;
  a.mean = channelInput(s, 3, "mean", l.c);
  a.var = channelInput(s, 4, "var", l.c);
  a.epsilon = s.node().attrFloat("epsilon", 1e-5f);
  a.dx = s.optionalOut(0, dy.dtype, x.dims);
  a.dScale = s.optionalOut(1, paramType, {l.c});
  a.dBias = s.optionalOut(2, paramType, {l.c});
  a.rowSumDy = floats(s, 2 * l.n * l.c);
  a.rowSumDyXhat = a.rowSumDy + l.n * l.c;
  a.n = l.n;
  a.channels = l.c;
  a.inner = l.inner;
  launchBatchNormGradGiven(a, s.stream());
}

void runBatchNormGrad(NodeStaging &s) {
  const Node &node = s.node();
  const Tensor &dy = s.in(0, "dY"), &x = s.in(1, "X");
  if (dy.dims != x.dims)
    fail(node, "dY of shape ", shapeString(dy.dims), " must have X's shape ",
         shapeString(x.dims));
  requireDeviceFloat(node, dy, "dY");
  requireDeviceFloat(node, x, "X");
  ChannelLayout l = channelLayout(node, x);
  const float *scale = channelInput(s, 2, "scale", l.c);
  DType paramType = s.in(2, "scale").dtype;
  if (s.optionalIn(3) || s.optionalIn(4)) {
    runBatchNormGradGiven(s, l, dy, x, scale, paramType);
    return;
  }
  if (l.count() < 2)
    fail(node,
         "batch statistics need more than one value per channel, X has "
         "shape ",
         shapeString(x.dims));
  DType t = dy.dtype == x.dtype ? cudnnDataType(x.dtype) : DType::F32;
  void *dxOut = s.optionalOut(0, dy.dtype, x.dims);
  void *dScaleOut = s.optionalOut(1, paramType, {l.c});
  void *dBiasOut = s.optionalOut(2, paramType, {l.c});
  if (l.c == 0)
    return;
  // cuDNN writes every result: those the node omits, or wants in another
  // dtype, go to scratch first.
  void *dx = dxOut && t == dy.dtype
                 ? dxOut
                 : s.scratch(size_t(x.numel()) * dtypeSize(t));
  float *dScale = dScaleOut && paramType == DType::F32
                      ? static_cast<float *>(dScaleOut)
                      : floats(s, l.c);
  float *dBias = dBiasOut && paramType == DType::F32
                     ? static_cast<float *>(dBiasOut)
                     : floats(s, l.c);
  if (x.numel() == 0) { // sums over nothing
    MPC_CUDA_CHECK(
        cudaMemsetAsync(dScale, 0, size_t(l.c) * sizeof(float), s.stream()));
    MPC_CUDA_CHECK(
        cudaMemsetAsync(dBias, 0, size_t(l.c) * sizeof(float), s.stream()));
  } else {
    cudnnHandle_t h = s.cudnn();
    TensorDesc xDesc(node, t, cudnnDims(l));
    TensorDesc bnDesc(node, DType::F32, {1, l.c, 1, 1});
    checkCudnn(cudnnBatchNormalizationBackward(
                   h, CUDNN_BATCHNORM_SPATIAL, &kOne, &kZero, &kOne, &kZero,
                   xDesc.get(), deviceAs(s, 1, x, t), xDesc.get(),
                   deviceAs(s, 0, dy, t), xDesc.get(), dx, bnDesc.get(), scale,
                   dScale, dBias, node.attrFloat("epsilon", 1e-5f), nullptr,
                   nullptr),
               node, "cudnnBatchNormalizationBackward");
  }
  if (dxOut && dx != dxOut)
    launchCast(t, dy.dtype, dx, dxOut, x.numel(), s.stream());
  if (dScaleOut && dScale != dScaleOut)
    launchCast(DType::F32, paramType, dScale, dScaleOut, l.c, s.stream());
  if (dBiasOut && dBias != dBiasOut)
    launchCast(DType::F32, paramType, dBias, dBiasOut, l.c, s.stream());
}

std::string checkEpsilon(const Node &n) {
  float epsilon = n.attrFloat("epsilon", 1e-5f);
  if (!(double(epsilon) >= CUDNN_BN_MIN_EPSILON))
    return "epsilon " + std::to_string(epsilon) + " is below cuDNN's minimum " +
           std::to_string(CUDNN_BN_MIN_EPSILON);
  return "";
}

std::string checkBatchNorm(const Node &n) {
  std::string why = requireDeviceFloat(n, {0, 1, 2, 3, 4});
  return why.empty() ? checkEpsilon(n) : why;
}

// --- LayerNormalization
// ------------------------------------------------------------

using cpu::LayerNormShape;
using cpu::layerNormShape;
using cpu::requireBroadcastsTo;

/// Device pointer to input i expanded to the normalised shape (n elements).
const void *perColumn(NodeStaging &s, size_t i, const Tensor &t,
                      const std::vector<int64_t> &norm, int64_t n) {
  if (t.numel() == n)
    return s.device(i);
  if (norm.size() > size_t(kMaxKernelRank))
    fail(s.node(), "rank ", norm.size(),
         " is above the cuda kernels' limit of ", kMaxKernelRank);
  size_t size = dtypeSize(t.dtype);
  void *full = s.scratch(size_t(n) * size);
  const std::vector<int64_t> from[1] = {t.dims};
  launchBroadcastCopy(size, s.device(i), full,
                      makeBroadcastGeometry<1>(norm, from), s.stream());
  return full;
}

/// Where a norm's Y goes: X's dtype, or for mpc.LayerNormalizationTo and
/// RMSNormalizationTo `to`, with Ylow = Cast(Y, low) when the node asks for
/// it (at lowCopyOutput).
LayerNormOut normOutputs(NodeStaging &s, const Tensor &x) {
  const Node &node = s.node();
  LayerNormOut out;
  const int lowAt = lowCopyOutput(node.domain(), node.opType());
  const bool to = lowAt > 0;
  out.yType = to ? cpu::floatTypeAttr(node, "to", x.dtype) : x.dtype;
  if (to && node.output(size_t(lowAt))) {
    out.lowType = cpu::floatTypeAttr(node, "low", DType::F16);
    out.ylow = s.out(size_t(lowAt), out.lowType, x.dims);
  }
  return out;
}

/// LayerNormalization, and mpc.LayerNormalizationTo (Y in `to`, Ylow).
void runLayerNorm(NodeStaging &s) {
  const Node &node = s.node();
  const Tensor &x = s.in(0, "X"), &scale = s.in(1, "Scale");
  const Tensor *bias = s.optionalIn(2);
  if (node.attrInt("stash_type", 1) != 1)
    fail(node, "stash_type ", node.attrInt("stash_type", 1),
         " is not supported (mpc computes layer-norm statistics in fp32)");
  if (scale.dtype != x.dtype || (bias && bias->dtype != x.dtype))
    fail(node, "Scale and B must have X's element type ", dtypeName(x.dtype));
  requireDeviceFloat(node, x, "X");
  LayerNormShape sh = layerNormShape(node, x);
  requireBroadcastsTo(node, scale, sh.norm, "Scale");
  if (bias)
    requireBroadcastsTo(node, *bias, sh.norm, "B");
  const void *sc = perColumn(s, 1, scale, sh.norm, sh.n);
  const void *bi = bias ? perColumn(s, 2, *bias, sh.norm, sh.n) : nullptr;
  LayerNormOut out = normOutputs(s, x);
  void *y = s.out(0, out.yType, x.dims);
  auto *mean = static_cast<float *>(s.optionalOut(1, DType::F32, sh.stats));
  auto *inv = static_cast<float *>(s.optionalOut(2, DType::F32, sh.stats));
  launchLayerNorm(x.dtype, s.device(0), sc, bi, y, mean, inv, sh.outer, sh.n,
                  node.attrFloat("epsilon", 1e-5f), s.stream(), true, out);
}

/// The geometry a normalisation backward's dY, X and scale share: dY of
/// X's shape, scale broadcasting onto the normalised axes.
LayerNormShape normGradShape(const Node &node, const Tensor &dy,
                             const Tensor &x, const Tensor &scale) {
  if (dy.dims != x.dims)
    fail(node, "dY of shape ", cpu::shapeString(dy.dims),
         " does not match X of shape ", cpu::shapeString(x.dims));
  if (dy.dtype != x.dtype && !widensExactly(dy.dtype, x.dtype))
    fail(node, "dY must be X's dtype ", dtypeName(x.dtype),
         " or a narrower float, got ", dtypeName(dy.dtype));
  LayerNormShape sh = layerNormShape(node, x);
  requireBroadcastsTo(node, scale, sh.norm, "scale");
  return sh;
}

/// LayerNormalizationGrad's kernels on the node's dY, X and scale (inputs
/// 0-2) and the given row statistics, writing dX, dScale and, when
/// `centered`, dBias (outputs 0-2, each optional).
void launchNormGrad(NodeStaging &s, const LayerNormShape &sh, const void *mean,
                    const void *invStd, DType statType, bool centered) {
  const Tensor &dy = s.in(0, "dY"), &x = s.in(1, "X"),
               &scale = s.in(2, "scale");
  LayerNormGradArgs a;
  a.dyType = dy.dtype;
  a.xType = x.dtype;
  a.scaleType = scale.dtype;
  a.statType = statType;
  a.dy = s.device(0);
  a.x = s.device(1);
  a.scale = perColumn(s, 2, scale, sh.norm, sh.n);
  a.mean = mean;
  a.invStd = invStd;
  // The results take X's dtype (dY may be narrower: ir/mpc_ops.h).
  a.outType = x.dtype;
  a.dx = s.optionalOut(0, x.dtype, dy.dims);
  a.dScale = s.optionalOut(1, x.dtype, sh.norm);
  if (centered)
    a.dBias = s.optionalOut(2, x.dtype, sh.norm);
  a.outer = sh.outer;
  a.n = sh.n;
  a.centered = centered;
  a.scratch = static_cast<float *>(s.scratch(layerNormGradScratchBytes(a)));
  launchLayerNormGrad(a, s.stream());
}

void runLayerNormGrad(NodeStaging &s) {
  const Node &node = s.node();
  const Tensor &dy = s.in(0, "dY"), &x = s.in(1, "X"),
               &scale = s.in(2, "scale"), &mean = s.in(3, "mean"),
               &inv = s.in(4, "inv_std");
  LayerNormShape sh = normGradShape(node, dy, x, scale);
  if (mean.numel() != sh.outer || inv.numel() != sh.outer)
    fail(node, "mean and inv_std must hold one value per normalised row (",
         sh.outer, "), got shapes ", cpu::shapeString(mean.dims), " and ",
         cpu::shapeString(inv.dims));
  requireDeviceFloat(node, dy, "dY");
  requireDeviceFloat(node, x, "X");
  requireDeviceFloat(node, scale, "scale");
  requireDeviceFloat(node, mean, "mean");
  if (inv.dtype != mean.dtype)
    fail(node,
         "mean and inv_std must have one element type on the cuda "
         "backend, got ",
         dtypeName(mean.dtype), " and ", dtypeName(inv.dtype));
  launchNormGrad(s, sh, s.device(3), s.device(4), mean.dtype, true);
}

// --- mpc.RMSNormalization (and RMSNormalizationTo): the layer-norm kernels
// without centering ---------------------------------------------------------

void runRMSNorm(NodeStaging &s) {
  const Node &node = s.node();
  const Tensor &x = s.in(0, "X"), &scale = s.in(1, "Scale");
  if (scale.dtype != x.dtype)
    fail(node, "Scale must have X's element type ", dtypeName(x.dtype));
  requireDeviceFloat(node, x, "X");
  LayerNormShape sh = layerNormShape(node, x);
  requireBroadcastsTo(node, scale, sh.norm, "Scale");
  const void *sc = perColumn(s, 1, scale, sh.norm, sh.n);
  LayerNormOut out = normOutputs(s, x);
  void *y = s.out(0, out.yType, x.dims);
  launchLayerNorm(x.dtype, s.device(0), sc, nullptr, y, nullptr, nullptr,
                  sh.outer, sh.n, node.attrFloat("epsilon", 1e-5f), s.stream(),
                  false, out);
}

/// The backward recomputes the forward's inv_std (and a mean of 0) into
/// scratch with the forward kernel, then runs LayerNormalizationGrad's
/// kernels without the mean(g) term.
void runRMSNormGrad(NodeStaging &s) {
  const Node &node = s.node();
  const Tensor &dy = s.in(0, "dY"), &x = s.in(1, "X"),
               &scale = s.in(2, "scale");
  LayerNormShape sh = normGradShape(node, dy, x, scale);
  requireDeviceFloat(node, dy, "dY");
  requireDeviceFloat(node, x, "X");
  requireDeviceFloat(node, scale, "scale");
  auto *mean = static_cast<float *>(
      s.scratch(size_t(std::max<int64_t>(sh.outer, 1)) * sizeof(float)));
  auto *inv = static_cast<float *>(
      s.scratch(size_t(std::max<int64_t>(sh.outer, 1)) * sizeof(float)));
  launchLayerNorm(x.dtype, s.device(1), nullptr, nullptr, nullptr, mean, inv,
                  sh.outer, sh.n, node.attrFloat("epsilon", 1e-5f), s.stream(),
                  false);
  launchNormGrad(s, sh, mean, inv, DType::F32, false);
}

/// mpc.LayerNormalizationTo / RMSNormalizationTo: the plain norm's inputs,
/// and the types the kernels write, Y (`to`) fp32, fp16 or bf16 and Ylow
/// (`low`, where the node asks for it) fp16 or bf16: the shape rule takes
/// any float, fp64 included, which the device code does not write.
std::string checkNormTo(const Node &n, std::initializer_list<size_t> inputs) {
  std::string why = requireDeviceFloat(n, inputs);
  if (!why.empty())
    return why;
  std::optional<DType> to = fromOnnxDataType(int(n.attrInt("to", 0)));
  if (!to || !isDeviceFloat(*to))
    return "the cuda kernel writes Y in fp32, fp16 or bf16";
  const DType low = lowType(n);
  if (n.output(size_t(lowCopyOutput(n.domain(), n.opType()))) &&
      low != DType::F16 && low != DType::BF16)
    return "the cuda kernel writes Ylow in fp16 or bf16";
  return "";
}

std::string checkLayerNormGrad(const Node &n) {
  return requireDeviceFloat(n, {0, 1, 2, 3, 4});
}

} // namespace

std::vector<CudaOpEntry> normalizationOps() {
  return {
      {"", "BatchNormalization", runBatchNorm, checkBatchNorm},
      {kMpcDomain, "BatchNormalizationGrad", runBatchNormGrad, checkBatchNorm},
      {"", "LayerNormalization", runLayerNorm,
       [](const Node &n) {
         return requireDeviceFloat(n, {0, 1, 2});
       }},
      {kMpcDomain, "LayerNormalizationTo", runLayerNorm,
       [](const Node &n) {
         return checkNormTo(n, {0, 1, 2});
       }},
      {kMpcDomain, "RMSNormalization", runRMSNorm,
       [](const Node &n) {
         return requireDeviceFloat(n, {0, 1});
       }},
      {kMpcDomain, "RMSNormalizationTo", runRMSNorm,
       [](const Node &n) {
         return checkNormTo(n, {0, 1});
       }},
      {kMpcDomain, "RMSNormalizationGrad", runRMSNormGrad,
       [](const Node &n) {
         return requireDeviceFloat(n, {0, 1, 2});
       }},
      {kMpcDomain, "LayerNormalizationGrad", runLayerNormGrad,
       checkLayerNormGrad},
  };
}

} // namespace cuda
} // namespace mpc
