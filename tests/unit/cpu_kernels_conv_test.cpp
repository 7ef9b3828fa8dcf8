// CPU kernels of the CNN family (kernels/cpu/conv_pool.cpp,
// normalization.cpp) against naive loops written here in double.
//
// The references index X directly by coordinates (o * stride - pad + k *
// dilation), independently of the window tables the kernels use, and take
// the pads of the auto_pad cases as worked out by hand. fp16 results must
// equal the fp32 result rounded once (the GPU's contract); bad input must
// raise mpc::Error naming the node.
#include "ir/mpc_ops.h"
#include "kernels/cpu/kernel_table.h"
#include "support/diagnostics.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

using namespace mpc;

namespace {

using Attrs = std::vector<std::pair<std::string, Attribute>>;
using Ints = std::vector<int64_t>;

Attribute ints(Ints v) { return Attribute::ofInts(std::move(v)); }
Attribute i64(int64_t v) { return Attribute::ofInt(v); }
Attribute str(std::string v) { return Attribute::ofString(std::move(v)); }

Tensor random(Ints dims, unsigned seed, DType t = DType::F32) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> d(-1, 1);
  Tensor x(t, dims);
  for (int64_t i = 0; i < x.numel(); ++i)
    x.setFromDouble(i, d(rng));
  return x;
}
/// Multiples of 1/8 in [-1, 1]: products and short sums are exact in fp16.
Tensor eighths(Ints dims, unsigned seed, DType t = DType::F32) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> d(-8, 8);
  Tensor x(t, dims);
  for (int64_t i = 0; i < x.numel(); ++i)
    x.setFromDouble(i, d(rng) / 8.0);
  return x;
}
void expectNear(const Tensor &t, const std::vector<double> &want, double tol,
                const std::string &what) {
  ASSERT_EQ(size_t(t.numel()), want.size()) << what;
  int bad = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    double got = t.getAsDouble(int64_t(i));
    // Written so that a NaN fails: NaN > x is false.
    if (!(std::fabs(got - want[i]) <=
          tol * std::max(1.0, std::fabs(want[i]))) &&
        bad++ < 5)
      ADD_FAILURE() << what << " element " << i << ": got " << got << ", want "
                    << want[i];
  }
}

/// Runs a one-node graph; nullptr inputs are omitted, and output i is
/// omitted where `present` says so (all present when empty).
std::vector<Tensor> run(const std::string &op,
                        const std::vector<const Tensor *> &inputs,
                        const Attrs &attrs = {}, size_t numOutputs = 1,
                        const std::string &domain = "",
                        std::vector<bool> present = {}) {
  Graph g;
  std::vector<Value *> vals;
  for (size_t i = 0; i < inputs.size(); ++i)
    vals.push_back(inputs[i]
                       ? g.addInput("in" + std::to_string(i), inputs[i]->dtype,
                                    toDims(inputs[i]->dims))
                       : nullptr);
  std::vector<std::string> names;
  for (size_t i = 0; i < numOutputs; ++i)
    names.push_back(present.empty() || present[i] ? "out" + std::to_string(i)
                                                  : "");
  Node *n = g.createNodeWithOutputs(op, vals, names, "test_node", domain);
  for (const auto &kv : attrs)
    n->setAttr(kv.first, kv.second);
  std::vector<Tensor> outs;
  runCpuNode(*n, inputs, outs);
  return outs;
}

std::string errorOf(const std::string &op,
                    const std::vector<const Tensor *> &inputs,
                    const Attrs &attrs, size_t numOutputs = 1,
                    const std::string &domain = "") {
  try {
    run(op, inputs, attrs, numOutputs, domain);
  } catch (const Error &e) {
    return e.what();
  }
  return "";
}

// --- naive references
// ----------------------------------------------------------

/// Window parameters of a naive reference; pads per dim (begin, end).
struct Win {
  Ints kernel, strides, dilations, padBegin, padEnd;
  bool ceil = false;

  size_t rank() const { return kernel.size(); }
  static Win of(Ints kernel, Ints strides = {}, Ints dilations = {},
                Ints pads = {}) {
    Win w;
    size_t r = kernel.size();
    w.kernel = kernel;
    w.strides = strides.empty() ? Ints(r, 1) : strides;
    w.dilations = dilations.empty() ? Ints(r, 1) : dilations;
    Ints p = pads.empty() ? Ints(2 * r, 0) : pads;
    w.padBegin.assign(p.begin(), p.begin() + int64_t(r));
    w.padEnd.assign(p.begin() + int64_t(r), p.end());
    return w;
  }
  /// Output size of dim d for input size `in` (floor, or ceil with the
  /// last-window rule).
  int64_t outSize(size_t d, int64_t in) const {
    int64_t eff = (kernel[d] - 1) * dilations[d] + 1;
    int64_t span = in + padBegin[d] + padEnd[d] - eff;
    int64_t o =
        (ceil ? (span + strides[d] - 1) / strides[d] : span / strides[d]) + 1;
    if (ceil && (o - 1) * strides[d] >= in + padBegin[d])
      --o;
    return o;
  }
};

int64_t product(const Ints &v) {
  int64_t p = 1;
  for (int64_t x : v)
    p *= x;
  return p;
}

/// Row-major coordinates of flat index i over dims.
Ints unravel(int64_t i, const Ints &dims) {
  Ints c(dims.size());
  for (size_t d = dims.size(); d-- > 0;) {
    c[d] = i % dims[d];
    i /= dims[d];
  }
  return c;
}

