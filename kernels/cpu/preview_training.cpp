// CPU kernels of ONNX's training operators, domain ai.onnx.preview.training
// opset 1 (issue 5): Adagrad, Momentum ("standard" and "nesterov") and Adam.
//
// These follow the formulas of the ONNX operator specification
// (onnx/defs/training/defs.cc and the reference implementation) exactly. Each
// op is variadic: R (learning rate scalar), T (int64 update count), then runs
// of n tensors (X1..Xn, G1..Gn, the optimizer state) and output runs
// (X1_new..Xn_new, the new state); trailing output runs may be omitted. The
// scalar coefficients derived from R, T and the attributes are computed in
// double; the per-element update runs in the tensors' own precision (fp32 or
// fp64).
#include "kernels/cpu/cpu_util.h"

#include <cmath>
#include <string>
#include <type_traits>

namespace mpc {
namespace cpu {
namespace {

const char *const kOnnxTrainingDomain = "ai.onnx.preview.training";

/// The operands of one optimizer node: n tensors per run.
struct OptimizerOperands {
  size_t n = 0;
  double r = 0;
  int64_t t = 0;
  DType dtype = DType::Undefined;
};

/// Checks the input/output counts, R, T and the operand shapes and dtypes.
OptimizerOperands optimizerOperands(const KernelContext &ctx, size_t groups,
                                    size_t outGroups) {
  const Node &node = ctx.node;
  size_t nin = ctx.inputs.size();
  if (nin < 2 + groups || (nin - 2) % groups != 0)
    fail(node, "has ", nin, " inputs; expected R, T and ", groups,
         " runs of n tensors");
  OptimizerOperands o;
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
  o.r = loadDouble(r, 0);
  o.t = loadInt(t, 0);
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

/// Runs `update(k, in, out)` over every element of every tensor i: `in`
/// holds the `groups` inputs' elements (X, G, state...) and `out` receives
/// the `outGroups` results (X_new, new state...), stored where the node has
/// that output.
template <size_t groups, size_t outGroups, typename Update>
void runOptimizer(KernelContext &ctx, Update &&update) {
  OptimizerOperands o = optimizerOperands(ctx, groups, outGroups);
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
        C in[groups], out[outGroups];
        for (size_t g = 0; g < groups; ++g)
          in[g] = Io::load(src[g], k);
        update(o, in, out);
        for (size_t g = 0; g < outGroups; ++g)
          if (dst[g])
            Io::store(dst[g], k, out[g]);
      }
    }
  });
}

void kernelAdagrad(KernelContext &ctx) {
  const Node &node = ctx.node;
  double decay = node.attrFloat("decay_factor", 0.0f);
  double eps = node.attrFloat("epsilon", 1e-6f);
  double norm = node.attrFloat("norm_coefficient", 0.0f);
  runOptimizer<3, 2>(ctx, [&](const OptimizerOperands &o, auto *in, auto *out) {
    using C = std::remove_reference_t<decltype(in[0])>;
    // r = R / (1 + T * decay_factor)
    C r = C(o.r / (1.0 + double(o.t) * decay));
    C x = in[0], g = in[1], h = in[2];
    C gReg = C(norm) * x + g;
    C hNew = h + gReg * gReg;
    C hAdaptive = std::sqrt(hNew) + C(eps);
    out[0] = x - r * gReg / hAdaptive;
    out[1] = hNew;
  });
}

void kernelMomentum(KernelContext &ctx) {
  const Node &node = ctx.node;
  double alpha = node.attrFloat("alpha", 0.0f);
  double beta = node.attrFloat("beta", 0.0f);
  double norm = node.attrFloat("norm_coefficient", 0.0f);
  std::string mode = node.attrString("mode", "standard");
  if (mode != "standard" && mode != "nesterov")
    fail(node, "attribute 'mode' must be \"standard\" or \"nesterov\", got \"",
         mode, "\"");
  bool nesterov = mode == "nesterov";
  runOptimizer<3, 2>(ctx, [&](const OptimizerOperands &o, auto *in, auto *out) {
    using C = std::remove_reference_t<decltype(in[0])>;
    // The first update (T == 0) does not scale the gradient by beta.
    C betaAdjusted = C(o.t > 0 ? beta : 1.0);
    C r = C(o.r);
    C x = in[0], g = in[1], v = in[2];
    C gReg = C(norm) * x + g;
    C vNew = C(alpha) * v + betaAdjusted * gReg;
    out[0] = nesterov ? x - r * (gReg + C(alpha) * vNew) : x - r * vNew;
    out[1] = vNew;
  });
}

void kernelAdam(KernelContext &ctx) {
  const Node &node = ctx.node;
  double alpha = node.attrFloat("alpha", 0.9f);
  double beta = node.attrFloat("beta", 0.999f);
  double eps = node.attrFloat("epsilon", 1e-6f);
  double norm = node.attrFloat("norm_coefficient", 0.0f);
  double normPost = node.attrFloat("norm_coefficient_post", 0.0f);
  runOptimizer<4, 3>(ctx, [&](const OptimizerOperands &o, auto *in, auto *out) {
    using C = std::remove_reference_t<decltype(in[0])>;
    // Bias correction of the learning rate (none on the first update).
    double t = double(o.t);
    C r = C(o.t > 0 ? o.r * std::sqrt(1.0 - std::pow(beta, t)) /
                          (1.0 - std::pow(alpha, t))
                    : o.r);
    C x = in[0], g = in[1], v = in[2], h = in[3];
    C gReg = C(norm) * x + g;
    C vNew = C(alpha) * v + C(1.0 - alpha) * gReg;
    C hNew = C(beta) * h + C(1.0 - beta) * (gReg * gReg);
    C hSqrt = std::sqrt(hNew) + C(eps);
    C xNew = x - r * (vNew / hSqrt);
    out[0] = C(1.0 - normPost) * xNew;
    out[1] = vNew;
    out[2] = hNew;
  });
}

} // namespace

std::vector<KernelEntry> previewTrainingKernels() {
  return {
      {kOnnxTrainingDomain, "Adagrad", kernelAdagrad},
      {kOnnxTrainingDomain, "Adam", kernelAdam},
      {kOnnxTrainingDomain, "Momentum", kernelMomentum},
  };
}

} // namespace cpu
} // namespace mpc
