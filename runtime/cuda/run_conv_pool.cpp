// CUDA runners of the convolution family on cuDNN 9: Conv, ConvTranspose,
// mpc.ConvGradInput and mpc.ConvGradWeight, 1-D to 3-D, with groups,
// strides, dilations and any pads.
//
// Why cuDNN's descriptor API and not its graph API: each node is one plain
// convolution (forward, data gradient or weight gradient) with nothing to
// fuse, which is exactly what cudnnConvolutionForward / BackwardData /
// BackwardFilter do in a few calls, and what PyTorch has run for years;
// the graph API would add an operation graph, engine heuristics and
// execution plans per geometry for the same kernels. cuDNN 9 deprecates
// the descriptor API but still ships it; moving to the graph API later
// changes this file only.
//
// Algorithms: cudnnGet*Algorithm_v7 (cuDNN's heuristics, no timing runs)
// ranks them per geometry, once; the first that is deterministic, allowed
// by the precision rule below and needs at most kMaxWorkspace bytes is
// cached per (direction, dtype, geometry, device). Heuristics rather than
// cudnnFind*: the choice does not depend on timing noise, so two runs (and
// a --resume) pick the same kernels; Find's benchmark runs also allocate
// their own memory outside the caching allocator. Deterministic algorithms
// first, for the same reason: the data and weight gradients of the others
// add with atomics in a varying order. mpc-run --cudnn-deterministic=false
// (CudaBackendOptions::cudnnDeterministic) takes cuDNN's ranking as it is,
// the fast nondeterministic data and weight gradients included: speed over
// bit-for-bit repeatable runs. The workspace comes from the staging's
// scratch (in a resident step, the device-wide shared workspace).
//
// Layout: fp16 and bf16 convolutions with channels in multiples of 8 run
// channels-last (conv_plan.h, preferredLayout): the operands are rewritten
// into NHWC scratch (cudnnTransformTensor), cuDNN convolves in NHWC, and
// the result is rewritten back into the arena's NCHW. When cuDNN offers no
// NHWC algorithm the same call runs NCHW; MPC_CUDA_CONV_NHWC=0
// (CudaBackendOptions::convNhwc) keeps every convolution NCHW.
//
// Precision: fp16 and bf16 tensors with an fp32 compute type (fp32
// accumulation) and Tensor Core math allowed; fp32 tensors fully in fp32
// (CUDNN_FMA_MATH: no TF32, whose 10-bit mantissa would miss the CPU
// reference by far more than the backend-ops tolerance). Operands of
// different dtypes (an fp32 gradient meeting an fp16 weight) are widened
// to fp32 on the device first and the result rounded to the output's dtype.
//
// Pads: cuDNN pads both ends of a dim alike. Where a node's pads differ
// (auto_pad SAME_* with an even kernel, explicit asymmetric pads, a
// ConvTranspose's output_shape), the runner zero-pads the input into
// scratch and convolves without pads, or lets the data gradient fill a
// padded buffer and crops it (kernels/cuda/conv_support.h). A 1-D
// convolution runs as a 2-D one over a height of 1 (cuDNN's convolutions
// take 4-D and 5-D tensors); windows of more than 3 spatial dims are
// refused by the check. The bias is added by a small kernel in fp32.
//
// CUDA runners of the pooling family: MaxPool (with Indices), AveragePool,
// GlobalAveragePool, mpc.MaxPoolGrad and mpc.AveragePoolGrad, 1 to 3
// spatial dims.
//
// The window comes from the same resolver as the CPU kernels'
// (ir/window_geometry.h), with their checks and messages
// (kernels/cpu/conv_pool.cpp), and runs on mpc's own kernels (kernels/cuda/
// pool.h says why not cuDNN's pooling): the outputs are the CPU's bits.
// AveragePoolGrad's x_shape is a shape (int64, made by a host-run Shape or
// Constant) and is read on the host, as Reshape's shape is.
#include "ir/mpc_ops.h"
#include "kernels/cpu/conv_geometry.h"
#include "kernels/cpu/conv_util.h"
#include "kernels/cuda/cast.h"
#include "kernels/cuda/conv_support.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/pool.h"
#include "runtime/cuda/conv_plan.h"
#include "runtime/cuda/cuda_ops.h"
#include "runtime/cuda/cudnn_util.h"
#include "runtime/cuda/node_staging.h"

