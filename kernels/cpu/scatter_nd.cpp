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

void kernelScatterND(KernelContext &ctx) {
  const Node &node = ctx.node;
  const Tensor &data = input(ctx, 0, "data"), &idx = input(ctx, 1, "indices"),
               &upd = input(ctx, 2, "updates");
  if (upd.dtype != data.dtype)
    fail(node, "updates (", dtypeName(upd.dtype), ") and data (",
         dtypeName(data.dtype), ") differ in element type");
  IndexTupleRows t = indexTupleRows(node, data.dims, idx, 0);
  if (upd.dims != t.outDims)
    fail(node, "updates must have shape ", shapeString(t.outDims), ", got ",
         shapeString(upd.dims));
  Reduction red = reductionOf(node);
  Tensor &out = output(ctx, 0, data.dtype, data.dims);
  out.bytes = data.bytes;
  int64_t slice = t.slice;
  dispatchAll(node, data.dtype, [&](auto io) {
    using Io = decltype(io);
    auto *po = ptr<Io>(out);
    const auto *pu = ptr<Io>(upd);
    for (size_t j = 0; j < t.rows.size(); ++j) {
      int64_t offset = t.rows[j] * slice;
      for (int64_t e = 0; e < slice; ++e)
        Io::store(po, offset + e,
                  reduce(red, Io::load(po, offset + e),
                         Io::load(pu, int64_t(j) * slice + e)));
    }
  });
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
