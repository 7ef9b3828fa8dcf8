// Gather and scatter CPU kernels: Gather, GatherElements, GatherND,
// ScatterND, ScatterElements, and the backward ops mpc.GatherGrad and
// mpc.GatherElementsGrad.
//
// Gather (an axis and an index tensor) reads whole slices, every index
// validated first; fold-constants runs the exporter's Shape -> Gather shape
// arithmetic through it. mpc.GatherGrad scatter-adds dY back, summing in the
// compute type (compute_support.h).
//
// GatherElements(data, indices) <axis> reads one data element per index:
// out[i] = data[i with i[axis] replaced by indices[i]] (ONNX opset 11/13,
// torch.gather). Both kernels resolve the indices, in row-major order, to
// data offsets (gatherElementsOffsets, node_geometry.h, shared with the
// CUDA runner), so neither materialises coordinates. The gradient scatter-adds
// dY into zeros of data's shape (repeated indices accumulate), summing in fp32
// for fp16/bf16 and in fp64 for fp64, like mpc.GatherGrad.
//
// GatherND (opset 11/12/13, batch_dims): out[i...] = data[b..., tuple(i...)],
// the slice each index tuple names; PyTorch exports advanced indexing with
// several index tensors (x[rows, cols]) this way. ScatterND: out = data,
// then each update slice written at the position its index tuple names
// (ONNX opset 11; reduction none, add, mul, max, min from opsets 16/18). This
// is how PyTorch exports an indexed assignment (x[a:b, c:d] = v): torchvision's
// Swin builds its shifted-window attention mask that way, from constants, so
// fold-constants evaluates it with this kernel at compile time. Updates apply
// in index order, so with reduction none a repeated index keeps the last update
// (ONNX leaves that case undefined; this is numpy's and ONNX's reference
// order). ScatterElements (opset 11; reductions as ScatterND's) writes
// updates[i] where GatherElements would read index position i: torch's
// dynamo exporter writes select_scatter this way (T5's and BART's
// shift_tokens_right, `shifted[:, 0] = start`).
#include "ir/mpc_ops.h"
#include "kernels/cpu/compute_support.h"
#include "kernels/cpu/cpu_util.h"
#include "kernels/cpu/node_geometry.h"

#include <algorithm>
#include <cstring>

