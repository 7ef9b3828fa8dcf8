// The CPU's native bf16 products and convolutions (oneDNN, kernels/cpu/
// onednn.h) against the emulated path they replace, which stays the
// bit-exact reference under MPC_CPU_EXACT_HALF=1 (widen to fp32, sgemm,
// round once). Both accumulate in fp32 and round once; only the summation
// order differs. The stated tolerance, per output element y with S the same
// sum over |operands| (computed by the fp32 kernel on absolute values) and K
// the terms summed:
//
//   |native - reference| <= ulp_bf16(|reference|) + 2 * K * 2^-24 * S
//
// one bf16 ulp (two fp32 sums on either side of a rounding boundary) plus
// the fp32 summation error of both orders. fp32 convolutions (oneDNN's
// direct convolution against im2col + sgemm under MPC_CPU_ONEDNN=0) get the
// second term alone. Shapes: odd sizes, 1-element dims, transposed operands,
// broadcast batches, Gemm with alpha/beta/C; convolutions 1-D to 3-D with
// strides, pads, dilations and groups. Each test also checks that oneDNN did
// run (the kernel report), so it cannot pass on the reference alone.
#include "ir/graph.h"
#include "ir/mpc_ops.h"
#include "kernels/cpu/cpu_util.h"
#include "kernels/cpu/kernel_table.h"
#include "kernels/cpu/onednn.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

using namespace mpc;

namespace {

using Attrs = std::vector<std::pair<std::string, Attribute>>;

Tensor randomTensor(DType t, const std::vector<int64_t> &dims, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-2, 2);
  std::vector<float> v(size_t(elementCount(dims)));
  for (float &x : v)
    x = d(rng);
  return Tensor::fromFloats(dims, v).castTo(t);
}

/// |t| in fp32.
Tensor absF32(const Tensor &t) {
  std::vector<float> v = t.castTo(DType::F32).toFloats();
  for (float &x : v)
    x = std::fabs(x);
  return Tensor::fromFloats(t.dims, v);
}

/// Which path the kernels take while it lives: "native" (the default),
/// "exact" (MPC_CPU_EXACT_HALF=1) or "blas" (MPC_CPU_ONEDNN=0).
class PathScope {
public:
  explicit PathScope(const std::string &path) {
    ::unsetenv("MPC_CPU_EXACT_HALF");
    ::unsetenv("MPC_CPU_ONEDNN");
    if (path == "exact")
      ::setenv("MPC_CPU_EXACT_HALF", "1", 1);
    if (path == "blas")
      ::setenv("MPC_CPU_ONEDNN", "0", 1);
  }
  ~PathScope() {
    ::unsetenv("MPC_CPU_EXACT_HALF");
    ::unsetenv("MPC_CPU_ONEDNN");
  }
};

Tensor runOne(const std::string &domain, const std::string &op,
              const std::vector<const Tensor *> &inputs, const Attrs &attrs,
              const std::string &path) {
  PathScope scope(path);
  Graph g;
  std::vector<Value *> vals;
  for (size_t i = 0; i < inputs.size(); ++i)
    vals.push_back(g.addInput("in" + std::to_string(i), inputs[i]->dtype,
                              toDims(inputs[i]->dims)));
  Node *n = g.createNode(op, vals, 1, "node", domain);
  for (const auto &kv : attrs)
    n->setAttr(kv.first, kv.second);
  std::vector<Tensor> outs;
  runCpuNode(*n, inputs, outs);
  return outs[0];
}

/// ulp of a bf16 value of magnitude x (8 significant bits).
double bf16Ulp(double x) {
  if (x < 1e-30)
    return 0;
  return std::ldexp(1.0, int(std::floor(std::log2(x))) - 7);
}

