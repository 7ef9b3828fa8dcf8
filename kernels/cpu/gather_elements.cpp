// GatherElements and its gradient, mpc.GatherElementsGrad, on the CPU.
//
// GatherElements(data, indices) <axis> reads one data element per index:
// out[i] = data[i with i[axis] replaced by indices[i]] (ONNX opset 11/13,
// torch.gather). Both kernels walk the indices in row-major order and keep
// the matching data offset with a StridedWalker, so neither materialises
// coordinates. The gradient scatter-adds dY into zeros of data's shape
// (repeated indices accumulate), summing in fp32 for fp16/bf16 and in fp64
// for fp64, like mpc.GatherGrad.
#include "kernels/cpu/cpu_util.h"
#include "passes/ir/mpc_ops.h"

namespace mpc {
namespace cpu {
namespace {

/// The checked geometry of one GatherElements: for every index position
/// (row-major over the indices' dims), the data element it names.
struct ElementsWalk {
  int64_t axis = 0;
  std::vector<int64_t> offsets; ///< data offset per index position
};

/// Checks ranks, dims and index range (negative indices count from the end)
/// and resolves every index to a data offset of a tensor of dims `data`.
ElementsWalk walkElements(const Node &node, const std::vector<int64_t> &data,
                          const Tensor &idx) {
  if (idx.dtype != DType::I64 && idx.dtype != DType::I32)
    fail(node, "indices must be int64 or int32, got ", dtypeName(idx.dtype));
  int64_t r = int64_t(data.size());
  if (r == 0)
    fail(node, "cannot gather from a scalar");
  if (int64_t(idx.dims.size()) != r)
    fail(node, "indices of shape ", shapeString(idx.dims),
         " must have the rank of data of shape ", shapeString(data));
  ElementsWalk w;
  w.axis = normalizeAxis(node, node.attrInt("axis", 0), r);
  for (int64_t d = 0; d < r; ++d)
    if (d != w.axis && idx.dims[size_t(d)] > data[size_t(d)])
      fail(node, "indices of shape ", shapeString(idx.dims),
           " exceed data of shape ", shapeString(data), " in dim ", d,
           " (only the axis ", w.axis, " may differ)");
  std::vector<int64_t> strides = rowMajorStrides(data);
  int64_t axisStride = strides[size_t(w.axis)], len = data[size_t(w.axis)];
  strides[size_t(w.axis)] = 0; // the index supplies this coordinate
  const std::vector<int64_t> walkStrides[1] = {strides};
  StridedWalker<1> walker(idx.dims, walkStrides);
  int64_t n = idx.numel();
  w.offsets.resize(size_t(n));
  for (int64_t i = 0; i < n; ++i, walker.next()) {
    int64_t v = loadInt(idx, i);
    if (v < -len || v >= len)
      fail(node, "index ", v, " is out of range for axis ", w.axis, " of size ",
           len);
    w.offsets[size_t(i)] =
        walker.offset(0) + (v < 0 ? v + len : v) * axisStride;
  }
  return w;
}

void kernelGatherElements(KernelContext &ctx) {
  const Tensor &x = input(ctx, 0, "data"), &idx = input(ctx, 1, "indices");
  ElementsWalk w = walkElements(ctx.node, x.dims, idx);
  Tensor &y = output(ctx, 0, x.dtype, idx.dims);
  size_t size = dtypeSize(x.dtype);
  for (size_t i = 0; i < w.offsets.size(); ++i)
    copyElement(y.bytes.data(), int64_t(i), x.bytes.data(), w.offsets[i], size);
}

/// Adds dY into zeros of data's shape at the positions GatherElements read.
template <typename Io>
void scatterAdd(const Tensor &dy, const ElementsWalk &w, Tensor &dd) {
  // Sums in fp32 for fp16/bf16 storage, in double for fp64.
  using C = typename Io::Compute;
  std::vector<C> acc(size_t(dd.numel()), C(0));
  const auto *g = ptr<Io>(dy);
  for (size_t i = 0; i < w.offsets.size(); ++i)
    acc[size_t(w.offsets[i])] += Io::load(g, int64_t(i));
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
  ElementsWalk w = walkElements(node, data.dims, idx);
  Tensor &dd = output(ctx, 0, dy.dtype, data.dims);
  dispatchFloat(node, dy.dtype,
                [&](auto io) { scatterAdd<decltype(io)>(dy, w, dd); });
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
