// mpc.LogSigmoid and mpc.LogSigmoidGrad (fuse-log-sigmoid's op and its
// gradient): the CPU kernels against log sigmoid computed here in long
// double over the whole range (where Log(Sigmoid(x)) is 0 or -inf), fp16
// operands rounded once from the fp32 result, a float64 finite-difference
// check of the gradient rule, and the function bodies the exporter writes
// against the kernels.
#include "ir/half.h"
#include "ir/mpc_ops.h"
#include "kernels/cpu/kernel_table.h"
#include "support/diagnostics.h"
#include "tests/unit/gradcheck_harness.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

using namespace mpc;

namespace {

const bool kCovered = gradcheck::coverGradientRules({"mpc.LogSigmoid"});

/// Runs a one-node mpc graph on the CPU kernel.
Tensor runMpc(const std::string &op, const std::vector<const Tensor *> &in) {
  Graph g;
  std::vector<Value *> vals;
  for (size_t i = 0; i < in.size(); ++i)
    vals.push_back(g.addInput("in" + std::to_string(i), in[i]->dtype,
                              toDims(in[i]->dims)));
  Node *n = g.createNodeWithOutputs(op, vals, {"out"}, "test_node", kMpcDomain);
  Tensor out;
  KernelContext ctx{*n, in, {}, 0, {}};
  ctx.outputs.push_back(&out);
  const CpuKernel *k = findCpuKernel(kMpcDomain, op);
  if (!k)
    throw Error("no kernel for " + op);
  (*k)(ctx);
  return out;
}

/// log(sigmoid(x)) and sigmoid(-x) in long double, straight from the
/// definition where that is exact enough, else from the asymptotes.
long double refLogSigmoid(long double x) {
  return x < 0 ? x - std::log1p(std::exp(x)) : -std::log1p(std::exp(-x));
}
long double refSigmoidNeg(long double x) { return 1.0L / (1.0L + std::exp(x)); }

const std::vector<double> kExtremes = {
    -1000, -200, -104, -88, -40,  -17.5, -8, -1,  -1e-3, -1e-30, 0,
    1e-30, 1e-3, 1,    8,   17.5, 40,    88, 104, 200,   1000};

Tensor f32(const std::vector<double> &v) {
  Tensor t(DType::F32, {int64_t(v.size())});
  for (size_t i = 0; i < v.size(); ++i)
    t.data<float>()[i] = float(v[i]);
  return t;
}

} // namespace

TEST(LogSigmoid, KernelIsExactToAFewUlpEverywhere) {
  Tensor x = f32(kExtremes);
  Tensor y = runMpc("LogSigmoid", {&x});
  ASSERT_EQ(y.dtype, DType::F32);
  for (int64_t i = 0; i < x.numel(); ++i) {
    long double xv = x.getAsDouble(i);
    long double want = refLogSigmoid(xv);
    double got = y.getAsDouble(i);
    ASSERT_TRUE(std::isfinite(got)) << "x = " << double(xv);
    // A few fp32 ulp of the result, relative: log sigmoid(40) = -4.2e-18 is
    // kept, not rounded to 0 as Log(Sigmoid(40)) would be.
    EXPECT_NEAR(got, double(want), 4e-7 * std::fabs(double(want)) + 1.2e-38)
        << "x = " << double(xv);
  }
  // fp64 in, fp64 out, computed in fp64.
  Tensor xd = x.castTo(DType::F64);
  Tensor yd = runMpc("LogSigmoid", {&xd});
  ASSERT_EQ(yd.dtype, DType::F64);
  for (int64_t i = 0; i < x.numel(); ++i)
    EXPECT_NEAR(yd.getAsDouble(i), double(refLogSigmoid(xd.getAsDouble(i))),
                1e-15 * std::fabs(yd.getAsDouble(i)) + 1e-300);
}

TEST(LogSigmoid, HalfOperandsRoundTheFp32ResultOnce) {
  std::vector<double> v;
  for (int i = -400; i <= 400; ++i)
    v.push_back(i * 0.05);
  Tensor h = f32(v).castTo(DType::F16);
  Tensor hy = runMpc("LogSigmoid", {&h});
  ASSERT_EQ(hy.dtype, DType::F16);
  Tensor hf = h.castTo(DType::F32);
  Tensor fy = runMpc("LogSigmoid", {&hf});
  for (int64_t i = 0; i < h.numel(); ++i)
    EXPECT_EQ(float(hy.getAsDouble(i)), roundToHalf(float(fy.getAsDouble(i))))
        << i;
}