/// Checks the stated tolerance elementwise; `halfUlp` adds the bf16 term.
void expectWithin(const Tensor &native, const Tensor &reference,
                  const Tensor &absSum, int64_t terms, bool halfUlp) {
  ASSERT_EQ(native.dims, reference.dims);
  ASSERT_EQ(native.dtype, reference.dtype);
  std::vector<float> n = native.castTo(DType::F32).toFloats();
  std::vector<float> r = reference.castTo(DType::F32).toFloats();
  std::vector<float> s = absSum.toFloats();
  ASSERT_EQ(n.size(), s.size());
  int bad = 0;
  for (size_t i = 0; i < n.size(); ++i) {
    double tol = 2.0 * double(terms) * std::ldexp(1.0, -24) * s[i];
    if (halfUlp) // one ulp of the half type (fp16: 11 significant bits)
      tol += native.dtype == DType::F16 ? bf16Ulp(std::fabs(r[i])) / 8
                                        : bf16Ulp(std::fabs(r[i]));
    if (!(std::fabs(double(n[i]) - r[i]) <= tol) && bad++ < 5)
      ADD_FAILURE() << "element " << i << ": native " << n[i] << ", reference "
                    << r[i] << ", tolerance " << tol;
  }
  EXPECT_EQ(bad, 0);
}

/// An fp32 op on oneDNN (the default path) within the fp32 tolerance of
/// BLAS (MPC_CPU_ONEDNN=0): `terms` summed per element, S from the same op
/// on the inputs' absolute values with `absAttrs`.
void expectFp32MatchesBlas(const char *domain, const char *op,
                           std::vector<Tensor> inputs, const Attrs &attrs,
                           const Attrs &absAttrs, int64_t terms) {
  std::vector<Tensor> abs;
  std::vector<const Tensor *> in, inAbs;
  for (const Tensor &t : inputs)
    abs.push_back(absF32(t));
  for (size_t i = 0; i < inputs.size(); ++i) {
    in.push_back(&inputs[i]);
    inAbs.push_back(&abs[i]);
  }
  Tensor native = runOne(domain, op, in, attrs, "native");
  Tensor reference = runOne(domain, op, in, attrs, "blas");
  Tensor sum = runOne(domain, op, inAbs, absAttrs, "blas");
  expectWithin(native, reference, sum, terms, false);
}

struct MatMulCase {
  std::vector<int64_t> a, b; ///< stored shapes (already transposed if flagged)
  bool ta, tb;
};

TEST(OneDnn, Bf16MatMulWithinOneUlpOfTheEmulatedPath) {
  const std::vector<MatMulCase> cases = {
      {{1, 1}, {1, 1}, false, false},
      {{5, 7}, {7, 3}, false, false},
      {{33, 129}, {129, 17}, false, false},
      {{129, 33}, {129, 17}, true, false},
      {{33, 129}, {17, 129}, false, true},
      {{129, 33}, {17, 129}, true, true},
      {{4, 5, 300}, {300, 9}, false, false},      // shared B, stacked rows
      {{3, 4, 5, 7}, {3, 4, 7, 6}, false, false}, // batched
      {{2, 1, 5, 7}, {3, 7, 6}, false, false},    // broadcast batches
      {{2, 1, 7, 5}, {3, 6, 7}, true, true},      // broadcast, transposed
      {{7}, {7, 3}, false, false},                // 1-D operands
      {{3, 7}, {7}, false, false},
      {{8, 128, 64}, {8, 64, 128}, false, false},
  };
  unsigned seed = 1;
  for (const MatMulCase &c : cases) {
    SCOPED_TRACE(cpu::shapeString(c.a) + " x " + cpu::shapeString(c.b) +
                 " ta=" + std::to_string(c.ta) + " tb=" + std::to_string(c.tb));
    Tensor a = randomTensor(DType::BF16, c.a, seed++);
    Tensor b = randomTensor(DType::BF16, c.b, seed++);
    Tensor aa = absF32(a), ab = absF32(b);
    bool fused = c.ta || c.tb;
    const char *domain = fused ? kMpcDomain : "";
    const char *op = fused ? "FusedMatMul" : "MatMul";
    Attrs attrs;
    if (fused)
      attrs = {{"transA", Attribute::ofInt(c.ta)},
               {"transB", Attribute::ofInt(c.tb)}};
    Tensor native = runOne(domain, op, {&a, &b}, attrs, "native");
    Tensor reference = runOne(domain, op, {&a, &b}, attrs, "exact");
    Tensor sum = runOne(domain, op, {&aa, &ab}, attrs, "blas");
    int64_t k = c.a.size() == 1 ? c.a[0] : c.a[c.a.size() - (c.ta ? 2 : 1)];
    expectWithin(native, reference, sum, k, true);
  }
  EXPECT_NE(cpu::onednn::kernelReport().find("oneDNN bf16"), std::string::npos)
      << cpu::onednn::kernelReport();
}