/// Flat index of input coordinate o*s - pb + k*dil, or -1 outside X
/// (`inPads` is set when it is inside X's pads).
int64_t inputIndex(const Win &w, const Ints &in, const Ints &o, const Ints &k,
                   bool *inPads = nullptr) {
  int64_t flat = 0;
  bool outside = false, pads = true;
  for (size_t d = 0; d < w.rank(); ++d) {
    int64_t x = o[d] * w.strides[d] - w.padBegin[d] + k[d] * w.dilations[d];
    outside |= x < 0 || x >= in[d];
    pads &= x >= -w.padBegin[d] && x < in[d] + w.padEnd[d];
    flat = flat * in[d] + x;
  }
  if (inPads)
    *inPads = pads;
  return outside ? -1 : flat;
}

Ints spatial(const Ints &dims) { return Ints(dims.begin() + 2, dims.end()); }

Ints outDims(const Win &w, int64_t n, int64_t c, const Ints &in) {
  Ints d = {n, c};
  for (size_t i = 0; i < in.size(); ++i)
    d.push_back(w.outSize(i, in[i]));
  return d;
}

/// Conv in double: y[n, g*Mg+m, o] = b + sum w[g*Mg+m, c, k] x[n, g*Cg+c, .].
std::vector<double> naiveConv(const Tensor &x, const Tensor &w, const Tensor *b,
                              const Win &win, int64_t group, Ints &dims) {
  Ints in = spatial(x.dims), ks = spatial(w.dims);
  int64_t n = x.dims[0], c = x.dims[1], m = w.dims[0], cg = c / group,
          mg = m / group;
  dims = outDims(win, n, m, in);
  Ints out = spatial(dims);
  int64_t P = product(out), S = product(in), K = product(ks);
  std::vector<double> y(size_t(n * m * P));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < m; ++j)
      for (int64_t p = 0; p < P; ++p) {
        double acc = b ? b->getAsDouble(j) : 0;
        Ints o = unravel(p, out);
        int64_t g = j / mg;
        for (int64_t cc = 0; cc < cg; ++cc)
          for (int64_t k = 0; k < K; ++k) {
            int64_t idx = inputIndex(win, in, o, unravel(k, ks));
            if (idx >= 0)
              acc += x.getAsDouble((i * c + g * cg + cc) * S + idx) *
                     w.getAsDouble((j * cg + cc) * K + k);
          }
        y[size_t((i * m + j) * P + p)] = acc;
      }
  return y;
}

/// ConvTranspose in double: every x[n, g*Cg+c, i] * w[g*Cg+c, m, k] lands at
/// output position i*s - pb + k*dil.
std::vector<double> naiveConvTranspose(const Tensor &x, const Tensor &w,
                                       const Tensor *b, const Win &win,
                                       int64_t group, const Ints &outSpatial) {
  Ints in = spatial(x.dims), ks = spatial(w.dims);
  int64_t n = x.dims[0], c = x.dims[1], mg = w.dims[1], m = mg * group,
          cg = c / group;
  int64_t P = product(in), S = product(outSpatial), K = product(ks);
  std::vector<double> y(size_t(n * m * S), 0.0);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < m; ++j)
      for (int64_t s = 0; s < S; ++s)
        y[size_t((i * m + j) * S + s)] = b ? b->getAsDouble(j) : 0;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t cc = 0; cc < c; ++cc)
      for (int64_t p = 0; p < P; ++p) {
        Ints o = unravel(p, in);
        int64_t g = cc / cg;
        for (int64_t mm = 0; mm < mg; ++mm)
          for (int64_t k = 0; k < K; ++k) {
            int64_t idx = inputIndex(win, outSpatial, o, unravel(k, ks));
            if (idx >= 0)
              y[size_t((i * m + g * mg + mm) * S + idx)] +=
                  x.getAsDouble((i * c + cc) * P + p) *
                  w.getAsDouble((cc * mg + mm) * K + k);
          }
      }
  return y;
}

Attrs convAttrs(const Win &w, int64_t group) {
  Ints pads = w.padBegin;
  pads.insert(pads.end(), w.padEnd.begin(), w.padEnd.end());
  return {{"strides", ints(w.strides)},
          {"dilations", ints(w.dilations)},
          {"pads", ints(pads)},
          {"group", i64(group)}};
}

Attrs poolAttrs(const Win &w) {
  Attrs a = convAttrs(w, 1);
  a.pop_back(); // no group
  a.push_back({"kernel_shape", ints(w.kernel)});
  if (w.ceil)
    a.push_back({"ceil_mode", i64(1)});
  return a;
}

} // namespace

// --- the table
// -----------------------------------------------------------------

TEST(CpuConvKernels, TableHasTheFamily) {
  std::vector<std::string> ops = cpuKernelOps();
  for (const char *op :
       {"Conv", "ConvTranspose", "MaxPool", "AveragePool", "GlobalAveragePool",
        "BatchNormalization", "mpc.ConvGradInput", "mpc.ConvGradWeight",
        "mpc.MaxPoolGrad", "mpc.AveragePoolGrad", "mpc.BatchNormalizationGrad"})
    EXPECT_TRUE(std::count(ops.begin(), ops.end(), op)) << op;
}

// --- Conv
// ----------------------------------------------------------------------

TEST(CpuConvKernels, Conv2dMatchesNaiveLoopsForEveryAttribute) {
  unsigned seed = 1;
  for (int64_t stride : {1, 2, 3})
    for (const Ints &pads :
         {Ints{0, 0, 0, 0}, Ints{1, 1, 1, 1}, Ints{2, 0, 1, 3}})
      for (int64_t dil : {1, 2})
        for (int64_t group : {1, 2, 4})
          for (bool bias : {false, true})
            for (DType t : {DType::F32, DType::F64}) {
              Win win = Win::of({3, 2}, {stride, 1}, {dil, 1}, pads);
              Tensor x = random({2, 4, 7, 6}, seed++, t);
              Tensor w = random({8, 4 / group, 3, 2}, seed++, t);
              Tensor b = random({8}, seed++, t);
              Ints dims;
              std::vector<double> want =
                  naiveConv(x, w, bias ? &b : nullptr, win, group, dims);
              Tensor y = run("Conv", {&x, &w, bias ? &b : nullptr},
                             convAttrs(win, group))[0];
              std::string what = "stride " + std::to_string(stride) + " dil " +
                                 std::to_string(dil) + " group " +
                                 std::to_string(group) + " " + dtypeName(t);
              EXPECT_EQ(y.dims, dims) << what;
              EXPECT_EQ(y.dtype, t);
              expectNear(y, want, t == DType::F64 ? 1e-12 : 1e-5, what);
            }
}

