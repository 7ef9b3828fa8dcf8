// Shared helpers of the CPU kernels: dtype dispatch, broadcasting, checks.
//
// Every CPU kernel follows the GPU's numerics: fp16/bf16 are storage types
// only, each element is loaded into fp32, computed on, and rounded to
// nearest-even when stored (ir/half.h); fp64 computes in double
// (the float64 finite-difference gradient checks rely on it). The `Io`
// structs below capture that: `Io::Storage` is what the tensor holds,
// `Io::Compute` is what the arithmetic runs in, and load/store convert.
// Kernels are templates over an Io and are instantiated by the dispatch
// helpers, which turn an unsupported dtype into an mpc::Error naming the node.
#pragma once

#include "ir/half.h"
#include "kernels/cpu/half_convert.h"
#include "kernels/cpu/kernel_table.h"
#include "support/diagnostics.h"

#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace mpc {
namespace cpu {

// --- errors ------------------------------------------------------------------

/// Throws mpc::Error "node '...' (Op): <args...>".
template <typename... Args>
[[noreturn]] void fail(const Node &node, const Args &...args) {
  ErrorBuilder b(node);
  (b << ... << args);
  b.raise();
}

// --- element types -----------------------------------------------------------

/// fp32 storage, fp32 compute.
struct F32Io {
  using Storage = float;
  using Compute = float;
  static constexpr DType dtype = DType::F32;
  static Compute load(const Storage *p, int64_t i) { return p[i]; }
  static void store(Storage *p, int64_t i, Compute v) { p[i] = v; }
};

/// fp16 storage (bit patterns), fp32 compute, round-to-nearest-even store.
struct F16Io {
  using Storage = uint16_t;
  using Compute = float;
  static constexpr DType dtype = DType::F16;
  static Compute load(const Storage *p, int64_t i) { return halfToFloat(p[i]); }
  static void store(Storage *p, int64_t i, Compute v) { p[i] = floatToHalf(v); }
};

/// bf16 storage (bit patterns), fp32 compute, round-to-nearest-even store.
struct BF16Io {
  using Storage = uint16_t;
  using Compute = float;
  static constexpr DType dtype = DType::BF16;
  static Compute load(const Storage *p, int64_t i) { return bf16ToFloat(p[i]); }
  static void store(Storage *p, int64_t i, Compute v) { p[i] = floatToBf16(v); }
};

/// fp64 storage and compute.
struct F64Io {
  using Storage = double;
  using Compute = double;
  static constexpr DType dtype = DType::F64;
  static Compute load(const Storage *p, int64_t i) { return p[i]; }
  static void store(Storage *p, int64_t i, Compute v) { p[i] = v; }
};

/// Integer types compute in their own type (shape arithmetic must be exact).
template <typename T, DType D> struct IntIo {
  using Storage = T;
  using Compute = T;
  static constexpr DType dtype = D;
  static Compute load(const Storage *p, int64_t i) { return p[i]; }
  static void store(Storage *p, int64_t i, Compute v) { p[i] = v; }
};
using I64Io = IntIo<int64_t, DType::I64>;
using I32Io = IntIo<int32_t, DType::I32>;
using I8Io = IntIo<int8_t, DType::I8>;
using U8Io = IntIo<uint8_t, DType::U8>;

/// bool is stored as one byte, 0 or 1.
struct BoolIo {
  using Storage = uint8_t;
  using Compute = bool;
  static constexpr DType dtype = DType::Bool;
  static Compute load(const Storage *p, int64_t i) { return p[i] != 0; }
  static void store(Storage *p, int64_t i, Compute v) { p[i] = v ? 1 : 0; }
};

/// dst[j] = Io::load(p, j) for j < n, a whole run at once (F16C for fp16
/// where the CPU has it, vectorised loops for bf16; kernels/cpu/
/// half_convert.h), bit for bit the same.
template <typename Io>
void loadRun(const typename Io::Storage *p, int64_t n,
             typename Io::Compute *dst) {
  if constexpr (Io::dtype == DType::F16) {
    halfToFloatN(p, dst, n);
  } else if constexpr (Io::dtype == DType::BF16) {
    bf16ToFloatN(p, dst, n);
  } else if constexpr (std::is_same_v<typename Io::Storage,
                                      typename Io::Compute>) {
    if (n > 0)
      std::memcpy(dst, p, size_t(n) * sizeof *dst);
  } else {
    for (int64_t j = 0; j < n; ++j)
      dst[j] = Io::load(p, j);
  }
}

/// Io::store(p, j, src[j]) for j < n, a whole run at once.
template <typename Io>
void storeRun(typename Io::Storage *p, int64_t n,
              const typename Io::Compute *src) {
  if constexpr (Io::dtype == DType::F16) {
    floatToHalfN(src, p, n);
  } else if constexpr (Io::dtype == DType::BF16) {
    floatToBf16N(src, p, n);
  } else if constexpr (std::is_same_v<typename Io::Storage,
                                      typename Io::Compute>) {
    if (n > 0)
      std::memmove(p, src, size_t(n) * sizeof *src);
  } else {
    for (int64_t j = 0; j < n; ++j)
      Io::store(p, j, src[j]);
  }
}

template <typename Io> const typename Io::Storage *ptr(const Tensor &t) {
  return t.data<typename Io::Storage>();
}
template <typename Io> typename Io::Storage *ptr(Tensor &t) {
  return t.data<typename Io::Storage>();
}

/// Calls f(Io{}) for a floating dtype (fp32, fp16, bf16, fp64).
template <typename F> void dispatchFloat(const Node &node, DType t, F &&f) {
  switch (t) {
  case DType::F32:
    return f(F32Io{});
  case DType::F16:
    return f(F16Io{});
  case DType::BF16:
    return f(BF16Io{});
  case DType::F64:
    return f(F64Io{});
  default:
    fail(node, "unsupported element type ", dtypeName(t),
         " (expects fp32, fp16, bf16 or fp64)");
  }
}

/// Calls f(AIo{}, BIo{}) for two floating dtypes (a gradient's and its
/// forward value's, or an input's and a wider output's).
template <typename F>
void dispatchFloat2(const Node &node, DType a, DType b, F &&f) {
  dispatchFloat(node, a, [&](auto ia) {
    dispatchFloat(node, b, [&](auto ib) { f(ia, ib); });
  });
}

/// Calls f(Io{}) for a floating or integer dtype (not bool).
template <typename F> void dispatchNumeric(const Node &node, DType t, F &&f) {
  switch (t) {
  case DType::I64:
    return f(I64Io{});
  case DType::I32:
    return f(I32Io{});
  case DType::I8:
    return f(I8Io{});
  case DType::U8:
    return f(U8Io{});
  default:
    return dispatchFloat(node, t, std::forward<F>(f));
  }
}

/// Calls f(Io{}) for any dtype the IR knows.
template <typename F> void dispatchAll(const Node &node, DType t, F &&f) {
  if (t == DType::Bool)
    return f(BoolIo{});
  return dispatchNumeric(node, t, std::forward<F>(f));
}

/// Element i of a floating tensor of any floating dtype, in fp32 (fp64 is
/// rounded). For kernels whose operands may differ in precision.
float loadFloat(const Tensor &t, int64_t i);
/// Element i of any tensor as double (exact for every dtype but huge int64).
inline double loadDouble(const Tensor &t, int64_t i) {
  return t.getAsDouble(i);
}
/// Element i of an integer tensor (labels, indices, shapes) as int64.
int64_t loadInt(const Tensor &t, int64_t i);

/// Whether a one-element flag tensor (found_inf) is set.
bool flagSet(const Node &node, const Tensor &t, const char *what);

/// A kernel's scratch array of n elements, left uninitialised: for buffers
/// whose every element is written before it is read, where std::vector's
/// zero-fill would be a wasted pass over memory (on a step of tiny tensors,
/// a large share of the work).
template <typename T> class ScratchArray {
  static_assert(std::is_trivially_default_constructible_v<T>,
                "ScratchArray leaves its elements uninitialised");

public:
  ScratchArray() = default;
  explicit ScratchArray(size_t n) { resize(n); }
  /// n elements, uninitialised (the old contents are dropped).
  void resize(size_t n) {
    data_.reset(n ? new T[n] : nullptr);
    size_ = n;
  }
  T *data() { return data_.get(); }
  const T *data() const { return data_.get(); }
  size_t size() const { return size_; }
  T &operator[](size_t i) { return data_[i]; }
  const T &operator[](size_t i) const { return data_[i]; }

private:
  std::unique_ptr<T[]> data_;
  size_t size_ = 0;
};

// --- inputs, outputs, sizes --------------------------------------------------

/// Where a Slice reads: the output dims and, per axis, the first index and
/// the step (negative steps walk backwards).
struct SliceGeometry {
  std::vector<int64_t> dims, first, step;
};
/// Resolves Slice's starts/ends/axes/steps (inputs from `firstParam` on,
/// opset 10+, or the opset-1 attributes) against a tensor of dims `in`:
/// negative indices, clamping, duplicate axes, zero steps (errors).
SliceGeometry sliceGeometry(const KernelContext &ctx,
                            const std::vector<int64_t> &in, size_t firstParam);

/// Input i; throws if it is missing.
const Tensor &input(const KernelContext &ctx, size_t i, const char *what);
/// Input i or nullptr when omitted.
inline const Tensor *optionalInput(const KernelContext &ctx, size_t i) {
  return ctx.hasInput(i) ? ctx.inputs[i] : nullptr;
}
/// Requires the node to have at least n inputs present at indices < n.
void requireInputs(const KernelContext &ctx, size_t n);

/// Allocates output i (throws if the node omits it or the shape is too big).
Tensor &output(const KernelContext &ctx, size_t i, DType t,
               const std::vector<int64_t> &dims);
/// Like output(), for a kernel that writes every element: where the executor
/// bound the output to the arena its bytes are left as they are (not zeroed
/// first), which saves a pass over memory per node.
Tensor &overwrittenOutput(const KernelContext &ctx, size_t i, DType t,
                          const std::vector<int64_t> &dims);
/// Allocates output i when the node has it; nullptr otherwise.
Tensor *optionalOutput(const KernelContext &ctx, size_t i, DType t,
                       const std::vector<int64_t> &dims);
/// Output 0 := x's bytes under new dims (the element count must match):
/// Identity, Reshape, Flatten, Squeeze, Unsqueeze.
void copyWithDims(KernelContext &ctx, const Tensor &x,
                  const std::vector<int64_t> &dims);

/// A float-type attribute of node (an ONNX data type number, as Cast's
/// `to`), `dflt` when absent; one line naming the node when it is no float
/// type.
DType floatTypeAttr(const Node &node, const char *name, DType dflt);

/// out := Cast(x, to) by the Cast kernel itself (a synthetic Cast node named
/// after `owner`), so every op that casts converts bit for bit as Cast does
/// (CastLike, SoftmaxTo's Ylow).
void castWithCastKernel(const Node &owner, const Tensor &x, DType to,
                        Tensor *out, uint64_t seed);

/// Element count of dims; throws (naming the node) on overflow or a
/// negative dim, so that bad shapes never reach an allocation.
int64_t checkedCount(const Node &node, const std::vector<int64_t> &dims);

/// Values of a 1-D (or scalar) integer tensor: shapes, axes, starts...
std::vector<int64_t> readInts(const Node &node, const Tensor &t,
                              const char *what);

/// Maps axis in [-rank, rank) to [0, rank); throws otherwise.
int64_t normalizeAxis(const Node &node, int64_t axis, int64_t rank,
                      const char *what = "axis");

/// "[2,3,4]" for messages.
std::string shapeString(const std::vector<int64_t> &dims);

/// A shape seen as [outer, len, inner] around one axis: element (o, j, i) is
/// at (o * len + j) * inner + i.
struct AxisSplit {
  int64_t outer = 1, len = 1, inner = 1;
};
/// Splits dims around `axis` (already normalised).
AxisSplit splitAt(const std::vector<int64_t> &dims, int64_t axis);

// --- broadcasting ------------------------------------------------------------

/// The numpy broadcast of shapes a and b; throws if they do not broadcast.
std::vector<int64_t> broadcastShapes(const Node &node,
                                     const std::vector<int64_t> &a,
                                     const std::vector<int64_t> &b);

/// Element strides of a tensor of shape `in` viewed as shape `out` under numpy
/// broadcasting (right-aligned; 0 on broadcast dims). `in` must broadcast to
/// `out`.
std::vector<int64_t> broadcastStrides(const std::vector<int64_t> &in,
                                      const std::vector<int64_t> &out);

/// Row-major strides of dims.
std::vector<int64_t> rowMajorStrides(const std::vector<int64_t> &dims);

/// Walks the elements of an output shape in row-major order, keeping the
/// element offset of each of K operands (given their strides over that
/// shape) up to date in O(1) amortised per step.
template <size_t K> class StridedWalker {
public:
  StridedWalker(const std::vector<int64_t> &dims,
                const std::vector<int64_t> (&strides)[K])
      : dims_(dims), index_(dims.size(), 0) {
    for (size_t k = 0; k < K; ++k) {
      strides_[k] = strides[k];
      offset_[k] = 0;
    }
  }
  int64_t offset(size_t k) const { return offset_[k]; }
  void next() {
    for (size_t d = dims_.size(); d-- > 0;) {
      ++index_[d];
      for (size_t k = 0; k < K; ++k)
        offset_[k] += strides_[k][d];
      if (index_[d] < dims_[d])
        return;
      for (size_t k = 0; k < K; ++k)
        offset_[k] -= strides_[k][d] * dims_[d];
      index_[d] = 0;
    }
  }

private:
  std::vector<int64_t> dims_;
  std::vector<int64_t> index_;
  std::vector<int64_t> strides_[K];
  int64_t offset_[K];
};

/// Calls f(i, len, off, step) for each run of output elements i .. i+len-1
/// of the broadcast shape `out`, in row-major order: element j of the run
/// reads operand k (of shape in[k], which must broadcast to `out`) at
/// off[k] + j * step[k], where step[k] is 0 along a broadcast dim. Adjacent
/// dims that every operand walks the same way are merged first, so runs are
/// as long as the shapes allow (the whole tensor when every operand has out's
/// element count or one element) and per-element work stays in tight loops.
template <size_t K, typename F>
void forEachBroadcastRun(const std::vector<int64_t> &out,
                         const std::vector<int64_t> (&in)[K], F &&f) {
  int64_t n = elementCount(out);
  if (n <= 0)
    return;
  int64_t off[K], step[K];
  bool simple = true;
  for (size_t k = 0; k < K; ++k) {
    int64_t nk = elementCount(in[k]);
    simple = simple && (nk == n || nk == 1);
    off[k] = 0;
    step[k] = nk == n ? 1 : 0;
  }
  if (simple) {
    f(int64_t(0), n, static_cast<const int64_t *>(off),
      static_cast<const int64_t *>(step));
    return;
  }
  std::vector<int64_t> strides[K];
  for (size_t k = 0; k < K; ++k)
    strides[k] = broadcastStrides(in[k], out);
  // Merge dim d into the one before when every operand's stride there is
  // stride(d) * size(d); drop size-1 dims.
  std::vector<int64_t> dims, merged[K];
  for (size_t d = 0; d < out.size(); ++d) {
    if (out[d] == 1)
      continue;
    bool join = !dims.empty();
    for (size_t k = 0; k < K && join; ++k)
      join = merged[k].back() == strides[k][d] * out[d];
    if (join) {
      dims.back() *= out[d];
      for (size_t k = 0; k < K; ++k)
        merged[k].back() = strides[k][d];
    } else {
      dims.push_back(out[d]);
      for (size_t k = 0; k < K; ++k)
        merged[k].push_back(strides[k][d]);
    }
  }
  int64_t len = dims.back();
  dims.pop_back();
  for (size_t k = 0; k < K; ++k) {
    step[k] = merged[k].back();
    merged[k].pop_back();
  }
  StridedWalker<K> w(dims, merged);
  for (int64_t i = 0; i < n; i += len, w.next()) {
    for (size_t k = 0; k < K; ++k)
      off[k] = w.offset(k);
    f(i, len, static_cast<const int64_t *>(off),
      static_cast<const int64_t *>(step));
  }
}

/// Calls f(i, offsets) for every element i (row-major) of the broadcast shape
/// `out`, where offsets[k] is the element offset into operand k of shape
/// in[k] (each must broadcast to `out`).
template <size_t K, typename F>
void forEachBroadcast(const std::vector<int64_t> &out,
                      const std::vector<int64_t> (&in)[K], F &&f) {
  forEachBroadcastRun(
      out, in,
      [&](int64_t i, int64_t len, const int64_t *off, const int64_t *step) {
        int64_t o[K];
        for (int64_t j = 0; j < len; ++j) {
          for (size_t k = 0; k < K; ++k)
            o[k] = off[k] + j * step[k];
          f(i + j, static_cast<const int64_t *>(o));
        }
      });
}

/// Copies one element of `size` bytes (1, 2, 4 or 8).
inline void copyElement(uint8_t *dst, int64_t di, const uint8_t *src,
                        int64_t si, size_t size) {
  switch (size) {
  case 1:
    dst[di] = src[si];
    break;
  case 2:
    reinterpret_cast<uint16_t *>(dst)[di] =
        reinterpret_cast<const uint16_t *>(src)[si];
    break;
  case 4:
    reinterpret_cast<uint32_t *>(dst)[di] =
        reinterpret_cast<const uint32_t *>(src)[si];
    break;
  default:
    std::memcpy(dst + di * int64_t(size), src + si * int64_t(size), size);
    break;
  }
}

// --- reductions --------------------------------------------------------------

/// The axes a Reduce* node (or ReduceGrad) reduces over an input of `rank`:
/// the int64 tensor at input `axesInput` when present (ReduceSum-13 and every
/// reduce of opset 18+), else attribute "axes". No axes means every axis,
/// or none at all (an identity) when noop_with_empty_axes=1.
std::vector<bool> reducedAxes(const KernelContext &ctx, size_t axesInput,
                              int64_t rank);

// --- losses ------------------------------------------------------------------

/// The validated labels and weights of a loss node (forward or backward):
/// scores [N, C, d1...] (D = d1 * ...), labels [N, d1...].
struct LossSetup {
  enum Reduction { None, Sum, Mean } reduction = Mean;
  bool hasIgnore = false;
  int64_t ignoreIndex = 0;
  int64_t n = 0, c = 0, d = 0;
  /// Shape of a per-position loss: [N, d1...].
  std::vector<int64_t> perPosition;
  /// Label of each position (n * D + d).
  std::vector<int64_t> labels;
  /// w[label] of each position; 0 where the label is ignore_index.
  std::vector<double> weight;