/// fp16 stays emulated (oneDNN 2.6 has no native fp16 CPU kernels), but
/// its widened fp32 product runs on oneDNN's fp32 kernels instead of
/// OpenBLAS (onednn::useForWidened): the same contract as bf16's, with an
/// fp16 ulp (11 significant bits) for the rounding term.
TEST(OneDnn, Fp16WidenedProductsWithinOneUlpOfTheBlasPath) {
  const std::vector<MatMulCase> cases = {
      {{33, 129}, {129, 17}, false, false},
      {{129, 33}, {17, 129}, true, true},
      {{4, 5, 300}, {300, 9}, false, false},
      {{2, 1, 7, 5}, {3, 6, 7}, true, true},
      {{8, 128, 64}, {8, 64, 128}, false, false},
  };
  unsigned seed = 100;
  for (const MatMulCase &c : cases) {
    SCOPED_TRACE(cpu::shapeString(c.a) + " x " + cpu::shapeString(c.b));
    Tensor a = randomTensor(DType::F16, c.a, seed++);
    Tensor b = randomTensor(DType::F16, c.b, seed++);
    Tensor aa = absF32(a), ab = absF32(b);
    bool fused = c.ta || c.tb;
    const char *domain = fused ? kMpcDomain : "";
    const char *op = fused ? "FusedMatMul" : "MatMul";
    Attrs attrs;
    if (fused)
      attrs = {{"transA", Attribute::ofInt(c.ta)},
               {"transB", Attribute::ofInt(c.tb)}};
    Tensor native = runOne(domain, op, {&a, &b}, attrs, "native");
    Tensor reference = runOne(domain, op, {&a, &b}, attrs, "exact");
    Tensor sum = runOne(domain, op, {&aa, &ab}, attrs, "blas");
    ASSERT_EQ(native.dtype, DType::F16);
    int64_t k = c.a[c.a.size() - (c.ta ? 2 : 1)];
    std::vector<float> n = native.castTo(DType::F32).toFloats();
    std::vector<float> r = reference.castTo(DType::F32).toFloats();
    std::vector<float> sv = sum.toFloats();
    ASSERT_EQ(n.size(), r.size());
    int bad = 0;
    for (size_t i = 0; i < n.size(); ++i) {
      double mag = std::fabs(r[i]);
      double ulp = mag < 1e-30
                       ? 0
                       : std::ldexp(1.0, int(std::floor(std::log2(mag))) - 10);
      double tol = 2.0 * double(k) * std::ldexp(1.0, -24) * sv[i] + ulp;
      if (!(std::fabs(double(n[i]) - r[i]) <= tol) && bad++ < 5)
        ADD_FAILURE() << "element " << i << ": native " << n[i]
                      << ", reference " << r[i] << ", tolerance " << tol;
    }
    EXPECT_EQ(bad, 0);
  }
  // The widened products ran on oneDNN's fp32 kernels.
  EXPECT_NE(cpu::onednn::kernelReport().find("oneDNN fp32"), std::string::npos)
      << cpu::onednn::kernelReport();
}