TEST(CpuConvKernels, Conv1dAnd3d) {
  Win w1 = Win::of({3}, {2}, {2}, {1, 2});
  Tensor x1 = random({2, 3, 11}, 1), k1 = random({4, 3, 3}, 2),
         b1 = random({4}, 3);
  Ints d1;
  std::vector<double> want1 = naiveConv(x1, k1, &b1, w1, 1, d1);
  Tensor y1 = run("Conv", {&x1, &k1, &b1}, convAttrs(w1, 1))[0];
  EXPECT_EQ(y1.dims, d1);
  expectNear(y1, want1, 1e-5, "1-D");

  Win w3 = Win::of({2, 3, 2}, {1, 2, 1}, {1, 1, 2}, {1, 0, 1, 0, 1, 1});
  Tensor x3 = random({1, 4, 4, 5, 6}, 4), k3 = random({2, 2, 2, 3, 2}, 5);
  Ints d3;
  std::vector<double> want3 = naiveConv(x3, k3, nullptr, w3, 2, d3);
  Tensor y3 = run("Conv", {&x3, &k3}, convAttrs(w3, 2))[0];
  EXPECT_EQ(y3.dims, d3);
  expectNear(y3, want3, 1e-5, "3-D");
}

TEST(CpuConvKernels, ConvAutoPadMatchesHandWorkedPads) {
  // k = 3, stride 2: size 7 -> 4 outputs, total pad 2 (1 + 1 either way);
  // size 6 -> 3 outputs, total pad 1: SAME_UPPER puts it at the end,
  // SAME_LOWER at the beginning; VALID: floor((in - 3) / 2) + 1, no pads.
  struct Case {
    const char *autoPad;
    int64_t size;
    Ints pads;
  };
  for (const Case &c : std::vector<Case>{{"SAME_UPPER", 7, {1, 1, 1, 1}},
                                         {"SAME_LOWER", 7, {1, 1, 1, 1}},
                                         {"SAME_UPPER", 6, {0, 0, 1, 1}},
                                         {"SAME_LOWER", 6, {1, 1, 0, 0}},
                                         {"VALID", 6, {0, 0, 0, 0}},
                                         {"VALID", 7, {0, 0, 0, 0}}}) {
    Win win = Win::of({3, 3}, {2, 2}, {}, c.pads);
    Tensor x = random({1, 2, c.size, c.size}, 7), w = random({3, 2, 3, 3}, 8);
    Ints dims;
    std::vector<double> want = naiveConv(x, w, nullptr, win, 1, dims);
    Tensor y = run("Conv", {&x, &w},
                   {{"auto_pad", str(c.autoPad)},
                    {"strides", ints({2, 2})},
                    {"kernel_shape", ints({3, 3})}})[0];
    std::string what = std::string(c.autoPad) + " " + std::to_string(c.size);
    EXPECT_EQ(y.dims, dims) << what;
    expectNear(y, want, 1e-5, what);
  }
}

TEST(CpuConvKernels, ConvHalfPrecisionRoundsTheFp32ResultOnce) {
  for (DType t : {DType::F16, DType::BF16}) {
    Tensor x = eighths({2, 4, 5, 5}, 11, t), w = eighths({4, 2, 3, 3}, 12, t),
           b = eighths({4}, 13, t);
    Attrs a = {{"pads", ints({1, 1, 1, 1})}, {"group", i64(2)}};
    Tensor y = run("Conv", {&x, &w, &b}, a)[0];
    Tensor x32 = x.castTo(DType::F32), w32 = w.castTo(DType::F32),
           b32 = b.castTo(DType::F32);
    Tensor want = run("Conv", {&x32, &w32, &b32}, a)[0].castTo(t);
    EXPECT_EQ(y.dtype, t);
    EXPECT_EQ(y.bytes, want.bytes) << dtypeName(t);
  }
}

TEST(CpuConvKernels, ConvGradientsMatchNaiveDerivatives) {
  // dL/dX and dL/dW of L = sum(Conv(X, W) * R), by the chain rule over the
  // naive loops: dX[n, c, idx] += R * W, dW[m, c, k] += R * X.
  for (int64_t group : {1, 2}) {
    Win win = Win::of({3, 2}, {2, 1}, {1, 2}, {1, 0, 2, 1});
    Tensor x = random({2, 4, 6, 7}, 21, DType::F64);
    Tensor w = random({6, 4 / group, 3, 2}, 22, DType::F64);
    Ints dims;
    naiveConv(x, w, nullptr, win, group, dims);
    Tensor r = random(dims, 23, DType::F64);
    Ints in = spatial(x.dims), ks = spatial(w.dims), out = spatial(dims);
    int64_t n = 2, c = 4, m = 6, cg = c / group, mg = m / group;
    int64_t P = product(out), S = product(in), K = product(ks);
    std::vector<double> dx(size_t(x.numel()), 0), dw(size_t(w.numel()), 0);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < m; ++j)
        for (int64_t p = 0; p < P; ++p)
          for (int64_t cc = 0; cc < cg; ++cc)
            for (int64_t k = 0; k < K; ++k) {
              int64_t idx =
                  inputIndex(win, in, unravel(p, out), unravel(k, ks));
              if (idx < 0)
                continue;
              double g = r.getAsDouble((i * m + j) * P + p);
              int64_t xi = (i * c + (j / mg) * cg + cc) * S + idx;
              int64_t wi = (j * cg + cc) * K + k;
              dx[size_t(xi)] += g * w.getAsDouble(wi);
              dw[size_t(wi)] += g * x.getAsDouble(xi);
            }
    Attrs a = convAttrs(win, group);
    Tensor shape = Tensor::fromInt64s({4}, x.dims);
    Tensor gx = run("ConvGradInput", {&r, &w, &shape}, a, 1, kMpcDomain)[0];
    EXPECT_EQ(gx.dims, x.dims);
    expectNear(gx, dx, 1e-12, "dX group " + std::to_string(group));
    a.push_back({"kernel_shape", ints({3, 2})});
    Tensor gw = run("ConvGradWeight", {&r, &x}, a, 1, kMpcDomain)[0];
    EXPECT_EQ(gw.dims, w.dims);
    expectNear(gw, dw, 1e-12, "dW group " + std::to_string(group));
  }
}

