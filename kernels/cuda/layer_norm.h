// Host entry points of the CUDA LayerNormalization kernels (kernels/cuda/
// layer_norm.cu): the forward, saving mean and inv_std, and
// mpc.LayerNormalizationGrad.
//
// X is seen as [outer, n] (n = the product of the normalised axes); scale
// and bias arrive already expanded to n elements (the runner broadcasts a
// smaller one on the device first). Statistics are fp32, two-pass, with the
// formulas of kernels/common/layer_norm_math.h (the CPU backend's). Raw
// device pointers; dtypes fp32, fp16 or bf16, chosen per operand.
#pragma once

#include "ir/types.h"

#include <cuda_runtime_api.h>

#include <cstdint>

namespace mpc {
namespace cuda {

/// Where LayerNormalizationTo's rows go besides X's dtype: Y stored in
/// yType (rounded once from the fp32 result, as a Cast rounds), and Ylow =
/// Cast(Y, lowType) when ylow is set.
struct LayerNormOut {
  DType yType = DType::Undefined; ///< Undefined: X's dtype
  void *ylow = nullptr;
  DType lowType = DType::F16;
};

/// y := (x - mean) * inv_std * scale + bias per row; mean/invStd (fp32,
/// `outer` each) may be nullptr; bias may be nullptr (no bias); y may be
/// nullptr (the statistics alone). x, scale and bias of dtype t, y of t or
/// out.yType. Not `centered` (mpc.RMSNormalization): the mean is 0,
/// inv_std = 1 / sqrt(mean(x^2) + epsilon).
void launchLayerNorm(DType t, const void *x, const void *scale,
                     const void *bias, void *y, float *mean, float *invStd,
                     int64_t outer, int64_t n, double epsilon,
                     cudaStream_t stream, bool centered = true,
                     const LayerNormOut &out = {});

/// The operands of the backward, each with its own dtype.
struct LayerNormGradArgs {
  DType dyType = DType::F32, xType = DType::F32, scaleType = DType::F32,
        statType = DType::F32;
  const void *dy = nullptr, *x = nullptr, *scale = nullptr;
  const void *mean = nullptr, *invStd = nullptr;
  /// Outputs in outType (X's dtype; dY may be narrower); any may be
  /// nullptr (not computed).
  DType outType = DType::F32;
  void *dx = nullptr, *dScale = nullptr, *dBias = nullptr;
  int64_t outer = 0, n = 0;
  /// false for RMSNormalizationGrad: mean is 0 and dX has no mean(g) term.
  bool centered = true;
  /// layerNormGradScratchBytes(*this) bytes of device scratch (the chunk
  /// sums of dScale and dBias), where that is not 0.
  float *scratch = nullptr;
};

/// Scratch launchLayerNormGrad needs: fp32 chunk sums of dScale and dBias
/// when they are asked for and the rows are more than one chunk.
size_t layerNormGradScratchBytes(const LayerNormGradArgs &args);

/// dX per row (one warp a row); dScale and dBias per column, each summed
/// over the rows in row order in chunks of kSumChunk rows
/// (kernels/common/chunked_sum.h, the chunks in parallel), which is the
/// CPU backend's order, so those two are the same bits on both backends.
void launchLayerNormGrad(const LayerNormGradArgs &args, cudaStream_t stream);

} // namespace cuda
} // namespace mpc
