// CPU kernels of ONNX's random ops: RandomUniform, RandomNormal (shape from
// the `shape` attribute), RandomUniformLike, RandomNormalLike (shape, and
// by default dtype, of the input), Bernoulli (one draw per probability),
// Dropout and its backward op mpc.DropoutGrad.
//
// They are what torchvision's stochastic depth exports (RandomUniformLike,
// then Less against the survival rate) and what torch.bernoulli, rand_like
// and randn_like export. Every element is drawn from the step seed and the
// node's key alone (kernels/common/random_math.h, shared with the CUDA
// kernel), so a run is reproducible under --seed and both backends draw the
// same numbers. Draws are computed in fp32 and rounded to the output dtype.
//
// Dropout's mask is drawn the same way (kernels/common/dropout_rng.h), so
// mpc.DropoutGrad recomputes the forward's mask instead of reading it.
#include "ir/mpc_ops.h"
#include "kernels/common/dropout_rng.h"
#include "kernels/common/random_math.h"
#include "kernels/cpu/cpu_util.h"
#include "kernels/cpu/node_geometry.h"
#include "kernels/cpu/parallel.h"

#include <algorithm>

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

// --- Dropout -----------------------------------------------------------------

/// The node's mask key (kernels/common/dropout_rng.h, shared with CUDA).
uint64_t dropoutKey(const Node &node) {
  return mpc::dropoutKey(node.name(), node.hasAttr("seed"),
                         node.attrInt("seed", 0));
}

/// ratio (input 1, opset 12+; attribute before; default 0.5) and
/// training_mode (input 2; false when absent) of a Dropout or DropoutGrad,
/// whose ratio/training_mode sit at inputs `ratioAt` and `ratioAt + 1`.
struct DropoutMode {
  double ratio = 0.5;
  bool training = false;
};

DropoutMode dropoutMode(const KernelContext &ctx, size_t ratioAt) {
  DropoutMode m;
  if (const Tensor *r = optionalInput(ctx, ratioAt)) {
    if (r->numel() != 1 || !isFloating(r->dtype))
      fail(ctx.node, "ratio must be one floating-point element, got ",
           dtypeName(r->dtype), " ", shapeString(r->dims));
    m.ratio = r->getAsDouble(0);
  } else {
    m.ratio = ctx.node.attrFloat("ratio", 0.5f);
  }
  if (const Tensor *t = optionalInput(ctx, ratioAt + 1))
    m.training = flagSet(ctx.node, *t, "training_mode");
  if (m.training && !(m.ratio >= 0 && m.ratio <= 1))
    fail(ctx.node, "ratio must be in [0, 1], got ", m.ratio);
  return m;
}

/// Training mode: keep(i) = u(i) >= ratio with u(i) the top 24 bits of
/// splitmix64((seed ^ key) + i) over 2^24 (mpc_ops.h), Y = keep ? X * scale
/// : 0 with scale = 1 / (1 - ratio) rounded to fp32 as PyTorch's is.
/// Inference mode: Y = X, mask all true.
void kernelDropout(KernelContext &ctx) {
  const Tensor &x = input(ctx, 0, "data");
  DropoutMode m = dropoutMode(ctx, 1);
  Tensor &y = output(ctx, 0, x.dtype, x.dims);
  Tensor *mask = optionalOutput(ctx, 1, DType::Bool, x.dims);
  int64_t n = x.numel();
  if (!m.training || m.ratio == 0) {
    y.bytes = x.bytes;
    if (mask)
      std::fill(mask->bytes.begin(), mask->bytes.end(), uint8_t(1));
    return;
  }
  uint64_t base = ctx.seed ^ dropoutKey(ctx.node);
  const uint32_t threshold = dropoutThreshold(m.ratio);
  std::vector<uint8_t> keep(static_cast<size_t>(n));
  // Elements in parallel: each draw is a function of its index alone.
  parallelFor(n, kGrainValues, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      keep[size_t(i)] = dropoutKeep(base, i, threshold);
  });
  if (mask)
    std::copy(keep.begin(), keep.end(), mask->bytes.begin());
  dispatchFloat(ctx.node, x.dtype, [&](auto io) {
    using Io = decltype(io);
    using C = typename Io::Compute;
    C scale = m.ratio == 1 ? C(0) : C(float(1.0 / (1.0 - m.ratio)));
    const auto *px = ptr<Io>(x);
    auto *py = ptr<Io>(y);
    parallelFor(n, kGrainValues, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i)
        Io::store(py, i, keep[size_t(i)] ? Io::load(px, i) * scale : C(0));
    });
  });
}

void kernelDropoutGrad(KernelContext &ctx) {
  const Tensor &dy = input(ctx, 0, "dY"), &mask = input(ctx, 1, "mask");
  if (mask.dtype != DType::Bool || mask.dims != dy.dims)
    fail(ctx.node, "mask must be bool of dY's shape ", shapeString(dy.dims),
         ", got ", dtypeName(mask.dtype), " ", shapeString(mask.dims));
  DropoutMode m = dropoutMode(ctx, 2);
  // Every element is written below: no zero fill first.
  Tensor &dx = overwrittenOutput(ctx, 0, dy.dtype, dy.dims);
  if (!m.training) {
    dx.bytes = dy.bytes;
    return;
  }
  dispatchFloat(ctx.node, dy.dtype, [&](auto io) {
    using Io = decltype(io);
    using C = typename Io::Compute;
    C scale = m.ratio == 1 ? C(0) : C(float(1.0 / (1.0 - m.ratio)));
    const auto *pg = ptr<Io>(dy);
    const uint8_t *pm = mask.data<uint8_t>();
    auto *px = ptr<Io>(dx);
    parallelFor(dy.numel(), kGrainValues, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i)
        Io::store(px, i, pm[i] ? Io::load(pg, i) * scale : C(0));
    });
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
      {"", "Dropout", kernelDropout},
      {kMpcDomain, "DropoutGrad", kernelDropoutGrad},
  };
}

} // namespace cpu
} // namespace mpc