TEST(CpuConvKernels, ConvGradInputWithSameLowerPadsLikeTheForward) {
  // The backward resolves auto_pad from x_shape as the forward did: its
  // result equals the explicit-pads backward with the hand-worked pads.
  Tensor w = random({3, 2, 3, 3}, 31), dy = random({1, 3, 3, 3}, 32);
  Tensor shape = Tensor::fromInt64s({4}, {1, 2, 6, 6});
  Tensor same =
      run("ConvGradInput", {&dy, &w, &shape},
          {{"auto_pad", str("SAME_LOWER")}, {"strides", ints({2, 2})}}, 1,
          kMpcDomain)[0];
  Tensor explicitPads =
      run("ConvGradInput", {&dy, &w, &shape},
          {{"pads", ints({1, 1, 0, 0})}, {"strides", ints({2, 2})}}, 1,
          kMpcDomain)[0];
  EXPECT_EQ(same.bytes, explicitPads.bytes);
}

// --- ConvTranspose
// -------------------------------------------------------------

TEST(CpuConvKernels, ConvTransposeMatchesNaiveLoops) {
  struct Case {
    Win win;
    int64_t group;
    Ints outputPadding;
  };
  unsigned seed = 40;
  for (const Case &c : std::vector<Case>{
           {Win::of({3, 3}), 1, {0, 0}},
           {Win::of({3, 2}, {2, 2}, {}, {1, 0, 1, 1}), 1, {1, 1}},
           {Win::of({2, 2}, {2, 1}, {2, 2}), 2, {1, 0}},
           {Win::of({3, 3}, {3, 2}, {1, 1}, {2, 1, 0, 1}), 2, {2, 1}}}) {
    Tensor x = random({2, 4, 3, 4}, seed++);
    Tensor w = random({4, 3, c.win.kernel[0], c.win.kernel[1]}, seed++);
    Tensor b = random({3 * c.group}, seed++);
    Ints in = spatial(x.dims), out;
    for (size_t d = 0; d < 2; ++d)
      out.push_back(c.win.strides[d] * (in[d] - 1) + c.outputPadding[d] +
                    (c.win.kernel[d] - 1) * c.win.dilations[d] + 1 -
                    c.win.padBegin[d] - c.win.padEnd[d]);
    Attrs a = convAttrs(c.win, c.group);
    a.push_back({"output_padding", ints(c.outputPadding)});
    Tensor y = run("ConvTranspose", {&x, &w, &b}, a)[0];
    Ints dims = {2, 3 * c.group, out[0], out[1]};
    EXPECT_EQ(y.dims, dims);
    expectNear(y, naiveConvTranspose(x, w, &b, c.win, c.group, out), 1e-5,
               "ConvTranspose group " + std::to_string(c.group));
  }
}

TEST(CpuConvKernels, ConvTransposeOutputShapeAndAutoPad) {
  Tensor x = random({1, 2, 3, 3}, 50), w = random({2, 2, 3, 3}, 51);
  // stride 2 on 3: full size 2*2 + 3 = 7. output_shape [6, 7] leaves a total
  // pad of 1 / 0: NOTSET puts the odd pad at the beginning, so pads are
  // (1, 0) and (0, 0); SAME_UPPER asks for 3 * 2 = 6: pads (0, 1) per dim.
  Tensor y =
      run("ConvTranspose", {&x, &w},
          {{"strides", ints({2, 2})}, {"output_shape", ints({6, 7})}})[0];
  EXPECT_EQ(y.dims, (Ints{1, 2, 6, 7}));
  expectNear(y,
             naiveConvTranspose(x, w, nullptr,
                                Win::of({3, 3}, {2, 2}, {}, {1, 0, 0, 0}), 1,
                                {6, 7}),
             1e-5, "output_shape");
  Tensor same =
      run("ConvTranspose", {&x, &w},
          {{"strides", ints({2, 2})}, {"auto_pad", str("SAME_UPPER")}})[0];
  EXPECT_EQ(same.dims, (Ints{1, 2, 6, 6}));
  expectNear(same,
             naiveConvTranspose(x, w, nullptr,
                                Win::of({3, 3}, {2, 2}, {}, {0, 0, 1, 1}), 1,
                                {6, 6}),
             1e-5, "SAME_UPPER");
}

