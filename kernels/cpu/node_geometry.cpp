// Checked node geometry shared by the CPU kernels and the CUDA runners
// (node_geometry.h).
#include "kernels/cpu/node_geometry.h"

#include "kernels/common/random_math.h"

#include "ir/mpc_ops.h"
#include "kernels/cpu/cpu_util.h"

#include <cmath>

namespace mpc {
namespace cpu {

std::vector<int64_t> transposePerm(const Node &node, size_t rank) {
  std::vector<int64_t> perm = node.attrInts("perm");
  if (!node.hasAttr("perm")) {
    perm.resize(rank);
    for (size_t i = 0; i < rank; ++i)
      perm[i] = int64_t(rank - 1 - i);
  }
  if (perm.size() != rank)
    fail(node, "perm has ", perm.size(), " entries for an input of rank ",
         rank);
  std::vector<bool> seen(rank, false);
  for (int64_t &p : perm) {
    p = normalizeAxis(node, p, int64_t(rank));
    if (seen[size_t(p)])
      fail(node, "axes contain a duplicate");
    seen[size_t(p)] = true;
  }
  return perm;
}

LayerNormShape layerNormShape(const Node &node, const Tensor &x) {
  int64_t rank = int64_t(x.dims.size());
  if (rank == 0)
    fail(node, "X must have rank >= 1");
  LayerNormShape s;
  s.axis = normalizeAxis(node, node.attrInt("axis", -1), rank);
  s.norm.assign(x.dims.begin() + s.axis, x.dims.end());
  for (int64_t d = 0; d < rank; ++d)
    (d < s.axis ? s.outer : s.n) *= x.dims[size_t(d)];
  s.stats = x.dims;
  for (size_t i = size_t(s.axis); i < s.stats.size(); ++i)
    s.stats[i] = 1;
  return s;
}

void requireBroadcastsTo(const Node &node, const Tensor &t,
                         const std::vector<int64_t> &norm, const char *what) {
  bool ok = t.dims.size() <= norm.size();
  for (size_t i = 0; ok && i < t.dims.size(); ++i) {
    int64_t d = t.dims[t.dims.size() - 1 - i];
    ok = d == 1 || d == norm[norm.size() - 1 - i];
  }
  if (!ok)
    fail(node, what, " of shape ", shapeString(t.dims),
         " does not broadcast to the normalised shape ", shapeString(norm));
}

bool geluTanh(const Node &node) {
  // mpc.GeluTanh has no attribute: its name is the form (it needs a function
  // body of its own, and a body cannot branch on a string attribute).
  if (node.domain() == kMpcDomain && node.opType() == "GeluTanh")
    return true;
  std::string a = node.attrString("approximate", "none");
  if (a != "none" && a != "tanh")
    fail(node, "attribute 'approximate' must be \"none\" or \"tanh\", got \"",
         a, "\"");
  return a == "tanh";
}

// The sizes Split cuts `len` into: the split input (opset 13+) or attribute
// (older), else num_outputs pieces of ceil(len / num_outputs) with a
// smaller last one (opset 18), else equal pieces, one per output.
std::vector<int64_t> splitSizes(const Node &node, const Tensor *given,
                                size_t outs, int64_t len) {
  std::vector<int64_t> sizes;
  if (given)
    sizes = readInts(node, *given, "split");
  else if (node.hasAttr("split"))
    sizes = node.attrInts("split");
  if (!sizes.empty() || given) {
    int64_t total = 0;
    for (int64_t v : sizes) {
      if (v < 0)
        fail(node, "split ", shapeString(sizes), " has a negative size");
      total += v;
    }
    if (sizes.size() != outs || total != len)
      fail(node, "split ", shapeString(sizes), " must have one size per ",
           "output (", outs, ") summing to the axis length ", len);
    return sizes;
  }
  if (node.hasAttr("num_outputs")) {
    int64_t num = node.attrInt("num_outputs", 0);
    if (num <= 0 || size_t(num) != outs)
      fail(node, "num_outputs ", num, " must be positive and equal the ",
           "number of outputs (", outs, ")");
    int64_t chunk = (len + num - 1) / num;
    for (int64_t i = 0; i < num; ++i)
      sizes.push_back(std::max<int64_t>(0, std::min(chunk, len - i * chunk)));
    if (sizes.back() == 0 && len > 0)
      fail(node, "cannot split an axis of length ", len, " into ", num,
           " non-empty pieces");
    return sizes;
  }
  if (outs == 0 || len % int64_t(outs) != 0)
    fail(node, "cannot split an axis of length ", len, " into ", outs,
         " equal pieces");
  return std::vector<int64_t>(outs, len / int64_t(outs));
}

ChannelLayout channelLayout(const Node &node, const Tensor &x) {
  if (x.dims.size() < 2)
    fail(node, "X must have rank >= 2 ([N, C, ...]), got shape ",
         shapeString(x.dims));
  ChannelLayout l;
  l.n = x.dims[0];
  l.c = x.dims[1];
  for (size_t d = 2; d < x.dims.size(); ++d)
    l.inner *= x.dims[d];
  return l;
}

GatherElementsShape gatherElementsShape(const Node &node,
                                        const std::vector<int64_t> &data,
                                        const Tensor &idx) {
  if (idx.dtype != DType::I64 && idx.dtype != DType::I32)
    fail(node, "indices must be int64 or int32, got ", dtypeName(idx.dtype));
  int64_t r = int64_t(data.size());
  if (r == 0)
    fail(node, "cannot gather from a scalar");
  if (int64_t(idx.dims.size()) != r)
    fail(node, "indices of shape ", shapeString(idx.dims),
         " must have the rank of data of shape ", shapeString(data));
  GatherElementsShape s;
  s.axis = normalizeAxis(node, node.attrInt("axis", 0), r);
  for (int64_t d = 0; d < r; ++d)
    if (d != s.axis && idx.dims[size_t(d)] > data[size_t(d)])
      fail(node, "indices of shape ", shapeString(idx.dims),
           " exceed data of shape ", shapeString(data), " in dim ", d,
           " (only the axis ", s.axis, " may differ)");
  s.walkStrides = rowMajorStrides(data);
  s.axisStride = s.walkStrides[size_t(s.axis)];
  s.len = data[size_t(s.axis)];
  s.walkStrides[size_t(s.axis)] = 0; // the index supplies this coordinate
  return s;
}

std::vector<int64_t> gatherElementsOffsets(const Node &node,
                                           const GatherElementsShape &s,
                                           const Tensor &idx) {
  const std::vector<int64_t> walkStrides[1] = {s.walkStrides};
  StridedWalker<1> walker(idx.dims, walkStrides);
  int64_t n = idx.numel();
  std::vector<int64_t> offsets(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i, walker.next()) {
    int64_t v = loadInt(idx, i);
    if (v < -s.len || v >= s.len)
      fail(node, "index ", v, " is out of range for axis ", s.axis, " of size ",
           s.len);
    offsets[size_t(i)] =
        walker.offset(0) + (v < 0 ? v + s.len : v) * s.axisStride;
  }
  return offsets;
}

IndexTupleRows indexTupleRows(const Node &node,
                              const std::vector<int64_t> &data,
                              const Tensor &idx, int64_t b) {
  if (idx.dtype != DType::I64)
    fail(node, "indices must be int64, got ", dtypeName(idx.dtype));
  size_t r = data.size(), q = idx.dims.size();
  if (q < 1)
    fail(node, "indices must have rank >= 1");
  if (b < 0 || (b > 0 && size_t(b) >= std::min(r, q)))
    fail(node, "batch_dims ", b, " must be below the ranks of data (", r,
         ") and indices (", q, ")");
  int64_t k = idx.dims.back();
  if (k < 1 || size_t(b + k) > r)
    fail(node, "the last dim of indices (", k, ") plus batch_dims (", b,
         ") must be at most data's rank ", r);
  IndexTupleRows t;
  int64_t batches = 1, perBatchRows = 1;
  for (int64_t d = 0; d < b; ++d) {
    if (data[size_t(d)] != idx.dims[size_t(d)])
      fail(node, "batch dim ", d, " of data (", data[size_t(d)],
           ") and indices (", idx.dims[size_t(d)], ") differ");
    batches *= data[size_t(d)];
  }
  for (size_t d = size_t(b); d < size_t(b + k); ++d)
    perBatchRows *= data[d];
  for (size_t d = size_t(b + k); d < r; ++d)
    t.slice *= data[d];
  t.numRows = batches * perBatchRows;
  t.outDims.assign(idx.dims.begin(), idx.dims.end() - 1);
  t.outDims.insert(t.outDims.end(), data.begin() + b + k, data.end());
  int64_t tuples = idx.numel() / k, perBatch = batches ? tuples / batches : 0;
  t.rows.resize(size_t(tuples));
  const int64_t *ix = idx.data<int64_t>();
  for (int64_t j = 0; j < tuples; ++j) {
    int64_t row = 0;
    for (int64_t d = 0; d < k; ++d) {
      int64_t i = ix[j * k + d], n = data[size_t(b + d)];
      if (i < -n || i >= n)
        fail(node, "index ", i, " is out of range for axis ", b + d,
             " of size ", n);
      row = row * n + (i < 0 ? i + n : i);
    }
    t.rows[size_t(j)] = (j / perBatch) * perBatchRows + row;
  }
  return t;
}

ScatterReduction scatterReduction(const Node &node) {
  std::string r = node.attrString("reduction", "none");
  if (r == "none")
    return ScatterReduction::None;
  if (r == "add")
    return ScatterReduction::Add;
  if (r == "mul")
    return ScatterReduction::Mul;
  if (r == "max")
    return ScatterReduction::Max;
  if (r == "min")
    return ScatterReduction::Min;
  fail(node, "reduction '", r, "' is not one of none, add, mul, max, min");
}

std::vector<int64_t> variadicShape(const KernelContext &ctx) {
  if (ctx.inputs.empty())
    fail(ctx.node, "expects at least one input");
  const Tensor &first = input(ctx, 0, "data_0");
  std::vector<int64_t> dims = first.dims;
  for (size_t i = 0; i < ctx.inputs.size(); ++i) {
    const Tensor &t = input(ctx, i, "data");
    if (t.dtype != first.dtype)
      fail(ctx.node, "input ", i, " is ", dtypeName(t.dtype),
           " but input 0 is ", dtypeName(first.dtype));
    dims = broadcastShapes(ctx.node, dims, t.dims);
  }
  return dims;
}

int64_t extremumGradIndex(const KernelContext &ctx) {
  const Node &node = ctx.node;
  requireInputs(ctx, 3);
  const Tensor &dy = input(ctx, 0, "dY"), &y = input(ctx, 1, "Y");
  if (dy.dims != y.dims)
    fail(node, "dY of shape ", shapeString(dy.dims),
         " does not match Y of shape ", shapeString(y.dims));
  size_t count = ctx.inputs.size() - 2;
  int64_t index = node.attrInt("index", 0);
  if (index < 0 || size_t(index) >= count)
    fail(node, "index ", index, " is out of range for ", count, " inputs");
  for (size_t k = 2; k < ctx.inputs.size(); ++k) {
    const Tensor &xk = input(ctx, k, "X");
    if (xk.dims.size() > dy.dims.size() ||
        broadcastShapes(node, xk.dims, dy.dims) != dy.dims)
      fail(node, "input ", k, " of shape ", shapeString(xk.dims),
           " does not broadcast to dY ", shapeString(dy.dims));
  }
  return index;
}

int64_t triluDiagonal(const Node &node, const Tensor *k) {
  if (!k)
    return 0;
  if (k->dtype != DType::I64 || k->numel() != 1)
    fail(node, "k must be an int64 scalar, got ", dtypeName(k->dtype), " ",
         shapeString(k->dims));
  return k->data<int64_t>()[0];
}

RangeSpec rangeSpec(const Node &node, const Tensor &start, const Tensor &limit,
                    const Tensor &delta) {
  for (const Tensor *t : {&start, &limit, &delta})
    if (t->numel() != 1)
      fail(node, "start, limit and delta must be scalars, got ",
           shapeString(t->dims));
  if (start.dtype != limit.dtype || start.dtype != delta.dtype)
    fail(node, "start, limit and delta must have one dtype");
  RangeSpec r;
  r.dtype = start.dtype;
  r.delta = delta.getAsDouble(0);
  r.start = start.getAsDouble(0);
  if (r.delta == 0)
    fail(node, "delta must not be zero");
  double count = std::ceil((limit.getAsDouble(0) - r.start) / r.delta);
  if (!(count >= 0))
    count = 0;
  if (count > double(int64_t(1) << 40))
    fail(node, "would produce ", count, " elements");
  r.count = int64_t(count);
  r.integer = !isFloating(start.dtype);
  if (r.integer) {
    r.startInt = start.toInt64s()[0];
    r.deltaInt = delta.toInt64s()[0];
  }
  return r;
}

DType randomOutputDType(const Node &node, DType fallback) {
  if (!node.hasAttr("dtype"))
    return fallback;
  int64_t onnx = node.attrInt("dtype", 1);
  std::optional<DType> t = fromOnnxDataType(int(onnx));
  if (!t)
    fail(node, "attribute 'dtype' = ", onnx,
         " is not a data type mpc supports");
  return *t;
}

uint64_t randomNodeKey(const Node &node) {
  return randomOpKey(node.name(), node.hasAttr("seed"),
                     node.attrFloat("seed", 0.0f));
}

} // namespace cpu
} // namespace mpc