namespace mpc {
namespace cpu {

namespace {

void kernelGather(KernelContext &ctx) {
  const Node &node = ctx.node;
  const Tensor &x = input(ctx, 0, "data"), &idx = input(ctx, 1, "indices");
  if (idx.dtype != DType::I64 && idx.dtype != DType::I32)
    fail(node, "indices must be int64 or int32, got ", dtypeName(idx.dtype));
  int64_t r = int64_t(x.dims.size());
  if (r == 0)
    fail(node, "cannot gather from a scalar");
  int64_t axis = normalizeAxis(node, node.attrInt("axis", 0), r);
  std::vector<int64_t> dims(x.dims.begin(), x.dims.begin() + axis);
  dims.insert(dims.end(), idx.dims.begin(), idx.dims.end());
  dims.insert(dims.end(), x.dims.begin() + axis + 1, x.dims.end());
  Tensor &y = output(ctx, 0, x.dtype, dims);
  int64_t outer = 1, inner = 1, s = x.dims[size_t(axis)];
  for (int64_t d = 0; d < r; ++d)
    if (d < axis)
      outer *= x.dims[size_t(d)];
    else if (d > axis)
      inner *= x.dims[size_t(d)];
  int64_t numIdx = idx.numel();
  std::vector<int64_t> rows(size_t(std::max<int64_t>(numIdx, 0)));
  for (int64_t j = 0; j < numIdx; ++j) {
    int64_t v = loadInt(idx, j);
    if (v < -s || v >= s)
      fail(node, "index ", v, " is out of range for axis ", axis, " of size ",
           s);
    rows[size_t(j)] = v < 0 ? v + s : v;
  }
  size_t size = dtypeSize(x.dtype), block = size_t(inner) * size;
  if (!block)
    return;
  // Rows of a few elements (a Gather along an inner axis: a lowered Resize)
  // are copied as typed elements; a library call per row would cost more
  // than the copy.
  auto copyTyped = [&](auto element) {
    using T = decltype(element);
    const T *px = reinterpret_cast<const T *>(x.bytes.data());
    T *py = reinterpret_cast<T *>(y.bytes.data());
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t j = 0; j < numIdx; ++j) {
        const T *src = px + (o * s + rows[size_t(j)]) * inner;
        T *dst = py + (o * numIdx + j) * inner;
        for (int64_t i = 0; i < inner; ++i)
          dst[i] = src[i];
      }
  };
  if (block <= 64 && size == 4)
    return copyTyped(uint32_t());
  if (block <= 64 && size == 2)
    return copyTyped(uint16_t());
  if (block <= 64 && size == 8)
    return copyTyped(uint64_t());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < numIdx; ++j)
      std::memcpy(y.bytes.data() + size_t(o * numIdx + j) * block,
                  x.bytes.data() + size_t(o * s + rows[size_t(j)]) * block,
                  block);
}

void kernelGatherGrad(KernelContext &ctx) {
  const Node &node = ctx.node;
  const Tensor &dy = input(ctx, 0, "dY"), &idx = input(ctx, 1, "indices"),
               &data = input(ctx, 2, "data");
  if (idx.dtype != DType::I64 && idx.dtype != DType::I32)
    fail(node, "indices must be int64 or int32, got ", dtypeName(idx.dtype));
  int64_t r = int64_t(data.dims.size());
  if (r == 0)
    fail(node, "data must have rank >= 1");
  int64_t axis = normalizeAxis(node, node.attrInt("axis", 0), r);
  std::vector<int64_t> want(data.dims.begin(), data.dims.begin() + axis);
  want.insert(want.end(), idx.dims.begin(), idx.dims.end());
  want.insert(want.end(), data.dims.begin() + axis + 1, data.dims.end());
  if (dy.dims != want)
    fail(node, "dY of shape ", shapeString(dy.dims), " is not the shape ",
         shapeString(want), " Gather produces from data ",
         shapeString(data.dims), " and indices ", shapeString(idx.dims));
  AxisSplit s = splitAt(data.dims, axis);
  int64_t numIdx = idx.numel();
  std::vector<int64_t> rows(static_cast<size_t>(numIdx));
  for (int64_t j = 0; j < numIdx; ++j) {
    int64_t v = loadInt(idx, j);
    if (v < -s.len || v >= s.len)
      fail(node, "index ", v, " is out of range for axis ", axis, " of size ",
           s.len);
    rows[size_t(j)] = v < 0 ? v + s.len : v;
  }
  Tensor &dd = output(ctx, 0, dy.dtype, data.dims);
  auto scatterAdd = [&](const auto *g, auto *acc) {
    for (int64_t o = 0; o < s.outer; ++o)
      for (int64_t j = 0; j < numIdx; ++j) {
        const auto *src = g + (o * numIdx + j) * s.inner;
        auto *dst = acc + (o * s.len + rows[size_t(j)]) * s.inner;
        for (int64_t i = 0; i < s.inner; ++i)
          dst[i] += src[i];
      }
  };
  // fp32 and fp64 add into the zeroed output where it lies; fp16/bf16 add in
  // fp32 and round once at the end.
  if (dy.dtype == DType::F32)
    return scatterAdd(dy.data<float>(), dd.data<float>());
  if (dy.dtype == DType::F64)
    return scatterAdd(dy.data<double>(), dd.data<double>());
  withCompute(node, {&dy}, [&](auto c) {
    using C = decltype(c);
    std::vector<C> g = loadAll<C>(dy), acc(size_t(dd.numel()), C(0));
    scatterAdd(g.data(), acc.data());
    storeAll(dd, acc);
  });
}

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

/// out = data, then update row j (`slice` elements of upd) applied in
/// order at row rows[j] of out: ScatterND's tuples' rows, ScatterElements'
/// element offsets (slice 1).
void scatterRows(const Node &node, const Tensor &data, const Tensor &upd,
                 const std::vector<int64_t> &rows, int64_t slice, Tensor &out) {
  if (upd.dtype != data.dtype)
    fail(node, "updates (", dtypeName(upd.dtype), ") and data (",
         dtypeName(data.dtype), ") differ in element type");
  ScatterReduction red = scatterReduction(node);
  out.bytes = data.bytes;
  dispatchAll(node, data.dtype, [&](auto io) {
    using Io = decltype(io);
    auto *po = ptr<Io>(out);
    const auto *pu = ptr<Io>(upd);
    for (size_t j = 0; j < rows.size(); ++j)
      for (int64_t e = 0, at = rows[j] * slice; e < slice; ++e)
        Io::store(po, at + e,
                  scatterUpdate(red, Io::load(po, at + e),
                                Io::load(pu, int64_t(j) * slice + e)));
  });
}

void kernelScatterND(KernelContext &ctx) {
  const Node &node = ctx.node;
  const Tensor &data = input(ctx, 0, "data"), &idx = input(ctx, 1, "indices"),
               &upd = input(ctx, 2, "updates");
  IndexTupleRows t = indexTupleRows(node, data.dims, idx, 0);
  if (upd.dims != t.outDims)
    fail(node, "updates must have shape ", shapeString(t.outDims), ", got ",
         shapeString(upd.dims));
  scatterRows(node, data, upd, t.rows, t.slice,
              output(ctx, 0, data.dtype, data.dims));
}

void kernelGatherND(KernelContext &ctx) {
  const Node &node = ctx.node;
  const Tensor &data = input(ctx, 0, "data"), &idx = input(ctx, 1, "indices");
  IndexTupleRows t =
      indexTupleRows(node, data.dims, idx, node.attrInt("batch_dims", 0));
  Tensor &out = output(ctx, 0, data.dtype, t.outDims);
  size_t bytes = size_t(t.slice) * dtypeSize(data.dtype);
  for (size_t j = 0; j < t.rows.size(); ++j)
    if (bytes)
      std::memcpy(out.bytes.data() + j * bytes,
                  data.bytes.data() + size_t(t.rows[j]) * bytes, bytes);
}

/// ScatterElements: out = data, then updates[i] applied at the element
/// GatherElements would read for index position i (node_geometry.h's
/// offsets: the same axis, index and bounds rules), in index order.
void kernelScatterElements(KernelContext &ctx) {
  const Node &node = ctx.node;
  const Tensor &data = input(ctx, 0, "data"), &idx = input(ctx, 1, "indices"),
               &upd = input(ctx, 2, "updates");
  if (upd.dims != idx.dims)
    fail(node, "updates of shape ", shapeString(upd.dims),
         " must have the shape of indices ", shapeString(idx.dims));
  std::vector<int64_t> offsets = gatherElementsOffsets(
      node, gatherElementsShape(node, data.dims, idx), idx);
  scatterRows(node, data, upd, offsets, 1,
              output(ctx, 0, data.dtype, data.dims));
}

} // namespace

std::vector<KernelEntry> gatherScatterKernels() {
  return {
      {"", "Gather", kernelGather},
      {kMpcDomain, "GatherGrad", kernelGatherGrad},
      {"", "GatherElements", kernelGatherElements},
      {kMpcDomain, "GatherElementsGrad", kernelGatherElementsGrad},
      {"", "GatherND", kernelGatherND},
      {"", "ScatterND", kernelScatterND},
      {"", "ScatterElements", kernelScatterElements},
  };
}

} // namespace cpu
} // namespace mpc
