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

namespace mpc {
namespace cpu {
namespace {

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

std::vector<KernelEntry> scatterNDKernels() {
  return {{"", "ScatterND", kernelScatterND},
          {"", "GatherND", kernelGatherND},
          {"", "ScatterElements", kernelScatterElements}};
}

} // namespace cpu
} // namespace mpc
