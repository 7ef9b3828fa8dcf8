// CPU kernels of the transformer and residual-MLP ops (layer norm, Gelu,
// LeakyRelu, Clip, Max/Min/Sum, Split, Dropout, CastLike, the random ops, the
// gather gradients; kernels/cpu/normalization.cpp, activation.cpp,
// elementwise.cpp, shape_ops.cpp, random.cpp, gather_scatter.cpp) against
// values computed here in double.
//
// fp16/bf16 results must equal the fp32 result rounded once (the GPU's
// contract); statistics and sums must accumulate in fp32, never in the
// storage type; bad input must raise mpc::Error naming the node.
#include "ir/half.h"
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

Tensor F(std::vector<int64_t> dims, std::vector<float> v) {
  return Tensor::fromFloats(dims, v);
}
Tensor I(std::vector<int64_t> dims, std::vector<int64_t> v) {
  return Tensor::fromInt64s(dims, v);
}
Tensor D(std::vector<int64_t> dims, std::vector<double> v) {
  Tensor t(DType::F64, dims);
  std::copy(v.begin(), v.end(), t.data<double>());
  return t;
}
Tensor B(std::vector<int64_t> dims, std::vector<bool> v) {
  Tensor t(DType::Bool, dims);
  for (size_t i = 0; i < v.size(); ++i)
    t.data<uint8_t>()[i] = v[i];
  return t;
}

std::vector<float> randomFloats(size_t n, unsigned seed, float lo = -1,
                                float hi = 1) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (float &x : v)
    x = d(rng);
  return v;
}

void expectNear(const Tensor &t, const std::vector<double> &want, double tol,
                const std::string &what = "") {
  ASSERT_EQ(size_t(t.numel()), want.size()) << what;
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_NEAR(t.getAsDouble(int64_t(i)), want[i],
                tol * std::max(1.0, std::fabs(want[i])))
        << what << " element " << i;
}

/// Runs a one-node graph named "test_node"; nullptr inputs are omitted, and
/// `outputs` slots that are false are omitted outputs.
std::vector<Tensor> runNode(const std::string &op,
                            const std::vector<const Tensor *> &inputs,
                            const Attrs &attrs = {},
                            std::vector<bool> outputs = {true},
                            const std::string &domain = "", uint64_t seed = 0,
                            const std::string &name = "test_node") {
  Graph g;
  std::vector<Value *> vals;
  for (size_t i = 0; i < inputs.size(); ++i)
    vals.push_back(inputs[i]
                       ? g.addInput("in" + std::to_string(i), inputs[i]->dtype,
                                    toDims(inputs[i]->dims))
                       : nullptr);
  std::vector<std::string> names;
  for (size_t i = 0; i < outputs.size(); ++i)
    names.push_back(outputs[i] ? "out" + std::to_string(i) : "");
  Node *n = g.createNodeWithOutputs(op, vals, names, name, domain);
  for (const auto &kv : attrs)
    n->setAttr(kv.first, kv.second);
  std::vector<Tensor> outs(n->numOutputs());
  KernelContext ctx{*n, inputs, {}, seed, {}};
  for (size_t i = 0; i < outs.size(); ++i)
    ctx.outputs.push_back(n->output(i) ? &outs[i] : nullptr);
  const CpuKernel *k = findCpuKernel(domain, op);
  if (!k)
    throw Error("no kernel for " + op);
  (*k)(ctx);
  return outs;
}

Tensor run1(const std::string &op, const std::vector<Tensor> &inputs,
            const Attrs &attrs = {}, const std::string &domain = "") {
  std::vector<const Tensor *> ptrs;
  for (const Tensor &t : inputs)
    ptrs.push_back(&t);
  return runNode(op, ptrs, attrs, {true}, domain)[0];
}

Tensor runMpc(const std::string &op, const std::vector<Tensor> &inputs,
              const Attrs &attrs = {}) {
  return run1(op, inputs, attrs, kMpcDomain);
}

std::string errorOf(const std::string &op, const std::vector<Tensor> &inputs,
                    const Attrs &attrs = {}, const std::string &domain = "") {
  try {
    run1(op, inputs, attrs, domain);
  } catch (const Error &e) {
    return e.what();
  }
  return "";
}

#define EXPECT_CONTAINS(haystack, needle)                                      \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos)             \
      << "message: " << (haystack)

Attribute i64(int64_t v) { return Attribute::ofInt(v); }
Attribute f32(float v) { return Attribute::ofFloat(v); }
Attribute str(std::string v) { return Attribute::ofString(v); }
Attribute ints(std::vector<int64_t> v) { return Attribute::ofInts(v); }

float rnd(DType t, float v) {
  return t == DType::F16 ? roundToHalf(v) : roundToBf16(v);
}

} // namespace

// --- the table ---------------------------------------------------------------

TEST(CpuKernelsReference, TableHasTheFamily) {
  std::vector<std::string> ops = cpuKernelOps();
  for (const char *op : {"LayerNormalization",
                         "Gelu",
                         "LeakyRelu",
                         "Clip",
                         "Max",
                         "Min",
                         "Sum",
                         "Split",
                         "Dropout",
                         "CastLike",
                         "mpc.LayerNormalizationGrad",
                         "mpc.GatherGrad",
                         "mpc.SliceGrad",
                         "mpc.GeluGrad",
                         "mpc.ErfGrad",
                         "mpc.LeakyReluGrad",
                         "mpc.ClipGrad",
                         "mpc.ExtremumGrad",
                         "mpc.ReduceExtremumGrad",
                         "mpc.DropoutGrad"})
    EXPECT_TRUE(std::count(ops.begin(), ops.end(), op)) << op;
}

