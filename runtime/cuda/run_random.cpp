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
#include "kernels/cpu/cpu_util.h"
#include "kernels/cpu/node_geometry.h"
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

} // namespace

std::vector<CudaOpEntry> randomOps() {
  return {
      {"", "RandomUniform", runRandom<false>, checkOutput},
      {"", "RandomNormal", runRandom<true>, checkOutput},
      {"", "RandomUniformLike", runRandomLike<false>, checkOutput},
      {"", "RandomNormalLike", runRandomLike<true>, checkOutput},
      {"", "Bernoulli", runBernoulli, checkBernoulli},
  };
}

} // namespace cuda
} // namespace mpc
