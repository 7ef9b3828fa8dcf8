// oneDNN matrix products and convolutions (kernels/cpu/onednn.h).
#include "kernels/cpu/onednn.h"

#include "kernels/cpu/conv_as_product.h"
#include "kernels/cpu/parallel.h"

#include <oneapi/dnnl/dnnl.hpp>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <sstream>
#include <unordered_map>
#include <vector>

namespace mpc {
namespace cpu {
namespace onednn {
namespace {

using dnnl::memory;
using Dims = memory::dims;

bool envFlag(const char *name, bool unset) {
  const char *v = std::getenv(name);
  if (!v || !*v)
    return unset;
  return !(v[0] == '0' && v[1] == '\0');
}

dnnl::engine &engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

/// Every primitive's attributes start here: its scratchpad is the caller's
/// (run()'s workspace). The library's own scratchpad lives
/// with the thread that made the primitive, and a cached primitive outlives
/// that thread (data-parallel ranks run as threads that end): run from
/// another thread, it wrote freed memory.
dnnl::primitive_attr userScratchpad() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

/// Multiply-adds under which a product or convolution runs on one thread:
/// some 8 microseconds of AMX work, about what starting a parallel region
/// costs on a quiet machine. On a loaded one (more runnable threads than
/// cores) every region waits for its slowest thread to be scheduled again:
/// the test transformer's step took 110 ms on 2 threads against 0.4 ms on
/// one, all of it in its small products.
constexpr int64_t kParallelVolume = int64_t(1) << 21;

/// The threads a problem of `volume` multiply-adds runs on: the pool's
/// (kernels/cpu/parallel.h: --threads), as OpenBLAS and the kernels' own
/// loops, or one for a small problem.
int threadsFor(int64_t volume) {
  return volume < kParallelVolume ? 1 : threadCount();
}

memory::data_type dnnlType(DType t) {
  switch (t) {
  case DType::F32:
    return memory::data_type::f32;
  case DType::BF16:
    return memory::data_type::bf16;
  case DType::F16:
    return memory::data_type::f16;
  default:
    return memory::data_type::undef;
  }
}

const char *typeName(DType t) {
  return t == DType::BF16 ? "bf16" : t == DType::F16 ? "fp16" : "fp32";
}

/// A reference implementation is scalar C++: slower than widening into
/// sgemm. Such a problem stays on the caller's path.
bool isReference(const char *impl) {
  return !impl || std::strncmp(impl, "ref", 3) == 0;
}

// --- which families ran (kernelReport) ---------------------------------------

/// Bits: family (2) x dtype (3) x {oneDNN, own path}.
std::atomic<unsigned> used{0};

unsigned bit(Family f, DType t, bool native) {
  unsigned d = t == DType::BF16 ? 1 : t == DType::F16 ? 2 : 0;
  return 1u << ((f == Family::Conv ? 6 : 0) + (native ? 0 : 3) + d);
}

void note(Family f, DType t, bool native) {
  if (t == DType::F32 || t == DType::BF16 || t == DType::F16)
    used.fetch_or(bit(f, t, native), std::memory_order_relaxed);
}

// --- the primitive cache -----------------------------------------------------

/// One problem's primitive, with the reorders between the caller's plain
/// layouts and the ones the primitive chose (absent where they agree).
struct Entry {
  dnnl::primitive prim;
  /// Per argument (DNNL_ARG_*): the caller's layout and the primitive's.
  struct Arg {
    int id;
    memory::desc user, internal;
    bool input;
  };
  std::vector<Arg> args;
  memory::desc scratchpad; ///< the primitive's (userScratchpad)
  int threads = 1;         ///< its OpenMP threads, made and run with them
  bool usable = false;
};

std::mutex cacheMutex;
std::unordered_map<std::string, std::shared_ptr<Entry>> &cache() {
  static std::unordered_map<std::string, std::shared_ptr<Entry>> c;
  return c;
}

/// The cached entry for `key`, made by `make` the first time (a failed
/// creation is cached too, as unusable).
template <typename Make>
std::shared_ptr<Entry> cached(const std::string &key, int threads,
                              Make &&make) {
  // Before any primitive is made: a primitive sizes its scratchpad for the
  // thread count of the thread that makes it, and must run with no more.
  // A primitive made for fewer threads would overrun its scratchpad run on
  // more (setThreadCount between steps): the count is part of the key.
  useThreads(threads);
  std::lock_guard<std::mutex> lock(cacheMutex);
  auto &slot = cache()[std::to_string(threads) + "t" + key];
  if (!slot) {
    slot = std::make_shared<Entry>();
    slot->threads = threads;
    try {
      make(*slot);
    } catch (const dnnl::error &) {
      slot->usable = false;
    }
  }
  return slot;
}

/// The reorder buffers and scratchpad of the executing primitive, carved
/// out of one block that only grows and is reused by every execution (they
/// run one at a time, under run()'s lock). A buffer made per execution is
/// fresh pages the kernel maps and zeroes each time, on one thread: in
/// ResNet-18's step that was a tenth of the time, and the part of the
/// convolutions that did not get faster on more threads.
class Workspace {
public:
  /// Offsets into the block are multiples of this (oneDNN's alignment).
  static constexpr size_t kAlign = 64;
  static size_t rounded(size_t bytes) {
    return (bytes + kAlign - 1) / kAlign * kAlign;
  }
  /// A block of at least `bytes`, its contents undefined.
  uint8_t *reserve(size_t bytes) {
    if (bytes > size_) {
      block_.reset(static_cast<uint8_t *>(std::aligned_alloc(kAlign, bytes)));
      if (!block_)
        throw std::bad_alloc();
      size_ = bytes;
    }
    return block_.get();
  }

private:
  struct Free {
    void operator()(uint8_t *p) const { std::free(p); }
  };
  std::unique_ptr<uint8_t, Free> block_;
  size_t size_ = 0;
};

/// One oneDNN execution at a time: a primitive's library-managed scratchpad
/// is shared, so two threads running kernels at once (data-parallel ranks as
/// threads, a trainer beside an evaluation) would write it together. A
/// kernel's product already uses every core through oneDNN's own threads.
std::mutex &executing() {
  static std::mutex m;
  return m;
}

/// Runs an entry on the caller's buffers (ptrs by DNNL_ARG_* in
/// entry.args order), reordering into and out of the primitive's layouts.
bool run(const Entry &e, const std::vector<void *> &ptrs) {
  if (!e.usable)
    return false;
  useThreads(e.threads);
  static Workspace workspace;
  std::lock_guard<std::mutex> lock(executing());
  size_t bytes = Workspace::rounded(e.scratchpad.get_size());
  for (const Entry::Arg &a : e.args)
    if (a.user != a.internal)
      bytes += Workspace::rounded(a.internal.get_size());
  uint8_t *block = workspace.reserve(bytes);
  dnnl::stream s(engine());
  std::unordered_map<int, memory> args;
  std::vector<std::pair<memory, memory>> outputs; // internal -> user
  for (size_t i = 0; i < e.args.size(); ++i) {
    const Entry::Arg &a = e.args[i];
    memory user(a.user, engine(), ptrs[i]);
    if (a.user == a.internal) {
      args.emplace(a.id, user);
      continue;
    }
    memory internal(a.internal, engine(), block);
    block += Workspace::rounded(a.internal.get_size());
    if (a.input)
      dnnl::reorder(user, internal).execute(s, user, internal);
    else
      outputs.emplace_back(internal, user);
    args.emplace(a.id, internal);
  }
  if (e.scratchpad.get_size() > 0)
    args.emplace(DNNL_ARG_SCRATCHPAD, memory(e.scratchpad, engine(), block));
  e.prim.execute(s, args);
  for (auto &[internal, user] : outputs)
    dnnl::reorder(internal, user).execute(s, internal, user);
  s.wait();
  return true;
}

std::string dimsKey(const std::vector<int64_t> &v) {
  std::string s;
  for (int64_t x : v)
    s += std::to_string(x) + ",";
  return s;
}

// --- convolutions ------------------------------------------------------------

memory::format_tag plainTag(size_t spatial) {
  return spatial == 1   ? memory::format_tag::ncw
         : spatial == 2 ? memory::format_tag::nchw
                        : memory::format_tag::ncdhw;
}

memory::format_tag plainWeightTag(size_t spatial, bool grouped) {
  if (grouped)
    return spatial == 1   ? memory::format_tag::goiw
           : spatial == 2 ? memory::format_tag::goihw
                          : memory::format_tag::goidhw;
  return spatial == 1   ? memory::format_tag::oiw
         : spatial == 2 ? memory::format_tag::oihw
                        : memory::format_tag::oidhw;
}

/// The plain descriptors of a problem: src, weights, dst, bias.
struct ConvDescs {
  memory::desc src, wei, dst, bias;
  Dims strides, dilations, padL, padR;
};

bool convDescs(const ConvProblem &p, ConvDescs &d) {
  size_t r = p.kernel.size();
  if (r < 1 || r > 3 || p.in.size() != r || p.out.size() != r || p.groups < 1 ||
      p.c % p.groups || p.m % p.groups)
    return false;
  memory::data_type dt = dnnlType(p.dtype);
  Dims src = {p.n, p.c}, dst = {p.n, p.m}, wei;
  bool grouped = p.groups > 1;
  if (grouped)
    wei = {p.groups, p.m / p.groups, p.c / p.groups};
  else
    wei = {p.m, p.c};
  for (size_t i = 0; i < r; ++i) {
    src.push_back(p.in[i]);
    dst.push_back(p.out[i]);
    wei.push_back(p.kernel[i]);
    d.strides.push_back(p.strides[i]);
    d.dilations.push_back(p.dilations[i] - 1);
    d.padL.push_back(p.padBegin[i]);
    // The end padding that makes oneDNN's output size the node's: ONNX's
    // may leave input elements unread at the end (then this is smaller).
    int64_t extent = (p.kernel[i] - 1) * p.dilations[i] + 1;
    int64_t padR =
        (p.out[i] - 1) * p.strides[i] + extent - p.in[i] - p.padBegin[i];
    if (padR < 0)
      return false;
    d.padR.push_back(padR);
  }
  d.src = memory::desc(src, dt, plainTag(r));
  d.dst = memory::desc(dst, dt, plainTag(r));
  d.wei = memory::desc(wei, dt, plainWeightTag(r, grouped));
  d.bias = memory::desc({p.m}, dt, memory::format_tag::x);
  return true;
}

std::string convKey(const char *what, const ConvProblem &p, bool bias) {
  return std::string(what) + typeName(p.dtype) + (bias ? "b" : "") + "|" +
         std::to_string(p.n) + "," + std::to_string(p.c) + "," +
         std::to_string(p.m) + "," + std::to_string(p.groups) + "|" +
         dimsKey(p.in) + "|" + dimsKey(p.out) + "|" + dimsKey(p.kernel) + "|" +
         dimsKey(p.strides) + "|" + dimsKey(p.dilations) + "|" +
         dimsKey(p.padBegin);
}

/// A convolution's multiply-adds (each gradient has as many).
int64_t convVolume(const ConvProblem &p) {
  int64_t v = p.n * p.m * (p.groups > 0 ? p.c / p.groups : p.c);
  for (int64_t o : p.out)
    v *= o;
  for (int64_t k : p.kernel)
    v *= k;
  return v;
}

memory::desc anyOf(const memory::desc &d) {
  return memory::desc(d.dims(), d.data_type(), memory::format_tag::any);
}

dnnl::convolution_forward::primitive_desc forwardDesc(const ConvDescs &d,
                                                      bool bias) {
  auto any = [](const memory::desc &m) { return anyOf(m); };
  dnnl::convolution_forward::desc fd =
      bias ? dnnl::convolution_forward::desc(
                 dnnl::prop_kind::forward_training,
                 dnnl::algorithm::convolution_direct, any(d.src), any(d.wei),
                 d.bias, any(d.dst), d.strides, d.dilations, d.padL, d.padR)
           : dnnl::convolution_forward::desc(
                 dnnl::prop_kind::forward_training,
                 dnnl::algorithm::convolution_direct, any(d.src), any(d.wei),
                 any(d.dst), d.strides, d.dilations, d.padL, d.padR);
  return dnnl::convolution_forward::primitive_desc(fd, userScratchpad(),
                                                   engine());
}

} // namespace

bool useFor(Family f, DType t) {
  if (!envFlag("MPC_CPU_ONEDNN", true))
    return false;
  switch (t) {
  case DType::BF16:
    return !envFlag("MPC_CPU_EXACT_HALF", false);
  case DType::F32:
    // Measured here (bench/cpu_contenders.py, docs/benchmarks.md): oneDNN's
    // direct convolution beats im2col + sgemm several times over, and its
    // fp32 products (its own CPU dispatch) beat Debian's OpenBLAS 0.3.21
    // 3-5x on the transformer and MLP steps of this CPU, whose cores that
    // OpenBLAS does not know (its kernel choice then depends on
    // OPENBLAS_CORETYPE). MPC_CPU_ONEDNN_FP32_PRODUCTS=0 keeps products on
    // OpenBLAS.
    return f == Family::Conv || envFlag("MPC_CPU_ONEDNN_FP32_PRODUCTS", true);
  default:
    // fp16: oneDNN 2.6 has no native fp16 kernels for the CPU (only its
    // reference ones), so fp16 keeps the widened sgemm path.
    return false;
  }
}

bool useForWidened(Family f) {
  return useFor(f, DType::F32) && !envFlag("MPC_CPU_EXACT_HALF", false);
}

namespace {

/// The product entry for `w` columns of a row-major B whose rows are `ldb`
/// apart and a Y whose rows are `ldy` apart (w == ldb == ldy: the whole
/// product).
std::shared_ptr<Entry> productEntry(DType t, DType yt, bool ta, bool tb,
                                    int64_t batch, int64_t m, int64_t w,
                                    int64_t k, int64_t ldb, int64_t ldy,
                                    float alpha, float beta, bool bias) {
  std::ostringstream key;
  key << "mm" << typeName(t) << typeName(yt) << ta << tb << "|" << batch << ","
      << m << "," << w << "," << k << "|" << ldb << "," << ldy << "|" << alpha
      << "," << beta << (bias ? "|bias" : "");
  return cached(key.str(), threadsFor(batch * m * w * k), [&](Entry &e) {
    memory::data_type dt = dnnlType(t), ydt = dnnlType(yt);
    Dims ad = {batch, m, k}, bd = {batch, k, w}, yd = {batch, m, w};
    Dims as = ta ? Dims{m * k, 1, m} : Dims{m * k, k, 1};
    Dims bs = tb ? Dims{k * ldb, 1, k} : Dims{k * ldb, ldb, 1};
    memory::desc amd(ad, dt, as), bmd(bd, dt, bs),
        ymd(yd, ydt, Dims{m * ldy, ldy, 1});
    dnnl::primitive_attr attr = userScratchpad();
    if (alpha != 1.f)
      attr.set_output_scales(0, {alpha});
    if (beta != 0.f) {
      dnnl::post_ops ops;
      ops.append_sum(beta);
      attr.set_post_ops(ops);
    }
    memory::desc biasmd(Dims{1, 1, w}, dt, Dims{w, w, 1});
    dnnl::matmul::primitive_desc pd(
        bias ? dnnl::matmul::desc(amd, bmd, biasmd, ymd)
             : dnnl::matmul::desc(amd, bmd, ymd),
        attr, engine());
    if (isReference(pd.impl_info_str()))
      return;
    e.prim = dnnl::matmul(pd);
    e.scratchpad = pd.scratchpad_desc();
    e.args = {{DNNL_ARG_SRC, amd, amd, true},
              {DNNL_ARG_WEIGHTS, bmd, bmd, true}};
    if (bias)
      e.args.push_back({DNNL_ARG_BIAS, biasmd, biasmd, true});
    e.args.push_back({DNNL_ARG_DST, ymd, ymd, false});
    e.usable = true;
  });
}

/// An fp32 product of one matrix, A and B plain, B of more rows than columns
/// (k > n: a Linear layer's data gradient dY W, W stored [out, in] with out
/// > in) runs on oneDNN's sgemm (its jit GEMM, which packs both operands
/// itself) instead of the matmul primitive, whose fp32 brgemm runs that
/// class below its speed. Measured on an Intel Xeon with AMX (oneDNN 2.6,
/// GFLOP/s, primitive against sgemm): 1024 x 768 x 3072 156 / 192 on one
/// thread and 317 / 383 on two; 1024 x 512 x 2048 195 / 213; 256 x 1024 x
/// 4096 179 / 196. Elsewhere neither was ahead across 1 and 2 threads (the
/// primitive 10-20% faster on some transposed-A weight gradients and on
/// 2 threads of some transposed-B forwards), so the rest stays on the
/// primitive. A row bias is copied into Y's rows first and added to each
/// finished sum (beta 1), as the primitive adds its bias. Each element is
/// still one fp32 sum over k, in sgemm's order (tests/unit/onednn_test.cpp's
/// bound).
bool plainSgemm(int64_t m, int64_t n, int64_t k, float alpha, float beta,
                const float *a, const float *b, float *y, const float *bias) {
  if (bias) {
    for (int64_t r = 0; r < m; ++r)
      std::memcpy(y + r * n, bias, size_t(n) * sizeof(float));
    beta = 1.f;
  }
  useThreads(threadsFor(m * n * k));
  std::lock_guard<std::mutex> lock(executing());
  return dnnl_sgemm('N', 'N', m, n, k, alpha, a, k, b, n, beta, y, n) ==
         dnnl_success;
}

/// The widest column block an fp32 product with a plain (untransposed) B
/// runs in one call. oneDNN 2.6's fp32 brgemm runs such a product 2-3x
/// below its speed when B's rows are 3072 (BERT's 4 x 768 feed-forward),
/// 4608 or 6144 floats wide, and at full speed on the same rows taken 2048
/// columns or fewer at a time (1024 x 3072 x 768 on one thread: 40 GFLOP/s
/// whole, 129-136 in blocks; never slower in blocks, at 1 and 2 threads).
/// Each output element is still one oneDNN sum over k; bf16's AMX kernels
/// are faster whole and stay whole.
constexpr int64_t kFp32ColumnBlock = 2048;

} // namespace

bool matmul(DType t, DType yt, bool ta, bool tb, int64_t batch, int64_t m,
            int64_t n, int64_t k, float alpha, float beta, const void *a,
            const void *b, void *y, const void *bias) {
  if (batch <= 0 || m <= 0 || n <= 0 || k <= 0 ||
      (beta != 0.f && yt != DType::F32) ||
      (bias && (alpha != 1.f || beta != 0.f || batch != 1)))
    return false;
  // oneDNN's call costs a few microseconds (memory objects, a stream, the
  // cache look-up): a tiny product (models/mlp_seed.onnx's step took 0.027
  // ms on BLAS and 0.042 on oneDNN) is faster on the caller's path.
  constexpr int64_t kMinVolume = int64_t(1) << 15;
  if (batch * m * n * k < kMinVolume)
    return false;
  if (t == DType::F32 && yt == DType::F32 && batch == 1 && !ta && !tb &&
      k > n) {
    bool ok = plainSgemm(m, n, k, alpha, beta, static_cast<const float *>(a),
                         static_cast<const float *>(b), static_cast<float *>(y),
                         static_cast<const float *>(bias));
    note(Family::Product, t, ok);
    return ok;
  }
  // Column blocks of equal width (a multiple of 16 floats), the last one
  // what is left.
  int64_t width = n;
  if (t == DType::F32 && !tb && n > kFp32ColumnBlock) {
    int64_t blocks = (n + kFp32ColumnBlock - 1) / kFp32ColumnBlock;
    width = ((n + blocks - 1) / blocks + 15) / 16 * 16;
  }
  int64_t tail = n % width;
  auto whole = productEntry(t, yt, ta, tb, batch, m, width, k, n, n, alpha,
                            beta, bias != nullptr);
  auto last = tail ? productEntry(t, yt, ta, tb, batch, m, tail, k, n, n, alpha,
                                  beta, bias != nullptr)
                   : whole;
  // Every block's primitive made before any runs: a block that cannot run
  // leaves Y untouched for the caller's path (which may add beta * Y).
  bool ok = whole->usable && last->usable;
  const size_t in = dtypeSize(t), out = dtypeSize(yt);
  for (int64_t c = 0; ok && c < n; c += width) {
    std::vector<void *> ptrs = {
        const_cast<void *>(a),
        const_cast<char *>(static_cast<const char *>(b) + size_t(c) * in)};
    if (bias)
      ptrs.push_back(
          const_cast<char *>(static_cast<const char *>(bias) + size_t(c) * in));
    ptrs.push_back(static_cast<char *>(y) + size_t(c) * out);
    ok = run(c + width <= n ? *whole : *last, ptrs);
  }
  note(Family::Product, t, ok);
  return ok;
}

bool convForward(const ConvProblem &p, const void *x, const void *w,
                 const void *bias, void *y) {
  if (convForwardAsProduct(p, x, w, bias, y)) {
    note(Family::Conv, p.dtype, true);
    return true;
  }
  ConvDescs d;
  bool hasBias = bias != nullptr;
  auto e = cached(
      convKey("fwd", p, hasBias), threadsFor(convVolume(p)), [&](Entry &e) {
        if (!convDescs(p, d))
          return;
        auto pd = forwardDesc(d, hasBias);
        if (isReference(pd.impl_info_str()))
          return;
        e.prim = dnnl::convolution_forward(pd);
        e.scratchpad = pd.scratchpad_desc();
        e.args = {{DNNL_ARG_SRC, d.src, pd.src_desc(), true},
                  {DNNL_ARG_WEIGHTS, d.wei, pd.weights_desc(), true}};
        if (hasBias)
          e.args.push_back({DNNL_ARG_BIAS, d.bias, pd.bias_desc(), true});
        e.args.push_back({DNNL_ARG_DST, d.dst, pd.dst_desc(), false});
        e.usable = true;
      });
  std::vector<void *> ptrs = {const_cast<void *>(x), const_cast<void *>(w)};
  if (hasBias)
    ptrs.push_back(const_cast<void *>(bias));
  ptrs.push_back(y);
  bool ok = run(*e, ptrs);
  note(Family::Conv, p.dtype, ok);
  return ok;
}

bool convBackwardData(const ConvProblem &p, const void *dy, const void *w,
                      void *dx) {
  if (convBackwardDataAsProduct(p, dy, w, dx)) {
    note(Family::Conv, p.dtype, true);
    return true;
  }
  auto e = cached(
      convKey("bwd_d", p, false), threadsFor(convVolume(p)), [&](Entry &e) {
        ConvDescs d;
        if (!convDescs(p, d))
          return;
        auto hint = forwardDesc(d, false);
        dnnl::convolution_backward_data::desc bd(
            dnnl::algorithm::convolution_direct, anyOf(d.src), anyOf(d.wei),
            anyOf(d.dst), d.strides, d.dilations, d.padL, d.padR);
        dnnl::convolution_backward_data::primitive_desc pd(bd, userScratchpad(),
                                                           engine(), hint);
        if (isReference(pd.impl_info_str()))
          return;
        e.prim = dnnl::convolution_backward_data(pd);
        e.scratchpad = pd.scratchpad_desc();
        e.args = {{DNNL_ARG_DIFF_DST, d.dst, pd.diff_dst_desc(), true},
                  {DNNL_ARG_WEIGHTS, d.wei, pd.weights_desc(), true},
                  {DNNL_ARG_DIFF_SRC, d.src, pd.diff_src_desc(), false}};
        e.usable = true;
      });
  bool ok = run(*e, {const_cast<void *>(dy), const_cast<void *>(w), dx});
  note(Family::Conv, p.dtype, ok);
  return ok;
}

bool convBackwardWeights(const ConvProblem &p, const void *dy, const void *x,
                         void *dw) {
  if (convBackwardWeightsAsProduct(p, dy, x, dw)) {
    note(Family::Conv, p.dtype, true);
    return true;
  }
  auto e = cached(
      convKey("bwd_w", p, false), threadsFor(convVolume(p)), [&](Entry &e) {
        ConvDescs d;
        if (!convDescs(p, d))
          return;
        auto hint = forwardDesc(d, false);
        dnnl::convolution_backward_weights::desc bd(
            dnnl::algorithm::convolution_direct, anyOf(d.src), anyOf(d.wei),
            anyOf(d.dst), d.strides, d.dilations, d.padL, d.padR);
        dnnl::convolution_backward_weights::primitive_desc pd(
            bd, userScratchpad(), engine(), hint);
        if (isReference(pd.impl_info_str()))
          return;
        e.prim = dnnl::convolution_backward_weights(pd);
        e.scratchpad = pd.scratchpad_desc();
        e.args = {
            {DNNL_ARG_DIFF_DST, d.dst, pd.diff_dst_desc(), true},
            {DNNL_ARG_SRC, d.src, pd.src_desc(), true},
            {DNNL_ARG_DIFF_WEIGHTS, d.wei, pd.diff_weights_desc(), false}};
        e.usable = true;
      });
  bool ok = run(*e, {const_cast<void *>(dy), const_cast<void *>(x), dw});
  note(Family::Conv, p.dtype, ok);
  return ok;
}

void noteFallback(Family f, DType t) { note(f, t, false); }

std::string kernelReport() {
  unsigned u = used.load(std::memory_order_relaxed);
  if (!u)
    return "";
  auto isa = [] {
    switch (dnnl::get_effective_cpu_isa()) {
    case dnnl::cpu_isa::avx512_core_amx:
      return "avx512_core_amx";
    case dnnl::cpu_isa::avx512_core_bf16:
      return "avx512_core_bf16";
    case dnnl::cpu_isa::avx512_core_vnni:
      return "avx512_core_vnni";
    case dnnl::cpu_isa::avx512_core:
      return "avx512_core";
    case dnnl::cpu_isa::avx2_vnni:
    case dnnl::cpu_isa::avx2:
      return "avx2";
    default:
      return "sse41";
    }
  };
  std::string out;
  for (Family f : {Family::Product, Family::Conv}) {
    std::string parts;
    for (DType t : {DType::BF16, DType::F16, DType::F32}) {
      auto add = [&](const std::string &s) {
        parts += (parts.empty() ? "" : ", ") + s;
      };
      if (u & bit(f, t, true))
        add(std::string("oneDNN ") + typeName(t) + " (" + isa() + ")");
      if (u & bit(f, t, false))
        add(t == DType::F32
                ? std::string(f == Family::Conv ? "im2col + BLAS fp32"
                                                : "BLAS fp32")
                : std::string(typeName(t)) + " emulated (widened to fp32)");
    }
    if (parts.empty())
      continue;
    out += (out.empty() ? "" : "; ") +
           std::string(f == Family::Conv ? "convolutions: " : "products: ") +
           parts;
  }
  return out;
}

} // namespace onednn
} // namespace cpu
} // namespace mpc
