// Host entry points of the small kernels around cuDNN's convolutions
// (kernels/cuda/conv_support.cu): explicit padding and cropping, and the
// per-channel bias.
//
// cuDNN pads a convolution symmetrically. A window with other pads at its
// two ends (auto_pad SAME_* with an even kernel, explicit ONNX pads) runs
// as a convolution without pads on an explicitly zero-padded copy of its
// input, or, for the data gradient, into a padded buffer that is cropped
// afterwards: launchShiftCopy does both. Its index math is MPC_HD
// (shiftSource) so that the CPU tests replay it.
#pragma once

#include "ir/host_device.h"
#include "ir/types.h"
#include "kernels/cuda/broadcast_geometry.h"

#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

namespace mpc {
namespace cuda {

/// A shifted copy between row-major tensors of one rank (at most
/// kMaxKernelRank): dst coordinate c reads src coordinate c - offset.
struct ShiftGeometry {
  int rank = 0;
  int64_t src[kMaxKernelRank] = {}, dst[kMaxKernelRank] = {};
  int64_t offset[kMaxKernelRank] = {};
};

/// Throws unless the three vectors have one rank of at most kMaxKernelRank.
ShiftGeometry makeShiftGeometry(const std::vector<int64_t> &srcDims,
                                const std::vector<int64_t> &dstDims,
                                const std::vector<int64_t> &offset);

/// The src element dst element i reads, or -1 where that coordinate is
/// outside src (the copy writes 0 there).
MPC_HD int64_t shiftSource(const ShiftGeometry &g, int64_t i) {
  int64_t from = 0, scale = 1;
  bool inside = true;
  for (int d = g.rank - 1; d >= 0; --d) {
    int64_t c = i % g.dst[d] - g.offset[d];
    i /= g.dst[d];
    inside = inside && c >= 0 && c < g.src[d];
    from += c * scale;
    scale *= g.src[d];
  }
  return inside ? from : -1;
}

/// dst[c] = src[c - offset] where that coordinate is inside src, else 0,
/// for row-major tensors of `dstDims` and `srcDims` of `elementSize`-byte
/// elements: offset = padBegin pads, -padBegin crops.
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
