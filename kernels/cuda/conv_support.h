// Host entry points of the small kernels around cuDNN's convolutions
// (kernels/cuda/conv_support.cu): explicit padding and cropping, and the
// per-channel bias.
//
// cuDNN pads a convolution symmetrically. A window with other pads at its
// two ends (auto_pad SAME_* with an even kernel, explicit ONNX pads) runs
// as a convolution without pads on an explicitly zero-padded copy of its
// input, or, for the data gradient, into a padded buffer that is cropped
// afterwards: launchShiftCopy does both.
#pragma once

#include "passes/ir/types.h"

#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

namespace mpc {
namespace cuda {

/// dst[c] = src[c - offset] where that coordinate is inside src, else 0,
/// for row-major tensors of `dstDims` and `srcDims` (same rank, at most 8)
/// of `elementSize`-byte elements: offset = padBegin pads, -padBegin crops.
void launchShiftCopy(size_t elementSize, const void *src,
                     const std::vector<int64_t> &srcDims, void *dst,
                     const std::vector<int64_t> &dstDims,
                     const std::vector<int64_t> &offset, cudaStream_t stream);

/// y[n, c, i] += bias[c] for y of [n, channels, inner], each sum in fp32
/// and rounded once to y's dtype.
void launchChannelBias(DType yType, void *y, DType biasType, const void *bias,
                       int64_t n, int64_t channels, int64_t inner,
                       cudaStream_t stream);

} // namespace cuda
} // namespace mpc
