// Matrix-product CPU kernels: Gemm and MatMul on OpenBLAS (matMul also runs
// mpc.FusedMatMul, fused.cpp).
//
// bf16 runs on oneDNN's native kernels (kernels/cpu/onednn.h): bf16
// operands, fp32 accumulation, the result (alpha*AB + beta*C in fp32) rounded
// once. fp32 and fp64 go straight to sgemm / dgemm (kernels/cpu/blas.h).
// fp16 -- and bf16 under MPC_CPU_EXACT_HALF=1, the bit-exact reference --
// emulate Tensor Core math: the operands are widened to fp32, multiplied with
// fp32 accumulation (sgemm), and the result is rounded to the output dtype
// once, as cuBLAS does with an fp32 compute type. The two bf16 paths differ
// only in summation order (tests/unit/onednn_test.cpp states the bound).
#include "ir/mpc_ops.h"
#include "kernels/cpu/blas.h"
#include "kernels/cpu/cpu_util.h"
#include "kernels/cpu/onednn.h"
#include "kernels/cpu/shared_kernels.h"

#include <initializer_list>
#include <type_traits>

namespace mpc {
namespace cpu {

namespace {

/// A matrix operand in its compute type: the input's own buffer for
/// fp32/fp64, a widened copy for fp16/bf16.
template <typename Io> class ComputeView {
public:
  using C = typename Io::Compute;
  /// Whether the operand's storage is its compute type (no copy is made).
  static constexpr bool kDirect = std::is_same_v<typename Io::Storage, C>;

  explicit ComputeView(const Tensor &t) {
    if constexpr (kDirect) {
      data_ = ptr<Io>(t);
    } else {
      int64_t n = t.numel();
      copy_.resize(size_t(n)); // every element written by loadRun
      loadRun<Io>(ptr<Io>(t), n, copy_.data());
      data_ = copy_.data();
    }
  }
  /// With `swap`, a widened copy whose matrices (the last two axes, `rows`
  /// x `cols`) are transposed: what MatMul reads after a Transpose node, so
  /// the product is computed exactly as there. Only for copies (!kDirect).
  ComputeView(const Tensor &t, bool swap, int64_t rows, int64_t cols)
      : ComputeView(t) {
    if constexpr (!kDirect) {
      if (!swap || rows * cols == 0)
        return;
      ScratchArray<C> widened = std::move(copy_);
      copy_.resize(widened.size()); // every element written below
      int64_t size = rows * cols;
      constexpr int64_t kTile = 32;
      for (int64_t m = 0; m < int64_t(widened.size()); m += size)
        for (int64_t i0 = 0; i0 < rows; i0 += kTile)
          for (int64_t j0 = 0; j0 < cols; j0 += kTile)
            for (int64_t i = i0; i < std::min(rows, i0 + kTile); ++i)
              for (int64_t j = j0; j < std::min(cols, j0 + kTile); ++j)
                copy_[size_t(m + j * rows + i)] =
                    widened[size_t(m + i * cols + j)];
      data_ = copy_.data();
    }
  }
  const C *data() const { return data_; }

private:
  const C *data_ = nullptr;
  ScratchArray<C> copy_;
};

int blasDim(const Node &node, int64_t v) {
  if (v > int64_t(std::numeric_limits<int>::max()))
    fail(node, "matrix dimension ", v, " is too large for BLAS");
  return int(v);
}

/// Where a product is computed: straight into y when y holds the compute
/// type and shares no bytes with an operand (an output the memory plan put
/// in place), else a scratch buffer that store() rounds into y once. Neither
/// is zeroed: every element is written before it is read (C's broadcast
/// where beta != 0; otherwise a BLAS call with beta 0, which never reads C,
/// or blasGemm()'s own K == 0 loop).
template <typename Io> class ResultBuffer {
public:
  using C = typename Io::Compute;
  ResultBuffer(Tensor &y, std::initializer_list<const Tensor *> operands)
      : y_(y) {
    bool direct = std::is_same_v<typename Io::Storage, C>;
    for (const Tensor *t : operands)
      direct = direct && !(t && overlaps(*t, y));
    if (direct) {
      data_ = reinterpret_cast<C *>(ptr<Io>(y));
    } else {
      scratch_.resize(size_t(y.numel()));
      data_ = scratch_.data();
    }
  }
  C *data() { return data_; }
  void store() {
    if (data_ == scratch_.data())
      storeRun<Io>(ptr<Io>(y_), int64_t(scratch_.size()), scratch_.data());
  }

private:
  static bool overlaps(const Tensor &a, const Tensor &b) {
    const uint8_t *pa = a.bytes.data(), *pb = b.bytes.data();
    return a.byteSize() && b.byteSize() && pa < pb + b.byteSize() &&
           pb < pa + a.byteSize();
  }
  Tensor &y_;
  C *data_ = nullptr;
  ScratchArray<C> scratch_;
};

/// The fp32/fp64 product of the caller's path. Widened fp16/bf16 operands
/// (`widened`) multiply on oneDNN's fp32 kernels where onednn::
/// useForWidened says so (OpenBLAS's kernel choice depends on its core
/// detection: Debian's 0.3.21 runs this CPU's products on generic SSE3
/// kernels), else, and for a problem oneDNN declines, on BLAS.
template <typename T>
void callerGemm(const Node &node, bool widened, bool ta, bool tb, int64_t m,
                int64_t n, int64_t k, T alpha, const T *a, const T *b, T beta,
                T *c) {
  if constexpr (std::is_same_v<T, float>)
    if (widened && onednn::useForWidened(onednn::Family::Product) &&
        onednn::matmul(DType::F32, DType::F32, ta, tb, 1, m, n, k, alpha, beta,
                       a, b, c))
      return;
  blasGemm<T>(ta, tb, blasDim(node, m), blasDim(node, n), blasDim(node, k),
              alpha, a, b, beta, c);
}

// --- oneDNN ------------------------------------------------------------------

bool overlapping(const Tensor &a, const Tensor &b) {
  const uint8_t *pa = a.bytes.data(), *pb = b.bytes.data();
  return a.byteSize() && b.byteSize() && pa < pb + b.byteSize() &&
         pb < pa + a.byteSize();
}

/// The output's bytes where oneDNN may write them: y's own unless the memory
/// plan put y over an operand (oneDNN reads while it writes), else scratch
/// that finish() copies into y.
class NativeOutput {
public:
  NativeOutput(Tensor &y, std::initializer_list<const Tensor *> operands)
      : y_(y) {
    for (const Tensor *t : operands)
      if (t && overlapping(*t, y))
        scratch_.resize(y.byteSize());
  }
  void *data() {
    return (scratch_.size() == 0) ? y_.bytes.data() : scratch_.data();
  }
  void finish() {
    if (!(scratch_.size() == 0))
      std::memcpy(y_.bytes.data(), scratch_.data(), scratch_.size());
  }

private:
  Tensor &y_;
  ScratchArray<uint8_t> scratch_;
};

/// Gemm on oneDNN where onednn::useFor says so; false when it did not run.
/// With C, the product accumulates onto C (broadcast, widened) in an fp32
/// buffer rounded once into Y: alpha * AB + beta * C, as the emulated path.
bool nativeGemm(KernelContext &ctx, const Tensor &a, const Tensor &b,
                const Tensor *c, Tensor &y, bool ta, bool tb, int64_t m,
                int64_t n, int64_t k, double alpha, double beta) {
  DType t = a.dtype;
  if (!onednn::useFor(onednn::Family::Product, t))
    return false;
  if (!c || beta == 0.0) {
    NativeOutput out(y, {&a, &b});
    if (!onednn::matmul(t, t, ta, tb, 1, m, n, k, float(alpha), 0.f,
                        a.bytes.data(), b.bytes.data(), out.data()))
      return false;
    out.finish();
    return true;
  }
  // A row bias (C of n elements along Y's rows, alpha = beta = 1: a Linear
  // layer) goes to oneDNN as the product's bias, added in fp32 before Y's
  // one rounding: no fp32 buffer, no second pass.
  bool rowBias =
      alpha == 1.0 && beta == 1.0 && c->dtype == t && c->numel() == n &&
      (c->dims.size() == 1 || (c->dims.size() == 2 && c->dims[0] == 1));
  if (rowBias) {
    NativeOutput out(y, {&a, &b, c});
    if (onednn::matmul(t, t, ta, tb, 1, m, n, k, 1.f, 0.f, a.bytes.data(),
                       b.bytes.data(), out.data(), c->bytes.data())) {
      out.finish();
      return true;
    }
  }
  ScratchArray<float> acc(size_t(m * n));
  std::vector<float> cv(size_t(c->numel()));
  dispatchFloat(ctx.node, t, [&](auto io) {
    using Io = decltype(io);
    if constexpr (std::is_same_v<typename Io::Compute, float>)
      loadRun<Io>(ptr<Io>(*c), c->numel(), cv.data());
  });
  const std::vector<int64_t> dims = {m, n}, shapes[1] = {c->dims};
  forEachBroadcastRun(
      dims, shapes,
      [&](int64_t i, int64_t len, const int64_t *off, const int64_t *step) {
        for (int64_t j = 0; j < len; ++j)
          acc[size_t(i + j)] = cv[size_t(off[0] + j * step[0])];
      });
  if (!onednn::matmul(t, DType::F32, ta, tb, 1, m, n, k, float(alpha),
                      float(beta), a.bytes.data(), b.bytes.data(), acc.data()))
    return false;
  dispatchFloat(ctx.node, t, [&](auto io) {
    using Io = decltype(io);
    if constexpr (std::is_same_v<typename Io::Compute, float>)
      storeRun<Io>(ptr<Io>(y), m * n, acc.data());
  });
  return true;
}

/// MatMul's batches on oneDNN where onednn::useFor says so: one product
/// when B is shared (A's batches stacked into rows) or neither operand is
/// broadcast, else one per batch. False when it did not run.
bool nativeMatMul(const Tensor &a, const Tensor &b, Tensor &y, bool ta, bool tb,
                  int64_t m, int64_t n, int64_t k,
                  const std::vector<int64_t> &batchA,
                  const std::vector<int64_t> &batchB,
                  const std::vector<int64_t> &batch) {
  DType t = a.dtype;
  if (!onednn::useFor(onednn::Family::Product, t))
    return false;
  int64_t numBatch = elementCount(batch);
  if (numBatch == 0 || m == 0 || n == 0 || k == 0)
    return false;
  NativeOutput out(y, {&a, &b});
  const uint8_t *pa = a.bytes.data(), *pb = b.bytes.data();
  auto *py = static_cast<uint8_t *>(out.data());
  bool ok;
  if (elementCount(batchB) == 1 && !ta) {
    ok = onednn::matmul(t, t, false, tb, 1, numBatch * m, n, k, 1.f, 0.f, pa,
                        pb, py);
  } else if (elementCount(batchA) == numBatch &&
             elementCount(batchB) == numBatch) {
    ok = onednn::matmul(t, t, ta, tb, numBatch, m, n, k, 1.f, 0.f, pa, pb, py);
  } else {
    size_t es = dtypeSize(t);
    std::vector<int64_t> sa = broadcastStrides(batchA, batch);
    std::vector<int64_t> sb = broadcastStrides(batchB, batch);
    const std::vector<int64_t> strides[2] = {sa, sb};
    StridedWalker<2> w(batch, strides);
    ok = true;
    for (int64_t i = 0; ok && i < numBatch; ++i, w.next())
      ok = onednn::matmul(t, t, ta, tb, 1, m, n, k, 1.f, 0.f,
                          pa + size_t(w.offset(0) * m * k) * es,
                          pb + size_t(w.offset(1) * k * n) * es,
                          py + size_t(i * m * n) * es);
  }
  if (ok)
    out.finish();
  return ok;
}

// --- Gemm --------------------------------------------------------------------

void kernelGemm(KernelContext &ctx) {
  const Node &node = ctx.node;
  const Tensor &a = input(ctx, 0, "A"), &b = input(ctx, 1, "B");
  const Tensor *c = optionalInput(ctx, 2);
  if (a.dims.size() != 2 || b.dims.size() != 2)
    fail(node, "A and B must be 2-D, got ", shapeString(a.dims), " and ",
         shapeString(b.dims));
  if (a.dtype != b.dtype || (c && c->dtype != a.dtype))
    fail(node, "operands have different element types");
  bool ta = node.attrInt("transA", 0) != 0, tb = node.attrInt("transB", 0) != 0;
  int64_t m = ta ? a.dims[1] : a.dims[0], k = ta ? a.dims[0] : a.dims[1];
  int64_t kb = tb ? b.dims[1] : b.dims[0], n = tb ? b.dims[0] : b.dims[1];
  if (k != kb)
    fail(node, "inner dimensions differ: A ", shapeString(a.dims),
         (ta ? " (transposed)" : ""), ", B ", shapeString(b.dims),
         (tb ? " (transposed)" : ""));
  std::vector<int64_t> dims = {m, n};
  if (c) {
    if (c->dims.size() > 2)
      fail(node, "C must have rank <= 2, got ", shapeString(c->dims));
    for (size_t i = 0; i < c->dims.size(); ++i) {
      int64_t want = dims[2 - c->dims.size() + i];
      if (c->dims[i] != 1 && c->dims[i] != want)
        fail(node, "C of shape ", shapeString(c->dims),
             " does not broadcast to ", shapeString(dims));
    }
  }
  double alpha = node.attrFloat("alpha", 1.0f);
  double beta = c ? node.attrFloat("beta", 1.0f) : 0.0;
  Tensor &y = overwrittenOutput(ctx, 0, a.dtype, dims);
  if (nativeGemm(ctx, a, b, c, y, ta, tb, m, n, k, alpha, beta))
    return;
  onednn::noteFallback(onednn::Family::Product, a.dtype);
  dispatchFloat(node, a.dtype, [&](auto io) {
    using Io = decltype(io);
    using T = typename Io::Compute;
    ComputeView<Io> va(a), vb(b);
    ResultBuffer<Io> r(y, {&a, &b, c});
    if (c && beta != 0.0) {
      // C widened once (a bias is one row, broadcast to every row of the
      // product), then copied: the same values as widening it per row.
      ComputeView<Io> vc(*c);
      const T *pc = vc.data();
      const std::vector<int64_t> shapes[1] = {c->dims};
      forEachBroadcastRun(
          dims, shapes,
          [&](int64_t i, int64_t len, const int64_t *off, const int64_t *step) {
            T *dst = r.data() + i;
            if (step[0] == 1) {
              std::memcpy(dst, pc + off[0], size_t(len) * sizeof(T));
              return;
            }
            for (int64_t j = 0; j < len; ++j)
              dst[j] = pc[off[0] + j * step[0]];
          });
    }
    callerGemm<T>(node, !ComputeView<Io>::kDirect, ta, tb, m, n, k, T(alpha),
                  va.data(), vb.data(), T(beta), r.data());
    r.store();
  });
}

// --- MatMul, mpc.FusedMatMul -------------------------------------------------

} // namespace

/// MatMul(op(A), op(B)) with numpy batching, where op swaps the last two
/// axes when its flag is set. MatMul is the unflagged case. For fp16/bf16
/// the operands are widened into fp32 copies anyway; a flagged one is
/// transposed while it is copied, so mpc.FusedMatMul calls BLAS exactly as
/// MatMul after a Transpose node does and gives its bits. fp32/fp64 pass
/// the flag to BLAS instead of copying: the same products, summed in the
/// order of BLAS's kernel for that layout, which for some shapes (OpenBLAS's
/// small-matrix kernels) differs from the untransposed kernel's in the last
/// bit.
void matMul(KernelContext &ctx, bool ta, bool tb) {
  const Node &node = ctx.node;
  const Tensor &a = input(ctx, 0, "A"), &b = input(ctx, 1, "B");
  if (a.dtype != b.dtype)
    fail(node, "operands have different element types (", dtypeName(a.dtype),
         " and ", dtypeName(b.dtype), ")");
  if (a.dims.empty() || b.dims.empty())
    fail(node, "operands must have rank >= 1");
  if ((ta && a.dims.size() < 2) || (tb && b.dims.size() < 2))
    fail(node, "a transposed operand must have rank >= 2, got ",
         shapeString(a.dims), " and ", shapeString(b.dims));
  // numpy: a 1-D A is a row vector, a 1-D B a column vector; the added dim is
  // dropped from the result.
  std::vector<int64_t> da = a.dims, db = b.dims;
  bool vecA = da.size() == 1, vecB = db.size() == 1;
  if (vecA)
    da.insert(da.begin(), 1);
  if (vecB)
    db.push_back(1);
  size_t ra = da.size(), rb = db.size();
  int64_t m = da[ta ? ra - 1 : ra - 2], k = da[ta ? ra - 2 : ra - 1];
  int64_t kb = db[tb ? rb - 1 : rb - 2], n = db[tb ? rb - 2 : rb - 1];
  if (k != kb)
    fail(node, "inner dimensions differ: ", shapeString(a.dims),
         (ta ? " (transposed)" : ""), " x ", shapeString(b.dims),
         (tb ? " (transposed)" : ""));
  std::vector<int64_t> batchA(da.begin(), da.end() - 2);
  std::vector<int64_t> batchB(db.begin(), db.end() - 2);
  std::vector<int64_t> batch = broadcastShapes(node, batchA, batchB);
  std::vector<int64_t> dims = batch;
  if (!vecA)
    dims.push_back(m);
  if (!vecB)
    dims.push_back(n);
  Tensor &y = overwrittenOutput(ctx, 0, a.dtype, dims);
  int64_t numBatch = checkedCount(node, batch);
  if (nativeMatMul(a, b, y, ta, tb, m, n, k, batchA, batchB, batch))
    return;
  onednn::noteFallback(onednn::Family::Product, a.dtype);
  dispatchFloat(node, a.dtype, [&](auto io) {
    using Io = decltype(io);
    using T = typename Io::Compute;
    ComputeView<Io> va(a, ta, k, m), vb(b, tb, n, k);
    if constexpr (!ComputeView<Io>::kDirect)
      ta = tb = false; // the copies are in op()'s layout
    ResultBuffer<Io> r(y, {&a, &b});
    if (elementCount(batchB) == 1 && !ta) {
      // B is shared by every batch: one product with the batches stacked
      // into the rows of A (A is contiguous row-major).
      callerGemm<T>(node, !ComputeView<Io>::kDirect, false, tb, numBatch * m, n,
                    k, T(1), va.data(), vb.data(), T(0), r.data());
      r.store();
      return;
    }
    std::vector<int64_t> sa = broadcastStrides(batchA, batch);
    std::vector<int64_t> sb = broadcastStrides(batchB, batch);
    const std::vector<int64_t> strides[2] = {sa, sb};
    StridedWalker<2> w(batch, strides);
    for (int64_t i = 0; i < numBatch; ++i, w.next())
      callerGemm<T>(node, !ComputeView<Io>::kDirect, ta, tb, m, n, k, T(1),
                    va.data() + w.offset(0) * m * k,
                    vb.data() + w.offset(1) * k * n, T(0),
                    r.data() + i * m * n);
    r.store();
  });
}

namespace {

void kernelMatMul(KernelContext &ctx) { matMul(ctx, false, false); }

} // namespace

std::vector<KernelEntry> matmulKernels() {
  return {
      {"", "Gemm", kernelGemm},
      {"", "MatMul", kernelMatMul},
  };
}

} // namespace cpu
} // namespace mpc
