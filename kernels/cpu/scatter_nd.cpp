// GatherND and ScatterND on the CPU, the two ops that address slices of
// data by tuples of indices (the last axis of `indices`), and
// ScatterElements, which addresses single elements as GatherElements does.
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
#include "kernels/cpu/cpu_util.h"
#include "kernels/cpu/node_geometry.h"

#include <algorithm>
#include <cstring>
#include <type_traits>

namespace mpc {
namespace cpu {
namespace {

enum class Reduction { None, Add, Mul, Max, Min };

Reduction reductionOf(const Node &node) {
  std::string r = node.attrString("reduction", "none");
  if (r == "none")
    return Reduction::None;
  if (r == "add")
    return Reduction::Add;
  if (r == "mul")
    return Reduction::Mul;
  if (r == "max")
    return Reduction::Max;
  if (r == "min")
    return Reduction::Min;
  fail(node, "reduction '", r, "' is not one of none, add, mul, max, min");
}

/// o updated by u under reduction `red` (bool: add is or, mul is and).
template <typename T> T reduce(Reduction red, T o, T u) {
  switch (red) {
  case Reduction::None:
    return u;
  case Reduction::Add:
    if constexpr (std::is_same_v<T, bool>)
      return o || u;
    else
      return o + u;
  case Reduction::Mul:
    if constexpr (std::is_same_v<T, bool>)
      return o && u;
    else
      return o * u;
  case Reduction::Max:
    return u > o ? u : o;
  case Reduction::Min:
    return u < o ? u : o;
  }
  return u;
}

/// The data offset of element 0 of the slice that index tuple t names, for
/// data dims `dims` and tuples of k indices (negative ones count from the
/// end of their axis).
int64_t tupleOffset(const Node &node, const std::vector<int64_t> &dims,
                    size_t firstAxis, const int64_t *tuple, int64_t k) {
  int64_t offset = 0;
  for (int64_t d = 0; d < k; ++d) {
    int64_t i = tuple[d], n = dims[firstAxis + size_t(d)];
    if (i < -n || i >= n)
      fail(node, "index ", i, " is out of range for axis ",
           firstAxis + size_t(d), " of size ", n);
    offset = offset * n + (i < 0 ? i + n : i);
  }
  return offset;
}

void kernelScatterND(KernelContext &ctx) {
  const Node &node = ctx.node;
  const Tensor &data = input(ctx, 0, "data"), &idx = input(ctx, 1, "indices"),
               &upd = input(ctx, 2, "updates");
  if (idx.dtype != DType::I64)
    fail(node, "indices must be int64, got ", dtypeName(idx.dtype));
  if (upd.dtype != data.dtype)
    fail(node, "updates (", dtypeName(upd.dtype), ") and data (",
         dtypeName(data.dtype), ") differ in element type");
  size_t r = data.dims.size(), q = idx.dims.size();
  if (q < 1)
    fail(node, "indices must have rank >= 1");
  int64_t k = idx.dims.back();
  if (k < 1 || size_t(k) > r)
    fail(node, "the last dim of indices (", k, ") must be in [1, ", r,
         "], data's rank");
  // updates' shape: indices.shape[:-1] + data.shape[k:].
  std::vector<int64_t> want(idx.dims.begin(), idx.dims.end() - 1);
  want.insert(want.end(), data.dims.begin() + k, data.dims.end());
  if (upd.dims != want)
    fail(node, "updates must have shape ", shapeString(want), ", got ",
         shapeString(upd.dims));
  Reduction red = reductionOf(node);
  Tensor &out = output(ctx, 0, data.dtype, data.dims);
  out.bytes = data.bytes;
  int64_t slice = 1;
  for (size_t d = size_t(k); d < r; ++d)
    slice *= data.dims[d];
  const int64_t *ix = idx.data<int64_t>();
  int64_t tuples = idx.numel() / k;
  dispatchAll(node, data.dtype, [&](auto io) {
    using Io = decltype(io);
    auto *po = ptr<Io>(out);
    const auto *pu = ptr<Io>(upd);
    for (int64_t t = 0; t < tuples; ++t) {
      int64_t offset = tupleOffset(node, data.dims, 0, ix + t * k, k) * slice;
      for (int64_t j = 0; j < slice; ++j) {
        auto o =
            reduce(red, Io::load(po, offset + j), Io::load(pu, t * slice + j));
        Io::store(po, offset + j, o);
      }
    }
  });
}

void kernelGatherND(KernelContext &ctx) {
  const Node &node = ctx.node;
  const Tensor &data = input(ctx, 0, "data"), &idx = input(ctx, 1, "indices");
  if (idx.dtype != DType::I64)
    fail(node, "indices must be int64, got ", dtypeName(idx.dtype));
  int64_t b = node.attrInt("batch_dims", 0);
  size_t r = data.dims.size(), q = idx.dims.size();
  if (q < 1 || b < 0 || size_t(b) >= std::min(r, q))
    fail(node, "batch_dims ", b, " must be below the ranks of data (", r,
         ") and indices (", q, ")");
  int64_t k = idx.dims.back();
  if (k < 1 || size_t(b + k) > r)
    fail(node, "the last dim of indices (", k, ") plus batch_dims (", b,
         ") must be at most data's rank ", r);
  int64_t batches = 1;
  for (int64_t d = 0; d < b; ++d) {
    if (data.dims[size_t(d)] != idx.dims[size_t(d)])
      fail(node, "batch dim ", d, " of data (", data.dims[size_t(d)],
           ") and indices (", idx.dims[size_t(d)], ") differ");
    batches *= data.dims[size_t(d)];
  }
  std::vector<int64_t> outDims(idx.dims.begin(), idx.dims.end() - 1);
  outDims.insert(outDims.end(), data.dims.begin() + b + k, data.dims.end());
  Tensor &out = output(ctx, 0, data.dtype, outDims);
  int64_t slice = 1, batchStride = 1;
  for (size_t d = size_t(b + k); d < r; ++d)
    slice *= data.dims[d];
  for (size_t d = size_t(b); d < r; ++d)
    batchStride *= data.dims[d];
  int64_t tuples = idx.numel() / k, perBatch = tuples / batches;
  size_t size = dtypeSize(data.dtype), bytes = size_t(slice) * size;
  const int64_t *ix = idx.data<int64_t>();
  for (int64_t t = 0; t < tuples; ++t) {
    int64_t offset =
        (t / perBatch) * batchStride +
        tupleOffset(node, data.dims, size_t(b), ix + t * k, k) * slice;
    if (bytes)
      std::memcpy(out.bytes.data() + size_t(t) * bytes,
                  data.bytes.data() + size_t(offset) * size, bytes);
  }
}

/// ScatterElements: out = data, then updates[i] applied at the element
/// GatherElements would read for index position i (node_geometry.h's
/// offsets: the same axis, index and bounds rules), in index order.
void kernelScatterElements(KernelContext &ctx) {
  const Node &node = ctx.node;
  const Tensor &data = input(ctx, 0, "data"), &idx = input(ctx, 1, "indices"),
               &upd = input(ctx, 2, "updates");
  if (upd.dtype != data.dtype)
    fail(node, "updates (", dtypeName(upd.dtype), ") and data (",
         dtypeName(data.dtype), ") differ in element type");
  if (upd.dims != idx.dims)
    fail(node, "updates of shape ", shapeString(upd.dims),
         " must have the shape of indices ", shapeString(idx.dims));
  std::vector<int64_t> offsets = gatherElementsOffsets(
      node, gatherElementsShape(node, data.dims, idx), idx);
  Reduction red = reductionOf(node);
  Tensor &out = output(ctx, 0, data.dtype, data.dims);
  out.bytes = data.bytes;
  dispatchAll(node, data.dtype, [&](auto io) {
    using Io = decltype(io);
    auto *po = ptr<Io>(out);
    const auto *pu = ptr<Io>(upd);
    for (size_t i = 0; i < offsets.size(); ++i)
      Io::store(
          po, offsets[i],
          reduce(red, Io::load(po, offsets[i]), Io::load(pu, int64_t(i))));
  });
}

} // namespace

std::vector<KernelEntry> scatterNDKernels() {
  return {{"", "ScatterND", kernelScatterND},
          {"", "GatherND", kernelGatherND},
          {"", "ScatterElements", kernelScatterElements}};
}

} // namespace cpu
} // namespace mpc