TEST(OneDnn, Bf16AndFp32GemmWithAlphaBetaAndBroadcastC) {
  struct Case {
    int64_t m, n, k;
    bool ta, tb;
    std::vector<int64_t> c; ///< empty: no C
    float alpha, beta;
  };
  const std::vector<Case> cases = {
      {17, 9, 65, false, false, {}, 1.f, 1.f},
      {17, 9, 65, true, false, {9}, 1.f, 1.f},
      {17, 9, 65, false, true, {17, 1}, 0.5f, 2.f},
      {17, 9, 65, true, true, {17, 9}, -1.5f, 0.25f},
      {1, 1, 3, false, false, {1}, 1.f, 1.f},
      // Over oneDNN's size floor (2^15 multiply-adds): a row bias (alpha =
      // beta = 1) is oneDNN's bias argument, other C the fp32 sum post-op.
      {64, 48, 96, false, true, {48}, 1.f, 1.f},
      {64, 48, 96, true, false, {1, 48}, 1.f, 1.f},
      {64, 48, 96, false, true, {48}, 0.5f, 1.f},
      {64, 48, 96, false, false, {64, 1}, 1.f, 1.f},
      {64, 48, 96, true, true, {64, 48}, 1.f, 2.f},
      {64, 1, 600, false, true, {1}, 1.f, 1.f},
  };
  unsigned seed = 100;
  for (DType t : {DType::BF16, DType::F32})
    for (const Case &c : cases) {
      SCOPED_TRACE(std::string(dtypeName(t)) + " " + std::to_string(c.m) + "x" +
                   std::to_string(c.n) + "x" + std::to_string(c.k) + " C " +
                   cpu::shapeString(c.c));
      std::vector<int64_t> ad = c.ta ? std::vector<int64_t>{c.k, c.m}
                                     : std::vector<int64_t>{c.m, c.k};
      std::vector<int64_t> bd = c.tb ? std::vector<int64_t>{c.n, c.k}
                                     : std::vector<int64_t>{c.k, c.n};
      Tensor a = randomTensor(t, ad, seed++);
      Tensor b = randomTensor(t, bd, seed++);
      Tensor cc =
          randomTensor(t, c.c.empty() ? std::vector<int64_t>{1} : c.c, seed++);
      Tensor aa = absF32(a), ab = absF32(b), ac = absF32(cc);
      Attrs attrs = {{"transA", Attribute::ofInt(c.ta)},
                     {"transB", Attribute::ofInt(c.tb)},
                     {"alpha", Attribute::ofFloat(c.alpha)},
                     {"beta", Attribute::ofFloat(c.beta)}};
      std::vector<const Tensor *> in = {&a, &b}, inAbs = {&aa, &ab};
      if (!c.c.empty()) {
        in.push_back(&cc);
        inAbs.push_back(&ac);
      }
      Attrs absAttrs = attrs;
      absAttrs[2].second = Attribute::ofFloat(std::fabs(c.alpha));
      absAttrs[3].second = Attribute::ofFloat(std::fabs(c.beta));
      Tensor native = runOne("", "Gemm", in, attrs, "native");
      // fp32's reference is BLAS (MPC_CPU_ONEDNN=0), bf16's the emulation.
      Tensor reference =
          runOne("", "Gemm", in, attrs, t == DType::BF16 ? "exact" : "blas");
      Tensor sum = runOne("", "Gemm", inAbs, absAttrs, "blas");
      expectWithin(native, reference, sum, c.k + 1, t == DType::BF16);
    }
}

