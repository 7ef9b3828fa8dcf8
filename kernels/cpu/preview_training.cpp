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
// fp64). Both are the shared MPC_HD code of kernels/common/
// preview_optimizer_math.h, which the CUDA kernels run too; the operand
// checks (preview_training.h) are shared with the CUDA runner.
#include "kernels/cpu/preview_training.h"

#include "ir/mpc_ops.h"
#include "kernels/cpu/cpu_util.h"

#include <string>

namespace mpc {
namespace cpu {

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

std::vector<KernelEntry> previewTrainingKernels() {
  return {
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
