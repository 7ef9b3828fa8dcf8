// Matrix products and convolutions through oneDNN (Debian's libdnnl), for
// the CPU kernels of matmul.cpp and conv_pool.cpp.
//
// bf16 (and fp16 where the CPU computes it natively) runs in oneDNN's own
// low-precision kernels (AVX512-BF16, AMX): half operands, fp32
// accumulation, the result rounded once to its dtype (or written in fp32
// for the caller to round) -- the numerics contract of the emulated path,
// whose summation order alone differs. fp32 convolutions and products run
// here too: oneDNN's direct convolution against im2col + sgemm, and its
// products against Debian's OpenBLAS, which detects this machine's cores
// as "Prescott" (generic SSE3 kernels) unless OPENBLAS_CORETYPE says
// otherwise; oneDNN picks its kernels from the CPU's features itself.
//
// Every primitive is created once per problem (its shapes, dtypes and
// attributes) and kept for the life of the process: a training step runs
// the same shapes every step. A problem oneDNN cannot express, or only
// through a reference (scalar) implementation, returns false and the
// caller runs its own path.
//
// Environment: MPC_CPU_EXACT_HALF=1 keeps fp16/bf16 on the emulated path
// (widen, sgemm, round: the bit-exact reference the tests compare with);
// MPC_CPU_ONEDNN=0 keeps every dtype off oneDNN;
// MPC_CPU_ONEDNN_FP32_PRODUCTS=0 keeps fp32 products on OpenBLAS. All are
// read on each
// call, so a test can set them between runs.
#pragma once

#include "ir/types.h"

#include <cstdint>
#include <string>
#include <vector>

namespace mpc {
namespace cpu {
namespace onednn {

enum class Family { Product, Conv };

/// Whether a product or convolution with operands of `t` should run here:
/// the environment allows it, the dtype is one this CPU runs natively and
/// faster than the other path (bf16 everywhere oneDNN runs; fp16 only with
/// AVX512-FP16; fp32 unless MPC_CPU_ONEDNN_FP32_PRODUCTS=0 for products).
bool useFor(Family f, DType t);

/// Whether the fp32 product or convolution of fp16/bf16 operands widened by
/// the caller (the emulated path of a dtype useFor declines, fp16 here) runs
/// here: fp32 ones of the family do (useFor) and MPC_CPU_EXACT_HALF=1, which
/// keeps the emulated path on BLAS as the bit-exact reference, is not set.
/// The same numerics (fp32 accumulation, one rounding by the caller); the
/// summation order is oneDNN's.
bool useForWidened(Family f);

/// y[b] = alpha * op(A[b]) op(B[b]) (+ beta * y[b] when beta != 0) for b <
/// batch, A/B/Y contiguous batches (row-major m x k, k x n, m x n; a
/// transposed operand stored as its transpose). A, B have dtype `t`; Y has
/// `yt` (t, or F32 for a caller that rounds itself; beta != 0 needs F32).
/// False when oneDNN cannot run it (the caller computes it).
/// With `bias` (n elements of dtype t, alpha 1 and beta 0 only), y =
/// op(A) op(B) + bias per row, the bias added in fp32 before the one
/// rounding (a Linear layer's Gemm with its C).
bool matmul(DType t, DType yt, bool ta, bool tb, int64_t batch, int64_t m,
            int64_t n, int64_t k, float alpha, float beta, const void *a,
            const void *b, void *y, const void *bias = nullptr);

/// A convolution over plain [N, C, D...] tensors of one dtype, 1 to 3
/// spatial dims; weights [M, C/groups, K...].
struct ConvProblem {
  DType dtype = DType::F32;
  int64_t n = 0, c = 0, m = 0, groups = 1;
  std::vector<int64_t> in, out, kernel, strides, dilations, padBegin;
};

/// y = conv(x, w) (+ bias[m] per channel when bias is non-null).
bool convForward(const ConvProblem &p, const void *x, const void *w,
                 const void *bias, void *y);
/// dx = the data gradient of conv(x, w) for dy (overwritten, not added to).
bool convBackwardData(const ConvProblem &p, const void *dy, const void *w,
                      void *dx);
/// dw = the weight gradient of conv(x, w) for dy, summed over the batch.
bool convBackwardWeights(const ConvProblem &p, const void *dy, const void *x,
                         void *dw);

/// One line naming the kernel families that ran products and convolutions
/// in this process (e.g. "products: oneDNN bf16 (avx512_core_amx), BLAS
/// fp32; convolutions: oneDNN fp32"), or "" when none ran.
std::string kernelReport();

/// Records that the caller's own path ran a product or convolution of `t`
/// (for kernelReport).
void noteFallback(Family f, DType t);

} // namespace onednn
} // namespace cpu
} // namespace mpc
