// Optimizer CPU kernels: the mpc-domain training-step ops (loss scaling,
// gradient clipping, SGD, Adam/AdamW, the step counter and the learning-rate
// schedule) and ONNX's training operators of ai.onnx.preview.training
// opset 1 (Adagrad, Momentum "standard" and "nesterov", Adam).
//
// The per-element arithmetic is the shared MPC_HD code of
// kernels/common/loss_scale_math.h and kernels/common/optimizer_math.h, so
// the CPU reference and the CUDA kernels compute bit-identical updates.
// Optimizer ops work on fp32 master parameters; SGD's and Adam's moments are
// fp32 or bf16 (--optimizer-state-dtype=bf16: widened, updated in fp32,
// stored rounded, the shared *Stored forms). When found_inf
// (an optional bool scalar input) is set, every output is a byte copy of the
// corresponding input: a skipped step leaves the state exactly as it was.
//
// The preview-training ops follow the formulas of the ONNX operator
// specification (onnx/defs/training/defs.cc and the reference
// implementation) exactly.
//
// Each op is variadic: R (learning rate scalar), T (int64 update count),
// then runs of n tensors (X1..Xn, G1..Gn, the optimizer state) and output
// runs (X1_new..Xn_new, the new state); trailing output runs may be omitted.
// The scalar coefficients derived from R, T and the attributes are computed
// in double; the per-element update runs in the tensors' own precision (fp32
// or fp64). Both are the shared MPC_HD code of kernels/common/
// preview_optimizer_math.h, which the CUDA kernels run too; the operand
// checks (preview_training.h) are shared with the CUDA runner.
//
// The file is compiled with -fno-math-errno (CMakeLists.txt): the loops'
// std::sqrt becomes sqrtss/sqrtps (IEEE, the same bits) and vectorises.
#include "ir/mpc_ops.h"
#include "kernels/common/clip_grad_norm_math.h"
#include "kernels/common/loss_scale_math.h"
#include "kernels/common/lr_schedule_math.h"
#include "kernels/common/optimizer_math.h"
#include "kernels/cpu/compute_support.h"
#include "kernels/cpu/cpu_util.h"
#include "kernels/cpu/optimizer_operands.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/preview_training.h"
#include "kernels/lr_schedule_attrs.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <type_traits>

