// ScatterND on the CPU: out = data, then each update slice written at the
// position its index tuple names (ONNX opset 11; reduction none, add, mul,
// max, min from opsets 16/18). This is how PyTorch exports an indexed
// assignment (x[a:b, c:d] = v): torchvision's Swin builds its shifted-window
// attention mask that way, from constants, so fold-constants evaluates it
// with this kernel at compile time. Updates apply in index order, so with
// reduction none a repeated index keeps the last update (ONNX leaves that
// case undefined; this is numpy's and ONNX's reference order).
#include "kernels/cpu/cpu_util.h"

#include <type_traits>

namespace mpc {
namespace cpu {
namespace {

enum class Reduction { None, Add, Mul, Max, Min };

Reduction reductionOf(const Node &node) {
  const Attribute *a = node.attr("reduction");
  std::string r = a ? a->s : "none";
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
      int64_t offset = 0;
      for (int64_t d = 0; d < k; ++d) {
        int64_t i = ix[t * k + d], n = data.dims[size_t(d)];
        if (i < -n || i >= n)
          fail(node, "index ", i, " is out of range for dim ", d, " of size ",
               n);
        offset = offset * n + (i < 0 ? i + n : i);
      }
      offset *= slice;
      for (int64_t j = 0; j < slice; ++j) {
        auto u = Io::load(pu, t * slice + j);
        auto o = Io::load(po, offset + j);
        switch (red) {
        case Reduction::None:
          o = u;
          break;
        case Reduction::Add:
          if constexpr (std::is_same_v<decltype(o), bool>)
            o = o || u;
          else
            o = o + u;
          break;
        case Reduction::Mul:
          if constexpr (std::is_same_v<decltype(o), bool>)
            o = o && u;
          else
            o = o * u;
          break;
        case Reduction::Max:
          o = u > o ? u : o;
          break;
        case Reduction::Min:
          o = u < o ? u : o;
          break;
        }
        Io::store(po, offset + j, o);
      }
    }
  });
}

} // namespace

std::vector<KernelEntry> scatterNDKernels() {
  return {{"", "ScatterND", kernelScatterND}};
}

} // namespace cpu
} // namespace mpc