/// fp32 products with a plain B wider than 2048 columns run on oneDNN in
/// column blocks (onednn.cpp's kFp32ColumnBlock): every block, the tail
/// block, the bias and the beta sum land on their columns, within the fp32
/// tolerance of BLAS. Widths: 3072 (two blocks of 1536), 4100 (1376 x 2 and
/// a tail of 1348), 2049 (1040 and a tail of 1009).
TEST(OneDnn, Fp32WideProductsInColumnBlocksMatchBlas) {
  unsigned seed = 500;
  const auto check = expectFp32MatchesBlas;
  {
    SCOPED_TRACE("batched MatMul, 4100 columns");
    check("", "MatMul",
          {randomTensor(DType::F32, {2, 8, 24}, seed++),
           randomTensor(DType::F32, {2, 24, 4100}, seed++)},
          {}, {}, 24);
  }
  {
    SCOPED_TRACE("FusedMatMul transA, 3072 columns");
    Attrs t = {{"transA", Attribute::ofInt(1)},
               {"transB", Attribute::ofInt(0)}};
    check(kMpcDomain, "FusedMatMul",
          {randomTensor(DType::F32, {16, 8}, seed++),
           randomTensor(DType::F32, {16, 3072}, seed++)},
          t, t, 16);
  }
  for (float beta : {1.f, 0.5f}) {
    SCOPED_TRACE("Gemm with C, 2049 columns, beta " + std::to_string(beta));
    // beta 1 and a row C: oneDNN's bias argument, per block; beta 0.5 and
    // a full C: the fp32 sum post-op.
    std::vector<int64_t> c = beta == 1.f ? std::vector<int64_t>{2049}
                                         : std::vector<int64_t>{8, 2049};
    Attrs g = {{"alpha", Attribute::ofFloat(1.f)},
               {"beta", Attribute::ofFloat(beta)}};
    check("", "Gemm",
          {randomTensor(DType::F32, {8, 16}, seed++),
           randomTensor(DType::F32, {16, 2049}, seed++),
           randomTensor(DType::F32, c, seed++)},
          g, g, 17);
  }
  EXPECT_NE(cpu::onednn::kernelReport().find("oneDNN fp32"), std::string::npos)
      << cpu::onednn::kernelReport();
}

struct ConvCase {
  std::vector<int64_t> x, w; ///< [N, C, D...], [M, C/group, K...]
  std::vector<int64_t> strides, pads, dilations;
  int64_t group;
};