namespace mpc {
namespace cpu {

namespace {

/// found_inf at input i, false when omitted.
bool foundInf(const KernelContext &ctx, size_t i) {
  const Tensor *t = optionalInput(ctx, i);
  return t && flagSet(ctx.node, *t, "found_inf");
}

/// Output i := a byte copy of t.
Tensor &copiedOutput(const KernelContext &ctx, size_t i, const Tensor &t) {
  // Not zeroed first, and not copied where the plan put it over t already.
  Tensor &y = overwrittenOutput(ctx, i, t.dtype, t.dims);
  if (y.bytes.data() != t.bytes.data())
    y.bytes = t.bytes;
  return y;
}

/// copiedOutput() where the node has output i; nullptr otherwise.
Tensor *copyTo(const KernelContext &ctx, size_t i, const Tensor &t) {
  return ctx.hasOutput(i) ? &copiedOutput(ctx, i, t) : nullptr;
}

/// The update's 16-bit working copy of the new master (output
/// lowCopyOutput, passes/weight_copies.h), or nullptr when the node has
/// none: every element is written (as the update makes it, or from p on a
/// skipped step), so it is not zeroed first.
Tensor *workingCopyOutput(const KernelContext &ctx, const Tensor &p) {
  const int at = lowCopyOutput(ctx.node.domain(), ctx.node.opType());
  if (at < 0 || !ctx.hasOutput(size_t(at)))
    return nullptr;
  DType low = floatTypeAttr(ctx.node, "low", DType::F16);
  if (low != DType::F16 && low != DType::BF16)
    fail(ctx.node, "attribute 'low' must be fp16 or bf16, got ",
         dtypeName(low));
  return &overwrittenOutput(ctx, size_t(at), low, p.dims);
}

/// copy := Cast(p) (a skipped step's copy: the master as it stays), the
/// Cast kernel's conversions, in parallel ranges.
void castMaster(const Tensor &p, Tensor &copy) {
  const float *pp = p.data<float>();
  parallelFor(p.numel(), kGrainValues, [&](int64_t k0, int64_t k1) {
    storeFloats(copy, k0, k1 - k0, pp + k0);
  });
}

int64_t readStep(const Node &node, const Tensor &t) {
  if (t.numel() != 1)
    fail(node, "step must be a scalar, got shape ", shapeString(t.dims));
  int64_t step =
      isFloating(t.dtype) ? int64_t(loadDouble(t, 0)) : loadInt(t, 0);
  if (step < 0)
    fail(node, "step must be >= 0, got ", step);
  return step;
}

/// The learning rate: the optional input i (a floating scalar, the
/// schedule's fp64 rate), else the `lr` attribute.
double learningRate(const KernelContext &ctx, size_t i) {
  const Tensor *t = optionalInput(ctx, i);
  if (!t)
    return ctx.node.attrFloat("lr", 1e-3f);
  if (t->numel() != 1 || !isFloating(t->dtype))
    fail(ctx.node, "lr must be a floating-point scalar, got ",
         dtypeName(t->dtype), " ", shapeString(t->dims));
  return loadDouble(*t, 0);
}

// --- loss scaling ------------------------------------------------------------

void kernelUnscaleGradients(KernelContext &ctx) {
  const Tensor &scale = input(ctx, 0, "scale");
  if (scale.numel() != 1 || !isFloating(scale.dtype))
    fail(ctx.node, "scale must be a floating-point scalar");
  float inv = inverseLossScale(loadFloat(scale, 0));
  bool anyInf = false;
  for (size_t i = 1; i < ctx.inputs.size(); ++i) {
    const Tensor &g = input(ctx, i, "gradient");
    // Unscaled gradients are fp32 whatever the gradient's storage type (the
    // unscale is the first fp32 operation on them); fp64 stays fp64.
    // Every element of an output is written below (not zeroed first).
    Tensor *out = ctx.hasOutput(i)
                      ? &overwrittenOutput(ctx, i,
                                           g.dtype == DType::F64 ? DType::F64
                                                                 : DType::F32,
                                           g.dims)
                      : nullptr;
    int64_t n = g.numel();
    if (g.dtype == DType::F64) {
      // fp64 gradients (gradient checks) unscale in double by the same inv.
      const double *pg = g.data<double>();
      for (int64_t k = 0; k < n; ++k) {
        anyInf = anyInf || !std::isfinite(pg[k]);
        if (out)
          out->data<double>()[k] = inv == 1.0f ? pg[k] : pg[k] * double(inv);
      }
      continue;
    }
    dispatchFloat(ctx.node, g.dtype, [&](auto io) {
      using Io = decltype(io);
      using C = typename Io::Compute;
      const auto *pg = ptr<Io>(g);
      float *po = out ? out->data<float>() : nullptr;
      // A block at a time: fp16 gradients widen in one call per block (the
      // values of Io::load), fp32 ones are read where they are. The output
      // may be in place over the gradient: a block is read before written.
      constexpr int64_t kBlock = 512;
      C buf[kBlock];
      for (int64_t k = 0; k < n; k += kBlock) {
        int64_t m = std::min(kBlock, n - k);
        const C *v = buf;
        if constexpr (std::is_same_v<typename Io::Storage, C>)
          v = pg + k;
        else
          loadRun<Io>(pg + k, m, buf);
        // unscaleElement's arithmetic with its tests hoisted out of the
        // loops (inv == 1: a copy; finiteness: any element's exponent all
        // ones), so that they vectorise.
        uint32_t allOnes = 0;
        for (int64_t j = 0; j < m; ++j) {
          float g = float(v[j]);
          uint32_t bits;
          std::memcpy(&bits, &g, sizeof bits);
          allOnes |= uint32_t((bits & 0x7f800000u) == 0x7f800000u);
        }
        if (po) {
          if (inv == 1.0f)
            for (int64_t j = 0; j < m; ++j)
              po[k + j] = float(v[j]);
          else
            for (int64_t j = 0; j < m; ++j)
              po[k + j] = float(v[j]) * inv;
        }
        anyInf = anyInf || allOnes != 0;
      }
    });
  }
  output(ctx, 0, DType::Bool, {}).data<uint8_t>()[0] = anyInf ? 1 : 0;
}

void kernelUpdateLossScale(KernelContext &ctx) {
  const Tensor &scale = input(ctx, 0, "scale");
  const Tensor &tracker = input(ctx, 1, "growth_tracker");
  if (scale.dtype != DType::F32 || scale.numel() != 1)
    fail(ctx.node, "scale must be an fp32 scalar");
  if (tracker.numel() != 1 || isFloating(tracker.dtype))
    fail(ctx.node, "growth_tracker must be an integer scalar");
  const Node &node = ctx.node;
  float s = scale.data<float>()[0];
  int64_t t = loadInt(tracker, 0);
  updateLossScale(s, t, foundInf(ctx, 2), node.attrFloat("growth_factor", 2.0f),
                  node.attrFloat("backoff_factor", 0.5f),
                  node.attrInt("growth_interval", 2000));
  output(ctx, 0, DType::F32, scale.dims).data<float>()[0] = s;
  if (Tensor *y = optionalOutput(ctx, 1, tracker.dtype, tracker.dims))
    y->setFromDouble(0, double(t));
}

// --- gradient clipping -------------------------------------------------------

/// torch.nn.utils.clip_grad_norm_: per-tensor 2-norms, the 2-norm of those,
/// coef = max_norm * reciprocal(total + 1e-6) (Python's float / Tensor is
/// reciprocal-then-multiply), clamped to 1, every gradient multiplied by it.
void kernelClipGradNorm(KernelContext &ctx) {
  size_t n = ctx.inputs.size();
  if (n == 0)
    fail(ctx.node, "expects at least one gradient");
  float sumOfNormSquares = 0;
  for (size_t i = 0; i < n; ++i) {
    const Tensor &g = input(ctx, i, "gradient");
    float sq = 0;
    dispatchFloat(ctx.node, g.dtype, [&](auto io) {
      using Io = decltype(io);
      const auto *pg = ptr<Io>(g);
      for (int64_t k = 0, e = g.numel(); k < e; ++k) {
        float v = float(Io::load(pg, k));
        sq += v * v;
      }
    });
    clipAddTensorNorm(sumOfNormSquares, sq);
  }
  float total = std::sqrt(sumOfNormSquares);
  float coef =
      clipGradNormCoefficient(total, ctx.node.attrFloat("max_norm", 1.0f));
  for (size_t i = 0; i < n; ++i) {
    const Tensor &g = ctx.in(i);
    Tensor *out = optionalOutput(ctx, i, g.dtype, g.dims);
    if (!out)
      continue;
    dispatchFloat(ctx.node, g.dtype, [&](auto io) {
      using Io = decltype(io);
      using C = typename Io::Compute;
      const auto *pg = ptr<Io>(g);
      auto *po = ptr<Io>(*out);
      for (int64_t k = 0, e = g.numel(); k < e; ++k)
        Io::store(po, k, Io::load(pg, k) * C(coef));
    });
  }
  output(ctx, n, DType::F32, {}).data<float>()[0] = total;
}

// --- optimizers --------------------------------------------------------------

/// The factor an update unscales its gradient by: float(1 / double(scale))
/// of its optional `grad_scale` input (passes/fold_unscale.h), else 1.
float gradientUnscale(const KernelContext &ctx) {
  const int at = gradScaleInput(ctx.node.domain(), ctx.node.opType());
  const Tensor *t = at < 0 ? nullptr : optionalInput(ctx, size_t(at));
  if (!t)
    return 1.0f;
  if (t->numel() != 1 || t->dtype != DType::F32)
    fail(ctx.node, "grad_scale must be an fp32 scalar, got ",
         dtypeName(t->dtype), " ", shapeString(t->dims));
  return inverseLossScale(t->data<float>()[0]);
}

/// Calls update(k, n, gk) over parallel ranges of g's elements: gk the fp32
/// values of elements k..k+n-1 times `inv` (UnscaleGradients' multiply,
/// unscaleElement: none when inv is 1), g's own storage when it is fp32 and
/// inv 1, else a block widened exactly (an fp16/bf16 gradient: Cast's bits,
/// so the update is the one of the Cast's fp32 output) and unscaled.
template <typename F>
void forGradientBlocks(const Tensor &g, float inv, F &&update) {
  const int64_t total = g.numel();
  if (g.dtype == DType::F32 && inv == 1.0f) {
    const float *pg = g.data<float>();
    parallelFor(total, kGrainValues,
                [&](int64_t k0, int64_t k1) { update(k0, k1 - k0, pg + k0); });
    return;
  }
  parallelFor(total, kGrainValues, [&](int64_t k0, int64_t k1) {
    constexpr int64_t kBlock = 1024;
    float block[kBlock];
    for (int64_t k = k0; k < k1; k += kBlock) {
      int64_t n = std::min(kBlock, k1 - k);
      loadFloats(g, k, n, block);
      if (inv != 1.0f)
        for (int64_t j = 0; j < n; ++j)
          block[j] *= inv;
      update(k, n, static_cast<const float *>(block));
    }
  });
}

void kernelSGD(KernelContext &ctx) {
  const Node &node = ctx.node;
  const Tensor &stepT = input(ctx, 1, "step"), &p = input(ctx, 2, "param"),
               &g = input(ctx, 3, "gradient");
  const Tensor *buf = optionalInput(ctx, 4);
  requireLikeParam(node, p, p, "param");
  requireGradient(node, g, p);
  double momentum = node.attrFloat("momentum", 0.0f);
  if (buf)
    requireMoment(node, *buf, p, "momentum buffer");
  else if (momentum != 0.0)
    fail(node, "momentum ", momentum, " needs a momentum buffer (input 4)");
  if (ctx.hasOutput(1) && !buf)
    fail(node, "has a momentum buffer output but no buffer input");
  Tensor *copy = workingCopyOutput(ctx, p);
  if (foundInf(ctx, 0)) {
    copyTo(ctx, 0, p);
    if (buf)
      copyTo(ctx, 1, *buf);
    if (copy)
      castMaster(p, *copy);
    return;
  }
  SgdScalars s = sgdScalars(
      learningRate(ctx, 5), momentum, node.attrFloat("dampening", 0.0f),
      node.attrFloat("weight_decay", 0.0f), node.attrInt("nesterov", 0) != 0,
      readStep(node, stepT));
  Tensor &pOut = copiedOutput(ctx, 0, p);
  Tensor *bufOut = buf ? copyTo(ctx, 1, *buf) : nullptr;
  // Without a buffer output the updated buffer goes to scratch.
  std::vector<uint8_t> scratch;
  void *pb = nullptr;
  if (bufOut) {
    pb = bufOut->bytes.data();
  } else if (buf) {
    scratch = buf->bytes;
    pb = scratch.data();
  }
  float *pp = pOut.data<float>();
  const float inv = gradientUnscale(ctx);
  if (!pb) {
    forGradientBlocks(g, inv, [&](int64_t k0, int64_t n, const float *gk) {
      const SgdScalars local = s; // as Adam's below: a vectorized loop
      float *pk = pp + k0;
      float unused = 0;
      for (int64_t j = 0; j < n; ++j)
        sgdUpdate(pk[j], gk[j], unused, local);
      if (copy)
        storeFloats(*copy, k0, n, pk);
    });
    return;
  }
  dispatchMoment(buf->dtype, [&](auto stored) {
    using M = decltype(stored);
    M *b = static_cast<M *>(pb);
    forGradientBlocks(g, inv, [&](int64_t k0, int64_t n, const float *gk) {
      const SgdScalars local = s;
      float *pk = pp + k0;
      M *bk = b + k0;
      for (int64_t j = 0; j < n; ++j)
        sgdUpdateStored(pk[j], gk[j], bk[j], local);
      if (copy)
        storeFloats(*copy, k0, n, pk);
    });
  });
}

void kernelAdam(KernelContext &ctx) {
  const Node &node = ctx.node;
  const Tensor &stepT = input(ctx, 1, "step"), &p = input(ctx, 2, "param"),
               &g = input(ctx, 3, "gradient"), &m = input(ctx, 4, "exp_avg"),
               &v = input(ctx, 5, "exp_avg_sq");
  requireLikeParam(node, p, p, "param");
  requireGradient(node, g, p);
  requireMoment(node, m, p, "exp_avg");
  requireMoment(node, v, p, "exp_avg_sq");
  if (m.dtype != v.dtype)
    fail(node, "exp_avg is ", dtypeName(m.dtype), " but exp_avg_sq is ",
         dtypeName(v.dtype), " (both moments are stored in one dtype)");
  Tensor *copy = workingCopyOutput(ctx, p);
  if (foundInf(ctx, 0)) {
    copyTo(ctx, 0, p);
    copyTo(ctx, 1, m);
    copyTo(ctx, 2, v);
    if (copy)
      castMaster(p, *copy);
    return;
  }
  AdamScalars s = adamScalars(
      learningRate(ctx, 6), node.attrFloat("beta1", 0.9f),
      node.attrFloat("beta2", 0.999f), node.attrFloat("epsilon", 1e-8f),
      node.attrFloat("weight_decay", 0.0f), node.attrInt("decoupled", 0) != 0,
      readStep(node, stepT));
  Tensor &pOut = copiedOutput(ctx, 0, p);
  // Moments whose outputs are omitted are updated in scratch copies.
  Tensor mScratch, vScratch;
  Tensor *mOut = copyTo(ctx, 1, m);
  Tensor *vOut = copyTo(ctx, 2, v);
  if (!mOut) {
    mOut = &mScratch;
    mOut->bytes = m.bytes;
  }
  if (!vOut) {
    vOut = &vScratch;
    vOut->bytes = v.bytes;
  }
  float *pp = pOut.data<float>();
  const float inv = gradientUnscale(ctx);
  dispatchMoment(m.dtype, [&](auto stored) {
    using M = decltype(stored);
    M *pm = mOut->data<M>(), *pv = vOut->data<M>();
    forGradientBlocks(g, inv, [&](int64_t k0, int64_t n, const float *gk) {
      // A copy of the scalars no store through pp, pm or pv can reach:
      // their tests leave the loop, which then vectorizes.
      const AdamScalars local = s;
      float *pk = pp + k0;
      M *mk = pm + k0, *vk = pv + k0;
      for (int64_t j = 0; j < n; ++j)
        adamUpdateStored(pk[j], gk[j], mk[j], vk[j], local);
      // The copy of the block just updated, while it is in cache.
      if (copy)
        storeFloats(*copy, k0, n, pk);
    });
  });
}

void kernelIncrementStep(KernelContext &ctx) {
  const Tensor &step = input(ctx, 0, "step");
  if (step.numel() != 1)
    fail(ctx.node, "step must be a scalar, got shape ", shapeString(step.dims));
  bool skip = foundInf(ctx, 1);
  Tensor &y = output(ctx, 0, step.dtype, step.dims);
  dispatchNumeric(ctx.node, step.dtype, [&](auto io) {
    using Io = decltype(io);
    using C = typename Io::Compute;
    C v = Io::load(ptr<Io>(step), 0);
    Io::store(ptr<Io>(y), 0, skip ? v : C(v + C(1)));
  });
}

void kernelLearningRate(KernelContext &ctx) {
  int64_t step = readStep(ctx.node, input(ctx, 0, "step"));
  LrSchedule schedule = lrScheduleOf(ctx.node);
  output(ctx, 0, DType::F64, {}).data<double>()[0] =
      scheduledLr(schedule, step);
}

} // namespace

PreviewHyper previewHyper(const Node &node, PreviewOptimizer kind) {
  PreviewHyper h;
  h.kind = kind;
  h.norm = node.attrFloat("norm_coefficient", 0.0f);
  switch (kind) {
  case PreviewOptimizer::Adagrad:
    h.decayFactor = node.attrFloat("decay_factor", 0.0f);
    h.epsilon = node.attrFloat("epsilon", 1e-6f);
    break;
  case PreviewOptimizer::Momentum: {
    h.alpha = node.attrFloat("alpha", 0.0f);
    h.beta = node.attrFloat("beta", 0.0f);
    std::string mode = node.attrString("mode", "standard");
    if (mode != "standard" && mode != "nesterov")
      fail(node,
           "attribute 'mode' must be \"standard\" or \"nesterov\", got \"",
           mode, "\"");
    h.nesterov = mode == "nesterov";
    break;
  }
  case PreviewOptimizer::Adam:
    h.alpha = node.attrFloat("alpha", 0.9f);
    h.beta = node.attrFloat("beta", 0.999f);
    h.epsilon = node.attrFloat("epsilon", 1e-6f);
    h.normPost = node.attrFloat("norm_coefficient_post", 0.0f);
    break;
  }
  return h;
}

PreviewOperands previewOperands(const KernelContext &ctx,
                                PreviewOptimizer kind) {
  const Node &node = ctx.node;
  size_t groups = size_t(previewInputRuns(kind));
  size_t outGroups = size_t(previewOutputRuns(kind));
  size_t nin = ctx.inputs.size();
  if (nin < 2 + groups || (nin - 2) % groups != 0)
    fail(node, "has ", nin, " inputs; expected R, T and ", groups,
         " runs of n tensors");
  PreviewOperands o;
  o.n = (nin - 2) / groups;
  size_t nout = ctx.outputs.size();
  if (nout == 0 || nout % o.n != 0 || nout / o.n > outGroups)
    fail(node, "has ", nout, " outputs for ", o.n, " tensors");
  const Tensor &r = input(ctx, 0, "R"), &t = input(ctx, 1, "T");
  if (r.numel() != 1 || (r.dtype != DType::F32 && r.dtype != DType::F64))
    fail(node, "R must be a float or double scalar, got ", dtypeName(r.dtype),
         " ", shapeString(r.dims));
  if (t.numel() != 1 || t.dtype != DType::I64)
    fail(node, "T must be an int64 scalar, got ", dtypeName(t.dtype), " ",
         shapeString(t.dims));
  for (size_t i = 0; i < o.n; ++i) {
    const Tensor &x = input(ctx, 2 + i, "X");
    if (x.dtype != DType::F32 && x.dtype != DType::F64)
      fail(node, "input ", 2 + i, " must be float or double, got ",
           dtypeName(x.dtype));
    if (i == 0)
      o.dtype = x.dtype;
    else if (x.dtype != o.dtype)
      fail(node, "all tensors must have one dtype; input ", 2 + i, " is ",
           dtypeName(x.dtype), " but input 2 is ", dtypeName(o.dtype));
    for (size_t g = 1; g < groups; ++g) {
      size_t j = 2 + g * o.n + i;
      const Tensor &s = input(ctx, j, "operand");
      if (s.dtype != x.dtype || s.dims != x.dims)
        fail(node, "input ", j, " (", dtypeName(s.dtype), " ",
             shapeString(s.dims), ") must match input ", 2 + i, " (",
             dtypeName(x.dtype), " ", shapeString(x.dims), ")");
    }
  }
  return o;
}

namespace {

/// Runs the shared per-element update (preview_optimizer_math.h) over every
/// element of every tensor i, storing each result run where the node has
/// that output.
template <PreviewOptimizer Kind> void kernelPreview(KernelContext &ctx) {
  constexpr size_t groups = size_t(Kind == PreviewOptimizer::Adam ? 4 : 3);
  constexpr size_t outGroups = groups - 1;
  PreviewHyper h = previewHyper(ctx.node, Kind);
  PreviewOperands o = previewOperands(ctx, Kind);
  PreviewStep step =
      previewStep(h, loadDouble(*ctx.inputs[0], 0), loadInt(*ctx.inputs[1], 0));
  dispatchFloat(ctx.node, o.dtype, [&](auto io) {
    using Io = decltype(io);
    using C = typename Io::Compute;
    for (size_t i = 0; i < o.n; ++i) {
      const Tensor &x = *ctx.inputs[2 + i];
      const typename Io::Storage *src[groups];
      for (size_t g = 0; g < groups; ++g)
        src[g] = ctx.inputs[2 + g * o.n + i]->data<typename Io::Storage>();
      typename Io::Storage *dst[outGroups] = {};
      for (size_t g = 0; g < outGroups; ++g)
        if (Tensor *y = optionalOutput(ctx, g * o.n + i, o.dtype, x.dims))
          dst[g] = ptr<Io>(*y);
      for (int64_t k = 0, e = x.numel(); k < e; ++k) {
        C in[4] = {}, out[3] = {}; // previewUpdate takes any kind's runs
        for (size_t g = 0; g < groups; ++g)
          in[g] = Io::load(src[g], k);
        previewUpdate<C>(h, step, in, out);
        for (size_t g = 0; g < outGroups; ++g)
          if (dst[g])
            Io::store(dst[g], k, out[g]);
      }
    }
  });
}

} // namespace

std::vector<KernelEntry> optimizerKernels() {
  return {
      {kMpcDomain, "UnscaleGradients", kernelUnscaleGradients},
      {kMpcDomain, "UpdateLossScale", kernelUpdateLossScale},
      {kMpcDomain, "ClipGradNorm", kernelClipGradNorm},
      {kMpcDomain, "SGD", kernelSGD},
      {kMpcDomain, "Adam", kernelAdam},
      {kMpcDomain, "IncrementStep", kernelIncrementStep},
      {kMpcDomain, "LearningRate", kernelLearningRate},
      {kOnnxPreviewTrainingDomain, "Adagrad",
       kernelPreview<PreviewOptimizer::Adagrad>},
      {kOnnxPreviewTrainingDomain, "Adam",
       kernelPreview<PreviewOptimizer::Adam>},
      {kOnnxPreviewTrainingDomain, "Momentum",
       kernelPreview<PreviewOptimizer::Momentum>},
  };
}

} // namespace cpu
} // namespace mpc
