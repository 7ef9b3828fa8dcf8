// Shape and data-movement CPU kernels: Reshape, Flatten, Transpose, Concat,
// Split, Squeeze, Unsqueeze, Slice, Expand, Shape, Constant,
// ConstantOfShape, Range, and mpc.SliceGrad.
//
// These move elements without arithmetic, so they work on raw element bytes
// for every dtype. They also carry the shape arithmetic that the PyTorch
// exporter writes (Shape -> Gather -> Concat -> Reshape), which
// fold-constants evaluates through these same kernels; every size, axis and
// index read from a tensor or attribute is validated first.
#include "ir/mpc_ops.h"
#include "kernels/cpu/cpu_util.h"
#include "kernels/cpu/node_geometry.h"
#include "kernels/cpu/parallel.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#ifdef __SSE2__
#include <immintrin.h>
#endif

namespace mpc {
namespace cpu {

namespace {

/// Axes from input `index` when present (opset 13+), else from attribute
/// "axes" (older opsets). `given` says whether either was present.
std::vector<int64_t> axesFrom(const KernelContext &ctx, size_t index,
                              bool &given) {
  if (const Tensor *t = optionalInput(ctx, index)) {
    given = true;
    return readInts(ctx.node, *t, "axes");
  }
  given = ctx.node.hasAttr("axes");
  return ctx.node.attrInts("axes");
}

/// Normalises axes against rank and rejects duplicates.
std::vector<int64_t> uniqueAxes(const Node &node, std::vector<int64_t> axes,
                                int64_t rank) {
  for (int64_t &a : axes)
    a = normalizeAxis(node, a, rank);
  std::vector<int64_t> sorted = axes;
  std::sort(sorted.begin(), sorted.end());
  if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end())
    fail(node, "axes contain a duplicate");
  return axes;
}

void kernelReshape(KernelContext &ctx) {
  const Node &node = ctx.node;
  const Tensor &x = input(ctx, 0, "data");
  std::vector<int64_t> shape = readInts(node, input(ctx, 1, "shape"), "shape");
  bool allowZero = node.attrInt("allowzero", 0) != 0;
  int64_t inferred = -1, known = 1;
  std::vector<int64_t> dims(shape.size());
  for (size_t i = 0; i < shape.size(); ++i) {
    int64_t s = shape[i];
    if (s == 0 && !allowZero) {
      if (i >= x.dims.size())
        fail(node, "shape ", shapeString(shape), " copies dim ", i,
             " but the input ", shapeString(x.dims), " has rank ",
             x.dims.size());
      s = x.dims[i];
    } else if (s == -1) {
      if (inferred >= 0)
        fail(node, "shape ", shapeString(shape), " has more than one -1");
      inferred = int64_t(i);
      continue;
    } else if (s < -1) {
      fail(node, "shape ", shapeString(shape), " has a negative dim");
    }
    dims[i] = s;
    known = elementCount({known, s});
    if (known < 0)
      fail(node, "shape ", shapeString(shape), " is too large");
  }
  if (inferred >= 0) {
    if (allowZero && std::count(shape.begin(), shape.end(), 0))
      fail(node, "shape ", shapeString(shape),
           " has both 0 and -1 with allowzero=1");
    if (known == 0 || x.numel() % known != 0)
      fail(node, "cannot reshape ", shapeString(x.dims), " to ",
           shapeString(shape));
    dims[size_t(inferred)] = x.numel() / known;
  }
  copyWithDims(ctx, x, dims);
}

void kernelFlatten(KernelContext &ctx) {
  const Tensor &x = input(ctx, 0, "input");
  int64_t r = int64_t(x.dims.size());
  int64_t axis = ctx.node.attrInt("axis", 1);
  if (axis < -r || axis > r)
    fail(ctx.node, "axis ", axis, " is out of range for rank ", r);
  if (axis < 0)
    axis += r;
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < r; ++i)
    (i < axis ? outer : inner) *= x.dims[size_t(i)];
  copyWithDims(ctx, x, {outer, inner});
}

/// Elements per thread at least in Transpose's parallel copies.
constexpr int64_t kTransposeGrain = 32768;

/// out[p * cols + q] = in[q * step + p] for p < rows, q < cols, in tiles
/// that keep the rows read in L1 (4x4 SSE shuffles for 4-byte elements:
/// they move bits, so NaN payloads survive).
template <typename T>
void transpose2d(const T *in, int64_t step, T *out, int64_t rows,
                 int64_t cols) {
  constexpr int64_t kTile = 32;
  for (int64_t q0 = 0; q0 < cols; q0 += kTile) {
    int64_t q1 = std::min(cols, q0 + kTile);
    int64_t p = 0;
#ifdef __SSE2__
    if constexpr (sizeof(T) == 4) {
      for (; p + 4 <= rows; p += 4) {
        int64_t q = q0;
        for (; q + 4 <= q1; q += 4) {
          const float *src = reinterpret_cast<const float *>(in + q * step + p);
          __m128 r0 = _mm_loadu_ps(src), r1 = _mm_loadu_ps(src + step),
                 r2 = _mm_loadu_ps(src + 2 * step),
                 r3 = _mm_loadu_ps(src + 3 * step);
          _MM_TRANSPOSE4_PS(r0, r1, r2, r3);
          float *dst = reinterpret_cast<float *>(out + p * cols + q);
          _mm_storeu_ps(dst, r0);
          _mm_storeu_ps(dst + cols, r1);
          _mm_storeu_ps(dst + 2 * cols, r2);
          _mm_storeu_ps(dst + 3 * cols, r3);
        }
        for (; q < q1; ++q)
          for (int64_t k = 0; k < 4; ++k)
            out[(p + k) * cols + q] = in[q * step + p + k];
      }
    }
#endif
    for (; p < rows; ++p)
      for (int64_t q = q0; q < q1; ++q)
        out[p * cols + q] = in[q * step + p];
  }
}

/// y[i] = x[offset of output element i], where output dims `dims` walk x
/// with element strides `strides` (T: an unsigned type of the element size).
/// Output dims that stay adjacent in x are merged, so the inner loop copies
/// a whole run (contiguous when the innermost axis stays innermost).
template <typename T>
void transposeCopy(const Tensor &x, Tensor &y, const std::vector<int64_t> &dims,
                   const std::vector<int64_t> &strides) {
  int64_t n = y.numel();
  if (n <= 0)
    return;
  std::vector<int64_t> md, ms;
  for (size_t d = 0; d < dims.size(); ++d) {
    if (dims[d] == 1)
      continue;
    if (!md.empty() && ms.back() == strides[d] * dims[d]) {
      md.back() *= dims[d];
      ms.back() = strides[d];
    } else {
      md.push_back(dims[d]);
      ms.push_back(strides[d]);
    }
  }
  if (md.empty()) { // one element
    md.push_back(1);
    ms.push_back(1);
  }
  int64_t len = md.back(), step = ms.back();
  md.pop_back();
  ms.pop_back();
  const T *px = x.data<T>();
  T *py = y.data<T>();
  if (step != 1 && !md.empty() && ms.back() == 1) {
    // A batch of 2-D transposes: out[p][q] = in[q][p] for p < rows, q <
    // len, in[q][p] at q * step + p.
    int64_t rows = md.back();
    md.pop_back();
    ms.pop_back();
    const std::vector<int64_t> outer[1] = {ms};
    // Matrices in parallel, each thread's walker stepped to its first.
    int64_t size = rows * len;
    parallelFor(n / size, std::max<int64_t>(1, kTransposeGrain / size),
                [&](int64_t m0, int64_t m1) {
                  StridedWalker<1> w(md, outer);
                  for (int64_t m = 0; m < m0; ++m)
                    w.next();
                  for (int64_t m = m0; m < m1; ++m, w.next())
                    transpose2d(px + w.offset(0), step, py + m * size, rows,
                                len);
                });
    return;
  }
  const std::vector<int64_t> walk[1] = {ms};
  parallelFor(n / len, std::max<int64_t>(1, kTransposeGrain / len),
              [&](int64_t r0, int64_t r1) {
                StridedWalker<1> w(md, walk);
                for (int64_t r = 0; r < r0; ++r)
                  w.next();
                for (int64_t r = r0; r < r1; ++r, w.next()) {
                  const T *src = px + w.offset(0);
                  T *dst = py + r * len;
                  if (step == 1) {
                    std::memcpy(dst, src, size_t(len) * sizeof(T));
                  } else {
                    for (int64_t j = 0; j < len; ++j)
                      dst[j] = src[j * step];
                  }
                }
              });
}

void kernelTranspose(KernelContext &ctx) {
  const Node &node = ctx.node;
  const Tensor &x = input(ctx, 0, "data");
  size_t r = x.dims.size();
  std::vector<int64_t> perm = transposePerm(node, r);
  std::vector<int64_t> inStrides = rowMajorStrides(x.dims);
  std::vector<int64_t> dims(r), strides(r);
  for (size_t i = 0; i < r; ++i) {
    dims[i] = x.dims[size_t(perm[i])];
    strides[i] = inStrides[size_t(perm[i])];
  }
  Tensor &y = overwrittenOutput(ctx, 0, x.dtype, dims);
  switch (dtypeSize(x.dtype)) {
  case 1:
    return transposeCopy<uint8_t>(x, y, dims, strides);
  case 2:
    return transposeCopy<uint16_t>(x, y, dims, strides);
  case 4:
    return transposeCopy<uint32_t>(x, y, dims, strides);
  default:
    return transposeCopy<uint64_t>(x, y, dims, strides);
  }
}

void kernelShape(KernelContext &ctx) {
  const Tensor &x = input(ctx, 0, "data");
  int64_t r = int64_t(x.dims.size());
  auto clampIndex = [&](int64_t v) {
    if (v < 0)
      v += r;
    return std::min(std::max<int64_t>(v, 0), r);
  };
  int64_t start = clampIndex(ctx.node.attrInt("start", 0));
  int64_t end = clampIndex(ctx.node.attrInt("end", r));
  int64_t len = std::max<int64_t>(end - start, 0);
  Tensor &y = output(ctx, 0, DType::I64, {len});
  for (int64_t i = 0; i < len; ++i)
    y.data<int64_t>()[i] = x.dims[size_t(start + i)];
}

void kernelUnsqueeze(KernelContext &ctx) {
  const Tensor &x = input(ctx, 0, "data");
  bool given = false;
  std::vector<int64_t> axes = axesFrom(ctx, 1, given);
  if (!given || axes.empty())
    fail(ctx.node, "requires axes");
  int64_t outRank = int64_t(x.dims.size() + axes.size());
  axes = uniqueAxes(ctx.node, axes, outRank);
  std::vector<bool> isNew(size_t(outRank), false);
  for (int64_t a : axes)
    isNew[size_t(a)] = true;
  std::vector<int64_t> dims;
  size_t next = 0;
  for (int64_t i = 0; i < outRank; ++i)
    dims.push_back(isNew[size_t(i)] ? 1 : x.dims[next++]);
  copyWithDims(ctx, x, dims);
}

void kernelSqueeze(KernelContext &ctx) {
  const Tensor &x = input(ctx, 0, "data");
  int64_t r = int64_t(x.dims.size());
  bool given = false;
  std::vector<int64_t> axes = axesFrom(ctx, 1, given);
  std::vector<bool> drop(size_t(r), false);
  if (!given || axes.empty()) {
    for (int64_t i = 0; i < r; ++i)
      drop[size_t(i)] = x.dims[size_t(i)] == 1;
  } else {
    for (int64_t a : uniqueAxes(ctx.node, axes, r)) {
      if (x.dims[size_t(a)] != 1)
        fail(ctx.node, "cannot squeeze axis ", a, " of size ",
             x.dims[size_t(a)], " (input ", shapeString(x.dims), ")");
      drop[size_t(a)] = true;
    }
  }
  std::vector<int64_t> dims;
  for (int64_t i = 0; i < r; ++i)
    if (!drop[size_t(i)])
      dims.push_back(x.dims[size_t(i)]);
  copyWithDims(ctx, x, dims);
}

void kernelConcat(KernelContext &ctx) {
  const Node &node = ctx.node;
  if (ctx.inputs.empty())
    fail(node, "expects at least one input");
  if (!node.hasAttr("axis"))
    fail(node, "requires attribute 'axis'");
  const Tensor &first = input(ctx, 0, "inputs");
  int64_t r = int64_t(first.dims.size());
  if (r == 0)
    fail(node, "cannot concatenate scalars");
  int64_t axis = normalizeAxis(node, node.attrInt("axis", 0), r);
  std::vector<int64_t> dims = first.dims;
  dims[size_t(axis)] = 0;
  for (size_t i = 0; i < ctx.inputs.size(); ++i) {
    const Tensor &t = input(ctx, i, "inputs");
    if (t.dtype != first.dtype)
      fail(node, "input ", i, " is ", dtypeName(t.dtype), ", input 0 is ",
           dtypeName(first.dtype));
    bool ok = int64_t(t.dims.size()) == r;
    for (int64_t d = 0; ok && d < r; ++d)
      ok = d == axis || t.dims[size_t(d)] == first.dims[size_t(d)];
    if (!ok)
      fail(node, "input ", i, " of shape ", shapeString(t.dims),
           " does not match input 0 of shape ", shapeString(first.dims),
           " outside axis ", axis);
    dims[size_t(axis)] += t.dims[size_t(axis)];
  }
  Tensor &y = output(ctx, 0, first.dtype, dims);
  size_t size = dtypeSize(first.dtype);
  int64_t outer = 1;
  for (int64_t d = 0; d < axis; ++d)
    outer *= dims[size_t(d)];
  size_t rowBytes = size_t(y.numel() / std::max<int64_t>(outer, 1)) * size;
  size_t offset = 0;
  for (size_t i = 0; i < ctx.inputs.size(); ++i) {
    const Tensor &t = ctx.in(i);
    size_t chunk = size_t(t.numel() / std::max<int64_t>(outer, 1)) * size;
    for (int64_t o = 0; o < outer && chunk; ++o)
      std::memcpy(y.bytes.data() + size_t(o) * rowBytes + offset,
                  t.bytes.data() + size_t(o) * chunk, chunk);
    offset += chunk;
  }
}

void kernelSlice(KernelContext &ctx) {
  const Tensor &x = input(ctx, 0, "data");
  int64_t r = int64_t(x.dims.size());
  SliceGeometry g = sliceGeometry(ctx, x.dims, 1);
  const std::vector<int64_t> &dims = g.dims, &first = g.first, &step = g.step;
  Tensor &y = output(ctx, 0, x.dtype, dims);
  int64_t n = y.numel();
  if (n == 0)
    return;
  std::vector<int64_t> inStrides = rowMajorStrides(x.dims);
  std::vector<int64_t> strides(x.dims.size());
  int64_t base = 0;
  for (size_t a = 0; a < size_t(r); ++a) {
    strides[a] = inStrides[a] * step[a];
    base += first[a] * inStrides[a];
  }
  size_t size = dtypeSize(x.dtype);
  const std::vector<int64_t> walk[1] = {strides};
  StridedWalker<1> w(dims, walk);
  for (int64_t i = 0; i < n; ++i, w.next())
    copyElement(y.bytes.data(), i, x.bytes.data(), base + w.offset(0), size);
}

void kernelExpand(KernelContext &ctx) {
  const Tensor &x = input(ctx, 0, "input");
  std::vector<int64_t> shape =
      readInts(ctx.node, input(ctx, 1, "shape"), "shape");
  std::vector<int64_t> dims = broadcastShapes(ctx.node, x.dims, shape);
  Tensor &y = output(ctx, 0, x.dtype, dims);
  size_t size = dtypeSize(x.dtype);
  const std::vector<int64_t> shapes[1] = {x.dims};
  forEachBroadcast(dims, shapes, [&](int64_t i, const int64_t *o) {
    copyElement(y.bytes.data(), i, x.bytes.data(), o[0], size);
  });
}

/// Fills output 0 (of value's dtype and the given dims) with value's element.
void fillWith(KernelContext &ctx, const Tensor &value,
              const std::vector<int64_t> &dims) {
  if (value.numel() != 1)
    fail(ctx.node, "value must hold exactly one element, got shape ",
         shapeString(value.dims));
  Tensor &y = output(ctx, 0, value.dtype, dims);
  size_t size = dtypeSize(value.dtype);
  int64_t n = y.numel();
  for (int64_t i = 0; i < n; ++i)
    copyElement(y.bytes.data(), i, value.bytes.data(), 0, size);
}

void kernelConstantOfShape(KernelContext &ctx) {
  std::vector<int64_t> dims =
      readInts(ctx.node, input(ctx, 0, "input"), "shape");
  for (int64_t d : dims)
    if (d < 0)
      fail(ctx.node, "shape ", shapeString(dims), " has a negative dim");
  const Attribute *value = ctx.node.attr("value");
  if (value && (value->kind != Attribute::Kind::Tensor || !value->t))
    fail(ctx.node, "attribute 'value' must be a tensor");
  fillWith(ctx, value ? *value->t : Tensor::scalar(DType::F32, 0), dims);
}

/// Range(start, limit, delta): the sequence of rangeSpec (node_geometry.h,
/// which the CUDA runner reads too).
void kernelRange(KernelContext &ctx) {
  RangeSpec r = rangeSpec(ctx.node, input(ctx, 0, "start"),
                          input(ctx, 1, "limit"), input(ctx, 2, "delta"));
  Tensor &y = output(ctx, 0, r.dtype, {r.count});
  for (int64_t i = 0; i < r.count; ++i) {
    if (r.dtype == DType::I64)
      y.data<int64_t>()[i] = r.startInt + i * r.deltaInt;
    else
      y.setFromDouble(i, r.integer ? double(r.startInt + i * r.deltaInt)
                                   : r.start + double(i) * r.delta);
  }
}

void kernelConstant(KernelContext &ctx) {
  const Node &node = ctx.node;
  int kinds = 0;
  for (const char *name :
       {"value", "value_float", "value_floats", "value_int", "value_ints",
        "value_string", "value_strings", "sparse_value"})
    kinds += node.hasAttr(name);
  if (kinds != 1)
    fail(node, "must have exactly one value attribute, has ", kinds);
  if (const Attribute *a = node.attr("value")) {
    if (a->kind != Attribute::Kind::Tensor || !a->t)
      fail(node, "attribute 'value' must be a tensor");
    checkedCount(node, a->t->dims);
    output(ctx, 0, a->t->dtype, a->t->dims).bytes = a->t->bytes;
  } else if (const Attribute *a = node.attr("value_float")) {
    output(ctx, 0, DType::F32, {}).data<float>()[0] = a->f;
  } else if (const Attribute *a = node.attr("value_floats")) {
    Tensor &y = output(ctx, 0, DType::F32, {int64_t(a->floats.size())});
    std::copy(a->floats.begin(), a->floats.end(), y.data<float>());
  } else if (const Attribute *a = node.attr("value_int")) {
    output(ctx, 0, DType::I64, {}).data<int64_t>()[0] = a->i;
  } else if (const Attribute *a = node.attr("value_ints")) {
    Tensor &y = output(ctx, 0, DType::I64, {int64_t(a->ints.size())});
    std::copy(a->ints.begin(), a->ints.end(), y.data<int64_t>());
  } else {
    fail(node, "string and sparse constants are not supported");
  }
}

// --- Split -------------------------------------------------------------------

void kernelSplit(KernelContext &ctx) {
  const Tensor &x = input(ctx, 0, "input");
  int64_t rank = int64_t(x.dims.size());
  if (rank == 0)
    fail(ctx.node, "cannot split a scalar");
  int64_t axis = normalizeAxis(ctx.node, ctx.node.attrInt("axis", 0), rank);
  AxisSplit s = splitAt(x.dims, axis);
  std::vector<int64_t> sizes =
      splitSizes(ctx.node, optionalInput(ctx, 1), ctx.outputs.size(), s.len);
  size_t esize = dtypeSize(x.dtype);
  int64_t offset = 0;
  for (size_t k = 0; k < sizes.size(); ++k) {
    std::vector<int64_t> dims = x.dims;
    dims[size_t(axis)] = sizes[k];
    if (Tensor *y = optionalOutput(ctx, k, x.dtype, dims)) {
      size_t chunk = size_t(sizes[k] * s.inner) * esize;
      for (int64_t o = 0; o < s.outer && chunk; ++o)
        std::memcpy(y->bytes.data() + size_t(o) * chunk,
                    x.bytes.data() +
                        size_t((o * s.len + offset) * s.inner) * esize,
                    chunk);
    }
    offset += sizes[k];
  }
}

/// Where Slice(data, ...) reads: per axis the first index and the step, and
/// the output's dims. Same clamping as the Slice kernel (ONNX's rules).
void kernelSliceGrad(KernelContext &ctx) {
  const Tensor &dy = input(ctx, 0, "dY"), &data = input(ctx, 1, "data");
  SliceGeometry g = sliceGeometry(ctx, data.dims, 2);
  if (dy.dims != g.dims)
    fail(ctx.node, "dY of shape ", shapeString(dy.dims), " is not the shape ",
         shapeString(g.dims), " the slice of data ", shapeString(data.dims),
         " has");
  Tensor &dx = output(ctx, 0, dy.dtype, data.dims); // zero-filled
  int64_t n = dy.numel();
  if (n == 0)
    return;
  std::vector<int64_t> inStrides = rowMajorStrides(data.dims);
  std::vector<int64_t> strides(data.dims.size());
  int64_t base = 0;
  for (size_t a = 0; a < data.dims.size(); ++a) {
    strides[a] = inStrides[a] * g.step[a];
    base += g.first[a] * inStrides[a];
  }
  // Slice reads each position at most once: a plain copy, no accumulation.
  size_t size = dtypeSize(dy.dtype);
  const std::vector<int64_t> walk[1] = {strides};
  StridedWalker<1> w(dy.dims, walk);
  for (int64_t i = 0; i < n; ++i, w.next())
    copyElement(dx.bytes.data(), base + w.offset(0), dy.bytes.data(), i, size);
}

} // namespace

std::vector<KernelEntry> shapeOpsKernels() {
  return {
      {"", "Reshape", kernelReshape},
      {"", "Flatten", kernelFlatten},
      {"", "Transpose", kernelTranspose},
      {"", "Shape", kernelShape},
      {"", "Unsqueeze", kernelUnsqueeze},
      {"", "Squeeze", kernelSqueeze},
      {"", "Concat", kernelConcat},
      {"", "Slice", kernelSlice},
      {"", "Expand", kernelExpand},
      {"", "ConstantOfShape", kernelConstantOfShape},
      {"", "Constant", kernelConstant},
      {"", "Range", kernelRange},
      {"", "Split", kernelSplit},
      {kMpcDomain, "SliceGrad", kernelSliceGrad},
  };
}

} // namespace cpu
} // namespace mpc