TEST(LogSigmoid, GradKernelIsSigmoidOfMinusX) {
  Tensor x = f32(kExtremes);
  std::vector<double> gv(kExtremes.size());
  for (size_t i = 0; i < gv.size(); ++i)
    gv[i] = 0.5 + double(i);
  Tensor g = f32(gv);
  Tensor dx = runMpc("LogSigmoidGrad", {&g, &x});
  ASSERT_EQ(dx.dtype, DType::F32);
  for (int64_t i = 0; i < x.numel(); ++i) {
    long double want = gv[size_t(i)] * refSigmoidNeg(x.getAsDouble(i));
    double got = dx.getAsDouble(i);
    ASSERT_TRUE(std::isfinite(got));
    // (Below fp32's normal range, 1.2e-38, a subnormal's absolute step.)
    EXPECT_NEAR(got, double(want), 4e-7 * std::fabs(double(want)) + 1.2e-38)
        << "x = " << x.getAsDouble(i);
  }
  // An fp32 dY with fp16 X (autocast's backward reads X as stored), and
  // fp16 dY: computed in fp32, rounded once to dY's dtype.
  Tensor hx = x.castTo(DType::F16), hg = g.castTo(DType::F16);
  Tensor mixed = runMpc("LogSigmoidGrad", {&g, &hx});
  Tensor hxf = hx.castTo(DType::F32);
  Tensor wide = runMpc("LogSigmoidGrad", {&g, &hxf});
  ASSERT_EQ(mixed.dtype, DType::F32);
  for (int64_t i = 0; i < x.numel(); ++i)
    EXPECT_EQ(mixed.getAsDouble(i), wide.getAsDouble(i)) << i;
  Tensor half = runMpc("LogSigmoidGrad", {&hg, &hx});
  ASSERT_EQ(half.dtype, DType::F16);
  Tensor hgf = hg.castTo(DType::F32);
  Tensor ref = runMpc("LogSigmoidGrad", {&hgf, &hxf});
  for (int64_t i = 0; i < x.numel(); ++i)
    EXPECT_EQ(float(half.getAsDouble(i)),
              roundToHalf(float(ref.getAsDouble(i))))
        << i;
}

TEST(LogSigmoid, GradKernelRefusesMismatchedShapes) {
  Tensor g = f32({1, 2, 3}), x = f32({1, 2});
  try {
    runMpc("LogSigmoidGrad", {&g, &x});
    FAIL() << "no error";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("test_node"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("does not match"), std::string::npos)
        << e.what();
  }
}

// The gradient rule (one mpc.LogSigmoidGrad) against central finite
// differences in float64: moderate logits, saturated ones on both sides, and
// the BCE-with-logits arithmetic around it.
TEST(GradCheckLogSigmoid, LogSigmoidAndBceWithLogits) {
  using gradcheck::GradCase;
  std::vector<GradCase> cases;
  GradCase plain;
  plain.name = "LogSigmoid";
  plain.params = {{"x", {3, 5}, -6.0, 6.0}};
  plain.body = "y = mpc.LogSigmoid (x)";
  cases.push_back(plain);
  GradCase saturated = plain;
  saturated.name = "LogSigmoid saturated";
  saturated.params = {{"x", {2, 7}, -40.0, 40.0}};
  cases.push_back(saturated);
  GradCase bce;
  bce.name = "BCE with logits";
  bce.params = {{"z", {4, 3}, -5.0, 5.0}};
  bce.data = {{"double[4,3] t = {1, 0, 1, 0, 0, 1, 1, 1, 0, 0.5, 0.25, 1}"}};
  bce.frozen = "^t$"; // the targets
  bce.body = R"(
    one = Constant <value = double {1.0}> ()
    omt = Sub (one, t)
    a = Mul (omt, z)
    nz = Neg (z)
    b = mpc.LogSigmoid (nz)
    c = mpc.LogSigmoid (z)
    d = Sub (a, c)
    y = Add (d, b)
  )";
  cases.push_back(bce);
  gradcheck::checkAll(cases);
}
