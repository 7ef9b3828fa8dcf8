// Checked geometry of the Conv-family nodes (Conv, ConvTranspose,
// mpc.ConvGradInput, mpc.ConvGradWeight), read off a node and its operands'
// shapes by the CPU kernels (conv_pool.cpp) and the CUDA runners
// (run_conv_pool.cpp): one definition, so both backends accept the same nodes
// with the same messages.
#pragma once

#include "ir/graph.h"
#include "ir/tensor.h"
#include "ir/window_geometry.h"

#include <cstdint>
#include <vector>

namespace mpc {
namespace cpu {

/// One Conv-family node's operands, checked: its window attributes and
/// geometry, batch, the channel counts c and m of the node's own description
/// (see each function), and the dims of its output.
struct ConvNodeGeometry {
  WindowAttrs attrs;
  WindowGeometry window;
  int64_t batch = 0, c = 0, m = 0;
  std::vector<int64_t> outDims;
};

/// Conv(X, W [, B]): c = X's channels, m = W.dims[0]; Y is [N, m, out...].
ConvNodeGeometry convGeometry(const Node &node, const Tensor &x,
                              const Tensor &w, const Tensor *b);

/// ConvTranspose(X, W [, B]): c = X's channels, m = W.dims[1] * group (Y's
/// channels); the window is the transposed one, Y is [N, m, window.in...].
ConvNodeGeometry convTransposeGeometry(const Node &node, const Tensor &x,
                                       const Tensor &w, const Tensor *b);

/// mpc.ConvGradInput(dY, W, x_shape = xs): c = xs[1], m = W.dims[0]; dX is xs.
ConvNodeGeometry convGradInputGeometry(const Node &node, const Tensor &dy,
                                       const Tensor &w,
                                       const std::vector<int64_t> &xs);

/// mpc.ConvGradWeight(dY, X) <kernel_shape>: c = X's channels, m = dY's;
/// dW is [m, c / group, kernel...].
ConvNodeGeometry convGradWeightGeometry(const Node &node, const Tensor &dy,
                                        const Tensor &x);

} // namespace cpu
} // namespace mpc