// --- LayerNormalization ------------------------------------------------------

TEST(CpuKernelsReference, LayerNormalizationMatchesDoubleReference) {
  const int64_t rows = 3, n = 5;
  std::vector<float> xv = randomFloats(rows * n, 1, -2, 2),
                     sv = randomFloats(n, 2), bv = randomFloats(n, 3);
  Tensor x = F({rows, n}, xv), s = F({n}, sv), b = F({n}, bv);
  std::vector<Tensor> out =
      runNode("LayerNormalization", {&x, &s, &b}, {{"epsilon", f32(1e-3f)}},
              {true, true, true});
  ASSERT_EQ(out[1].dtype, DType::F32);
  EXPECT_EQ(out[1].dims, (std::vector<int64_t>{rows, 1}));
  std::vector<double> y, mean, inv;
  for (int64_t r = 0; r < rows; ++r) {
    double m = 0, v = 0;
    for (int64_t j = 0; j < n; ++j)
      m += xv[size_t(r * n + j)];
    m /= n;
    for (int64_t j = 0; j < n; ++j)
      v += (xv[size_t(r * n + j)] - m) * (xv[size_t(r * n + j)] - m);
    double is = 1 / std::sqrt(v / n + double(1e-3f));
    mean.push_back(m);
    inv.push_back(is);
    for (int64_t j = 0; j < n; ++j)
      y.push_back((xv[size_t(r * n + j)] - m) * is * sv[size_t(j)] +
                  bv[size_t(j)]);
  }
  expectNear(out[0], y, 1e-5, "Y");
  expectNear(out[1], mean, 1e-6, "Mean");
  expectNear(out[2], inv, 1e-5, "InvStdDev");
}

TEST(CpuKernelsReference, LayerNormalizationHalfKeepsFp32Statistics) {
  std::vector<float> xv = randomFloats(2 * 3 * 4, 4, -3, 3),
                     sv = randomFloats(12, 5), bv = randomFloats(12, 6);
  for (DType t : {DType::F16, DType::BF16}) {
    Tensor x = F({2, 3, 4}, xv).castTo(t), s = F({3, 4}, sv).castTo(t),
           b = F({3, 4}, bv).castTo(t);
    Attrs axis = {{"axis", i64(1)}};
    std::vector<Tensor> h =
        runNode("LayerNormalization", {&x, &s, &b}, axis, {true, true, true});
    // The same values in fp32: Y must be that result rounded once, the
    // statistics identical (they never pass through the storage type).
    Tensor x32 = x.castTo(DType::F32), s32 = s.castTo(DType::F32),
           b32 = b.castTo(DType::F32);
    std::vector<Tensor> f = runNode("LayerNormalization", {&x32, &s32, &b32},
                                    axis, {true, true, true});
    ASSERT_EQ(h[0].dtype, t);
    ASSERT_EQ(h[1].dtype, DType::F32);
    ASSERT_EQ(h[2].dtype, DType::F32);
    for (int64_t i = 0; i < 24; ++i)
      EXPECT_EQ(float(h[0].getAsDouble(i)), rnd(t, float(f[0].getAsDouble(i))))
          << i;
    EXPECT_EQ(h[1].bytes, f[1].bytes);
    EXPECT_EQ(h[2].bytes, f[2].bytes);
  }
}

TEST(CpuKernelsReference, LayerNormalizationErrors) {
  Tensor x = F({2, 4}, randomFloats(8, 7)), s = F({3}, {1, 1, 1});
  EXPECT_CONTAINS(errorOf("LayerNormalization", {x, s}), "test_node");
  EXPECT_CONTAINS(errorOf("LayerNormalization", {x, s}),
                  "does not broadcast to the normalised shape [4]");
  Tensor s4 = F({4}, {1, 1, 1, 1});
  EXPECT_CONTAINS(
      errorOf("LayerNormalization", {x, s4}, {{"stash_type", i64(0)}}),
      "stash_type 0 is not supported");
  EXPECT_CONTAINS(errorOf("LayerNormalization", {x, s4}, {{"axis", i64(2)}}),
                  "out of range");
  EXPECT_CONTAINS(errorOf("LayerNormalization", {x, s4.castTo(DType::F16)}),
                  "element type");
}

