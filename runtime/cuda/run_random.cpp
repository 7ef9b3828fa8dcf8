// CUDA runners of the random ops: RandomUniform, RandomNormal (dims from
// the `shape` attribute), RandomUniformLike, RandomNormalLike (the input's
// dims; its values are not read) and Bernoulli (a draw per probability).
//
// One kernel draws every element from the step seed and the node's key
// (kernels/common/random_math.h), the rules the CPU kernels use; a
// device-resident step reads the seed on the device, so a replayed CUDA
// graph draws anew at every step, as Dropout does. Outputs of fp32, fp16 or
// bf16 only; the checks refuse other dtypes (fp64, Bernoulli's int and bool
// outputs) before a step starts, and the CPU backend runs those.
//
// Dropout and mpc.DropoutGrad draw their mask on the device from the shared
// counter-based generator (kernels/cuda/dropout.h), the CPU backend's mask
// bit for bit.
#include "ir/mpc_ops.h"
#include "kernels/common/dropout_rng.h"
#include "kernels/cpu/cpu_util.h"
#include "kernels/cpu/node_geometry.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/dropout.h"
#include "kernels/cuda/random.h"
#include "runtime/cuda/cuda_ops.h"
#include "runtime/cuda/node_staging.h"

namespace mpc {
namespace cuda {
namespace {

using cpu::fail;

/// Launches the kind's draws into output 0 of dtype t and dims `dims`.
void draw(NodeStaging &s, RandomKind kind, DType t,
          const std::vector<int64_t> &dims, float a, float b,
          const void *p = nullptr, DType pType = DType::F32) {
  const Node &node = s.node();
  if (!isDeviceFloat(t))
    fail(node,
         "the output must be fp32, fp16 or bf16 on the cuda backend, got ",
         dtypeName(t));
  void *out = s.out(0, t, dims);
  int64_t n = cpu::checkedCount(node, dims);
  if (s.resident())
    launchRandom(kind, t, out, n, cpu::randomNodeKey(node), a, b, p, pType,
                 s.stream(), s.deviceSeed());
  else
    launchRandom(kind, t, out, n, s.ctx().seed ^ cpu::randomNodeKey(node), a, b,
                 p, pType, s.stream());
}

/// The distribution's two parameters: (low, high) or (mean, scale).
void distribution(const Node &node, bool normal, float &a, float &b) {
  a = normal ? node.attrFloat("mean", 0.0f) : node.attrFloat("low", 0.0f);
  b = normal ? node.attrFloat("scale", 1.0f) : node.attrFloat("high", 1.0f);
}

template <bool Normal> void runRandom(NodeStaging &s) {
  const Node &node = s.node();
  float a, b;
  distribution(node, Normal, a, b);
  draw(s, Normal ? RandomKind::Normal : RandomKind::Uniform,
       cpu::randomOutputDType(node, DType::F32), node.attrInts("shape"), a, b);
}

template <bool Normal> void runRandomLike(NodeStaging &s) {
  const Node &node = s.node();
  const Tensor &x = s.in(0, "input");
  float a, b;
  distribution(node, Normal, a, b);
  draw(s, Normal ? RandomKind::Normal : RandomKind::Uniform,
       cpu::randomOutputDType(node, x.dtype), x.dims, a, b);
}

void runBernoulli(NodeStaging &s) {
  const Node &node = s.node();
  const Tensor &p = s.in(0, "input");
  requireDeviceFloat(node, p, "input (probabilities)");
  draw(s, RandomKind::Bernoulli, cpu::randomOutputDType(node, p.dtype), p.dims,
       0, 0, s.device(0), p.dtype);
}

/// The output's dtype, as shape inference typed it, must be a device float.
std::string checkOutput(const Node &n) {
  const Value *y = n.output(0);
  if (y && y->dtype != DType::Undefined && !isDeviceFloat(y->dtype))
    return std::string("its device kernel writes fp32, fp16 or bf16, the "
                       "output is ") +
           dtypeName(y->dtype);
  return "";
}

std::string checkBernoulli(const Node &n) {
  std::string why = requireDeviceFloat(n, {0});
  return why.empty() ? checkOutput(n) : why;
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

} // namespace

std::vector<CudaOpEntry> randomOps() {
  return {
      {"", "RandomUniform", runRandom<false>, checkOutput},
      {"", "RandomNormal", runRandom<true>, checkOutput},
      {"", "RandomUniformLike", runRandomLike<false>, checkOutput},
      {"", "RandomNormalLike", runRandomLike<true>, checkOutput},
      {"", "Bernoulli", runBernoulli, checkBernoulli},
      // ratio and training_mode are read on the host (constants in
      // every exported model; a data-dependent ratio is refused).
      {"", "Dropout", runDropout, checkInput0, (1u << 1) | (1u << 2)},
      {kMpcDomain, "DropoutGrad", runDropoutGrad, checkInput0,
       (1u << 2) | (1u << 3)},
  };
}

} // namespace cuda
} // namespace mpc
