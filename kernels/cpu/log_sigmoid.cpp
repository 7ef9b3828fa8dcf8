// CPU kernels of mpc.LogSigmoid (Y = log sigmoid(X)) and mpc.LogSigmoidGrad
// (dX = dY * sigmoid(-X)), with the stable formulas of
// kernels/common/log_sigmoid_math.h: each element widened to fp32 (fp64 for
// fp64 tensors), computed there and rounded once on store, as the CUDA
// kernels do.
#include "kernels/cpu/log_sigmoid.h"

#include "ir/mpc_ops.h"
#include "kernels/common/log_sigmoid_math.h"

#include <type_traits>

namespace mpc {
namespace cpu {
namespace {

void kernelLogSigmoid(KernelContext &ctx) {
  const Tensor &x = input(ctx, 0, "X");
  Tensor &y = overwrittenOutput(ctx, 0, x.dtype, x.dims);
  dispatchFloat(ctx.node, x.dtype, [&](auto io) {
    using Io = decltype(io);
    const auto *px = ptr<Io>(x);
    auto *py = ptr<Io>(y);
    // Element i is read before it is written: Y may be in place over X.
    for (int64_t i = 0, n = x.numel(); i < n; ++i)
      Io::store(py, i, logSigmoidValue(Io::load(px, i)));
  });
}

void kernelLogSigmoidGrad(KernelContext &ctx) {
  const Tensor &dy = input(ctx, 0, "dY"), &x = input(ctx, 1, "X");
  if (dy.dims != x.dims)
    fail(ctx.node, "dY of shape ", shapeString(dy.dims),
         " does not match X of shape ", shapeString(x.dims));
  Tensor &dx = overwrittenOutput(ctx, 0, dy.dtype, dy.dims);
  dispatchFloat2(ctx.node, dy.dtype, x.dtype, [&](auto gio, auto xio) {
    using G = decltype(gio);
    using X = decltype(xio);
    using C = std::common_type_t<typename G::Compute, typename X::Compute>;
    const auto *pg = ptr<G>(dy);
    const auto *px = ptr<X>(x);
    auto *pd = ptr<G>(dx);
    for (int64_t i = 0, n = dy.numel(); i < n; ++i)
      G::store(pd, i,
               typename G::Compute(
                   logSigmoidGradValue(C(G::load(pg, i)), C(X::load(px, i)))));
  });
}

} // namespace

std::vector<KernelEntry> logSigmoidKernels() {
  return {
      {kMpcDomain, "LogSigmoid", kernelLogSigmoid},
      {kMpcDomain, "LogSigmoidGrad", kernelLogSigmoidGrad},
  };
}

} // namespace cpu
} // namespace mpc