TEST(CpuConvKernels, ConvTransposeIsConvGradInput) {
  // Without bias, ConvTranspose(dY, W) with output_shape = X's spatial size
  // is the data gradient of Conv(X, W): the same numbers.
  Tensor dy = random({2, 4, 3, 3}, 60), w = random({4, 3, 3, 3}, 61);
  Attrs a = {{"strides", ints({2, 2})}, {"pads", ints({1, 1, 1, 1})}};
  Tensor shape = Tensor::fromInt64s({4}, {2, 3, 6, 6});
  Tensor gx = run("ConvGradInput", {&dy, &w, &shape}, a, 1, kMpcDomain)[0];
  a.push_back({"output_padding", ints({1, 1})});
  Tensor t = run("ConvTranspose", {&dy, &w}, a)[0];
  EXPECT_EQ(t.dims, gx.dims);
  EXPECT_EQ(t.bytes, gx.bytes);
}

TEST(CpuConvKernels, ConvErrorsNameTheNode) {
  Tensor x = random({1, 3, 5, 5}, 1), w = random({4, 2, 3, 3}, 2);
  std::string msg = errorOf("Conv", {&x, &w}, {});
  EXPECT_NE(msg.find("'test_node'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("group"), std::string::npos) << msg;
  Tensor w3 = random({4, 3, 3, 3}, 3);
  msg = errorOf("Conv", {&x, &w3}, {{"kernel_shape", ints({2, 2})}});
  EXPECT_NE(msg.find("does not match the weight's kernel"), std::string::npos)
      << msg;
  msg = errorOf("Conv", {&x, &w3}, {{"auto_pad", str("SAME")}});
  EXPECT_NE(msg.find("auto_pad"), std::string::npos) << msg;
  Tensor small = random({1, 3, 2, 2}, 4);
  msg = errorOf("Conv", {&small, &w3}, {});
  EXPECT_NE(msg.find("smaller than the window"), std::string::npos) << msg;
}

// --- pools
// ---------------------------------------------------------------------

TEST(CpuPoolKernels, MaxPoolMatchesNaiveLoopsWithIndices) {
  unsigned seed = 70;
  for (const Win &base : {Win::of({2, 2}, {2, 2}), Win::of({3, 3}),
                          Win::of({3, 2}, {2, 2}, {}, {1, 0, 1, 1}),
                          Win::of({2, 2}, {1, 2}, {2, 2}),
                          Win::of({3, 3}, {2, 2}, {}, {1, 1, 1, 1})})
    for (bool ceil : {false, true}) {
      Win win = base;
      win.ceil = ceil;
      Tensor x = random({2, 3, 7, 6}, seed++);
      Ints dims = outDims(win, 2, 3, {7, 6});
      Ints out = spatial(dims), ks = win.kernel, in = {7, 6};
      std::vector<double> want, wantIdx;
      for (int64_t pl = 0; pl < 6; ++pl)
        for (int64_t p = 0; p < product(out); ++p) {
          double best = -INFINITY;
          int64_t at = -1;
          for (int64_t k = 0; k < product(ks); ++k) {
            int64_t idx = inputIndex(win, in, unravel(p, out), unravel(k, ks));
            if (idx >= 0 && (at < 0 || x.getAsDouble(pl * 42 + idx) > best)) {
              best = x.getAsDouble(pl * 42 + idx);
              at = idx;
            }
          }
          want.push_back(best);
          wantIdx.push_back(double(pl * 42 + at));
        }
      std::vector<Tensor> y = run("MaxPool", {&x}, poolAttrs(win), 2);
      std::string what = ceil ? "ceil" : "floor";
      EXPECT_EQ(y[0].dims, dims) << what;
      expectNear(y[0], want, 0, what);
      EXPECT_EQ(y[1].dtype, DType::I64);
      expectNear(y[1], wantIdx, 0, what + " indices");
    }
}

TEST(CpuPoolKernels, MaxPoolTiesNaNAndStorageOrder) {
  // Ties: the first maximum in window order wins (PyTorch); a NaN wins.
  Tensor x = Tensor::fromFloats({1, 1, 2, 4}, {1, 5, 5, 2, 5, 3, NAN, 9});
  Attrs a = {{"kernel_shape", ints({2, 2})}, {"strides", ints({2, 2})}};
  std::vector<Tensor> y = run("MaxPool", {&x}, a, 2);
  EXPECT_EQ(y[0].getAsDouble(0), 5);
  EXPECT_TRUE(std::isnan(y[0].getAsDouble(1)));
  EXPECT_EQ(y[1].data<int64_t>()[0], 1); // (0,1), not (0,2) or (1,0)
  EXPECT_EQ(y[1].data<int64_t>()[1], 6);
  // storage_order = 1: the index is column-major over (h, w): h + w * H.
  a.push_back({"storage_order", i64(1)});
  y = run("MaxPool", {&x}, a, 2);
  EXPECT_EQ(y[1].data<int64_t>()[0], 0 + 1 * 2);
  EXPECT_EQ(y[1].data<int64_t>()[1], 1 + 2 * 2);
  // The gradient goes to the same element; overlapping windows add up.
  Tensor dy = Tensor::fromFloats({1, 1, 1, 2}, {10, 20});
  Tensor dx = run("MaxPoolGrad", {&dy, &x}, poolAttrs(Win::of({2, 2}, {2, 2})),
                  1, kMpcDomain)[0];
  expectNear(dx, {0, 10, 0, 0, 0, 0, 20, 0}, 0, "MaxPoolGrad ties");
  Tensor x2 = Tensor::fromFloats({1, 1, 1, 3}, {1, 7, 2});
  Tensor dy2 = Tensor::fromFloats({1, 1, 1, 2}, {3, 4});
  Tensor dx2 = run("MaxPoolGrad", {&dy2, &x2}, {{"kernel_shape", ints({1, 2})}},
                   1, kMpcDomain)[0];
  expectNear(dx2, {0, 7, 0}, 0, "MaxPoolGrad overlap");
}

TEST(CpuPoolKernels, MaxPoolHalfIsExact) {
  Tensor x = random({1, 2, 5, 5}, 80, DType::F16);
  Attrs a = {{"kernel_shape", ints({3, 3})}, {"pads", ints({1, 1, 1, 1})}};
  Tensor y = run("MaxPool", {&x}, a)[0];
  Tensor x32 = x.castTo(DType::F32);
  Tensor want = run("MaxPool", {&x32}, a)[0].castTo(DType::F16);
  EXPECT_EQ(y.dtype, DType::F16);
  EXPECT_EQ(y.bytes, want.bytes);
}

TEST(CpuPoolKernels, AveragePoolDivisorsLikePyTorch) {
  // 1..9 in 3x3, kernel 2, stride 2, ceil_mode: PyTorch's avg_pool2d gives
  // [[3, 4.5], [7.5, 9]]: windows past the input count only what they see.
  std::vector<float> v = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  Tensor x = Tensor::fromFloats({1, 1, 3, 3}, v);
  Attrs a = {{"kernel_shape", ints({2, 2})},
             {"strides", ints({2, 2})},
             {"ceil_mode", i64(1)}};
  expectNear(run("AveragePool", {&x}, a)[0], {3, 4.5, 7.5, 9}, 1e-6, "ceil");
  // pads 1, kernel 3, stride 2 on 3x3 -> 2x2 windows. count_include_pad=1:
  // every window has 9 positions (PyTorch's default count_include_pad=True);
  // = 0: only the 4 input elements of each corner window count.
  Attrs p = {{"kernel_shape", ints({3, 3})},
             {"strides", ints({2, 2})},
             {"pads", ints({1, 1, 1, 1})}};
  Attrs incl = p;
  incl.push_back({"count_include_pad", i64(1)});
  expectNear(run("AveragePool", {&x}, incl)[0],
             {12 / 9.0, 16 / 9.0, 24 / 9.0, 28 / 9.0}, 1e-6, "include pad");
  expectNear(run("AveragePool", {&x}, p)[0], {3, 4, 6, 7}, 1e-6, "exclude pad");
  // ceil_mode with pads: the last window's part past the end pad is not
  // counted even with count_include_pad = 1 (PyTorch): 4x4 input, kernel 3,
  // stride 2, pad 1, ceil: 3 windows per dim, the last covers [3, 6) of
  // which only [3, 5) is input or pad.
  Tensor x4 = Tensor::fromFloats({1, 1, 1, 4}, {1, 2, 3, 4});
  Attrs c = {{"kernel_shape", ints({1, 3})},
             {"strides", ints({1, 2})},
             {"pads", ints({0, 1, 0, 1})},
             {"ceil_mode", i64(1)},
             {"count_include_pad", i64(1)}};
  expectNear(run("AveragePool", {&x4}, c)[0], {3 / 3.0, 9 / 3.0, 4 / 2.0}, 1e-6,
             "ceil + include pad");
}

TEST(CpuPoolKernels, AveragePoolAndItsGradientMatchNaiveLoops) {
  unsigned seed = 90;
  for (int include = 0; include < 2; ++include)
    for (const Win &base :
         {Win::of({2, 2}, {2, 2}), Win::of({3, 2}, {2, 1}, {}, {1, 0, 1, 1}),
          Win::of({3, 3}, {2, 2}, {2, 1}, {2, 1, 1, 2})})
      for (bool ceil : {false, true}) {
        Win win = base;
        win.ceil = ceil;
        Tensor x = random({2, 2, 7, 6}, seed++, DType::F64);
        Ints dims = outDims(win, 2, 2, {7, 6});
        Ints out = spatial(dims), ks = win.kernel, in = {7, 6};
        Tensor dy = random(dims, seed++, DType::F64);
        std::vector<double> want, wantDx(size_t(x.numel()), 0.0);
        for (int64_t pl = 0; pl < 4; ++pl)
          for (int64_t p = 0; p < product(out); ++p) {
            double sum = 0;
            int64_t count = 0;
            std::vector<int64_t> seen;
            for (int64_t k = 0; k < product(ks); ++k) {
              bool inPads = false;
              int64_t idx =
                  inputIndex(win, in, unravel(p, out), unravel(k, ks), &inPads);
              if (idx >= 0) {
                sum += x.getAsDouble(pl * 42 + idx);
                seen.push_back(idx);
              }
              count += idx >= 0 || (include && inPads);
            }
            want.push_back(sum / double(count));
            for (int64_t idx : seen)
              wantDx[size_t(pl * 42 + idx)] +=
                  dy.getAsDouble(pl * product(out) + p) / double(count);
          }
        Attrs a = poolAttrs(win);
        a.push_back({"count_include_pad", i64(include)});
        std::string what =
            "include " + std::to_string(include) + (ceil ? " ceil" : "");
        Tensor y = run("AveragePool", {&x}, a)[0];
        EXPECT_EQ(y.dims, dims) << what;
        expectNear(y, want, 1e-12, what);
        Tensor shape = Tensor::fromInt64s({4}, x.dims);
        Tensor dx = run("AveragePoolGrad", {&dy, &shape}, a, 1, kMpcDomain)[0];
        expectNear(dx, wantDx, 1e-12, what + " grad");
      }
}

TEST(CpuPoolKernels, GlobalAveragePoolAccumulatesInFp32) {
  // 4096 values of 1 + 2^-10 in fp16: an fp16 running sum would stall at
  // 2048; the fp32 mean is the value itself.
  Tensor x(DType::F16, {1, 2, 64, 64});
  for (int64_t i = 0; i < x.numel(); ++i)
    x.setFromDouble(i, 1.0 + 1.0 / 1024);
  Tensor y = run("GlobalAveragePool", {&x})[0];
  EXPECT_EQ(y.dims, (Ints{1, 2, 1, 1}));
  expectNear(y, {1.0 + 1.0 / 1024, 1.0 + 1.0 / 1024}, 0, "mean");
  Tensor d = random({2, 3, 4}, 95, DType::F64);
  Tensor yd = run("GlobalAveragePool", {&d})[0];
  for (int64_t pl = 0; pl < 6; ++pl) {
    double s = 0;
    for (int64_t i = 0; i < 4; ++i)
      s += d.getAsDouble(pl * 4 + i);
    EXPECT_NEAR(yd.getAsDouble(pl), s / 4, 1e-15);
  }
}

TEST(CpuPoolKernels, PoolErrorsNameTheNode) {
  Tensor x = random({1, 1, 4, 4}, 1);
  std::string msg = errorOf("MaxPool", {&x}, {});
  EXPECT_NE(msg.find("'test_node'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("kernel_shape"), std::string::npos) << msg;
  msg = errorOf("AveragePool", {&x},
                {{"kernel_shape", ints({2, 2})}, {"pads", ints({2, 0, 0, 0})}});
  EXPECT_NE(msg.find("smaller than the window"), std::string::npos) << msg;
  Tensor dy = random({1, 1, 3, 3}, 2);
  msg = errorOf("MaxPoolGrad", {&dy, &x},
                {{"kernel_shape", ints({2, 2})}, {"strides", ints({2, 2})}}, 1,
                kMpcDomain);
  EXPECT_NE(msg.find("not MaxPool's output"), std::string::npos) << msg;
}

// --- BatchNormalization
// --------------------------------------------------------

namespace {

struct BnRef {
  std::vector<double> y, mean, var, runMean, runVar;
};

/// Batch-norm in double; training: batch mean, biased var for Y, unbiased
/// for the running var.
BnRef naiveBatchNorm(const Tensor &x, const Tensor &s, const Tensor &b,
                     const Tensor &rm, const Tensor &rv, bool training,
                     double eps, double momentum) {
  int64_t n = x.dims[0], c = x.dims[1], inner = x.numel() / (n * c);
  BnRef r;
  r.y.resize(size_t(x.numel()));
  for (int64_t j = 0; j < c; ++j) {
    double mean = rm.getAsDouble(j), var = rv.getAsDouble(j);
    int64_t count = n * inner;
    if (training) {
      double sum = 0, sq = 0;
      for (int64_t i = 0; i < n; ++i)
        for (int64_t k = 0; k < inner; ++k)
          sum += x.getAsDouble((i * c + j) * inner + k);
      mean = sum / double(count);
      for (int64_t i = 0; i < n; ++i)
        for (int64_t k = 0; k < inner; ++k) {
          double d = x.getAsDouble((i * c + j) * inner + k) - mean;
          sq += d * d;
        }
      var = sq / double(count);
      r.runMean.push_back(rm.getAsDouble(j) * momentum + mean * (1 - momentum));
      r.runVar.push_back(rv.getAsDouble(j) * momentum + var * double(count) /
                                                            double(count - 1) *
                                                            (1 - momentum));
    }
    r.mean.push_back(mean);
    r.var.push_back(var);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t k = 0; k < inner; ++k) {
        int64_t at = (i * c + j) * inner + k;
        r.y[size_t(at)] = (x.getAsDouble(at) - mean) / std::sqrt(var + eps) *
                              s.getAsDouble(j) +
                          b.getAsDouble(j);
      }
  }
  return r;
}

} // namespace

TEST(CpuBatchNormKernels, InferenceAndTrainingMatchNaiveLoops) {
  Tensor x = random({4, 3, 2, 5}, 100), s = random({3}, 101),
         b = random({3}, 102), rm = random({3}, 103);
  Tensor rv = random({3}, 104);
  for (int64_t i = 0; i < 3; ++i)
    rv.setFromDouble(i, 0.5 + std::fabs(rv.getAsDouble(i)));
  BnRef inf = naiveBatchNorm(x, s, b, rm, rv, false, 1e-5, 0.9);
  Tensor y = run("BatchNormalization", {&x, &s, &b, &rm, &rv})[0];
  expectNear(y, inf.y, 1e-5, "inference");

  BnRef tr = naiveBatchNorm(x, s, b, rm, rv, true, 1e-3, 0.7);
  std::vector<Tensor> outs = run("BatchNormalization", {&x, &s, &b, &rm, &rv},
                                 {{"training_mode", i64(1)},
                                  {"epsilon", Attribute::ofFloat(1e-3f)},
                                  {"momentum", Attribute::ofFloat(0.7f)}},
                                 3);
  expectNear(outs[0], tr.y, 1e-5, "training Y");
  expectNear(outs[1], tr.runMean, 1e-6, "running mean");
  // The unbiased variance (count 40: x 40/39) is what PyTorch stores.
  expectNear(outs[2], tr.runVar, 1e-6, "running var (unbiased)");
  EXPECT_EQ(outs[1].dims, (Ints{3}));

  // BatchNormalization-9 (opset <= 13): five outputs, no training_mode.
  std::vector<Tensor> nine = run("BatchNormalization", {&x, &s, &b, &rm, &rv},
                                 {{"epsilon", Attribute::ofFloat(1e-3f)},
                                  {"momentum", Attribute::ofFloat(0.7f)}},
                                 5);
  EXPECT_EQ(nine[0].bytes, outs[0].bytes);
  expectNear(nine[3], tr.mean, 1e-6, "saved mean");
  expectNear(nine[4], tr.var, 1e-6, "saved var (biased)");
}

TEST(CpuBatchNormKernels, HalfXWithFp32StatisticsAndFp64) {
  // fp16 X with fp32 scale/B/mean/var: Y is the fp32 result rounded once to
  // fp16, the running statistics stay fp32.
  Tensor x = random({4, 2, 3, 3}, 110, DType::F16), s = random({2}, 111),
         b = random({2}, 112), rm = random({2}, 113);
  Tensor rv = Tensor::fromFloats({2}, {1.0f, 2.0f});
  Attrs a = {{"training_mode", i64(1)}};
  std::vector<Tensor> h =
      run("BatchNormalization", {&x, &s, &b, &rm, &rv}, a, 3);
  Tensor x32 = x.castTo(DType::F32);
  std::vector<Tensor> f =
      run("BatchNormalization", {&x32, &s, &b, &rm, &rv}, a, 3);
  EXPECT_EQ(h[0].dtype, DType::F16);
  EXPECT_EQ(h[0].bytes, f[0].castTo(DType::F16).bytes);
  EXPECT_EQ(h[1].dtype, DType::F32);
  EXPECT_EQ(h[1].bytes, f[1].bytes);
  EXPECT_EQ(h[2].bytes, f[2].bytes);

  Tensor xd = random({3, 2, 4}, 114, DType::F64),
         sd = random({2}, 115, DType::F64), bd = random({2}, 116, DType::F64),
         md = random({2}, 117, DType::F64);
  Tensor vd = Tensor(DType::F64, {2});
  vd.setFromDouble(0, 0.7);
  vd.setFromDouble(1, 1.3);
  // momentum and epsilon are fp32 attributes: the reference uses their
  // fp32 values.
  BnRef r =
      naiveBatchNorm(xd, sd, bd, md, vd, true, double(1e-5f), double(0.9f));
  std::vector<Tensor> d =
      run("BatchNormalization", {&xd, &sd, &bd, &md, &vd}, a, 3);
  expectNear(d[0], r.y, 1e-12, "fp64 Y");
  expectNear(d[2], r.runVar, 1e-12, "fp64 running var");
}

TEST(CpuBatchNormKernels, GradientMatchesTheClosedForm) {
  Tensor x = random({3, 2, 2, 3}, 120, DType::F64),
         s = random({2}, 121, DType::F64),
         dy = random({3, 2, 2, 3}, 122, DType::F64);
  Tensor mean = random({2}, 123, DType::F64);
  Tensor var(DType::F64, {2});
  var.setFromDouble(0, 0.8);
  var.setFromDouble(1, 1.7);
  const double eps = 1e-5;
  int64_t n = 3, c = 2, inner = 6, count = 18;
  for (bool training : {true, false}) {
    std::vector<double> m(2), is(2), db(2, 0), ds(2, 0), dx(size_t(x.numel()));
    for (int64_t j = 0; j < c; ++j) {
      double mu = mean.getAsDouble(j), v = var.getAsDouble(j);
      if (training) {
        double sum = 0, sq = 0;
        for (int64_t i = 0; i < n; ++i)
          for (int64_t k = 0; k < inner; ++k)
            sum += x.getAsDouble((i * c + j) * inner + k);
        mu = sum / count;
        for (int64_t i = 0; i < n; ++i)
          for (int64_t k = 0; k < inner; ++k)
            sq += std::pow(x.getAsDouble((i * c + j) * inner + k) - mu, 2);
        v = sq / count;
      }
      m[size_t(j)] = mu;
      is[size_t(j)] = 1 / std::sqrt(v + eps);
      for (int64_t i = 0; i < n; ++i)
        for (int64_t k = 0; k < inner; ++k) {
          int64_t at = (i * c + j) * inner + k;
          db[size_t(j)] += dy.getAsDouble(at);
          ds[size_t(j)] +=
              dy.getAsDouble(at) * (x.getAsDouble(at) - mu) * is[size_t(j)];
        }
      for (int64_t i = 0; i < n; ++i)
        for (int64_t k = 0; k < inner; ++k) {
          int64_t at = (i * c + j) * inner + k;
          double xhat = (x.getAsDouble(at) - mu) * is[size_t(j)];
          double g = dy.getAsDouble(at);
          dx[size_t(at)] = s.getAsDouble(j) * is[size_t(j)] *
                           (training ? g - db[size_t(j)] / count -
                                           xhat * ds[size_t(j)] / count
                                     : g);
        }
    }
    std::vector<const Tensor *> ins = {&dy, &x, &s};
    if (!training) {
      ins.push_back(&mean);
      ins.push_back(&var);
    }
    std::vector<Tensor> g =
        run("BatchNormalizationGrad", ins,
            {{"epsilon", Attribute::ofFloat(1e-5f)}}, 3, kMpcDomain);
    std::string what = training ? "training" : "inference";
    expectNear(g[0], dx, 1e-9, what + " dX");
    expectNear(g[1], ds, 1e-9, what + " dScale");
    expectNear(g[2], db, 1e-9, what + " dBias");
  }
  // Omitted outputs are not produced.
  std::vector<Tensor> onlyScale = run("BatchNormalizationGrad", {&dy, &x, &s},
                                      {}, 3, kMpcDomain, {false, true, false});
  EXPECT_EQ(onlyScale[0].dtype, DType::Undefined);
  EXPECT_EQ(onlyScale[1].dims, (Ints{2}));
  EXPECT_EQ(onlyScale[2].dtype, DType::Undefined);
}

TEST(CpuBatchNormKernels, ErrorsNameTheNode) {
  Tensor x = random({1, 3, 1, 1}, 1), v = random({3}, 2), w = random({2}, 3);
  std::string msg = errorOf("BatchNormalization", {&x, &v, &v, &v, &v},
                            {{"training_mode", i64(1)}});
  EXPECT_NE(msg.find("'test_node'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("more than one value per channel"), std::string::npos)
      << msg;
  msg = errorOf("BatchNormalization", {&x, &w, &v, &v, &v}, {});
  EXPECT_NE(msg.find("one entry per channel"), std::string::npos) << msg;
}