TEST(CpuKernelsReference, LayerNormalizationGradOmitsWhatIsNotWanted) {
  Tensor x = F({2, 3}, randomFloats(6, 8)), s = F({3}, randomFloats(3, 9)),
         b = F({3}, {0, 0, 0}), dy = F({2, 3}, randomFloats(6, 10));
  std::vector<Tensor> fwd =
      runNode("LayerNormalization", {&x, &s, &b}, {}, {true, true, true});
  std::vector<Tensor> all =
      runNode("LayerNormalizationGrad", {&dy, &x, &s, &fwd[1], &fwd[2]},
              {{"axis", i64(1)}}, {true, true, true}, kMpcDomain);
  // dBias = sum of dY over the rows; dScale = sum of dY * xhat.
  for (int64_t j = 0; j < 3; ++j) {
    double db = 0, ds = 0;
    for (int64_t r = 0; r < 2; ++r) {
      double xhat = (x.getAsDouble(r * 3 + j) - fwd[1].getAsDouble(r)) *
                    fwd[2].getAsDouble(r);
      db += dy.getAsDouble(r * 3 + j);
      ds += dy.getAsDouble(r * 3 + j) * xhat;
    }
    EXPECT_NEAR(all[2].getAsDouble(j), db, 1e-6);
    EXPECT_NEAR(all[1].getAsDouble(j), ds, 1e-6);
  }
  // dX alone (frozen affine parameters), then dScale alone (frozen input).
  std::vector<Tensor> onlyDx =
      runNode("LayerNormalizationGrad", {&dy, &x, &s, &fwd[1], &fwd[2]},
              {{"axis", i64(1)}}, {true}, kMpcDomain);
  EXPECT_EQ(onlyDx[0].bytes, all[0].bytes);
  std::vector<Tensor> onlyDs =
      runNode("LayerNormalizationGrad", {&dy, &x, &s, &fwd[1], &fwd[2]},
              {{"axis", i64(1)}}, {false, true}, kMpcDomain);
  EXPECT_EQ(onlyDs[1].bytes, all[1].bytes);
  // Every row of dX sums to zero: normalisation removes the mean.
  for (int64_t r = 0; r < 2; ++r)
    EXPECT_NEAR(all[0].getAsDouble(r * 3) + all[0].getAsDouble(r * 3 + 1) +
                    all[0].getAsDouble(r * 3 + 2),
                0, 1e-6);
}

// --- activations -------------------------------------------------------------

TEST(CpuKernelsReference, GeluBothFormsAndTheirDerivatives) {
  Tensor x = D({5}, {-2, -1, 0, 1, 3});
  std::vector<double> exact, tanhForm, dExact, dTanh;
  for (double v : {-2.0, -1.0, 0.0, 1.0, 3.0}) {
    exact.push_back(0.5 * v * (1 + std::erf(v / std::sqrt(2.0))));
    double u = std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v);
    tanhForm.push_back(0.5 * v * (1 + std::tanh(u)));
    double cdf = 0.5 * (1 + std::erf(v / std::sqrt(2.0)));
    dExact.push_back(cdf + v * std::exp(-v * v / 2) / std::sqrt(2 * M_PI));
    double du = std::sqrt(2 / M_PI) * (1 + 3 * 0.044715 * v * v);
    dTanh.push_back(0.5 * (1 + std::tanh(u)) +
                    0.5 * v * (1 - std::tanh(u) * std::tanh(u)) * du);
  }
  expectNear(run1("Gelu", {x}), exact, 1e-14, "exact");
  expectNear(run1("Gelu", {x}, {{"approximate", str("tanh")}}), tanhForm, 1e-14,
             "tanh");
  Tensor ones = D({5}, {1, 1, 1, 1, 1});
  expectNear(runMpc("GeluGrad", {ones, x}), dExact, 1e-14, "d exact");
  expectNear(runMpc("GeluGrad", {ones, x}, {{"approximate", str("tanh")}}),
             dTanh, 1e-14, "d tanh");
  // gelu(1) as PyTorch prints it.
  EXPECT_NEAR(run1("Gelu", {F({1}, {1})}).getAsDouble(0), 0.8413447, 1e-7);
  EXPECT_CONTAINS(errorOf("Gelu", {x}, {{"approximate", str("fast")}}),
                  "\"none\" or \"tanh\"");
  // fp16: the fp32 result rounded once.
  std::vector<float> hv = randomFloats(32, 11, -4, 4);
  Tensor h = F({32}, hv).castTo(DType::F16);
  Tensor hy = run1("Gelu", {h});
  Tensor fy = run1("Gelu", {h.castTo(DType::F32)});
  for (int64_t i = 0; i < 32; ++i)
    EXPECT_EQ(float(hy.getAsDouble(i)), roundToHalf(float(fy.getAsDouble(i))));
}

TEST(CpuKernelsReference, ErfGradIsTheErfDerivativeComputedInFp32) {
  Tensor x = D({5}, {-3, -1, 0, 0.5, 2});
  Tensor g = D({5}, {1, -2, 3, 0.25, 10});
  std::vector<double> want;
  for (int64_t i = 0; i < 5; ++i) {
    double v = x.getAsDouble(i);
    want.push_back(g.getAsDouble(i) * 2 / std::sqrt(M_PI) * std::exp(-v * v));
  }
  expectNear(runMpc("ErfGrad", {g, x}), want, 1e-15, "fp64");
  // fp16 operands: the product is formed in fp32 and rounded once, so a
  // large x gives an exact 0 or a subnormal, never an inf or a NaN.
  std::vector<float> xv = randomFloats(64, 7, -6, 6);
  std::vector<float> gv = randomFloats(64, 8, -30000, 30000);
  Tensor hx = F({64}, xv).castTo(DType::F16);
  Tensor hg = F({64}, gv).castTo(DType::F16);
  Tensor hd = runMpc("ErfGrad", {hg, hx});
  ASSERT_EQ(hd.dtype, DType::F16);
  Tensor fd = runMpc("ErfGrad", {hg.castTo(DType::F32), hx.castTo(DType::F32)});
  for (int64_t i = 0; i < 64; ++i) {
    EXPECT_TRUE(std::isfinite(hd.getAsDouble(i))) << i;
    EXPECT_EQ(float(hd.getAsDouble(i)), roundToHalf(float(fd.getAsDouble(i))))
        << i;
  }
}

