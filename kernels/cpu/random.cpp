// CPU kernels of ONNX's random ops: RandomUniform, RandomNormal (shape from
// the `shape` attribute), RandomUniformLike, RandomNormalLike (shape, and
// by default dtype, of the input) and Bernoulli (one draw per probability).
//
// They are what torchvision's stochastic depth exports (RandomUniformLike,
// then Less against the survival rate) and what torch.bernoulli, rand_like
// and randn_like export. Every element is drawn from the step seed and the
// node's key alone (kernels/common/random_math.h, shared with the CUDA
// kernel), so a run is reproducible under --seed and both backends draw the
// same numbers. Draws are computed in fp32 and rounded to the output dtype.
#include "kernels/common/random_math.h"
#include "kernels/cpu/cpu_util.h"
#include "kernels/cpu/node_geometry.h"

namespace mpc {
namespace cpu {
namespace {

uint64_t randomBase(const KernelContext &ctx) {
  return ctx.seed ^ randomNodeKey(ctx.node);
}

/// out[i] := draw(i) for every element, rounded to out's dtype.
template <typename Draw>
void fillDraws(const Node &node, Tensor &out, Draw draw) {
  int64_t n = out.numel();
  dispatchAll(node, out.dtype, [&](auto io) {
    using Io = decltype(io);
    auto *p = ptr<Io>(out);
    for (int64_t i = 0; i < n; ++i)
      Io::store(p, i, typename Io::Compute(draw(i)));
  });
}

/// Uniform or normal draws into `out` by the node's attributes.
void fillDistribution(const KernelContext &ctx, Tensor &out, bool normal) {
  const Node &node = ctx.node;
  if (!isFloating(out.dtype))
    fail(node, "the output dtype must be floating point, got ",
         dtypeName(out.dtype));
  uint64_t base = randomBase(ctx);
  if (normal) {
    float mean = node.attrFloat("mean", 0.0f);
    float scale = node.attrFloat("scale", 1.0f);
    fillDraws(node, out,
              [&](int64_t i) { return randomNormalAt(base, i, mean, scale); });
  } else {
    float low = node.attrFloat("low", 0.0f);
    float high = node.attrFloat("high", 1.0f);
    fillDraws(node, out,
              [&](int64_t i) { return randomUniformAt(base, i, low, high); });
  }
}

/// RandomUniform / RandomNormal: dims from the `shape` attribute.
template <bool Normal> void kernelRandom(KernelContext &ctx) {
  const Node &node = ctx.node;
  if (!node.hasAttr("shape"))
    fail(node, "attribute 'shape' is required");
  std::vector<int64_t> dims = node.attrInts("shape");
  checkedCount(node, dims);
  Tensor &out =
      overwrittenOutput(ctx, 0, randomOutputDType(node, DType::F32), dims);
  fillDistribution(ctx, out, Normal);
}

/// RandomUniformLike / RandomNormalLike: dims (and, without `dtype`, the
/// dtype) of the input, whose values are not read.
template <bool Normal> void kernelRandomLike(KernelContext &ctx) {
  const Tensor &x = input(ctx, 0, "input");
  Tensor &out =
      overwrittenOutput(ctx, 0, randomOutputDType(ctx.node, x.dtype), x.dims);
  fillDistribution(ctx, out, Normal);
}

/// Bernoulli: out[i] = 1 with probability input[i] (read in fp32), of the
/// `dtype` attribute's type or the input's.
void kernelBernoulli(KernelContext &ctx) {
  const Node &node = ctx.node;
  const Tensor &p = input(ctx, 0, "input");
  if (!isFloating(p.dtype))
    fail(node, "input (probabilities) must be floating point, got ",
         dtypeName(p.dtype));
  Tensor &out =
      overwrittenOutput(ctx, 0, randomOutputDType(node, p.dtype), p.dims);
  uint64_t base = randomBase(ctx);
  fillDraws(node, out, [&](int64_t i) {
    return randomBernoulliAt(base, i, loadFloat(p, i));
  });
}

} // namespace

std::vector<KernelEntry> randomKernels() {
  return {
      {"", "RandomUniform", kernelRandom<false>},
      {"", "RandomNormal", kernelRandom<true>},
      {"", "RandomUniformLike", kernelRandomLike<false>},
      {"", "RandomNormalLike", kernelRandomLike<true>},
      {"", "Bernoulli", kernelBernoulli},
  };
}

} // namespace cpu
} // namespace mpc
