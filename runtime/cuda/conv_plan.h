// The cuDNN convolution a Conv-family node runs as, planned on the host
// (runtime/cuda/run_conv_pool.cpp runs it; backend-ops-cpu replays the plan on
// the CPU kernels, conv_plan_test.cpp).
//
// cuDNN takes 4-D and 5-D tensors with pads alike at both ends of a dim. A
// 1-D window runs as a 2-D one over a height of 1; a window whose pads
// differ at the two ends of a dim runs without pads over an explicitly
// zero-padded input (x is then the padded shape and xUnpadded the node's),
// and its data gradient is computed into such a padded buffer and cropped.
//
// Layout: the arena holds NCHW tensors. cuDNN's Tensor Core kernels for
// fp16 and bf16 work channels-last (NHWC), and given NCHW they transpose
// internally or pick slower kernels; preferredLayout() says when the runner
// transposes the operands into NHWC scratch itself, convolves in NHWC and
// transposes the result back (the dims stay NCHW-ordered, only the strides
// change: channelsLastStrides).
#pragma once

#include "ir/graph.h"
#include "ir/window_geometry.h"

#include <cstdint>
#include <vector>

namespace mpc {
namespace cuda {

/// Spatial dims the runners take (cuDNN's 5-D tensors).
constexpr size_t kMaxConvSpatial = 3;

/// One convolution in cuDNN's terms: input x [N, C, in...], filter w
/// [M, C/groups, k...], output y [N, M, out...], all 4-D or 5-D.
struct ConvProblem {
  DType type = DType::F32; ///< of x, w and y
  std::vector<int64_t> x, w, y;
  std::vector<int64_t> pads, strides, dilations; ///< symmetric, per dim
  int64_t groups = 1;
  /// Pads that differ at two ends: x is the zero-padded input (pads all 0)
  /// and xUnpadded the node's; offset = the padding in front, per dim of x
  /// (negative where a ConvTranspose's output_shape crops).
  bool explicitPad = false;
  std::vector<int64_t> xUnpadded, offset;
};

/// The problem of window g over an input of n images of c channels and an
/// output of m channels, for tensors of dtype t. Errors name the node.
ConvProblem convProblem(const Node &node, const WindowGeometry &g, int64_t n,
                        int64_t c, int64_t m, int64_t groups, DType t);

/// The offsets that crop a padded x back to xUnpadded (-offset).
std::vector<int64_t> cropOffset(const ConvProblem &p);

enum class ConvLayout { Nchw, Nhwc };

/// NHWC where cuDNN's Tensor Core kernels prefer it: fp16 or bf16, a 2-D
/// window (4-D tensors; 1-D runs as 2-D), one group, and the channels of x
/// and y multiples of 8 (the Tensor Cores' vector width in halves); NCHW
/// otherwise, or when `allowed` is false (CudaBackendOptions::convNhwc,
/// MPC_CUDA_CONV_NHWC=0).
ConvLayout preferredLayout(const ConvProblem &p, bool allowed);

/// The element strides of a packed tensor of NCHW-ordered `dims`: row-major
/// (NCHW) or with the channels (dim 1) innermost (NHWC). Empty dims count
/// as 1, as cuDNN wants strides of an empty tensor.
std::vector<int64_t> packedStrides(const std::vector<int64_t> &dims,
                                   ConvLayout layout);

} // namespace cuda
} // namespace mpc