TEST(CpuKernelsReference, LeakyReluAndClipWithTheirGradients) {
  Tensor x = F({5}, {-2, -0.5, 0, 0.5, 3});
  expectNear(run1("LeakyRelu", {x}), {-0.02, -0.005, 0, 0.5, 3}, 1e-7);
  expectNear(run1("LeakyRelu", {x}, {{"alpha", f32(0.5f)}}),
             {-1, -0.25, 0, 0.5, 3}, 0);
  Tensor g = F({5}, {1, 2, 3, 4, 5});
  // X = 0 takes alpha, as PyTorch's leaky_relu_backward does.
  expectNear(runMpc("LeakyReluGrad", {g, x}, {{"alpha", f32(0.5f)}}),
             {0.5, 1, 1.5, 4, 5}, 0);

  Tensor lo = F({}, {-0.5f}), hi = F({}, {0.5f});
  expectNear(run1("Clip", {x, lo, hi}), {-0.5, -0.5, 0, 0.5, 0.5}, 0);
  std::vector<const Tensor *> maxOnly = {&x, nullptr, &hi};
  expectNear(runNode("Clip", maxOnly)[0], {-2, -0.5, 0, 0.5, 0.5}, 0);
  expectNear(run1("Clip", {x}, {{"min", f32(0)}, {"max", f32(1)}}),
             {0, 0, 0, 0.5, 1}, 0);
  // min > max gives max everywhere (PyTorch's clamp).
  expectNear(run1("Clip", {x, hi, lo}), {-0.5, -0.5, -0.5, -0.5, -0.5}, 0);
  Tensor nan = F({1}, {std::numeric_limits<float>::quiet_NaN()});
  EXPECT_TRUE(std::isnan(run1("Clip", {nan, lo, hi}).getAsDouble(0)));
  Tensor xi = I({4}, {-7, 0, 3, 9});
  expectNear(run1("Clip", {xi, I({}, {-1}), I({}, {5})}), {-1, 0, 3, 5}, 0);
  EXPECT_CONTAINS(errorOf("Clip", {x, F({2}, {0, 1})}), "single elements");
  // The bounds are inclusive: X == min passes the gradient.
  expectNear(runMpc("ClipGrad", {g, x, lo, hi}), {0, 2, 3, 4, 0}, 0);
  std::vector<const Tensor *> gradMaxOnly = {&g, &x, nullptr, &hi};
  expectNear(runNode("ClipGrad", gradMaxOnly, {}, {true}, kMpcDomain)[0],
             {1, 2, 3, 4, 0}, 0);
  expectNear(runMpc("ClipGrad", {g, x}, {{"min", f32(0)}}), {0, 0, 3, 4, 5}, 0);
}

// --- Max, Min, Sum -----------------------------------------------------------

TEST(CpuKernelsReference, MaxMinSumBroadcastAndPropagateNaN) {
  Tensor a = F({2, 2}, {1, 5, -3, 2}), b = F({2}, {4, 0}), c = F({}, {-1});
  expectNear(run1("Max", {a, b, c}), {4, 5, 4, 2}, 0);
  expectNear(run1("Min", {a, b, c}), {-1, -1, -3, -1}, 0);
  expectNear(run1("Sum", {a, b, c}), {4, 4, 0, 1}, 0);
  expectNear(run1("Max", {a}), {1, 5, -3, 2}, 0);
  float qnan = std::numeric_limits<float>::quiet_NaN();
  Tensor n = F({2}, {qnan, 1});
  Tensor mx = run1("Max", {F({2}, {2, qnan}), n});
  EXPECT_TRUE(std::isnan(mx.getAsDouble(0)));
  EXPECT_TRUE(std::isnan(mx.getAsDouble(1)));
  EXPECT_TRUE(std::isnan(run1("Min", {n, F({2}, {0, 0})}).getAsDouble(0)));
  expectNear(run1("Max", {I({3}, {1, -4, 9}), I({1}, {2})}), {2, 2, 9}, 0);
  EXPECT_CONTAINS(errorOf("Max", {a, I({1}, {1})}), "input 1 is int64");
  EXPECT_CONTAINS(errorOf("Sum", {a, F({3}, {1, 2, 3})}), "do not broadcast");
  // fp16 Sum accumulates in fp32 and rounds once: 1 + 2^-11 + 2^-11 is
  // 1.0009765625 exactly, while adding in fp16 would round to 1 twice.
  float e = std::ldexp(1.0f, -11);
  Tensor h1 = F({1}, {1}).castTo(DType::F16),
         h2 = F({1}, {e}).castTo(DType::F16);
  EXPECT_EQ(run1("Sum", {h1, h2, h2}).getAsDouble(0), 1.0 + 2 * e);
}