#include <cstdio>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>

namespace mpc {
namespace cuda {
namespace {

using cpu::fail;
using cpu::shapeString;
using cpu::spatialDims;

/// The largest workspace an algorithm may ask for.
constexpr size_t kMaxWorkspace = size_t(512) << 20;

enum class Direction { Forward, BackwardData, BackwardFilter };

struct AlgoChoice {
  int algo = 0;
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;
  size_t workspace = 0;
};

std::string problemKey(Direction dir, const ConvProblem &p, ConvLayout layout,
                       bool deterministic) {
  int device = -1;
  cudaGetDevice(&device);
  std::ostringstream k;
  k << int(dir) << ' ' << int(p.type) << ' ' << device << ' ' << p.groups << ' '
    << int(layout) << ' ' << deterministic;
  for (const auto *v : {&p.x, &p.w, &p.y, &p.pads, &p.strides, &p.dilations}) {
    k << " |";
    for (int64_t d : *v)
      k << ' ' << d;
  }
  return k.str();
}

/// The cuDNN descriptors of a problem in one layout.
struct ConvDescs {
  TensorDesc x, y;
  FilterDesc w;
  ConvDesc conv;
  ConvDescs(const Node &node, const ConvProblem &p, ConvLayout layout)
      : x(node, p.type, p.x, layout), y(node, p.type, p.y, layout),
        w(node, p.type, p.w, layout),
        conv(node, p.pads, p.strides, p.dilations, p.groups, CUDNN_DATA_FLOAT) {
  }
};

/// The math the precision rule runs an algorithm cuDNN ranked with `math`
/// in, or false when the rule forbids it (Tensor Core math on fp32).
bool allowedMath(DType t, cudnnMathType_t ranked, cudnnMathType_t &run) {
  if (t != DType::F32) {
    run = ranked;
    return true;
  }
  run = CUDNN_FMA_MATH;
  return ranked == CUDNN_DEFAULT_MATH || ranked == CUDNN_FMA_MATH;
}

/// Picks the algorithm of `dir` for problem p in `layout` (cached, a miss
/// too). Perf is cuDNN's perf-result struct of that direction; rank() fills
/// a vector of them; workspace(algo, &bytes) asks the size under the
/// descriptors' current math type. `deterministic`: deterministic
/// algorithms first, any other only when none fits; false: cuDNN's ranking
/// alone (--cudnn-deterministic=false). Nothing when no algorithm fits.
template <typename Perf, typename Rank, typename Workspace>
std::optional<AlgoChoice> chooseAlgo(const Node &node, Direction dir,
                                     const ConvProblem &p, ConvLayout layout,
                                     bool deterministic, ConvDescs &d,
                                     Rank rank, Workspace workspace) {
  static std::mutex mutex;
  static std::map<std::string, std::optional<AlgoChoice>> cache;
  std::string key = problemKey(dir, p, layout, deterministic);
  {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = cache.find(key);
    if (it != cache.end())
      return it->second;
  }
  d.conv.setMathType(node, p.type == DType::F32 ? CUDNN_FMA_MATH
                                                : CUDNN_TENSOR_OP_MATH);
  std::vector<Perf> perfs = rank();
  std::optional<AlgoChoice> choice;
  std::vector<bool> passes = {true, false};
  if (!deterministic)
    passes = {false};
  for (bool deterministicOnly : passes) {
    for (const Perf &perf : perfs) {
      cudnnMathType_t math;
      if (perf.status != CUDNN_STATUS_SUCCESS ||
          (deterministicOnly && perf.determinism != CUDNN_DETERMINISTIC) ||
          !allowedMath(p.type, perf.mathType, math))
        continue;
      d.conv.setMathType(node, math);
      size_t bytes = 0;
      if (workspace(perf.algo, &bytes) != CUDNN_STATUS_SUCCESS ||
          bytes > kMaxWorkspace)
        continue;
      choice = AlgoChoice{int(perf.algo), math, bytes};
      break;
    }
    if (choice)
      break;
  }
  std::lock_guard<std::mutex> lock(mutex);
  cache[key] = choice;
  return choice;
}

[[noreturn]] void noAlgorithm(const Node &node, const ConvProblem &p) {
  fail(node, "cuDNN offers no usable algorithm for this convolution (",
       dtypeName(p.type), " x ", shapeString(p.x), ", w ", shapeString(p.w),
       ", y ", shapeString(p.y), ", groups ", p.groups, ")");
}

const float kOne = 1.0f, kZero = 0.0f;

/// The algorithm of `dir` for p in `layout` on the staging's handle.
std::optional<AlgoChoice> chooseFor(NodeStaging &s, Direction dir,
                                    const ConvProblem &p, ConvLayout layout,
                                    ConvDescs &d) {
  const Node &node = s.node();
  cudnnHandle_t h = s.cudnn();
  bool det = s.cudaDevice().options.cudnnDeterministic;
  switch (dir) {
  case Direction::Forward:
    return chooseAlgo<cudnnConvolutionFwdAlgoPerf_t>(
        node, dir, p, layout, det, d,
        [&] {
          int max = 0, got = 0;
          checkCudnn(cudnnGetConvolutionForwardAlgorithmMaxCount(h, &max), node,
                     "cudnnGetConvolutionForwardAlgorithmMaxCount");
          std::vector<cudnnConvolutionFwdAlgoPerf_t> v(
              size_t(std::max(max, 1)));
          checkCudnn(cudnnGetConvolutionForwardAlgorithm_v7(
                         h, d.x.get(), d.w.get(), d.conv.get(), d.y.get(),
                         int(v.size()), &got, v.data()),
                     node, "cudnnGetConvolutionForwardAlgorithm_v7");
          v.resize(size_t(got));
          return v;
        },
        [&](cudnnConvolutionFwdAlgo_t a, size_t *bytes) {
          return cudnnGetConvolutionForwardWorkspaceSize(
              h, d.x.get(), d.w.get(), d.conv.get(), d.y.get(), a, bytes);
        });
  case Direction::BackwardData:
    return chooseAlgo<cudnnConvolutionBwdDataAlgoPerf_t>(
        node, dir, p, layout, det, d,
        [&] {
          int max = 0, got = 0;
          checkCudnn(cudnnGetConvolutionBackwardDataAlgorithmMaxCount(h, &max),
                     node, "cudnnGetConvolutionBackwardDataAlgorithmMaxCount");
          std::vector<cudnnConvolutionBwdDataAlgoPerf_t> v(
              size_t(std::max(max, 1)));
          checkCudnn(cudnnGetConvolutionBackwardDataAlgorithm_v7(
                         h, d.w.get(), d.y.get(), d.conv.get(), d.x.get(),
                         int(v.size()), &got, v.data()),
                     node, "cudnnGetConvolutionBackwardDataAlgorithm_v7");
          v.resize(size_t(got));
          return v;
        },
        [&](cudnnConvolutionBwdDataAlgo_t a, size_t *bytes) {
          return cudnnGetConvolutionBackwardDataWorkspaceSize(
              h, d.w.get(), d.y.get(), d.conv.get(), d.x.get(), a, bytes);
        });
  case Direction::BackwardFilter:
    return chooseAlgo<cudnnConvolutionBwdFilterAlgoPerf_t>(
        node, dir, p, layout, det, d,
        [&] {
          int max = 0, got = 0;
          checkCudnn(
              cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(h, &max), node,
              "cudnnGetConvolutionBackwardFilterAlgorithmMaxCount");
          std::vector<cudnnConvolutionBwdFilterAlgoPerf_t> v(
              size_t(std::max(max, 1)));
          checkCudnn(cudnnGetConvolutionBackwardFilterAlgorithm_v7(
                         h, d.x.get(), d.y.get(), d.conv.get(), d.w.get(),
                         int(v.size()), &got, v.data()),
                     node, "cudnnGetConvolutionBackwardFilterAlgorithm_v7");
          v.resize(size_t(got));
          return v;
        },
        [&](cudnnConvolutionBwdFilterAlgo_t a, size_t *bytes) {
          return cudnnGetConvolutionBackwardFilterWorkspaceSize(
              h, d.x.get(), d.y.get(), d.conv.get(), d.w.get(), a, bytes);
        });
  }
  return std::nullopt;
}

/// The dims of a direction's two operands and its result, in p's terms:
/// forward x, w -> y; data gradient w, dy -> dx; weight gradient x, dy -> dw.
struct Roles {
  const std::vector<int64_t> *a, *b, *out;
};
Roles roles(Direction dir, const ConvProblem &p) {
  switch (dir) {
  case Direction::Forward:
    return {&p.x, &p.w, &p.y};
  case Direction::BackwardData:
    return {&p.w, &p.y, &p.x};
  default:
    return {&p.x, &p.y, &p.w};
  }
}

/// Runs `dir` with chosen algorithm c on operands a, b (in d's layout).
void execute(NodeStaging &s, Direction dir, ConvDescs &d, const AlgoChoice &c,
             const void *a, const void *b, void *out) {
  const Node &node = s.node();
  cudnnHandle_t h = s.cudnn();
  d.conv.setMathType(node, c.math);
  void *ws = s.scratch(c.workspace);
  switch (dir) {
  case Direction::Forward:
    checkCudnn(cudnnConvolutionForward(h, &kOne, d.x.get(), a, d.w.get(), b,
                                       d.conv.get(),
                                       cudnnConvolutionFwdAlgo_t(c.algo), ws,
                                       c.workspace, &kZero, d.y.get(), out),
               node, "cudnnConvolutionForward");
    return;
  case Direction::BackwardData:
    checkCudnn(cudnnConvolutionBackwardData(
                   h, &kOne, d.w.get(), a, d.y.get(), b, d.conv.get(),
                   cudnnConvolutionBwdDataAlgo_t(c.algo), ws, c.workspace,
                   &kZero, d.x.get(), out),
               node, "cudnnConvolutionBackwardData");
    return;
  case Direction::BackwardFilter:
    checkCudnn(cudnnConvolutionBackwardFilter(
                   h, &kOne, d.x.get(), a, d.y.get(), b, d.conv.get(),
                   cudnnConvolutionBwdFilterAlgo_t(c.algo), ws, c.workspace,
                   &kZero, d.w.get(), out),
               node, "cudnnConvolutionBackwardFilter");
    return;
  }
}

/// src of NCHW-ordered `dims` in layout `from`, rewritten into dst in
/// layout `to` (cuDNN's strided copy).
void relayout(NodeStaging &s, DType t, const std::vector<int64_t> &dims,
              const void *src, ConvLayout from, void *dst, ConvLayout to) {
  if (elementCount(dims) == 0)
    return;
  TensorDesc a(s.node(), t, dims, from), b(s.node(), t, dims, to);
  checkCudnn(cudnnTransformTensor(s.cudnn(), &kOne, a.get(), src, &kZero,
                                  b.get(), dst),
             s.node(), "cudnnTransformTensor");
}

/// A channels-last copy of src (NCHW, dims) in scratch.
const void *toNhwc(NodeStaging &s, DType t, const std::vector<int64_t> &dims,
                   const void *src) {
  void *dst = s.scratch(size_t(elementCount(dims)) * dtypeSize(t));
  relayout(s, t, dims, src, ConvLayout::Nchw, dst, ConvLayout::Nhwc);
  return dst;
}

/// Problems whose channels-last run cuDNN refused (an unsupported
/// transform or descriptor on this cuDNN/GPU): they run NCHW from then on.
bool nhwcRefused(const std::string &key, bool remember = false) {
  static std::mutex mutex;
  static std::set<std::string> refused;
  std::lock_guard<std::mutex> lock(mutex);
  if (remember)
    refused.insert(key);
  return refused.count(key) != 0;
}

/// out := convolution `dir` of a and b (NCHW, p's dims), in NHWC where
/// preferredLayout says so and cuDNN has an algorithm for it, else NCHW.
/// A cuDNN call of the channels-last path that fails (before anything is
/// written to `out`: its calls check their arguments before they launch)
/// sends this problem to NCHW for good, with one warning per process.
void convolve(NodeStaging &s, Direction dir, const ConvProblem &p,
              const void *a, const void *b, void *out) {
  const Node &node = s.node();
  Roles r = roles(dir, p);
  std::string key;
  if (preferredLayout(p, s.cudaDevice().options.convNhwc) == ConvLayout::Nhwc) {
    key = problemKey(dir, p, ConvLayout::Nhwc, true);
    if (!nhwcRefused(key)) {
      try {
        ConvDescs d(node, p, ConvLayout::Nhwc);
        if (std::optional<AlgoChoice> c =
                chooseFor(s, dir, p, ConvLayout::Nhwc, d)) {
          const void *an = toNhwc(s, p.type, *r.a, a);
          const void *bn = toNhwc(s, p.type, *r.b, b);
          void *on =
              s.scratch(size_t(elementCount(*r.out)) * dtypeSize(p.type));
          execute(s, dir, d, *c, an, bn, on);
          relayout(s, p.type, *r.out, on, ConvLayout::Nhwc, out,
                   ConvLayout::Nchw);
          return;
        }
      } catch (const Error &e) {
        // Under a capture the backend decides (it runs the step eagerly).
        if (s.cudaDevice().capturing)
          throw;
        static std::once_flag warned;
        std::call_once(warned, [&] {
          std::fprintf(stderr,
                       "mpc: warning: cuDNN refused a channels-last "
                       "convolution (%s); such convolutions run NCHW\n",
                       e.what());
        });
        nhwcRefused(key, /*remember=*/true);
      }
    }
  }
  ConvDescs d(node, p, ConvLayout::Nchw);
  std::optional<AlgoChoice> c = chooseFor(s, dir, p, ConvLayout::Nchw, d);
  if (!c)
    noAlgorithm(node, p);
  execute(s, dir, d, *c, a, b, out);
}

/// y := conv(x, w) on the stream.
void runForward(NodeStaging &s, const ConvProblem &p, const void *x,
                const void *w, void *y) {
  convolve(s, Direction::Forward, p, x, w, y);
}

/// dx := the data gradient of conv for dy (x of p's padded dims).
void runBackwardData(NodeStaging &s, const ConvProblem &p, const void *w,
                     const void *dy, void *dx) {
  convolve(s, Direction::BackwardData, p, w, dy, dx);
}

/// dw := the weight gradient of conv for x (padded dims) and dy.
void runBackwardFilter(NodeStaging &s, const ConvProblem &p, const void *x,
                       const void *dy, void *dw) {
  convolve(s, Direction::BackwardFilter, p, x, dy, dw);
}

// --- operands and results in the compute dtype ---------------------------

/// The dtype a node computes in: its operands' when they agree, else fp32.
DType computeType(std::initializer_list<const Tensor *> operands) {
  DType t = (*operands.begin())->dtype;
  for (const Tensor *o : operands)
    if (o->dtype != t)
      return DType::F32;
  return t;
}

/// An output of `dims` computed in dtype t and delivered in dtype `want`.
struct Result {
  void *compute = nullptr, *out = nullptr;
  DType t = DType::F32, want = DType::F32;
  int64_t n = 0;
  void finish(NodeStaging &s) {
    if (compute != out && n)
      launchCast(t, want, compute, out, n, s.stream());
  }
};

Result result(NodeStaging &s, size_t i, DType t, DType want,
              const std::vector<int64_t> &dims) {
  Result r;
  r.t = t;
  r.want = want;
  r.n = elementCount(dims);
  r.out = s.out(i, want, dims);
  r.compute = t == want ? r.out : s.scratch(size_t(r.n) * dtypeSize(t));
  return r;
}

/// A buffer of p's padded input dims where the pads are explicit.
void *paddedBuffer(NodeStaging &s, const ConvProblem &p) {
  return s.scratch(size_t(elementCount(p.x)) * dtypeSize(p.type));
}

/// x of the node's (unpadded) dims, padded as p needs it.
const void *padInput(NodeStaging &s, const ConvProblem &p, const void *x) {
  if (!p.explicitPad)
    return x;
  void *padded = paddedBuffer(s, p);
  launchShiftCopy(dtypeSize(p.type), x, p.xUnpadded, padded, p.x, p.offset,
                  s.stream());
  return padded;
}

/// The data gradient of p into dx (the node's unpadded dims).
void dataGradient(NodeStaging &s, const ConvProblem &p, const void *w,
                  const void *dy, void *dx) {
  if (!p.explicitPad) {
    runBackwardData(s, p, w, dy, dx);
    return;
  }
  void *padded = paddedBuffer(s, p);
  runBackwardData(s, p, w, dy, padded);
  launchShiftCopy(dtypeSize(p.type), padded, p.x, dx, p.xUnpadded,
                  cropOffset(p), s.stream());
}

bool anyEmpty(std::initializer_list<const std::vector<int64_t> *> dims) {
  for (const auto *d : dims)
    if (elementCount(*d) == 0)
      return true;
  return false;
}

void zero(NodeStaging &s, void *p, int64_t n, DType t) {
  if (n)
    MPC_CUDA_CHECK(cudaMemsetAsync(p, 0, size_t(n) * dtypeSize(t), s.stream()));
}

// --- the checks the CPU kernels make (kernels/cpu/conv_pool.cpp)
// ---------------

void requireSameDTypes(NodeStaging &s, size_t count) {
  for (size_t i = 1; i < count; ++i)
    if (const Tensor *t = s.optionalIn(i))
      if (t->dtype != s.in(0, "X").dtype)
        fail(s.node(), "input ", i, " is ", dtypeName(t->dtype),
             " but input 0 is ", dtypeName(s.in(0, "X").dtype),
             " (the inputs must have the same type)");
}

void addBias(NodeStaging &s, const Tensor *b, void *y, DType yType,
             const std::vector<int64_t> &dims) {
  if (!b)
    return;
  int64_t inner = 1;
  for (size_t d = 2; d < dims.size(); ++d)
    inner *= dims[d];
  launchChannelBias(yType, y, b->dtype, s.device(2), dims[0], dims[1], inner,
                    s.stream());
}

// --- the runners ------------------------------------------------------------

void runConv(NodeStaging &s) {
  const Node &node = s.node();
  const Tensor &x = s.in(0, "X"), &w = s.in(1, "W");
  const Tensor *b = s.optionalIn(2);
  requireSameDTypes(s, 3);
  requireDeviceFloat(node, x, "X");
  cpu::ConvNodeGeometry k = cpu::convGeometry(node, x, w, b);
  void *y = s.out(0, x.dtype, k.outDims);
  if (anyEmpty({&k.outDims}))
    return;
  if (anyEmpty({&x.dims, &w.dims})) {
    zero(s, y, elementCount(k.outDims), x.dtype);
  } else {
    ConvProblem p =
        convProblem(node, k.window, k.batch, k.c, k.m, k.attrs.group, x.dtype);
    runForward(s, p, padInput(s, p, s.device(0)), s.device(1), y);
  }
  addBias(s, b, y, x.dtype, k.outDims);
}

void runConvTranspose(NodeStaging &s) {
  const Node &node = s.node();
  const Tensor &x = s.in(0, "X"), &w = s.in(1, "W");
  const Tensor *b = s.optionalIn(2);
  requireSameDTypes(s, 3);
  requireDeviceFloat(node, x, "X");
  cpu::ConvNodeGeometry k = cpu::convTransposeGeometry(node, x, w, b);
  void *y = s.out(0, x.dtype, k.outDims);
  if (anyEmpty({&k.outDims}))
    return;
  if (anyEmpty({&x.dims, &w.dims})) {
    zero(s, y, elementCount(k.outDims), x.dtype);
  } else {
    // The data gradient of the convolution from Y's M channels and size to
    // X's C channels and size, whose filter W is ([C, M/group, k...]).
    ConvProblem p =
        convProblem(node, k.window, k.batch, k.m, k.c, k.attrs.group, x.dtype);
    dataGradient(s, p, s.device(1), s.device(0), y);
  }
  addBias(s, b, y, x.dtype, k.outDims);
}

void runConvGradInput(NodeStaging &s) {
  const Node &node = s.node();
  const Tensor &dy = s.in(0, "dY"), &w = s.in(1, "W");
  // x_shape is a shape (an int64 vector a host-run Shape or Constant made),
  // read on the host like Reshape's.
  std::vector<int64_t> xs = cpu::readInts(node, s.in(2, "x_shape"), "x_shape");
  requireDeviceFloat(node, dy, "dY");
  requireDeviceFloat(node, w, "W");
  cpu::ConvNodeGeometry k = cpu::convGradInputGeometry(node, dy, w, xs);
  DType t = computeType({&dy, &w});
  Result dx = result(s, 0, t, dy.dtype, xs);
  if (anyEmpty({&xs}))
    return;
  if (anyEmpty({&dy.dims, &w.dims})) {
    zero(s, dx.out, dx.n, dy.dtype);
    return;
  }
  ConvProblem p =
      convProblem(node, k.window, k.batch, k.c, k.m, k.attrs.group, t);
  dataGradient(s, p, deviceAs(s, 1, w, t), deviceAs(s, 0, dy, t), dx.compute);
  dx.finish(s);
}

void runConvGradWeight(NodeStaging &s) {
  const Node &node = s.node();
  const Tensor &dy = s.in(0, "dY"), &x = s.in(1, "X");
  requireDeviceFloat(node, dy, "dY");
  requireDeviceFloat(node, x, "X");
  cpu::ConvNodeGeometry k = cpu::convGradWeightGeometry(node, dy, x);
  DType t = computeType({&dy, &x});
  Result dw = result(s, 0, t, dy.dtype, k.outDims);
  if (anyEmpty({&k.outDims}))
    return;
  if (anyEmpty({&dy.dims, &x.dims})) { // a sum over nothing
    zero(s, dw.out, dw.n, dy.dtype);
    return;
  }
  ConvProblem p =
      convProblem(node, k.window, k.batch, k.c, k.m, k.attrs.group, t);
  runBackwardFilter(s, p, padInput(s, p, deviceAs(s, 1, x, t)),
                    deviceAs(s, 0, dy, t), dw.compute);
  dw.finish(s);
}

// --- the checks of supports() -----------------------------------------------

/// "" unless input i has a known rank with more than kMaxConvSpatial
/// spatial dims.
std::string checkSpatialRank(const Node &node, size_t i) {
  const Value *v = i < node.numInputs() ? node.input(i) : nullptr;
  if (v && v->hasShape && v->dims.size() > kMaxConvSpatial + 2)
    return "cuDNN's convolutions take 1 to 3 spatial dims, input " +
           std::to_string(i) + " has " + std::to_string(v->dims.size() - 2);
  return "";
}

std::string checkConv(const Node &n) {
  std::string why = requireDeviceFloat(n, {0, 1, 2});
  return why.empty() ? checkSpatialRank(n, 0) : why;
}

std::string checkConvGradInput(const Node &n) {
  std::string why = requireDeviceFloat(n, {0, 1});
  return why.empty() ? checkSpatialRank(n, 0) : why;
}

// --- pooling
// --------------------------------------------------------------------------

using cpu::fail;
using cpu::shapeString;

/// The pooling window of `node` over an input of `xdims`, padded in front
/// to kMaxPoolRank spatial dims.
PoolWindow poolWindow(const Node &node, const std::vector<int64_t> &xdims) {
  if (xdims.size() < 3)
    fail(node, "X must have rank >= 3 ([N, C, D1, ...]), got shape ",
         shapeString(xdims));
  size_t r = xdims.size() - 2;
  if (r > size_t(kMaxPoolRank))
    fail(node, "the cuda backend pools over 1 to ", kMaxPoolRank,
         " spatial dims, got ", r);
  WindowAttrs a = readWindowAttrs(node, WindowKind::Pool, r);
  WindowGeometry g = resolveWindow(node, a, cpu::spatialDims(xdims));
  PoolWindow w = makePoolWindow(g, xdims[0] * xdims[1]);
  w.countIncludePad = node.attrInt("count_include_pad", 0) != 0;
  return w;
}

std::vector<int64_t> outputDims(const std::vector<int64_t> &xdims,
                                const PoolWindow &w) {
  std::vector<int64_t> dims = {xdims[0], xdims[1]};
  for (int d = kMaxPoolRank - w.rank; d < kMaxPoolRank; ++d)
    dims.push_back(w.out[d]);
  return dims;
}

void runMaxPool(NodeStaging &s) {
  const Node &node = s.node();
  const Tensor &x = s.in(0, "X");
  requireDeviceFloat(node, x, "X");
  PoolWindow w = poolWindow(node, x.dims);
  int64_t order = node.attrInt("storage_order", 0);
  if (order != 0 && order != 1)
    fail(node, "attribute 'storage_order' must be 0 or 1, got ", order);
  w.storageOrder = int(order);
  std::vector<int64_t> dims = outputDims(x.dims, w);
  void *y = s.out(0, x.dtype, dims);
  auto *indices = static_cast<int64_t *>(s.optionalOut(1, DType::I64, dims));
  launchMaxPool(x.dtype, s.device(0), y, indices, w, s.stream());
}

void runMaxPoolGrad(NodeStaging &s) {
  const Node &node = s.node();
  const Tensor &dy = s.in(0, "dY"), &x = s.in(1, "X");
  requireDeviceFloat(node, dy, "dY");
  requireDeviceFloat(node, x, "X");
  PoolWindow w = poolWindow(node, x.dims);
  if (dy.dims != outputDims(x.dims, w))
    fail(node, "dY of shape ", shapeString(dy.dims),
         " is not MaxPool's output for X of shape ", shapeString(x.dims));
  void *dx = s.out(0, dy.dtype, x.dims);
  auto *argmax = static_cast<int64_t *>(
      s.scratch(size_t(w.planes * w.outCount) * sizeof(int64_t)));
  launchMaxPoolGrad(dy.dtype, s.device(0), x.dtype, s.device(1), dx, argmax, w,
                    s.stream());
}

void runAveragePool(NodeStaging &s) {
  const Node &node = s.node();
  const Tensor &x = s.in(0, "X");
  requireDeviceFloat(node, x, "X");
  PoolWindow w = poolWindow(node, x.dims);
  void *y = s.out(0, x.dtype, outputDims(x.dims, w));
  launchAveragePool(x.dtype, s.device(0), y, w, s.stream());
}

void runAveragePoolGrad(NodeStaging &s) {
  const Node &node = s.node();
  const Tensor &dy = s.in(0, "dY");
  requireDeviceFloat(node, dy, "dY");
  std::vector<int64_t> xs = cpu::readInts(node, s.in(1, "x_shape"), "x_shape");
  cpu::checkedCount(node, xs);
  PoolWindow w = poolWindow(node, xs);
  if (dy.dims != outputDims(xs, w))
    fail(node, "dY of shape ", shapeString(dy.dims),
         " is not AveragePool's output for x_shape ", shapeString(xs));
  void *dx = s.out(0, dy.dtype, xs);
  launchAveragePoolGrad(dy.dtype, s.device(0), dx, w, s.stream());
}

void runGlobalAveragePool(NodeStaging &s) {
  const Node &node = s.node();
  const Tensor &x = s.in(0, "X");
  requireDeviceFloat(node, x, "X");
  cpu::requireWindowRank(node, x, "X");
  std::vector<int64_t> dims = x.dims;
  int64_t size = 1;
  for (size_t d = 2; d < dims.size(); ++d) {
    size *= dims[d];
    dims[d] = 1;
  }
  void *y = s.out(0, x.dtype, dims);
  launchGlobalAveragePool(x.dtype, s.device(0), y, x.dims[0] * x.dims[1], size,
                          s.stream());
}

/// "" unless input 0 has a known rank with more spatial dims than the
/// kernels take.
std::string checkPoolRank(const Node &node) {
  const Value *v = node.numInputs() ? node.input(0) : nullptr;
  if (v && v->hasShape && v->dims.size() > size_t(kMaxPoolRank) + 2)
    return "the pooling kernels take 1 to 3 spatial dims, input 0 has " +
           std::to_string(v->dims.size() - 2);
  return "";
}

std::string checkPool(const Node &n) {
  std::string why = requireDeviceFloat(n, {0});
  return why.empty() ? checkPoolRank(n) : why;
}

std::string checkMaxPoolGrad(const Node &n) {
  std::string why = requireDeviceFloat(n, {0, 1});
  return why.empty() ? checkPoolRank(n) : why;
}

} // namespace

std::vector<CudaOpEntry> convPoolOps() {
  return {
      {"", "Conv", runConv, checkConv},
      {"", "ConvTranspose", runConvTranspose, checkConv},
      {kMpcDomain, "ConvGradInput", runConvGradInput, checkConvGradInput},
      {kMpcDomain, "ConvGradWeight", runConvGradWeight, checkConvGradInput},
      {"", "MaxPool", runMaxPool, checkPool},
      {"", "AveragePool", runAveragePool, checkPool},
      {"", "GlobalAveragePool", runGlobalAveragePool,
       [](const Node &n) { return requireDeviceFloat(n, {0}); }},
      {kMpcDomain, "MaxPoolGrad", runMaxPoolGrad, checkMaxPoolGrad},
      {kMpcDomain, "AveragePoolGrad", runAveragePoolGrad,
       [](const Node &n) { return requireDeviceFloat(n, {0}); }},
  };
}

} // namespace cuda
} // namespace mpc
