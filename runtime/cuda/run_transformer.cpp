// CUDA runners of the transformer family: LayerNormalization and its
// gradient, Gelu, mpc.GeluGrad, mpc.ErfGrad, Dropout and mpc.DropoutGrad.
//
// Operands are validated with the CPU kernels' rules and messages
// (kernels/cpu/transformer.cpp). A layer norm's scale and bias that are
// smaller than the normalised shape are broadcast to it on the device
// first, so the kernels index them per column. Dropout's ratio and
// training_mode are read on the host (graph constants in compiled steps);
// its mask is drawn on the device from the shared generator.
#include "ir/mpc_ops.h"
#include "kernels/common/dropout_rng.h"
#include "kernels/cpu/cpu_util.h"
#include "kernels/cpu/node_geometry.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/dropout.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/gelu.h"
#include "kernels/cuda/layer_norm.h"
#include "runtime/cuda/cuda_ops.h"
#include "runtime/cuda/node_staging.h"

namespace mpc {
namespace cuda {
namespace {

using cpu::fail;

// --- LayerNormalization
// ------------------------------------------------------------

using cpu::geluTanh;
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
  void *y = s.out(0, x.dtype, x.dims);
  auto *mean = static_cast<float *>(s.optionalOut(1, DType::F32, sh.stats));
  auto *inv = static_cast<float *>(s.optionalOut(2, DType::F32, sh.stats));
  launchLayerNorm(x.dtype, s.device(0), sc, bi, y, mean, inv, sh.outer, sh.n,
                  node.attrFloat("epsilon", 1e-5f), s.stream());
}

/// The geometry a normalisation backward's dY, X and scale share: dY of
/// X's shape, scale broadcasting onto the normalised axes.
LayerNormShape normGradShape(const Node &node, const Tensor &dy,
                             const Tensor &x, const Tensor &scale) {
  if (dy.dims != x.dims)
    fail(node, "dY of shape ", cpu::shapeString(dy.dims),
         " does not match X of shape ", cpu::shapeString(x.dims));
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
  a.dx = s.optionalOut(0, dy.dtype, dy.dims);
  a.dScale = s.optionalOut(1, dy.dtype, sh.norm);
  if (centered)
    a.dBias = s.optionalOut(2, dy.dtype, sh.norm);
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

// --- mpc.RMSNormalization: the layer-norm kernels without centering ---------

void runRMSNorm(NodeStaging &s) {
  const Node &node = s.node();
  const Tensor &x = s.in(0, "X"), &scale = s.in(1, "Scale");
  if (scale.dtype != x.dtype)
    fail(node, "Scale must have X's element type ", dtypeName(x.dtype));
  requireDeviceFloat(node, x, "X");
  LayerNormShape sh = layerNormShape(node, x);
  requireBroadcastsTo(node, scale, sh.norm, "Scale");
  const void *sc = perColumn(s, 1, scale, sh.norm, sh.n);
  void *y = s.out(0, x.dtype, x.dims);
  launchLayerNorm(x.dtype, s.device(0), sc, nullptr, y, nullptr, nullptr,
                  sh.outer, sh.n, node.attrFloat("epsilon", 1e-5f), s.stream(),
                  false);
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

// --- GELU
// ------------------------------------------------------------------------

void runGelu(NodeStaging &s) {
  const Tensor &x = s.in(0, "X");
  requireDeviceFloat(s.node(), x, "X");
  bool tanhForm = geluTanh(s.node());
  void *y = s.out(0, x.dtype, x.dims);
  launchGelu(x.dtype, s.device(0), y, x.numel(), tanhForm, s.stream());
}

template <GeluGradKind K> void runGeluGrad(NodeStaging &s) {
  const Node &node = s.node();
  const Tensor &dy = s.in(0, "dY"), &x = s.in(1, "X");
  if (dy.dims != x.dims)
    fail(node, "dY of shape ", cpu::shapeString(dy.dims),
         " does not match X of shape ", cpu::shapeString(x.dims));
  requireDeviceFloat(node, dy, "dY");
  requireDeviceFloat(node, x, "X");
  GeluGradKind kind = K;
  if (K != GeluGradKind::Erf && geluTanh(node))
    kind = GeluGradKind::GeluTanh;
  void *dx = s.out(0, dy.dtype, dy.dims);
  launchGeluGrad(kind, dy.dtype, s.device(0), x.dtype, s.device(1), dx,
                 dy.numel(), s.stream());
}

// --- Dropout
// ---------------------------------------------------------------------

struct DropoutMode {
  double ratio = 0.5;
  bool training = false;
};

/// ratio (input ratioAt, else the attribute, default 0.5) and
/// training_mode (input ratioAt + 1, false when absent), as the CPU reads
/// them.
DropoutMode dropoutMode(NodeStaging &s, size_t ratioAt) {
  DropoutMode m;
  if (const Tensor *r = s.optionalIn(ratioAt)) {
    if (r->numel() != 1 || !isFloating(r->dtype))
      fail(s.node(), "ratio must be one floating-point element, got ",
           dtypeName(r->dtype), " ", cpu::shapeString(r->dims));
    m.ratio = r->getAsDouble(0);
  } else {
    m.ratio = s.node().attrFloat("ratio", 0.5f);
  }
  if (const Tensor *t = s.optionalIn(ratioAt + 1))
    m.training = cpu::flagSet(s.node(), *t, "training_mode");
  if (m.training && !(m.ratio >= 0 && m.ratio <= 1))
    fail(s.node(), "ratio must be in [0, 1], got ", m.ratio);
  return m;
}

void copyOnDevice(NodeStaging &s, void *dst, size_t i, const Tensor &t) {
  if (t.byteSize())
    MPC_CUDA_CHECK(cudaMemcpyAsync(dst, s.device(i), t.byteSize(),
                                   cudaMemcpyDeviceToDevice, s.stream()));
}

void runDropout(NodeStaging &s) {
  const Node &node = s.node();
  const Tensor &x = s.in(0, "data");
  requireDeviceFloat(node, x, "data");
  DropoutMode m = dropoutMode(s, 1);
  void *y = s.out(0, x.dtype, x.dims);
  auto *mask = static_cast<uint8_t *>(s.optionalOut(1, DType::Bool, x.dims));
  if (!m.training || m.ratio == 0) {
    copyOnDevice(s, y, 0, x);
    if (mask && x.numel())
      MPC_CUDA_CHECK(cudaMemsetAsync(mask, 1, size_t(x.numel()), s.stream()));
    return;
  }
  uint64_t key =
      dropoutKey(node.name(), node.hasAttr("seed"), node.attrInt("seed", 0));
  // Resident: the seed is read on the device (a graph replays with the
  // step's seed); staged: the host's, as before.
  if (s.resident())
    launchDropout(x.dtype, s.device(0), y, mask, x.numel(), key,
                  dropoutThreshold(m.ratio), dropoutScale(m.ratio), s.stream(),
                  s.deviceSeed());
  else
    launchDropout(x.dtype, s.device(0), y, mask, x.numel(), s.ctx().seed ^ key,
                  dropoutThreshold(m.ratio), dropoutScale(m.ratio), s.stream());
}

void runDropoutGrad(NodeStaging &s) {
  const Node &node = s.node();
  const Tensor &dy = s.in(0, "dY"), &mask = s.in(1, "mask");
  if (mask.dtype != DType::Bool || mask.dims != dy.dims)
    fail(node, "mask must be bool of dY's shape ", cpu::shapeString(dy.dims),
         ", got ", dtypeName(mask.dtype), " ", cpu::shapeString(mask.dims));
  requireDeviceFloat(node, dy, "dY");
  DropoutMode m = dropoutMode(s, 2);
  void *dx = s.out(0, dy.dtype, dy.dims);
  if (!m.training) {
    copyOnDevice(s, dx, 0, dy);
    return;
  }
  launchDropoutGrad(dy.dtype, s.device(0),
                    static_cast<const uint8_t *>(s.device(1)), dx, dy.numel(),
                    dropoutScale(m.ratio), s.stream());
}

std::string checkLayerNormGrad(const Node &n) {
  return requireDeviceFloat(n, {0, 1, 2, 3, 4});
}
std::string checkInput0(const Node &n) { return requireDeviceFloat(n, {0}); }
std::string checkInputs01(const Node &n) {
  return requireDeviceFloat(n, {0, 1});
}

} // namespace

std::vector<CudaOpEntry> transformerOps() {
  return {
      {"", "LayerNormalization", runLayerNorm,
       [](const Node &n) {
         return requireDeviceFloat(n, {0, 1, 2});
       }},
      {kMpcDomain, "RMSNormalization", runRMSNorm,
       [](const Node &n) {
         return requireDeviceFloat(n, {0, 1});
       }},
      {kMpcDomain, "RMSNormalizationGrad", runRMSNormGrad,
       [](const Node &n) {
         return requireDeviceFloat(n, {0, 1, 2});
       }},
      {kMpcDomain, "LayerNormalizationGrad", runLayerNormGrad,
       checkLayerNormGrad},
      {"", "Gelu", runGelu, checkInput0},
      {kMpcDomain, "Gelu", runGelu, checkInput0},     // fuse-gelu, opset < 20
      {kMpcDomain, "GeluTanh", runGelu, checkInput0}, // (cpu::geluTanh)
      {kMpcDomain, "GeluGrad", runGeluGrad<GeluGradKind::Gelu>, checkInputs01},
      {kMpcDomain, "ErfGrad", runGeluGrad<GeluGradKind::Erf>, checkInputs01},
      // ratio and training_mode are read on the host (constants in
      // every exported model; a data-dependent ratio is refused).
      {"", "Dropout", runDropout, checkInput0, (1u << 1) | (1u << 2)},
      {kMpcDomain, "DropoutGrad", runDropoutGrad, checkInput0,
       (1u << 2) | (1u << 3)},
  };
}

} // namespace cuda
} // namespace mpc