TEST(CpuKernelsReference, ExtremumGradSplitsTiesEvenly) {
  // Max(a, b) with a tie at element 1: half the gradient to each, as
  // PyTorch's maximum does; element 0 goes to b, element 2 to a.
  Tensor a = F({3}, {1, 2, 5}), b = F({3}, {3, 2, -1});
  Tensor y = run1("Max", {a, b});
  Tensor g = F({3}, {10, 10, 10});
  expectNear(runMpc("ExtremumGrad", {g, y, a, b}, {{"index", i64(0)}}),
             {0, 5, 10}, 0);
  expectNear(runMpc("ExtremumGrad", {g, y, a, b}, {{"index", i64(1)}}),
             {10, 5, 0}, 0);
  // Three-way tie with a broadcast scalar: a third each.
  Tensor c = F({}, {2});
  Tensor y3 = run1("Max", {a, b, c});
  expectNear(runMpc("ExtremumGrad", {g, y3, a, b, c}, {{"index", i64(2)}}),
             {0, 10.0 / 3, 0}, 1e-6);
  EXPECT_CONTAINS(
      errorOf("ExtremumGrad", {g, y, a, b}, {{"index", i64(2)}}, kMpcDomain),
      "out of range");
}

TEST(CpuKernelsReference, ReduceExtremumGradSplitsTiesEvenly) {
  Tensor x = F({2, 3}, {1, 4, 4, -1, 0, -2});
  Tensor y =
      run1("ReduceMax", {x}, {{"axes", ints({1})}, {"keepdims", i64(0)}});
  expectNear(y, {4, 0}, 0);
  Tensor g = F({2}, {6, 8});
  expectNear(runMpc("ReduceExtremumGrad", {g, x, y},
                    {{"axes", ints({1})}, {"keepdims", i64(0)}}),
             {0, 3, 3, 0, 8, 0}, 0);
  Tensor yAll = run1("ReduceMax", {x});
  expectNear(runMpc("ReduceExtremumGrad", {F({1, 1}, {2}), x, yAll}),
             {0, 1, 1, 0, 0, 0}, 0);
  EXPECT_CONTAINS(errorOf("ReduceExtremumGrad", {F({3}, {1, 1, 1}), x, y},
                          {{"axes", ints({1})}, {"keepdims", i64(0)}},
                          kMpcDomain),
                  "reduced shape");
}

// --- Split -------------------------------------------------------------------

