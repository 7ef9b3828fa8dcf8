// The runners that the op tables of more than one category list: an op that
// another category's device code runs (Relu, Tanh and Sigmoid are cases of
// the unary-math kernel; mpc.ErfGrad is GELU's gradient kernel in its erf
// form), and the fused ops, which run the runner of the op they fuse
// (mpc.Gelu, mpc.GeluTanh, mpc.FusedMatMul, mpc.SoftmaxGradAs) or its rows
// (axisRows). Each is defined once, beside its op (run_activation.cpp,
// run_matmul.cpp; the unary runner here), and the other tables name it from
// here.
#pragma once

#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/gelu.h"
#include "kernels/cuda/softmax.h"
#include "runtime/cuda/cuda_ops.h"
#include "runtime/cuda/node_staging.h"

#include <string>
#include <vector>

namespace mpc {
namespace cuda {

// --- unary math (run_elementwise.cpp; Relu, Tanh, Sigmoid in
// run_activation.cpp)

template <UnaryOp Op> void runUnary(NodeStaging &s) {
  const Tensor &x = s.in(0, "X");
  requireDeviceFloat(s.node(), x, "X");
  void *y = s.out(0, x.dtype, x.dims);
  launchUnary(Op, x.dtype, s.device(0), y, x.numel(), s.stream());
}

inline std::string checkUnary(const Node &node) {
  return requireDeviceFloat(node, {0});
}

// --- run_activation.cpp

/// Gelu, mpc.Gelu and mpc.GeluTanh (the tanh form when the node asks).
void runGelu(NodeStaging &s);
/// mpc.GeluGrad and (K = Erf) mpc.ErfGrad; instantiated for Erf there.
template <GeluGradKind K> void runGeluGrad(NodeStaging &s);
/// The node's `axis` (default -1) splits dims into softmax rows.
AxisRows axisRows(const Node &node, const std::vector<int64_t> &dims);
/// SoftmaxGrad / LogSoftmaxGrad, and SoftmaxGradAs (AsY); instantiated for
/// <false, true> there.
template <bool Log, bool AsY = false> void runSoftmaxGrad(NodeStaging &s);

// --- run_matmul.cpp

/// MatMul, and mpc.FusedMatMul's transA/transB.
void runMatMul(NodeStaging &s);
std::string checkGemm(const Node &node);

} // namespace cuda
} // namespace mpc
