// CUDA runners of ONNX's training operators (ai.onnx.preview.training
// opset 1): Adagrad, Momentum and Adam, variadic over n tensors of fp32 or
// fp64 (the dtypes the operator and the CPU kernel take).
//
// The operands are checked by the CPU kernel's own previewOperands (counts,
// R, T, every run against X) and the attributes read by its previewHyper,
// so both backends refuse the same nodes with the same messages. R and T
// are read on the device by the kernel (kernels/cuda/preview_training.h),
// never on the host, so the op needs no host mirror in a device-resident
// step: T can be state the step itself counts.
#include "kernels/cpu/preview_training.h"

#include "ir/mpc_ops.h"
#include "kernels/cuda/preview_training.h"
#include "runtime/cuda/cuda_ops.h"
#include "runtime/cuda/node_staging.h"

namespace mpc {
namespace cuda {
namespace {

template <PreviewOptimizer Kind> void runPreview(NodeStaging &s) {
  PreviewHyper h = cpu::previewHyper(s.node(), Kind);
  cpu::PreviewOperands o = cpu::previewOperands(s.ctx(), Kind);
  size_t groups = size_t(previewInputRuns(Kind));
  size_t outGroups = size_t(previewOutputRuns(Kind));
  const Tensor &r = s.in(0, "R");
  const void *rate = s.device(0);
  const auto *step = static_cast<const int64_t *>(s.device(1));
  for (size_t i = 0; i < o.n; ++i) {
    const Tensor &x = s.in(2 + i, "X");
    PreviewTensor t;
    t.n = x.numel();
    for (size_t g = 0; g < groups; ++g)
      t.in[g] = s.device(2 + g * o.n + i);
    for (size_t g = 0; g < outGroups; ++g)
      t.out[g] = s.optionalOut(g * o.n + i, o.dtype, x.dims);
    launchPreviewOptimizer(h, o.dtype, rate, r.dtype, step, t, s.stream());
  }
}

/// The tensors (input 2 on) must be fp32 or fp64, as the operator's.
std::string checkPreview(const Node &node) {
  for (size_t i = 2; i < node.numInputs(); ++i) {
    const Value *v = node.input(i);
    if (v && v->dtype != DType::Undefined && v->dtype != DType::F32 &&
        v->dtype != DType::F64)
      return std::string("its tensors must be fp32 or fp64, input ") +
             std::to_string(i) + " is " + dtypeName(v->dtype);
  }
  return "";
}

} // namespace

std::vector<CudaOpEntry> previewTrainingOps() {
  return {
      {kOnnxPreviewTrainingDomain, "Adagrad",
       runPreview<PreviewOptimizer::Adagrad>, checkPreview},
      {kOnnxPreviewTrainingDomain, "Momentum",
       runPreview<PreviewOptimizer::Momentum>, checkPreview},
      {kOnnxPreviewTrainingDomain, "Adam", runPreview<PreviewOptimizer::Adam>,
       checkPreview},
  };
}

} // namespace cuda
} // namespace mpc
