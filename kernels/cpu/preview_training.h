// The checked operands of ONNX's training operators (Adagrad, Momentum,
// Adam of ai.onnx.preview.training): what the CPU kernels
// (optimizer.cpp) and the CUDA runner (runtime/cuda/
// run_optimizer.cpp) both read off a node, so both backends accept
// the same nodes with the same messages.
#pragma once

#include "kernels/common/preview_optimizer_math.h"
#include "kernels/kernel_context.h"

#include <cstddef>

namespace mpc {
namespace cpu {

/// The node's attributes with the operator's defaults; an unknown Momentum
/// mode is an error on the node.
PreviewHyper previewHyper(const Node &node, PreviewOptimizer kind);

/// The operand layout: R, T, then previewInputRuns(kind) runs of n tensors;
/// at most previewOutputRuns(kind) runs of n outputs.
struct PreviewOperands {
  size_t n = 0;
  DType dtype = DType::Undefined; ///< of every tensor (fp32 or fp64)
};

/// Checks the input/output counts, R's and T's dtypes and shapes and every
/// run against X's dtype and shape; reads no value.
PreviewOperands previewOperands(const KernelContext &ctx,
                                PreviewOptimizer kind);

} // namespace cpu
} // namespace mpc