const std::vector<ConvCase> &convCases() {
  static const std::vector<ConvCase> cases = {
      {{2, 3, 9, 9}, {8, 3, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1},
      {{2, 16, 13, 11}, {32, 16, 3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, 1},
      {{1, 8, 12, 12}, {8, 2, 3, 3}, {1, 1}, {2, 0, 1, 2}, {2, 2}, 4},
      {{3, 6, 10, 10}, {6, 1, 3, 3}, {1, 2}, {1, 1, 1, 1}, {1, 1}, 6},
      {{2, 5, 17}, {7, 5, 4}, {3}, {2, 1}, {2}, 1}, // 1-D
      {{1, 4, 5, 6, 7},
       {6, 2, 2, 3, 2},
       {1, 2, 1},
       {0, 1, 1, 1, 0, 0}, // 3-D
       {1, 1, 2},
       2},
      {{4, 64, 8, 8}, {64, 64, 1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1},
      // Stride 2 over an even size without end padding: the last input row
      // is never read (oneDNN's end padding would be -1: the own path runs).
      {{1, 2, 8, 8}, {3, 2, 3, 3}, {2, 2}, {0, 0, 0, 0}, {1, 1}, 1},
      // Output maps of at most 16 positions: the weight gradient as one
      // product (ResNet's last stage; strides, dilations, uneven pads, 1-D).
      {{4, 64, 2, 2}, {64, 64, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1},
      {{2, 32, 8, 8}, {48, 32, 3, 3}, {2, 2}, {1, 0, 2, 1}, {2, 1}, 1},
      {{16, 32, 6}, {32, 32, 3}, {2}, {1, 1}, {1}, 1},
  };
  return cases;
}

Attrs convAttrs(const ConvCase &c) {
  std::vector<int64_t> kernel(c.w.begin() + 2, c.w.end());
  return {{"kernel_shape", Attribute::ofInts(kernel)},
          {"strides", Attribute::ofInts(c.strides)},
          {"pads", Attribute::ofInts(c.pads)},
          {"dilations", Attribute::ofInts(c.dilations)},
          {"group", Attribute::ofInt(c.group)}};
}

/// Conv forward (with a bias), data gradient and weight gradient of one
/// case in dtype t, native against `referencePath`.
void checkConv(DType t, const ConvCase &c, unsigned seed,
               const std::string &referencePath) {
  Attrs attrs = convAttrs(c);
  Tensor x = randomTensor(t, c.x, seed), w = randomTensor(t, c.w, seed + 1);
  Tensor bias = randomTensor(t, {c.w[0]}, seed + 2);
  Tensor ax = absF32(x), aw = absF32(w), ab = absF32(bias);
  int64_t kernel = 1;
  for (size_t i = 2; i < c.w.size(); ++i)
    kernel *= c.w[i];
  bool half = t != DType::F32;
  {
    SCOPED_TRACE("Conv");
    Tensor native = runOne("", "Conv", {&x, &w, &bias}, attrs, "native");
    Tensor ref = runOne("", "Conv", {&x, &w, &bias}, attrs, referencePath);
    Tensor sum = runOne("", "Conv", {&ax, &aw, &ab}, attrs, "blas");
    expectWithin(native, ref, sum, c.w[1] * kernel + 1, half);
  }
  Tensor y = runOne("", "Conv", {&x, &w}, attrs, "exact");
  Tensor dy = randomTensor(t, y.dims, seed + 3), ady = absF32(dy);
  {
    SCOPED_TRACE("ConvGradInput");
    Tensor shape = Tensor::fromInt64s({int64_t(c.x.size())}, c.x);
    Tensor native =
        runOne(kMpcDomain, "ConvGradInput", {&dy, &w, &shape}, attrs, "native");
    Tensor ref = runOne(kMpcDomain, "ConvGradInput", {&dy, &w, &shape}, attrs,
                        referencePath);
    Tensor sum =
        runOne(kMpcDomain, "ConvGradInput", {&ady, &aw, &shape}, attrs, "blas");
    expectWithin(native, ref, sum, (c.w[0] / c.group) * kernel, half);
  }
  {
    SCOPED_TRACE("ConvGradWeight");
    Tensor native =
        runOne(kMpcDomain, "ConvGradWeight", {&dy, &x}, attrs, "native");
    Tensor ref =
        runOne(kMpcDomain, "ConvGradWeight", {&dy, &x}, attrs, referencePath);
    Tensor sum =
        runOne(kMpcDomain, "ConvGradWeight", {&ady, &ax}, attrs, "blas");
    expectWithin(native, ref, sum,
                 c.x[0] * elementCount(y.dims) / y.dims[0] / y.dims[1], half);
  }
}

TEST(OneDnn, Bf16ConvAndGradientsWithinOneUlpOfTheEmulatedPath) {
  unsigned seed = 200;
  for (const ConvCase &c : convCases()) {
    SCOPED_TRACE("x " + cpu::shapeString(c.x) + " w " + cpu::shapeString(c.w) +
                 " group " + std::to_string(c.group));
    checkConv(DType::BF16, c, seed, "exact");
    seed += 10;
  }
  std::string report = cpu::onednn::kernelReport();
  EXPECT_NE(report.find("convolutions: oneDNN bf16"), std::string::npos)
      << report;
}

/// fp16 convolutions stay emulated (no native fp16 kernels in oneDNN 2.6),
/// their widened operands on oneDNN's fp32 convolutions: one fp16 ulp of
/// the im2col + BLAS path under MPC_CPU_EXACT_HALF=1.
TEST(OneDnn, Fp16WidenedConvAndGradientsWithinOneUlpOfTheEmulatedPath) {
  unsigned seed = 400;
  for (const ConvCase &c : convCases()) {
    SCOPED_TRACE("x " + cpu::shapeString(c.x) + " w " + cpu::shapeString(c.w) +
                 " group " + std::to_string(c.group));
    checkConv(DType::F16, c, seed, "exact");
    seed += 10;
  }
}

/// fp32 products with a plain B of more rows than columns (k > n) run on
/// oneDNN's sgemm (onednn.cpp): Gemm without C, with a row bias (copied into
/// Y, added with beta 1), with a full C and beta, with alpha; MatMul 2-D and
/// batched over a shared B (one product of the stacked rows); a FusedMatMul
/// with alpha. Each within the fp32 tolerance of BLAS, and oneDNN ran.
TEST(OneDnn, Fp32TallPlainBProductsOnSgemmMatchBlas) {
  unsigned seed = 700;
  const auto check = expectFp32MatchesBlas;
  struct GemmCase {
    std::vector<int64_t> c; ///< empty: no C
    float alpha, beta;
  };
  for (const GemmCase &g : std::vector<GemmCase>{{{}, 1.f, 0.f},
                                                 {{}, 0.5f, 0.f},
                                                 {{40}, 1.f, 1.f},
                                                 {{1, 40}, 1.f, 1.f},
                                                 {{33, 40}, 1.f, 0.5f},
                                                 {{33, 1}, -2.f, 1.f}}) {
    SCOPED_TRACE("Gemm 33x40x300 C " + cpu::shapeString(g.c) + " alpha " +
                 std::to_string(g.alpha) + " beta " + std::to_string(g.beta));
    std::vector<Tensor> in = {randomTensor(DType::F32, {33, 300}, seed++),
                              randomTensor(DType::F32, {300, 40}, seed++)};
    if (!g.c.empty())
      in.push_back(randomTensor(DType::F32, g.c, seed++));
    Attrs attrs = {{"alpha", Attribute::ofFloat(g.alpha)},
                   {"beta", Attribute::ofFloat(g.beta)}};
    Attrs absAttrs = {{"alpha", Attribute::ofFloat(std::fabs(g.alpha))},
                      {"beta", Attribute::ofFloat(std::fabs(g.beta))}};
    check("", "Gemm", in, attrs, absAttrs, 301);
  }
  {
    SCOPED_TRACE("MatMul 2-D 64x24x700");
    check("", "MatMul",
          {randomTensor(DType::F32, {64, 700}, seed++),
           randomTensor(DType::F32, {700, 24}, seed++)},
          {}, {}, 700);
  }
  {
    SCOPED_TRACE("MatMul batched over a shared B 3x16x130 x 130x50");
    check("", "MatMul",
          {randomTensor(DType::F32, {3, 16, 130}, seed++),
           randomTensor(DType::F32, {130, 50}, seed++)},
          {}, {}, 130);
  }
  {
    SCOPED_TRACE("FusedMatMul alpha 0.25, 40x30x900");
    Attrs f = {{"alpha", Attribute::ofFloat(0.25f)}};
    check(kMpcDomain, "FusedMatMul",
          {randomTensor(DType::F32, {40, 900}, seed++),
           randomTensor(DType::F32, {900, 30}, seed++)},
          f, f, 900);
  }
  EXPECT_NE(cpu::onednn::kernelReport().find("oneDNN fp32"), std::string::npos)
      << cpu::onednn::kernelReport();
}

TEST(OneDnn, Fp32ConvAndGradientsMatchIm2colBlas) {
  unsigned seed = 300;
  for (const ConvCase &c : convCases()) {
    SCOPED_TRACE("x " + cpu::shapeString(c.x) + " w " + cpu::shapeString(c.w) +
                 " group " + std::to_string(c.group));
    checkConv(DType::F32, c, seed, "blas");
    seed += 10;
  }
  EXPECT_NE(cpu::onednn::kernelReport().find("oneDNN fp32"), std::string::npos)
      << cpu::onednn::kernelReport();
}

TEST(OneDnn, ExactHalfFlagGivesTheEmulatedBits) {
  // The reference must be what it was before oneDNN: widened operands, one
  // sgemm, one rounding -- recomputed here from the fp32 product of the
  // widened operands.
  Tensor a = randomTensor(DType::BF16, {19, 300}, 7);
  Tensor b = randomTensor(DType::BF16, {300, 23}, 8);
  Tensor af = a.castTo(DType::F32), bf = b.castTo(DType::F32);
  Tensor exact = runOne("", "MatMul", {&a, &b}, {}, "exact");
  Tensor wide = runOne("", "MatMul", {&af, &bf}, {}, "blas");
  Tensor rounded = wide.castTo(DType::BF16);
  ASSERT_EQ(exact.byteSize(), rounded.byteSize());
  EXPECT_EQ(
      std::memcmp(exact.bytes.data(), rounded.bytes.data(), exact.byteSize()),
      0);
}

} // namespace
