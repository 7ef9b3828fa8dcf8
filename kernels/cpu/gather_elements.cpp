// GatherElements and its gradient, mpc.GatherElementsGrad, on the CPU.
//
// GatherElements(data, indices) <axis> reads one data element per index:
// out[i] = data[i with i[axis] replaced by indices[i]] (ONNX opset 11/13,
// torch.gather). Both kernels resolve the indices, in row-major order, to
// data offsets (gatherElementsOffsets, node_geometry.h, shared with the
// CUDA runner), so neither materialises coordinates. The gradient scatter-adds
// dY into zeros of data's shape (repeated indices accumulate), summing in fp32
// for fp16/bf16 and in fp64 for fp64, like mpc.GatherGrad.
#include "ir/mpc_ops.h"
#include "kernels/cpu/cpu_util.h"
#include "kernels/cpu/node_geometry.h"

namespace mpc {
namespace cpu {
namespace {

/// The data offset of every index position (node_geometry.h, whose checks
/// and messages the CUDA runner shares).
std::vector<int64_t> elementOffsets(const Node &node,
                                    const std::vector<int64_t> &data,
                                    const Tensor &idx) {
  return gatherElementsOffsets(node, gatherElementsShape(node, data, idx), idx);
}

void kernelGatherElements(KernelContext &ctx) {
  const Tensor &x = input(ctx, 0, "data"), &idx = input(ctx, 1, "indices");
  std::vector<int64_t> offsets = elementOffsets(ctx.node, x.dims, idx);
  Tensor &y = output(ctx, 0, x.dtype, idx.dims);
  size_t size = dtypeSize(x.dtype);
  for (size_t i = 0; i < offsets.size(); ++i)
    copyElement(y.bytes.data(), int64_t(i), x.bytes.data(), offsets[i], size);
}

/// Adds dY into zeros of data's shape at the positions GatherElements read.
template <typename Io>
void scatterAdd(const Tensor &dy, const std::vector<int64_t> &offsets,
                Tensor &dd) {
  // Sums in fp32 for fp16/bf16 storage, in double for fp64.
  using C = typename Io::Compute;
  std::vector<C> acc(size_t(dd.numel()), C(0));
  const auto *g = ptr<Io>(dy);
  for (size_t i = 0; i < offsets.size(); ++i)
    acc[size_t(offsets[i])] += Io::load(g, int64_t(i));
  auto *out = ptr<Io>(dd);
  for (size_t i = 0; i < acc.size(); ++i)
    Io::store(out, int64_t(i), acc[i]);
}

void kernelGatherElementsGrad(KernelContext &ctx) {
  const Node &node = ctx.node;
  const Tensor &dy = input(ctx, 0, "dY"), &idx = input(ctx, 1, "indices"),
               &data = input(ctx, 2, "data");
  if (dy.dims != idx.dims)
    fail(node, "dY of shape ", shapeString(dy.dims),
         " must have the shape of indices ", shapeString(idx.dims));
  std::vector<int64_t> offsets = elementOffsets(node, data.dims, idx);
  Tensor &dd = output(ctx, 0, dy.dtype, data.dims);
  dispatchFloat(node, dy.dtype,
                [&](auto io) { scatterAdd<decltype(io)>(dy, offsets, dd); });
}

} // namespace

std::vector<KernelEntry> gatherElementsKernels() {
  return {
      {"", "GatherElements", kernelGatherElements},
      {kMpcDomain, "GatherElementsGrad", kernelGatherElementsGrad},
  };
}

} // namespace cpu
} // namespace mpc
