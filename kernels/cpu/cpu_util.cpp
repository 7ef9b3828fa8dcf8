// Shared helpers of the CPU kernels: checked inputs/outputs, shapes, axes.
//
// Everything here validates user-controlled data (shapes read from tensors,
// axes from attributes) before a kernel indexes memory with it, so that bad
// input ends in an mpc::Error naming the node rather than a crash.
#include "kernels/cpu/cpu_util.h"

#include <algorithm>
#include <optional>

namespace mpc {
namespace cpu {

namespace {
// Refuse single tensors above this many bytes: a corrupt shape must be an
// error message, not an out-of-memory kill.
constexpr int64_t kMaxTensorBytes = int64_t(1) << 36; // 64 GiB
} // namespace

float loadFloat(const Tensor &t, int64_t i) {
  switch (t.dtype) {
  case DType::F32:
    return t.data<float>()[i];
  case DType::F16:
    return halfToFloat(t.data<uint16_t>()[i]);
  case DType::BF16:
    return bf16ToFloat(t.data<uint16_t>()[i]);
  default:
    return float(t.getAsDouble(i));
  }
}

int64_t loadInt(const Tensor &t, int64_t i) {
  switch (t.dtype) {
  case DType::I64:
    return t.data<int64_t>()[i];
  case DType::I32:
    return t.data<int32_t>()[i];
  default:
    return int64_t(t.getAsDouble(i));
  }
}

bool flagSet(const Node &node, const Tensor &t, const char *what) {
  if (t.numel() != 1)
    fail(node, what, " must hold one element, got shape ", shapeString(t.dims));
  return t.getAsDouble(0) != 0;
}

const Tensor &input(const KernelContext &ctx, size_t i, const char *what) {
  if (!ctx.hasInput(i))
    fail(ctx.node, "missing input ", i, " (", what, ")");
  return *ctx.inputs[i];
}

void requireInputs(const KernelContext &ctx, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (!ctx.hasInput(i))
      fail(ctx.node, "expects at least ", n, " inputs, input ", i,
           " is missing");
}

int64_t checkedCount(const Node &node, const std::vector<int64_t> &dims) {
  int64_t n = elementCount(dims);
  if (n < 0)
    fail(node, "invalid output shape ", shapeString(dims));
  return n;
}

namespace {
/// The checks output() and overwrittenOutput() share.
void checkOutput(const KernelContext &ctx, size_t i, DType t,
                 const std::vector<int64_t> &dims) {
  if (!ctx.hasOutput(i))
    fail(ctx.node, "output ", i, " is required but omitted");
  int64_t n = checkedCount(ctx.node, dims);
  if (n > kMaxTensorBytes / int64_t(std::max<size_t>(dtypeSize(t), 1)))
    fail(ctx.node, "output shape ", shapeString(dims), " is too large");
}
} // namespace

Tensor &output(const KernelContext &ctx, size_t i, DType t,
               const std::vector<int64_t> &dims) {
  checkOutput(ctx, i, t, dims);
  return ctx.out(i, t, dims);
}

Tensor &overwrittenOutput(const KernelContext &ctx, size_t i, DType t,
                          const std::vector<int64_t> &dims) {
  checkOutput(ctx, i, t, dims);
  Tensor &o = *ctx.outputs[i];
  o.allocate(t, dims, /*zero=*/false);
  return o;
}

DType floatTypeAttr(const Node &node, const char *name, DType dflt) {
  int64_t v = node.attrInt(name, toOnnxDataType(dflt));
  std::optional<DType> t = fromOnnxDataType(int(v));
  if (!t || !isFloating(*t))
    fail(node, "attribute '", name, "' = ", v, " is not a float type");
  return *t;
}

void castWithCastKernel(const Node &owner, const Tensor &x, DType to,
                        Tensor *out, uint64_t seed) {
  Graph g;
  Node *cast =
      g.createNode("Cast", {g.addInput("input", x.dtype, {})}, 1, owner.name());
  cast->setAttr("to", Attribute::ofInt(toOnnxDataType(to)));
  const CpuKernel *k = findCpuKernel("", "Cast");
  if (!k)
    fail(owner, "internal: no Cast kernel to delegate to");
  KernelContext castCtx{*cast, {&x}, {out}, seed, {}};
  (*k)(castCtx);
}

Tensor *optionalOutput(const KernelContext &ctx, size_t i, DType t,
                       const std::vector<int64_t> &dims) {
  if (!ctx.hasOutput(i))
    return nullptr;
  return &output(ctx, i, t, dims);
}

void copyWithDims(KernelContext &ctx, const Tensor &x,
                  const std::vector<int64_t> &dims) {
  Tensor &y = overwrittenOutput(ctx, 0, x.dtype, dims);
  if (y.numel() != x.numel())
    fail(ctx.node, "cannot reshape ", shapeString(x.dims), " to ",
         shapeString(dims));
  y.bytes = x.bytes;
}

std::vector<int64_t> readInts(const Node &node, const Tensor &t,
                              const char *what) {
  if (t.dims.size() > 1)
    fail(node, what, " must be a 1-D tensor, got shape ", shapeString(t.dims));
  if (t.dtype != DType::I64 && t.dtype != DType::I32)
    fail(node, what, " must be int64 or int32, got ", dtypeName(t.dtype));
  std::vector<int64_t> v(size_t(t.numel()));
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = loadInt(t, int64_t(i));
  return v;
}

int64_t normalizeAxis(const Node &node, int64_t axis, int64_t rank,
                      const char *what) {
  if (axis < -rank || axis >= rank)
    fail(node, what, " ", axis, " is out of range for rank ", rank);
  return axis < 0 ? axis + rank : axis;
}

AxisSplit splitAt(const std::vector<int64_t> &dims, int64_t axis) {
  AxisSplit s;
  for (int64_t d = 0; d < int64_t(dims.size()); ++d) {
    int64_t v = dims[size_t(d)];
    if (d < axis)
      s.outer *= v;
    else if (d == axis)
      s.len = v;
    else
      s.inner *= v;
  }
  return s;
}

std::vector<bool> reducedAxes(const KernelContext &ctx, size_t axesInput,
                              int64_t rank) {
  std::vector<int64_t> axes;
  if (const Tensor *t = optionalInput(ctx, axesInput))
    axes = readInts(ctx.node, *t, "axes");
  else
    axes = ctx.node.attrInts("axes");
  std::vector<bool> reduced(size_t(rank), axes.empty());
  if (axes.empty() && ctx.node.attrInt("noop_with_empty_axes", 0) != 0)
    return std::vector<bool>(size_t(rank), false);
  for (int64_t a : axes) {
    size_t i = size_t(normalizeAxis(ctx.node, a, rank));
    if (reduced[i])
      fail(ctx.node, "axes contain axis ", i, " twice");
    reduced[i] = true;
  }
  return reduced;
}

std::string shapeString(const std::vector<int64_t> &dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i)
      s += ",";
    s += std::to_string(dims[i]);
  }
  return s + "]";
}

