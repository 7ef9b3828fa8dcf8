// Kernels that one op category defines and another runs: the fused ops
// (fused.cpp) run their unfused kernels so they give the same bits.
#pragma once

#include "kernels/kernel_context.h"

namespace mpc {
namespace cpu {

/// Gelu (activation.cpp); mpc.Gelu and mpc.GeluTanh are the same kernel.
void kernelGelu(KernelContext &ctx);

/// MatMul(op(A), op(B)) with numpy batching, op swapping the last two axes
/// when its flag is set (matmul.cpp); mpc.FusedMatMul runs it with flags.
void matMul(KernelContext &ctx, bool ta, bool tb);

} // namespace cpu
} // namespace mpc