  bool ignored(size_t pos) const {
    return hasIgnore && labels[pos] == ignoreIndex;
  }
};

/// Reads attributes reduction/ignore_index and checks shapes, label range
/// (an out-of-range label that is not ignore_index is an Error naming it)
/// and weights ([C], optional).
LossSetup lossSetup(const KernelContext &ctx, const Tensor &scores,
                    const Tensor &labels, const Tensor *weights);

// --- kernel families ---------------------------------------------------------

/// One entry of the kernel table.
struct KernelEntry {
  const char *domain;
  const char *opType;
  CpuKernel kernel;
};

// Each op category's file (kernels/cpu/<category>.cpp) lists its kernels;
// kernel_table.cpp builds the table from these (explicit lists rather than
// static registration, which a static library would silently drop).
/// elementwise.cpp: arithmetic, comparisons and logic, unary math, Cast,
/// CastLike, Where, Identity, Trilu, Clip, Max/Min/Sum, and their grads.
std::vector<KernelEntry> elementwiseKernels();
/// activation.cpp: Relu, Tanh, Sigmoid, Gelu, LeakyRelu, mpc.LogSigmoid,
/// Softmax, LogSoftmax and their mpc.*Grad ops.
std::vector<KernelEntry> activationKernels();
/// reduction.cpp: ReduceSum/Mean/Max/Prod, CumSum, mpc.ReduceGrad,
/// mpc.ReduceExtremumGrad, mpc.SumToShape(As).
std::vector<KernelEntry> reductionKernels();
/// matmul.cpp: Gemm and MatMul.
std::vector<KernelEntry> matmulKernels();
/// conv_pool.cpp: Conv, ConvTranspose, MaxPool, AveragePool,
/// GlobalAveragePool and their mpc grads.
std::vector<KernelEntry> convPoolKernels();
/// normalization.cpp: BatchNormalization, LayerNormalization,
/// mpc.RMSNormalization and their mpc grads.
std::vector<KernelEntry> normalizationKernels();
/// shape_ops.cpp: Reshape, Transpose, Concat, Split, Slice, ... and
/// mpc.SliceGrad.
std::vector<KernelEntry> shapeOpsKernels();
/// gather_scatter.cpp: Gather, GatherElements, GatherND, ScatterND,
/// ScatterElements, mpc.GatherGrad, mpc.GatherElementsGrad.
std::vector<KernelEntry> gatherScatterKernels();
/// selection.cpp: TopK, ArgMax and ArgMin (selection by order).
std::vector<KernelEntry> selectionKernels();
/// loss.cpp: SoftmaxCrossEntropyLoss, NegativeLogLikelihoodLoss and their
/// mpc grads.
std::vector<KernelEntry> lossKernels();
/// optimizer.cpp: mpc.SGD, mpc.Adam, mpc.ClipGradNorm, the loss scaler, the
/// step counter and learning rate, and ai.onnx.preview.training's Adagrad,
/// Momentum and Adam.
std::vector<KernelEntry> optimizerKernels();
/// collective.cpp: mpc.AllReduce across the data-parallel world.
std::vector<KernelEntry> collectiveKernels();
/// random.cpp: RandomUniform, RandomNormal, their *Like forms, Bernoulli,
/// Dropout and mpc.DropoutGrad.
std::vector<KernelEntry> randomKernels();
/// fused.cpp: mpc.Gelu, mpc.GeluTanh, mpc.FusedMatMul, mpc.SoftmaxTo,
/// mpc.DivSoftmaxTo, mpc.SoftmaxGradAs, mpc.SoftmaxGradDiv.
std::vector<KernelEntry> fusedKernels();
/// TopK's K input checked (one int64 value in [0, len], len the size of the
/// selected axis) and returned; the CUDA runner reads it the same way.
int64_t topkCount(const Node &node, const Tensor &k, int64_t len);

} // namespace cpu
} // namespace mpc
