// Window geometry of convolutions and pools: attributes, output sizes, pads.
//
// Conv, ConvTranspose, MaxPool, AveragePool and their mpc backward ops
// (ir/mpc_ops.h) slide a kernel window over the spatial dims of an
// [N, C, D1, ..., Dr] tensor. Shape inference, the gradient rules and the CPU
// kernels all resolve that window here, from the same attributes and by the
// same formulas (ONNX's operator specs, with PyTorch's ceil_mode rule that the
// last window must start inside the input or its left padding), so the sizes
// the compiler infers are the sizes the kernels produce.
#pragma once

#include "ir/graph.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace mpc {

/// Which family of op a window belongs to (they read different attributes).
enum class WindowKind {
  Conv, ///< Conv, ConvTranspose, mpc.ConvGradInput, mpc.ConvGradWeight
  Pool, ///< MaxPool, AveragePool, mpc.MaxPoolGrad, mpc.AveragePoolGrad
};

/// The validated window attributes of one node, independent of input sizes.
struct WindowAttrs {
  /// "NOTSET", "SAME_UPPER", "SAME_LOWER" or "VALID".
  std::string autoPad = "NOTSET";
  std::vector<int64_t> kernel, strides, dilations;
  /// 2r entries: all begins, then all ends (ONNX order).
  std::vector<int64_t> pads;
  /// Pools only: output sizes round up instead of down.
  bool ceilMode = false;
  /// Conv family only: number of channel groups.
  int64_t group = 1;
};

/// A window resolved for concrete sizes, seen as a convolution: output
/// position o of dim d reads input coordinates o * stride - padBegin +
/// k * dilation for k in [0, kernel). Sizes of -1 are unknown (shape
/// inference with symbolic dims); kernels always see concrete sizes.
struct WindowGeometry {
  std::vector<int64_t> in, out, kernel, strides, dilations, padBegin, padEnd;

  size_t rank() const { return kernel.size(); }
  /// Product of `out` / `in` / `kernel` (all must be known).
  int64_t outCount() const;
  int64_t inCount() const;
  int64_t kernelCount() const;
};

/// Reads and checks kernel_shape, strides, dilations, pads, auto_pad (and
/// ceil_mode for pools, group for convs) for `spatialRank` spatial dims.
/// `weightKernel` is the kernel size read from the weight's shape (convs;
/// -1 entries unknown); a kernel_shape attribute must agree with it. Errors
/// name the node.
WindowAttrs readWindowAttrs(const Node &n, WindowKind kind, size_t spatialRank,
                            const std::vector<int64_t> &weightKernel = {});

/// Conv and pools: the output size and effective pads for input spatial
/// sizes `in` (-1: unknown). An input smaller than the (padded) window is an
/// error naming the node.
WindowGeometry resolveWindow(const Node &n, const WindowAttrs &a,
                             const std::vector<int64_t> &in);

/// ConvTranspose: the output size and pads for input spatial sizes `in`,
/// with attributes output_padding and output_shape, returned as the
/// geometry of the convolution it is the data gradient of: `in` of the
/// result is the ConvTranspose's output size and `out` its input size.
WindowGeometry resolveTransposedWindow(const Node &n, const WindowAttrs &a,
                                       const std::vector<int64_t> &in);

/// Marks of windowIndexTable for window positions without an input element.
inline constexpr int64_t kInPadding = -1;     ///< inside pads (reads 0 / -inf)
inline constexpr int64_t kBeyondPadding = -2; ///< past the end pad (ceil_mode)

/// For every kernel offset k (row-major over the kernel) and output position
/// p (row-major over `out`): table[k * outCount + p] is the row-major index
/// of the input element the window reads, or kInPadding / kBeyondPadding.
/// This is the gather pattern of im2col and of every pooling kernel.
std::vector<int64_t> windowIndexTable(const WindowGeometry &g);

/// windowIndexTable(g), kept per thread for the geometries met last (a
/// training step meets the same few every step): the CPU kernels' tables.
std::shared_ptr<const std::vector<int64_t>>
cachedWindowIndexTable(const WindowGeometry &g);

} // namespace mpc