TEST(CpuKernelsReference, SplitSizesEqualAndNumOutputs) {
  Tensor x = F({2, 5}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
  Tensor sizes = I({2}, {2, 3});
  std::vector<Tensor> s =
      runNode("Split", {&x, &sizes}, {{"axis", i64(1)}}, {true, true});
  EXPECT_EQ(s[0].dims, (std::vector<int64_t>{2, 2}));
  expectNear(s[0], {0, 1, 5, 6}, 0);
  expectNear(s[1], {2, 3, 4, 7, 8, 9}, 0);
  std::vector<Tensor> rows = runNode("Split", {&x}, {}, {true, true});
  expectNear(rows[1], {5, 6, 7, 8, 9}, 0);
  // num_outputs (opset 18): pieces of ceil(5 / 3) = 2, the last smaller.
  std::vector<Tensor> n3 =
      runNode("Split", {&x}, {{"axis", i64(-1)}, {"num_outputs", i64(3)}},
              {true, true, true});
  expectNear(n3[2], {4, 9}, 0);
  // An omitted output is not produced.
  std::vector<Tensor> skip =
      runNode("Split", {&x, &sizes}, {{"axis", i64(1)}}, {false, true});
  expectNear(skip[1], {2, 3, 4, 7, 8, 9}, 0);
  std::vector<const Tensor *> bad = {&x};
  try {
    runNode("Split", bad, {{"axis", i64(1)}}, {true, true});
    FAIL() << "no error";
  } catch (const Error &e) {
    EXPECT_CONTAINS(e.what(), "cannot split an axis of length 5 into 2");
    EXPECT_CONTAINS(e.what(), "test_node");
  }
  Tensor wrong = I({2}, {2, 2});
  try {
    runNode("Split", {&x, &wrong}, {{"axis", i64(1)}}, {true, true});
    FAIL() << "no error";
  } catch (const Error &e) {
    EXPECT_CONTAINS(e.what(), "summing to the axis length 5");
  }
}

// --- Dropout -----------------------------------------------------------------

TEST(CpuKernelsReference, DropoutInferenceIsIdentity) {
  Tensor x = F({4}, {1, 2, 3, 4}), r = F({}, {0.5f}), off = B({}, {false});
  std::vector<Tensor> a = runNode("Dropout", {&x, &r}, {}, {true, true});
  EXPECT_EQ(a[0].bytes, x.bytes);
  expectNear(a[1], {1, 1, 1, 1}, 0);
  std::vector<Tensor> b = runNode("Dropout", {&x, &r, &off}, {}, {true, true});
  EXPECT_EQ(b[0].bytes, x.bytes);
  Tensor g = F({4}, {5, 6, 7, 8});
  EXPECT_EQ(runMpc("DropoutGrad", {g, a[1], r, off}).bytes, g.bytes);
}

TEST(CpuKernelsReference, DropoutTrainingMaskIsSeededAndReusedByTheGradient) {
  const int64_t n = 20000;
  Tensor x = F({n}, std::vector<float>(size_t(n), 3.0f)), r = F({}, {0.25f}),
         on = B({}, {true});
  auto drop = [&](uint64_t seed, const std::string &name) {
    return runNode("Dropout", {&x, &r, &on}, {}, {true, true}, "", seed, name);
  };
  std::vector<Tensor> a = drop(7, "drop1");
  int64_t kept = 0;
  for (int64_t i = 0; i < n; ++i) {
    bool k = a[1].data<uint8_t>()[i] != 0;
    kept += k;
    // Kept elements are scaled by 1 / (1 - 0.25), dropped ones are 0.
    EXPECT_EQ(a[0].getAsDouble(i), k ? 3.0f * float(1 / 0.75) : 0.0) << i;
  }
  EXPECT_NEAR(double(kept) / n, 0.75, 0.015);
  // Same seed and node: the same mask; another step seed or another node:
  // a different one.
  EXPECT_EQ(drop(7, "drop1")[1].bytes, a[1].bytes);
  EXPECT_NE(drop(8, "drop1")[1].bytes, a[1].bytes);
  EXPECT_NE(drop(7, "drop2")[1].bytes, a[1].bytes);
  // The gradient passes exactly where the forward kept, with the same scale.
  Tensor g = F({n}, std::vector<float>(size_t(n), 1.0f));
  Tensor dx = runMpc("DropoutGrad", {g, a[1], r, on});
  for (int64_t i = 0; i < n; ++i)
    ASSERT_EQ(dx.getAsDouble(i),
              a[1].data<uint8_t>()[i] ? double(float(1 / 0.75)) : 0.0)
        << i;
  // fp16 data with an fp32 ratio: the product rounded once.
  Tensor h = x.castTo(DType::F16);
  std::vector<Tensor> hd =
      runNode("Dropout", {&h, &r, &on}, {}, {true, true}, "", 7, "drop1");
  EXPECT_EQ(hd[1].bytes, a[1].bytes);
  EXPECT_EQ(hd[0].dtype, DType::F16);
  // Ratio 1 drops everything; a ratio outside [0, 1] is an error.
  Tensor one = F({}, {1.0f});
  std::vector<Tensor> all =
      runNode("Dropout", {&x, &one, &on}, {}, {true, true});
  EXPECT_EQ(std::count(all[1].bytes.begin(), all[1].bytes.end(), 0), n);
  Tensor bad = F({}, {1.5f});
  EXPECT_CONTAINS(errorOf("Dropout", {x, bad, on}), "ratio must be in [0, 1]");
}

// --- random draws ------------------------------------------------------------

/// Mean and variance of a tensor's elements, in double.
std::pair<double, double> moments(const Tensor &t) {
  double sum = 0, sq = 0;
  int64_t n = t.numel();
  for (int64_t i = 0; i < n; ++i)
    sum += t.getAsDouble(i);
  double mean = sum / double(n);
  for (int64_t i = 0; i < n; ++i)
    sq += (t.getAsDouble(i) - mean) * (t.getAsDouble(i) - mean);
  return {mean, sq / double(n)};
}

TEST(CpuRandom, UniformLikeDrawsInRangeSeededPerStepAndNode) {
  const int64_t n = 100000;
  Tensor like = F({4, n / 4}, std::vector<float>(size_t(n), 0.0f));
  Attrs range = {{"low", f32(-2.0f)}, {"high", f32(3.0f)}};
  auto draw = [&](uint64_t seed, const std::string &name, const Attrs &attrs) {
    return runNode("RandomUniformLike", {&like}, attrs, {true}, "", seed,
                   name)[0];
  };
  Tensor a = draw(11, "u1", range);
  EXPECT_EQ(a.dtype, DType::F32);
  EXPECT_EQ(a.dims, like.dims);
  for (int64_t i = 0; i < n; ++i) {
    double v = a.getAsDouble(i);
    ASSERT_TRUE(v >= -2.0 && v < 3.0) << i << ": " << v;
  }
  // Uniform on [-2, 3): mean 0.5, variance 25 / 12; 100k draws put both
  // within a few standard errors (0.0046 and 0.0067).
  auto [mean, var] = moments(a);
  EXPECT_NEAR(mean, 0.5, 0.03);
  EXPECT_NEAR(var, 25.0 / 12.0, 0.04);
  // Reproducible for one (step seed, node); new for another step or node.
  EXPECT_EQ(draw(11, "u1", range).bytes, a.bytes);
  EXPECT_NE(draw(12, "u1", range).bytes, a.bytes);
  EXPECT_NE(draw(11, "u2", range).bytes, a.bytes);
  // The seed attribute changes the draw; the dtype attribute rounds it.
  Attrs seeded = range;
  seeded.emplace_back("seed", f32(5.0f));
  EXPECT_NE(draw(11, "u1", seeded).bytes, a.bytes);
  Attrs half = range;
  half.emplace_back("dtype", i64(10));
  Tensor h = draw(11, "u1", half);
  EXPECT_EQ(h.dtype, DType::F16);
  EXPECT_EQ(h.bytes, a.castTo(DType::F16).bytes);
}

TEST(CpuRandom, NormalDrawsHaveTheRequestedMeanAndScale) {
  const int64_t n = 100000;
  Tensor y = runNode("RandomNormal", {},
                     {{"shape", Attribute::ofInts({n})},
                      {"mean", f32(1.5f)},
                      {"scale", f32(2.0f)}},
                     {true}, "", 3, "normal")[0];
  EXPECT_EQ(y.dtype, DType::F32);
  auto [mean, var] = moments(y);
  EXPECT_NEAR(mean, 1.5, 0.03); // standard error 0.0063
  EXPECT_NEAR(var, 4.0, 0.08);  // standard error 0.018
  // The shape of a normal: 68.3% within one scale of the mean, 95.4%
  // within two.
  int64_t one = 0, two = 0;
  for (int64_t i = 0; i < n; ++i) {
    double z = std::fabs(y.getAsDouble(i) - 1.5) / 2.0;
    one += z < 1;
    two += z < 2;
  }
  EXPECT_NEAR(double(one) / n, 0.6827, 0.006);
  EXPECT_NEAR(double(two) / n, 0.9545, 0.004);
  // RandomNormalLike takes its input's shape and dtype.
  Tensor like = F({3, 5}, std::vector<float>(15, 0.0f)).castTo(DType::BF16);
  Tensor z =
      runNode("RandomNormalLike", {&like}, {}, {true}, "", 3, "normal")[0];
  EXPECT_EQ(z.dtype, DType::BF16);
  EXPECT_EQ(z.dims, like.dims);
}

TEST(CpuRandom, BernoulliDrawsOneWithEachProbability) {
  const int64_t n = 60000;
  std::vector<float> p(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    p[size_t(i)] = i % 3 == 0 ? 0.0f : i % 3 == 1 ? 1.0f : 0.3f;
  Tensor probs = F({n}, p);
  Tensor y = runNode("Bernoulli", {&probs}, {}, {true}, "", 9, "coin")[0];
  EXPECT_EQ(y.dtype, DType::F32);
  int64_t ones = 0;
  for (int64_t i = 0; i < n; ++i) {
    double v = y.getAsDouble(i);
    ASSERT_TRUE(v == 0.0 || v == 1.0) << i;
    if (i % 3 == 0) {
      ASSERT_EQ(v, 0.0) << i;
    }
    if (i % 3 == 1) {
      ASSERT_EQ(v, 1.0) << i;
    }
    if (i % 3 == 2)
      ones += v == 1.0;
  }
  EXPECT_NEAR(double(ones) / (n / 3), 0.3, 0.02); // standard error 0.0035
  // The dtype attribute: bool and int64 outputs of the same draw.
  Tensor b = runNode("Bernoulli", {&probs}, {{"dtype", i64(9)}}, {true}, "", 9,
                     "coin")[0];
  Tensor k = runNode("Bernoulli", {&probs}, {{"dtype", i64(7)}}, {true}, "", 9,
                     "coin")[0];
  EXPECT_EQ(b.dtype, DType::Bool);
  EXPECT_EQ(k.dtype, DType::I64);
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(double(b.data<uint8_t>()[i]), y.getAsDouble(i)) << i;
    ASSERT_EQ(double(k.data<int64_t>()[i]), y.getAsDouble(i)) << i;
  }
  // Probabilities must be floating point.
  EXPECT_CONTAINS(errorOf("Bernoulli", {I({2}, {0, 1})}),
                  "must be floating point");
}

// --- CastLike ----------------------------------------------------------------

TEST(CpuKernelsReference, CastLikeIsCast) {
  Tensor x = F({4}, {1.0f + std::ldexp(1.0f, -11), -2.5f, 65520.0f, 3.7f});
  Tensor like = F({}, {0}).castTo(DType::F16);
  Tensor y = run1("CastLike", {x, like});
  Tensor want = run1("Cast", {x}, {{"to", i64(10)}});
  EXPECT_EQ(y.dtype, DType::F16);
  EXPECT_EQ(y.bytes, want.bytes);
  Tensor toInt = run1("CastLike", {x, I({1}, {0})});
  expectNear(toInt, {1, -2, 65520, 3}, 0);
}

// --- Gather and Slice gradients ----------------------------------------------

TEST(CpuKernelsReference, GatherGradScatterAddsRepeatedAndNegativeIndices) {
  // data [4, 2]; indices [[0, 3], [-1, 0]] -> dY [2, 2, 2].
  Tensor data = F({4, 2}, std::vector<float>(8, 0));
  Tensor idx = I({2, 2}, {0, 3, -1, 0});
  Tensor dy = F({2, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8});
  Tensor dd = runMpc("GatherGrad", {dy, idx, data}, {{"axis", i64(0)}});
  EXPECT_EQ(dd.dims, (std::vector<int64_t>{4, 2}));
  expectNear(dd, {1 + 7, 2 + 8, 0, 0, 0, 0, 3 + 5, 4 + 6}, 0);
  // Axis 1 of [2, 3] with indices [2, 2].
  Tensor d2 = F({2, 3}, std::vector<float>(6, 0));
  Tensor g2 = F({2, 2}, {1, 2, 3, 4});
  expectNear(runMpc("GatherGrad", {g2, I({2}, {2, 2}), d2}, {{"axis", i64(1)}}),
             {0, 0, 3, 0, 0, 7}, 0);
  EXPECT_CONTAINS(errorOf("GatherGrad", {dy, I({2, 2}, {0, 4, 0, 0}), data}, {},
                          kMpcDomain),
                  "index 4 is out of range");
  EXPECT_CONTAINS(errorOf("GatherGrad", {g2, idx, data}, {}, kMpcDomain),
                  "is not the shape");
  // fp16 gradients accumulate in fp32: 1 + 16 * 2^-11 = 1.0078125 exactly,
  // where adding in fp16 would stay at 1 (each 2^-11 is half an ulp).
  std::vector<float> gv = {1};
  for (int i = 0; i < 16; ++i)
    gv.push_back(std::ldexp(1.0f, -11));
  Tensor gh = F({17, 1}, gv).castTo(DType::F16);
  Tensor dh = runMpc(
      "GatherGrad", {gh, I({17}, std::vector<int64_t>(17, 0)), F({1, 1}, {0})});
  EXPECT_EQ(dh.dtype, DType::F16);
  EXPECT_EQ(dh.getAsDouble(0), 1.0078125);
}

// --- GatherElements and its gradient -------------------------------------

TEST(CpuKernelsReference, GatherElementsReadsOneElementPerIndex) {
  // data [2, 3]; axis 1, int32 indices [2, 2] with a negative one.
  Tensor data = F({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor idx32 = I({2, 2}, {2, -3, 1, 1}).castTo(DType::I32);
  Tensor y = run1("GatherElements", {data, idx32}, {{"axis", i64(1)}});
  EXPECT_EQ(y.dims, (std::vector<int64_t>{2, 2}));
  expectNear(y, {3, 1, 5, 5}, 0);
  // Axis 0 (the default): more index rows than data rows, fewer columns.
  expectNear(run1("GatherElements", {data, I({3, 1}, {1, 0, -1})}), {4, 1, 4},
             0);
  EXPECT_CONTAINS(errorOf("GatherElements", {data, I({1, 2}, {0, 2})}),
                  "index 2 is out of range for axis 0 of size 2");
  EXPECT_CONTAINS(errorOf("GatherElements", {data, I({2}, {0, 1})}),
                  "must have the rank of data");
  EXPECT_CONTAINS(errorOf("GatherElements", {data, I({1, 4}, {0, 0, 0, 0})}),
                  "exceed data of shape [2,3] in dim 1");
}

TEST(CpuKernelsReference, GatherElementsGradScatterAddsInFp32) {
  Tensor data = F({2, 3}, std::vector<float>(6, 0));
  Tensor idx = I({2, 2}, {2, -1, 0, 0});
  Tensor dd = runMpc("GatherElementsGrad", {F({2, 2}, {1, 2, 3, 4}), idx, data},
                     {{"axis", i64(1)}});
  EXPECT_EQ(dd.dims, (std::vector<int64_t>{2, 3}));
  expectNear(dd, {0, 0, 1 + 2, 3 + 4, 0, 0}, 0);
  EXPECT_CONTAINS(errorOf("GatherElementsGrad", {F({1, 2}, {1, 2}), idx, data},
                          {}, kMpcDomain),
                  "must have the shape of indices");
  // 1 + 16 * 2^-11 = 1.0078125 exactly in fp32 accumulation; fp16 adds
  // would stay at 1.
  std::vector<float> gv = {1};
  for (int i = 0; i < 16; ++i)
    gv.push_back(std::ldexp(1.0f, -11));
  Tensor gh = F({17, 1}, gv).castTo(DType::F16);
  Tensor dh =
      runMpc("GatherElementsGrad",
             {gh, I({17, 1}, std::vector<int64_t>(17, 0)), F({1, 1}, {0})});
  EXPECT_EQ(dh.dtype, DType::F16);
  EXPECT_EQ(dh.getAsDouble(0), 1.0078125);
}

TEST(CpuKernelsReference, SliceGradPlacesDyWhereSliceRead) {
  Tensor data = F({3, 4}, std::vector<float>(12, 0));
  // Rows 2, 0 (step -2) and columns 1..2.
  Tensor dy = F({2, 2}, {1, 2, 3, 4});
  Tensor dx = runMpc("SliceGrad", {dy, data, I({2}, {-1, 1}), I({2}, {-100, 3}),
                                   I({2}, {0, 1}), I({2}, {-2, 1})});
  expectNear(dx, {0, 3, 4, 0, 0, 0, 0, 0, 0, 1, 2, 0}, 0);
  // Round trip: SliceGrad of Slice's output puts every element back.
  Tensor x = F({3, 4}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
  Tensor st = I({1}, {1}), en = I({1}, {4}), ax = I({1}, {1});
  Tensor s = run1("Slice", {x, st, en, ax});
  Tensor back = runMpc("SliceGrad", {s, x, st, en, ax});
  expectNear(back, {0, 2, 3, 4, 0, 6, 7, 8, 0, 10, 11, 12}, 0);
  // The opset-1 form: bounds as attributes.
  Tensor back1 = run1("SliceGrad", {F({1, 4}, {1, 2, 3, 4}), data},
                      {{"starts", ints({2})}, {"ends", ints({3})}}, kMpcDomain);
  expectNear(back1, {0, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4}, 0);
  EXPECT_CONTAINS(errorOf("SliceGrad", {dy, data, st, en, ax}, {}, kMpcDomain),
                  "is not the shape [3,3]");
}