std::vector<int64_t> broadcastShapes(const Node &node,
                                     const std::vector<int64_t> &a,
                                     const std::vector<int64_t> &b) {
  size_t r = std::max(a.size(), b.size());
  std::vector<int64_t> out(r);
  for (size_t i = 0; i < r; ++i) {
    int64_t da = i < r - a.size() ? 1 : a[i - (r - a.size())];
    int64_t db = i < r - b.size() ? 1 : b[i - (r - b.size())];
    if (da != db && da != 1 && db != 1)
      fail(node, "shapes ", shapeString(a), " and ", shapeString(b),
           " do not broadcast");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

std::vector<int64_t> rowMajorStrides(const std::vector<int64_t> &dims) {
  std::vector<int64_t> s(dims.size());
  int64_t acc = 1;
  for (size_t i = dims.size(); i-- > 0;) {
    s[i] = acc;
    acc *= dims[i];
  }
  return s;
}

std::vector<int64_t> broadcastStrides(const std::vector<int64_t> &in,
                                      const std::vector<int64_t> &out) {
  std::vector<int64_t> own = rowMajorStrides(in);
  std::vector<int64_t> s(out.size(), 0);
  size_t lead = out.size() - in.size();
  for (size_t i = 0; i < in.size(); ++i)
    s[lead + i] = in[i] == 1 ? 0 : own[i];
  return s;
}

SliceGeometry sliceGeometry(const KernelContext &ctx,
                            const std::vector<int64_t> &in, size_t firstParam) {
  const Node &node = ctx.node;
  int64_t r = int64_t(in.size());
  std::vector<int64_t> starts, ends, axes, steps;
  bool haveAxes = false;
  if (ctx.hasInput(firstParam) || !node.hasAttr("starts")) {
    // Opset 10+: starts, ends, [axes], [steps] are inputs.
    starts = readInts(node, input(ctx, firstParam, "starts"), "starts");
    ends = readInts(node, input(ctx, firstParam + 1, "ends"), "ends");
    if (const Tensor *t = optionalInput(ctx, firstParam + 2)) {
      axes = readInts(node, *t, "axes");
      haveAxes = true;
    }
    if (const Tensor *t = optionalInput(ctx, firstParam + 3))
      steps = readInts(node, *t, "steps");
  } else {
    // Opset 1: attributes, step 1.
    starts = node.attrInts("starts");
    ends = node.attrInts("ends");
    haveAxes = node.hasAttr("axes");
    axes = node.attrInts("axes");
  }
  if (!haveAxes)
    for (size_t i = 0; i < starts.size(); ++i)
      axes.push_back(int64_t(i));
  if (steps.empty())
    steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() ||
      steps.size() != starts.size())
    fail(node, "starts, ends, axes and steps must have the same length");
  SliceGeometry g{in, std::vector<int64_t>(size_t(r), 0),
                  std::vector<int64_t>(size_t(r), 1)};
  std::vector<bool> seen(size_t(r), false);
  for (size_t i = 0; i < axes.size(); ++i) {
    size_t a = size_t(normalizeAxis(node, axes[i], r));
    if (seen[a])
      fail(node, "axes contain a duplicate");
    seen[a] = true;
    int64_t d = in[a], s = starts[i], e = ends[i], p = steps[i];
    if (p == 0)
      fail(node, "step of axis ", a, " is 0");
    // A step longer than the axis takes at most one element; clamping it
    // keeps the count and stride arithmetic free of overflow.
    p = std::clamp<int64_t>(p, -(d + 1), d + 1);
    if (s < 0)
      s += d;
    if (e < 0)
      e += d;
    int64_t count;
    if (p > 0) {
      s = std::clamp<int64_t>(s, 0, d);
      e = std::clamp<int64_t>(e, 0, d);
      count = e > s ? (e - s - 1) / p + 1 : 0;
    } else {
      s = std::clamp<int64_t>(s, 0, d - 1);
      e = std::clamp<int64_t>(e, -1, d - 1);
      count = s > e ? (s - e - 1) / (-p) + 1 : 0;
    }
    g.dims[a] = count;
    g.first[a] = s;
    g.step[a] = p;
  }
  return g;
}

} // namespace cpu
} // namespace mpc
