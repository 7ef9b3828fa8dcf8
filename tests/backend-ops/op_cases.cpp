// The backend-ops cases: elementwise, casts, matrix products, the loss, the
// training-step ops and the transformer / residual-MLP family (softmax,
// layer norm, GELU, reductions, gather, transpose, dropout, gradient
// clipping, comparisons and Where) and the CNN family (convolutions, batch
// norm, pooling), forward and backward, in fp32, fp16 and bf16 (and int64
// where the op takes it).
#include "op_cases.h"

#include "ir/half.h"
#include "ir/mpc_ops.h"
#include "ir/window_geometry.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <tuple>

namespace mpc {
namespace backend_ops {

Tensor randomTensor(std::mt19937 &rng, DType t, std::vector<int64_t> dims,
                    float lo, float hi) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(size_t(elementCount(dims)));
  for (float &x : v)
    x = d(rng);
  Tensor f = Tensor::fromFloats(dims, v);
  return t == DType::F32 ? f : f.castTo(t);
}

Tensor randomLabels(std::mt19937 &rng, std::vector<int64_t> dims,
                    int64_t classes) {
  std::uniform_int_distribution<int64_t> d(0, classes - 1);
  std::vector<int64_t> v(size_t(elementCount(dims)));
  for (int64_t &x : v)
    x = d(rng);
  return Tensor::fromInt64s(dims, v);
}

Tensor boolScalar(bool v) {
  Tensor t(DType::Bool, {});
  t.data<uint8_t>()[0] = v ? 1 : 0;
  return t;
}
Tensor int64Scalar(int64_t v) { return Tensor::fromInt64s({}, {v}); }
Tensor f32Scalar(float v) { return Tensor::fromFloats({}, {v}); }

Node *buildCaseNode(Graph &g, const OpCase &c, const Inputs &inputs,
                    std::vector<const Tensor *> &ptrs) {
  std::vector<Value *> values;
  ptrs.clear();
  for (size_t i = 0; i < inputs.size(); ++i) {
    values.push_back(inputs[i]
                         ? g.addInput("in" + std::to_string(i),
                                      inputs[i]->dtype, toDims(inputs[i]->dims))
                         : nullptr);
    ptrs.push_back(inputs[i] ? &*inputs[i] : nullptr);
  }
  Node *node = g.createNode(c.op, values, c.numOutputs, c.name, c.domain);
  for (const auto &kv : c.attrs)
    node->setAttr(kv.first, kv.second);
  return node;
}

std::string sourceDir() {
  const char *env = std::getenv("MPC_SOURCE_DIR");
  return env && *env ? env : MPC_SOURCE_DIR;
}

std::string caseOpName(const OpCase &c) {
  return c.domain.empty() ? c.op : c.domain + "." + c.op;
}

namespace {

const std::vector<DType> kFloats = {DType::F32, DType::F16, DType::BF16};
const std::vector<DType> kF32 = {DType::F32};

Attribute f(float v) { return Attribute::ofFloat(v); }
Attribute i(int64_t v) { return Attribute::ofInt(v); }

/// Random fp32 bit patterns (every class: normal, subnormal, inf, NaN with
/// payloads) after the listed special values.
Tensor floatPatterns(std::mt19937 &rng, int64_t n) {
  const float specials[] = {0.0f,          -0.0f,          INFINITY, -INFINITY,
                            NAN,           65504.0f,       65519.0f, 65520.0f,
                            -65520.0f,     5.96e-8f,       2.98e-8f, 1e-40f,
                            1.0009765625f, 1.00048828125f, 3.0e38f,  -1.5f};
  Tensor t(DType::F32, {n});
  std::uniform_int_distribution<uint32_t> bits;
  for (int64_t k = 0; k < n; ++k) {
    float v =
        size_t(k) < std::size(specials) ? specials[k] : bitsToFloat(bits(rng));
    t.data<float>()[k] = v;
  }
  // Two NaNs with payloads (quiet and signalling bit patterns).
  t.data<uint32_t>()[16] = 0x7f800001u;
  t.data<uint32_t>()[17] = 0xffc01234u;
  return t;
}

Tensor randomBools(std::mt19937 &rng, std::vector<int64_t> dims);

/// Every 16-bit pattern, as an fp16 or bf16 tensor.
Tensor allPatterns(DType t) {
  Tensor x(t, {65536});
  for (uint32_t k = 0; k < 65536; ++k)
    x.data<uint16_t>()[k] = uint16_t(k);
  return x;
}

void addElementwise(std::vector<OpCase> &cases) {
  struct Binary {
    const char *op;
    float lo, hi;
  };
  for (Binary b : {Binary{"Add", -1, 1}, Binary{"Sub", -1, 1},
                   Binary{"Mul", -2, 2}, Binary{"Div", 0.5f, 2}}) {
    std::string op = b.op;
    float lo = b.lo, hi = b.hi;
    struct Shapes {
      const char *name;
      std::vector<int64_t> a, b;
    };
    for (const Shapes &sh :
         {Shapes{"same", {7, 33}, {7, 33}}, Shapes{"bcast", {4, 1, 5}, {3, 1}},
          Shapes{"row", {6, 9}, {9}}, Shapes{"scalar", {5, 6}, {}}}) {
      std::vector<int64_t> da = sh.a, db = sh.b;
      cases.push_back({op + "_" + sh.name,
                       "",
                       op,
                       {},
                       1,
                       kFloats,
                       [=](DType t, std::mt19937 &rng) -> Inputs {
                         return {randomTensor(rng, t, da, lo, hi),
                                 randomTensor(rng, t, db, lo, hi)};
                       }});
    }
  }
  struct Unary {
    const char *op;
    float lo, hi;
    Compare compare;
  };
  for (Unary u : {Unary{"Relu", -1, 1, Compare::Exact},
                  Unary{"Neg", -1, 1, Compare::Exact},
                  Unary{"Abs", -1, 1, Compare::Exact},
                  Unary{"Sqrt", 0, 4, Compare::Exact},
                  Unary{"Exp", -4, 4, Compare::Tolerance},
                  Unary{"Log", 0.01f, 8, Compare::Tolerance},
                  Unary{"Tanh", -3, 3, Compare::Tolerance},
                  Unary{"Sigmoid", -6, 6, Compare::Tolerance},
                  Unary{"Erf", -2, 2, Compare::Tolerance},
                  Unary{"Sin", -8, 8, Compare::Tolerance},
                  Unary{"Cos", -8, 8, Compare::Tolerance},
                  Unary{"Floor", -8, 8, Compare::Exact},
                  Unary{"Ceil", -8, 8, Compare::Exact},
                  Unary{"Round", -8, 8, Compare::Exact},
                  Unary{"Sign", -2, 2, Compare::Exact}}) {
    float lo = u.lo, hi = u.hi;
    cases.push_back({u.op,
                     "",
                     u.op,
                     {},
                     1,
                     kFloats,
                     [=](DType t, std::mt19937 &rng) -> Inputs {
                       return {randomTensor(rng, t, {3, 1001}, lo, hi)};
                     },
                     u.compare});
  }
  // Pow: the scalar special cases are IEEE operations (exact); a general
  // exponent goes through powf (tolerance).
  struct PowCase {
    const char *name;
    float e;
    Compare compare;
  };
  for (PowCase p :
       {PowCase{"sq", 2, Compare::Exact}, PowCase{"cube", 3, Compare::Exact},
        PowCase{"sqrt", 0.5f, Compare::Exact},
        PowCase{"rsqrt", -0.5f, Compare::Exact},
        PowCase{"recip", -1, Compare::Exact},
        PowCase{"recip_sq", -2, Compare::Exact},
        PowCase{"general", 1.7f, Compare::Tolerance}}) {
    float e = p.e;
    cases.push_back({std::string("Pow_") + p.name,
                     "",
                     "Pow",
                     {},
                     1,
                     kFloats,
                     [=](DType t, std::mt19937 &rng) -> Inputs {
                       return {randomTensor(rng, t, {17, 31}, 0.25f, 3),
                               Tensor::fromFloats({}, {e})};
                     },
                     p.compare});
  }
  cases.push_back({"Pow_int_exponent",
                   "",
                   "Pow",
                   {},
                   1,
                   kFloats,
                   [](DType t, std::mt19937 &rng) -> Inputs {
                     return {randomTensor(rng, t, {40}, -2, 2), int64Scalar(2)};
                   }});
  cases.push_back({"Pow_bcast",
                   "",
                   "Pow",
                   {},
                   1,
                   kFloats,
                   [](DType t, std::mt19937 &rng) -> Inputs {
                     return {randomTensor(rng, t, {6, 5}, 0.25f, 3),
                             randomTensor(rng, DType::F32, {5}, -2, 2)};
                   },
                   Compare::Tolerance});
}

void addCasts(std::vector<OpCase> &cases) {
  for (DType from : kFloats)
    for (DType to : kFloats) {
      if (from == to)
        continue;
      std::string name =
          std::string("Cast_") + dtypeName(from) + "_to_" + dtypeName(to);
      // Random bit patterns of the source type, 4099 elements: the vector
      // path and a scalar tail.
      cases.push_back({name,
                       "",
                       "Cast",
                       {{"to", i(toOnnxDataType(to))}},
                       1,
                       {from},
                       [=](DType, std::mt19937 &rng) -> Inputs {
                         Tensor x = floatPatterns(rng, 4099);
                         if (from == DType::F32)
                           return {x};
                         Tensor h(from, {4099});
                         for (int64_t k = 0; k < 4099; ++k)
                           h.data<uint16_t>()[k] =
                               uint16_t(x.data<uint32_t>()[k] >> 16);
                         return {h};
                       }});
      if (from != DType::F32)
        cases.push_back({name + "_every_pattern",
                         "",
                         "Cast",
                         {{"to", i(toOnnxDataType(to))}},
                         1,
                         {from},
                         [=](DType, std::mt19937 &) -> Inputs {
                           return {allPatterns(from)};
                         }});
    }
  // bool <-> float: masks (stochastic depth casts its bool draw to fp32).
  // Every float bit pattern of fp16/bf16 (zeros of both signs, NaNs) to
  // bool, and random fp32 patterns.
  for (DType t : kFloats) {
    cases.push_back({std::string("Cast_bool_to_") + dtypeName(t),
                     "",
                     "Cast",
                     {{"to", i(toOnnxDataType(t))}},
                     1,
                     {DType::Bool},
                     [](DType, std::mt19937 &rng) -> Inputs {
                       return {randomBools(rng, {4099})};
                     }});
    cases.push_back({std::string("Cast_") + dtypeName(t) + "_to_bool",
                     "",
                     "Cast",
                     {{"to", i(toOnnxDataType(DType::Bool))}},
                     1,
                     {t},
                     [t](DType, std::mt19937 &rng) -> Inputs {
                       return {t == DType::F32 ? floatPatterns(rng, 4099)
                                               : allPatterns(t)};
                     }});
  }
  // int64/int32 -> fp32: counts read from shapes (--sync-batchnorm's
  // element count); beyond 2^24 the float rounds to nearest-even.
  cases.push_back({"Cast_int_to_fp32",
                   "",
                   "Cast",
                   {{"to", i(toOnnxDataType(DType::F32))}},
                   1,
                   {DType::I64, DType::I32},
                   [](DType t, std::mt19937 &rng) -> Inputs {
                     std::uniform_int_distribution<int64_t> small(-100000,
                                                                  100000);
                     Tensor x(t, {1027});
                     for (int64_t k = 0; k < x.numel(); ++k) {
                       int64_t v = small(rng);
                       if (k % 7 == 0) // odd values past 2^24: rounded
                         v = (int64_t(1) << 25) + 2 * v + 1;
                       if (k % 11 == 0 && t == DType::I64)
                         v = -(int64_t(1) << 40) - 2 * v - 1;
                       x.setFromDouble(k, double(v));
                     }
                     return {x};
                   }});
  // fp64 -> fp32: a scheduled learning rate read in fp32 (Adafactor),
  // rounded to nearest-even; doubles between floats, and ties.
  cases.push_back({"Cast_fp64_to_fp32",
                   "",
                   "Cast",
                   {{"to", i(toOnnxDataType(DType::F32))}},
                   1,
                   {DType::F64},
                   [](DType, std::mt19937 &rng) -> Inputs {
                     std::uniform_real_distribution<double> u(-4, 4);
                     Tensor x(DType::F64, {1027});
                     for (int64_t k = 0; k < x.numel(); ++k)
                       x.data<double>()[k] =
                           k % 5 == 0 ? 1.0 + std::ldexp(double(k), -30)
                                      : u(rng);
                     return {x};
                   }});
  cases.push_back({"Cast_identity",
                   "",
                   "Cast",
                   {{"to", i(toOnnxDataType(DType::F32))}},
                   1,
                   kF32,
                   [](DType, std::mt19937 &rng) -> Inputs {
                     return {floatPatterns(rng, 100)};
                   }});
}

void addBackward(std::vector<OpCase> &cases) {
  for (DType fwd : kFloats)
    cases.push_back({std::string("ReluGrad_fwd_") + dtypeName(fwd),
                     kMpcDomain,
                     "ReluGrad",
                     {},
                     1,
                     kFloats,
                     [=](DType t, std::mt19937 &rng) -> Inputs {
                       return {randomTensor(rng, t, {9, 57}),
                               randomTensor(rng, fwd, {9, 57})};
                     }});
  struct Sum {
    const char *name;
    std::vector<int64_t> from, to;
  };
  for (const Sum &s :
       {Sum{"bias", {64, 20}, {20}}, Sum{"inner", {8, 5, 6}, {5, 1}},
        Sum{"all", {3, 4, 5}, {}}, Sum{"none", {4, 3}, {4, 3}},
        // More rows than one chunk of the sum (kSumChunk): chunk sums in
        // parallel, then added in order, the CPU's bits all the same.
        Sum{"bias_long", {2, 300, 20}, {20}},
        // Outputs a whole number of 16-byte units in every dtype: each thread
        // sums 16 bytes of adjacent outputs (sumChunksPackedKernel), one
        // chunk and many.
        Sum{"bias_packed", {3, 200, 40}, {40}},
        Sum{"bias_packed_short", {5, 24}, {24}},
        Sum{"split_long", {300, 3, 5}, {3, 1}}}) {
    std::vector<int64_t> from = s.from, to = s.to;
    cases.push_back(
        {std::string("SumToShape_") + s.name,
         kMpcDomain,
         "SumToShape",
         {},
         1,
         kFloats,
         [=](DType t, std::mt19937 &rng) -> Inputs {
           return {randomTensor(rng, t, from), randomTensor(rng, t, to)};
         }});
    // The bias gradient as fold-widening-casts writes it: dY as stored,
    // the sum in X's fp32.
    cases.push_back({std::string("SumToShapeAs_") + s.name,
                     kMpcDomain,
                     "SumToShapeAs",
                     {},
                     1,
                     kFloats,
                     [=](DType t, std::mt19937 &rng) -> Inputs {
                       return {randomTensor(rng, t, from),
                               randomTensor(rng, DType::F32, to)};
                     }});
  }
}

void addMatrixProducts(std::vector<OpCase> &cases) {
  struct GemmCase {
    const char *name;
    std::vector<int64_t> a, b;
    std::optional<std::vector<int64_t>> c;
    Builder::Attrs attrs;
  };
  std::vector<GemmCase> gemms = {
      {"plain", {13, 17}, {17, 9}, std::nullopt, {}},
      {"transA", {17, 13}, {17, 9}, std::nullopt, {{"transA", i(1)}}},
      {"transB", {13, 17}, {9, 17}, std::nullopt, {{"transB", i(1)}}},
      {"transAB",
       {17, 13},
       {9, 17},
       std::nullopt,
       {{"transA", i(1)}, {"transB", i(1)}}},
      {"bias_row",
       {13, 17},
       {9, 17},
       std::vector<int64_t>{9},
       {{"transB", i(1)}}},
      // A bias row with beta 1 goes to cuBLASLt's bias epilogue.
      {"bias_row_matrix_alpha",
       {17, 13},
       {17, 9},
       std::vector<int64_t>{1, 9},
       {{"transA", i(1)}, {"alpha", f(-0.5f)}}},
      {"bias_col", {13, 17}, {17, 9}, std::vector<int64_t>{13, 1}, {}},
      {"bias_scalar",
       {13, 17},
       {17, 9},
       std::vector<int64_t>{},
       {{"alpha", f(0.5f)}, {"beta", f(2.0f)}}},
      {"c_full",
       {13, 17},
       {17, 9},
       std::vector<int64_t>{13, 9},
       {{"beta", f(-1.0f)}}},
      {"tensor_cores",
       {128, 256},
       {64, 256},
       std::vector<int64_t>{64},
       {{"transB", i(1)}}},
      {"empty_k", {5, 0}, {0, 4}, std::vector<int64_t>{4}, {{"beta", f(0.5f)}}},
  };
  for (const GemmCase &g : gemms) {
    GemmCase c = g;
    cases.push_back(
        {std::string("Gemm_") + g.name, "", "Gemm", g.attrs, 1, kFloats,
         [=](DType t, std::mt19937 &rng) -> Inputs {
           Inputs in = {randomTensor(rng, t, c.a), randomTensor(rng, t, c.b)};
           if (c.c)
             in.push_back(randomTensor(rng, t, *c.c));
           return in;
         },
         Compare::Tolerance});
  }
  struct MatMulCase {
    const char *name;
    std::vector<int64_t> a, b;
  };
  for (const MatMulCase &m :
       {MatMulCase{"2d", {5, 7}, {7, 3}},
        MatMulCase{"batched", {4, 5, 7}, {4, 7, 3}},
        MatMulCase{"shared_b", {4, 5, 7}, {7, 3}},
        MatMulCase{"shared_a", {5, 7}, {2, 7, 3}},
        MatMulCase{"bcast", {2, 1, 5, 7}, {3, 7, 4}},
        MatMulCase{"vec_mat", {7}, {7, 3}},
        MatMulCase{"mat_vec", {4, 5, 7}, {7}},
        MatMulCase{"large", {2, 96, 160}, {2, 160, 72}}}) {
    std::vector<int64_t> a = m.a, b = m.b;
    cases.push_back(
        {std::string("MatMul_") + m.name,
         "",
         "MatMul",
         {},
         1,
         kFloats,
         [=](DType t, std::mt19937 &rng) -> Inputs {
           return {randomTensor(rng, t, a), randomTensor(rng, t, b)};
         },
         Compare::Tolerance});
  }
  // mpc.FusedMatMul (fold-transpose): the transposed operand is stored with
  // its last two axes swapped; the flags go to cuBLAS.
  struct FusedCase {
    const char *name;
    std::vector<int64_t> a, b;
    int64_t transA, transB;
  };
  for (const FusedCase &m :
       {FusedCase{"transA", {7, 5}, {7, 3}, 1, 0},
        FusedCase{"transB", {5, 7}, {3, 7}, 0, 1},
        FusedCase{"transAB", {7, 5}, {3, 7}, 1, 1},
        FusedCase{"batched_transB", {4, 5, 7}, {4, 3, 7}, 0, 1},
        FusedCase{"shared_b_transA", {4, 7, 5}, {7, 3}, 1, 0},
        FusedCase{"shared_b_transB", {4, 5, 7}, {3, 7}, 0, 1},
        FusedCase{"bcast_transAB", {2, 1, 7, 5}, {3, 4, 7}, 1, 1},
        FusedCase{"large_transA", {2, 160, 96}, {2, 160, 72}, 1, 0}}) {
    std::vector<int64_t> a = m.a, b = m.b;
    cases.push_back(
        {std::string("FusedMatMul_") + m.name,
         kMpcDomain,
         "FusedMatMul",
         {{"transA", i(m.transA)}, {"transB", i(m.transB)}},
         1,
         kFloats,
         [=](DType t, std::mt19937 &rng) -> Inputs {
           return {randomTensor(rng, t, a), randomTensor(rng, t, b)};
         },
         Compare::Tolerance});
  }
}

void addLosses(std::vector<OpCase> &cases) {
  struct LossCase {
    const char *name;
    std::vector<int64_t> scores;
    Builder::Attrs attrs;
    bool weights;
  };
  for (const LossCase &l :
       {LossCase{"mean", {64, 2}, {}, false},
        // More classes than a warp has lanes: each lane takes several.
        LossCase{"many_classes", {8, 300}, {}, false},
        LossCase{"ignore",
                 {16, 5},
                 {{"ignore_index", i(1)},
                  {"reduction", Attribute::ofString("mean")}},
                 false},
        LossCase{
            "sum", {16, 5}, {{"reduction", Attribute::ofString("sum")}}, false},
        // Over kSumChunk (64) positions: the one-block chunked reduction,
        // several chunks and several rounds of 256 chunk sums.
        LossCase{"many_positions", {20000, 3}, {}, false},
        LossCase{"none_weighted_3d",
                 {4, 3, 6},
                 {{"reduction", Attribute::ofString("none")}},
                 true}}) {
    LossCase c = l;
    int64_t classes = l.scores[1];
    std::vector<int64_t> labelDims = l.scores;
    labelDims.erase(labelDims.begin() + 1);
    cases.push_back({std::string("SoftmaxCrossEntropyLoss_") + l.name, "",
                     "SoftmaxCrossEntropyLoss", l.attrs, 2, kFloats,
                     [=](DType t, std::mt19937 &rng) -> Inputs {
                       Inputs in = {randomTensor(rng, t, c.scores, -3, 3),
                                    randomLabels(rng, labelDims, classes)};
                       if (c.weights)
                         in.push_back(randomTensor(rng, t, {classes}, 0.5f, 2));
                       return in;
                     },
                     Compare::Tolerance});
    // The gradient takes log-probabilities: log_softmax of random scores,
    // computed here in double (the kernel only reads them).
    std::vector<int64_t> dLDims;
    bool none = l.attrs.size() == 1 && l.attrs[0].second.s == "none";
    if (none)
      dLDims = labelDims;
    cases.push_back(
        {std::string("SoftmaxCrossEntropyLossGrad_") + l.name, kMpcDomain,
         "SoftmaxCrossEntropyLossGrad", l.attrs, 1, kFloats,
         [=](DType t, std::mt19937 &rng) -> Inputs {
           Tensor x = randomTensor(rng, DType::F32, c.scores, -3, 3);
           int64_t n = c.scores[0], d = x.numel() / (n * classes);
           Tensor lp(DType::F32, c.scores);
           for (int64_t a = 0; a < n; ++a)
             for (int64_t e = 0; e < d; ++e) {
               double sum = 0;
               for (int64_t k = 0; k < classes; ++k)
                 sum += std::exp(
                     double(x.data<float>()[(a * classes + k) * d + e]));
               for (int64_t k = 0; k < classes; ++k) {
                 int64_t at = (a * classes + k) * d + e;
                 lp.data<float>()[at] =
                     float(double(x.data<float>()[at]) - std::log(sum));
               }
             }
           Inputs in = {randomTensor(rng, DType::F32, dLDims, 0.5f, 2),
                        t == DType::F32 ? lp : lp.castTo(t),
                        randomLabels(rng, labelDims, classes)};
           if (c.weights)
             in.push_back(randomTensor(rng, t, {classes}, 0.5f, 2));
           return in;
         },
         Compare::Tolerance});
  }
}

void addTraining(std::vector<OpCase> &cases) {
  // UnscaleGradients over gradients of three dtypes, one spanning several
  // chunks of the multi-tensor kernel; with and without an overflow.
  for (int variant = 0; variant < 3; ++variant) {
    const char *names[] = {"clean", "overflow", "scale_one"};
    cases.push_back(
        {std::string("UnscaleGradients_") + names[variant],
         kMpcDomain,
         "UnscaleGradients",
         {},
         4,
         kF32,
         [=](DType, std::mt19937 &rng) -> Inputs {
           Tensor big = randomTensor(rng, DType::F32, {40000}, -3e4f, 3e4f);
           if (variant == 1)
             big.data<float>()[33333] = INFINITY;
           return {f32Scalar(variant == 2 ? 1.0f : 65536.0f),
                   randomTensor(rng, DType::F16, {100}, -6e4f, 6e4f), big,
                   randomTensor(rng, DType::BF16, {3, 7}, -1e3f, 1e3f)};
         }});
  }
  for (int variant = 0; variant < 3; ++variant) {
    const char *names[] = {"count", "grow", "backoff"};
    cases.push_back({std::string("UpdateLossScale_") + names[variant],
                     kMpcDomain,
                     "UpdateLossScale",
                     {{"growth_factor", f(2)},
                      {"backoff_factor", f(0.5f)},
                      {"growth_interval", i(5)}},
                     2,
                     kF32,
                     [=](DType, std::mt19937 &) -> Inputs {
                       return {f32Scalar(32768.0f),
                               int64Scalar(variant == 1 ? 4 : 2),
                               boolScalar(variant == 2)};
                     }});
  }
  struct SgdCase {
    const char *name;
    Builder::Attrs attrs;
    int64_t step;
    bool skip;
  };
  for (const SgdCase &s :
       {SgdCase{"plain", {{"lr", f(0.1f)}}, 0, false},
        SgdCase{"momentum_first",
                {{"lr", f(0.05f)}, {"momentum", f(0.9f)}},
                0,
                false},
        SgdCase{"momentum_wd",
                {{"lr", f(0.05f)},
                 {"momentum", f(0.9f)},
                 {"weight_decay", f(1e-4f)},
                 {"dampening", f(0.1f)}},
                3,
                false},
        SgdCase{"nesterov",
                {{"lr", f(0.05f)}, {"momentum", f(0.9f)}, {"nesterov", i(1)}},
                7,
                false},
        SgdCase{
            "skipped", {{"lr", f(0.05f)}, {"momentum", f(0.9f)}}, 7, true}}) {
    bool withBuf = s.attrs.size() > 1;
    int64_t step = s.step;
    bool skip = s.skip;
    cases.push_back({std::string("SGD_") + s.name, kMpcDomain, "SGD", s.attrs,
                     size_t(withBuf ? 2 : 1), kF32,
                     [=](DType, std::mt19937 &rng) -> Inputs {
                       Inputs in = {boolScalar(skip), int64Scalar(step),
                                    randomTensor(rng, DType::F32, {33, 65}),
                                    randomTensor(rng, DType::F32, {33, 65})};
                       if (withBuf)
                         in.push_back(randomTensor(rng, DType::F32, {33, 65}));
                       return in;
                     }});
  }
  // Sizes: a multiple of 4 (float4s only), n % 4 == 3 (a scalar tail), and
  // more elements than one wave of resident blocks holds on an H200 (the
  // kernels' grid is one wave that grid-strides).
  struct AdamCase {
    const char *name;
    Builder::Attrs attrs;
    int64_t step;
    bool skip;
    int64_t n;
  };
  for (const AdamCase &a :
       {AdamCase{"first", {{"lr", f(1e-3f)}}, 0, false, 1000},
        AdamCase{"later_wd",
                 {{"lr", f(1e-2f)}, {"weight_decay", f(0.01f)}},
                 5,
                 false,
                 1003},
        AdamCase{
            "adamw",
            {{"lr", f(1e-3f)}, {"weight_decay", f(0.01f)}, {"decoupled", i(1)}},
            9,
            false,
            1000},
        AdamCase{"skipped", {{"lr", f(1e-3f)}}, 9, true, 1003},
        AdamCase{"long", {{"lr", f(1e-3f)}}, 3, false, 3000001}}) {
    int64_t step = a.step, n = a.n;
    bool skip = a.skip;
    cases.push_back({std::string("Adam_") + a.name, kMpcDomain, "Adam", a.attrs,
                     3, kF32, [=](DType, std::mt19937 &rng) -> Inputs {
                       return {boolScalar(skip),
                               int64Scalar(step),
                               randomTensor(rng, DType::F32, {n}),
                               randomTensor(rng, DType::F32, {n}),
                               randomTensor(rng, DType::F32, {n}, -0.1f, 0.1f),
                               randomTensor(rng, DType::F32, {n}, 0, 0.01f)};
                     }});
  }
  // --optimizer-state-dtype=bf16: bf16 moments and momentum buffer (the
  // kernels' scalar path, rounded on store), staged and skipped.
  for (bool skip : {false, true}) {
    const char *suffix = skip ? "_skipped" : "";
    cases.push_back(
        {std::string("Adam_bf16_moments") + suffix, kMpcDomain, "Adam",
         Builder::Attrs{
             {"lr", f(1e-3f)}, {"weight_decay", f(0.01f)}, {"decoupled", i(1)}},
         3, kF32, [=](DType, std::mt19937 &rng) -> Inputs {
           return {boolScalar(skip),
                   int64Scalar(4),
                   randomTensor(rng, DType::F32, {1003}),
                   randomTensor(rng, DType::F32, {1003}),
                   randomTensor(rng, DType::F32, {1003}, -0.1f, 0.1f)
                       .castTo(DType::BF16),
                   randomTensor(rng, DType::F32, {1003}, 0, 0.01f)
                       .castTo(DType::BF16)};
         }});
    cases.push_back(
        {std::string("SGD_bf16_momentum") + suffix, kMpcDomain, "SGD",
         Builder::Attrs{{"lr", f(0.05f)}, {"momentum", f(0.9f)}}, 2, kF32,
         [=](DType, std::mt19937 &rng) -> Inputs {
           return {boolScalar(skip), int64Scalar(3),
                   randomTensor(rng, DType::F32, {33, 65}),
                   randomTensor(rng, DType::F32, {33, 65}),
                   randomTensor(rng, DType::F32, {33, 65}).castTo(DType::BF16)};
         }});
  }
  // The 16-bit working copy of the new master (output `low`,
  // passes/weight_copies.h): written beside p' by the float4 path (4000
  // elements), the scalar tail (1003), a skipped step (the cast of p) and
  // bf16 moments' scalar path; SGD's after its buffer.
  for (DType low : {DType::F16, DType::BF16})
    for (bool skip : {false, true})
      for (int64_t n : {int64_t(4000), int64_t(1003)}) {
        std::string suffix = std::string("_") + dtypeName(low) +
                             (skip ? "_skipped" : "") + "_" + std::to_string(n);
        cases.push_back(
            {"Adam_working_copy" + suffix, kMpcDomain, "Adam",
             Builder::Attrs{{"lr", f(1e-3f)}, {"low", i(toOnnxDataType(low))}},
             4, kF32, [=](DType, std::mt19937 &rng) -> Inputs {
               return {boolScalar(skip),
                       int64Scalar(2),
                       randomTensor(rng, DType::F32, {n}),
                       randomTensor(rng, DType::F32, {n}),
                       randomTensor(rng, DType::F32, {n}, -0.1f, 0.1f),
                       randomTensor(rng, DType::F32, {n}, 0, 0.01f)};
             }});
        cases.push_back({"SGD_working_copy" + suffix, kMpcDomain, "SGD",
                         Builder::Attrs{{"lr", f(0.05f)},
                                        {"momentum", f(0.9f)},
                                        {"low", i(toOnnxDataType(low))}},
                         3, kF32, [=](DType, std::mt19937 &rng) -> Inputs {
                           return {boolScalar(skip), int64Scalar(3),
                                   randomTensor(rng, DType::F32, {n}),
                                   randomTensor(rng, DType::F32, {n}),
                                   randomTensor(rng, DType::F32, {n})};
                         }});
      }
  cases.push_back({"Adam_working_copy_bf16_moments", kMpcDomain, "Adam",
                   Builder::Attrs{{"lr", f(1e-3f)},
                                  {"low", i(toOnnxDataType(DType::BF16))}},
                   4, kF32, [=](DType, std::mt19937 &rng) -> Inputs {
                     return {boolScalar(false),
                             int64Scalar(4),
                             randomTensor(rng, DType::F32, {1003}),
                             randomTensor(rng, DType::F32, {1003}),
                             randomTensor(rng, DType::F32, {1003}, -0.1f, 0.1f)
                                 .castTo(DType::BF16),
                             randomTensor(rng, DType::F32, {1003}, 0, 0.01f)
                                 .castTo(DType::BF16)};
                   }});
  // The loss scale an update unscales its gradient by (grad_scale,
  // passes/fold_unscale.h): fp32 gradients by the float4 path (4000) and
  // the scalar tail (1003), fp16/bf16 ones, a scale that is not a power of
  // two (inv rounded), 1 (no multiply) and a skipped step; SGD's after an
  // omitted lr.
  struct ScaleCase {
    const char *name;
    DType grad;
    float scale;
    bool skip;
    int64_t n;
  };
  for (const ScaleCase &c :
       {ScaleCase{"fp32_4000", DType::F32, 65536.0f, false, 4000},
        ScaleCase{"fp32_1003", DType::F32, 3000.0f, false, 1003},
        ScaleCase{"fp16", DType::F16, 3000.0f, false, 1003},
        ScaleCase{"bf16", DType::BF16, 65536.0f, false, 4000},
        ScaleCase{"one", DType::F32, 1.0f, false, 4000},
        ScaleCase{"skipped", DType::F16, 3000.0f, true, 1003}}) {
    const DType grad = c.grad;
    const float scale = c.scale;
    const bool skip = c.skip;
    const int64_t n = c.n;
    cases.push_back(
        {std::string("Adam_grad_scale_") + c.name, kMpcDomain, "Adam",
         Builder::Attrs{{"lr", f(1e-3f)}}, 3, kF32,
         [=](DType, std::mt19937 &rng) -> Inputs {
           return {boolScalar(skip),
                   int64Scalar(2),
                   randomTensor(rng, DType::F32, {n}),
                   randomTensor(rng, DType::F32, {n}, -4000, 4000).castTo(grad),
                   randomTensor(rng, DType::F32, {n}, -0.1f, 0.1f),
                   randomTensor(rng, DType::F32, {n}, 0, 0.01f),
                   std::nullopt,
                   f32Scalar(scale)};
         }});
    cases.push_back(
        {std::string("SGD_grad_scale_") + c.name, kMpcDomain, "SGD",
         Builder::Attrs{{"lr", f(0.05f)}, {"momentum", f(0.9f)}}, 2, kF32,
         [=](DType, std::mt19937 &rng) -> Inputs {
           return {boolScalar(skip),
                   int64Scalar(3),
                   randomTensor(rng, DType::F32, {n}),
                   randomTensor(rng, DType::F32, {n}, -4000, 4000).castTo(grad),
                   randomTensor(rng, DType::F32, {n}),
                   std::nullopt,
                   f32Scalar(scale)};
         }});
  }
  // --lr-schedule: the rate an fp64 input (the device reads it; SGD's after
  // an omitted buffer), and mpc.LearningRate itself with the device's cos
  // and pow (a rounding tie could tell them apart; Exact asks for none).
  auto realScalar = [](DType t, double v) {
    Tensor x(t, {});
    x.setFromDouble(0, v);
    return x;
  };
  for (bool withBuf : {false, true})
    cases.push_back(
        {std::string("SGD_lr_input") + (withBuf ? "_momentum" : ""), kMpcDomain,
         "SGD",
         withBuf ? Builder::Attrs{{"momentum", f(0.9f)}} : Builder::Attrs{},
         size_t(withBuf ? 2 : 1), kF32,
         [=](DType, std::mt19937 &rng) -> Inputs {
           Inputs in = {boolScalar(false), int64Scalar(4),
                        randomTensor(rng, DType::F32, {33, 65}),
                        randomTensor(rng, DType::F32, {33, 65})};
           in.push_back(withBuf ? std::optional<Tensor>(
                                      randomTensor(rng, DType::F32, {33, 65}))
                                : std::nullopt);
           in.push_back(realScalar(DType::F64, 0.030000000000000002));
           return in;
         }});
  for (DType lrType : {DType::F64, DType::F32})
    cases.push_back({std::string("Adam_lr_input_") + dtypeName(lrType),
                     kMpcDomain,
                     "Adam",
                     {{"weight_decay", f(0.01f)}, {"decoupled", i(1)}},
                     3,
                     kF32,
                     [=](DType, std::mt19937 &rng) -> Inputs {
                       return {
                           boolScalar(false),
                           int64Scalar(6),
                           randomTensor(rng, DType::F32, {1003}),
                           randomTensor(rng, DType::F32, {1003}),
                           randomTensor(rng, DType::F32, {1003}, -0.1f, 0.1f),
                           randomTensor(rng, DType::F32, {1003}, 0, 0.01f),
                           realScalar(lrType, 0.0030000000000000001)};
                     }});
  struct ScheduleCase {
    const char *name;
    Builder::Attrs attrs;
    int64_t step;
  };
  auto real = [](double v) {
    return Attribute::ofTensor(Tensor::scalar(DType::F64, v));
  };
  for (const ScheduleCase &sc :
       {ScheduleCase{"warmup",
                     {{"schedule", Attribute::ofString("constant")},
                      {"warmup_steps", i(10)}},
                     3},
        ScheduleCase{"linear",
                     {{"schedule", Attribute::ofString("linear")},
                      {"base_lr", real(0.05)},
                      {"warmup_steps", i(10)},
                      {"total_steps", i(1000)}},
                     377},
        ScheduleCase{"cosine",
                     {{"schedule", Attribute::ofString("cosine")},
                      {"base_lr", real(3e-4)},
                      {"warmup_steps", i(100)},
                      {"total_steps", i(10000)},
                      {"min_lr_ratio", real(0.1)}},
                     4321},
        ScheduleCase{"step",
                     {{"schedule", Attribute::ofString("step")},
                      {"step_size", i(30)},
                      {"gamma", real(0.1)}},
                     95},
        ScheduleCase{"exponential",
                     {{"schedule", Attribute::ofString("exponential")},
                      {"gamma", real(0.9999)}},
                     12345},
        ScheduleCase{"restarts",
                     {{"schedule", Attribute::ofString("cosine_with_restarts")},
                      {"warmup_steps", i(10)},
                      {"total_steps", i(1000)},
                      {"cycles", i(4)}},
                     611},
        ScheduleCase{"polynomial",
                     {{"schedule", Attribute::ofString("polynomial")},
                      {"base_lr", real(1e-3)},
                      {"total_steps", i(1000)},
                      {"lr_end", real(1e-5)},
                      {"power", real(0.5)}},
                     333},
        ScheduleCase{"inverse_sqrt",
                     {{"schedule", Attribute::ofString("inverse_sqrt")},
                      {"warmup_steps", i(4000)}},
                     98765},
        ScheduleCase{"wsd",
                     {{"schedule", Attribute::ofString("warmup_stable_decay")},
                      {"warmup_steps", i(100)},
                      {"total_steps", i(10000)},
                      {"decay_steps", i(2000)},
                      {"decay_type", Attribute::ofString("1-sqrt")},
                      {"min_lr_ratio", real(0.1)}},
                     8765}}) {
    int64_t step = sc.step;
    cases.push_back(
        {std::string("LearningRate_") + sc.name, kMpcDomain, "LearningRate",
         sc.attrs, 1, kF32,
         [=](DType, std::mt19937 &) -> Inputs { return {int64Scalar(step)}; }});
  }
  for (bool skip : {false, true})
    cases.push_back(
        {std::string("IncrementStep_") + (skip ? "skipped" : "clean"),
         kMpcDomain,
         "IncrementStep",
         {},
         1,
         kF32,
         [=](DType, std::mt19937 &) -> Inputs {
           return {int64Scalar(41), boolScalar(skip)};
         }});
  // Data parallel in a world of one rank (the only one the cuda backend
  // joins): each output is its input, gradients and the overflow flag
  // together.
  cases.push_back({"AllReduce_one_rank",
                   kMpcDomain,
                   "AllReduce",
                   {{"reduction", Attribute::ofString("mean")}},
                   2,
                   kF32,
                   [](DType, std::mt19937 &rng) -> Inputs {
                     return {randomTensor(rng, DType::F32, {1003}),
                             randomTensor(rng, DType::F32, {7, 5})};
                   }});
  cases.push_back(
      {"AllReduce_flag",
       kMpcDomain,
       "AllReduce",
       {{"reduction", Attribute::ofString("max")}},
       1,
       kF32,
       [](DType, std::mt19937 &) -> Inputs { return {boolScalar(true)}; }});
  // --shard-optimizer's collectives in a world of one rank: the chunk is
  // the whole value (run_shard.cpp; NCCL only past one rank).
  const Builder::Attrs one = {{"world_size", Attribute::ofInt(1)}};
  cases.push_back({"RankShard_one_rank", kMpcDomain, "RankShard", one, 2, kF32,
                   [](DType, std::mt19937 &rng) -> Inputs {
                     return {randomTensor(rng, DType::F32, {1003}),
                             randomTensor(rng, DType::F32, {7, 5})};
                   }});
  cases.push_back({"ReduceScatter_one_rank",
                   kMpcDomain,
                   "ReduceScatter",
                   {{"world_size", Attribute::ofInt(1)},
                    {"reduction", Attribute::ofString("mean")}},
                   2,
                   kF32,
                   [](DType, std::mt19937 &rng) -> Inputs {
                     return {randomTensor(rng, DType::F32, {1003}),
                             randomTensor(rng, DType::F32, {7, 5})};
                   }});
  // The shape form, as --shard-optimizer gathers the fp32 masters.
  cases.push_back({"AllGather_shapes_one_rank",
                   kMpcDomain,
                   "AllGather",
                   {{"world_size", Attribute::ofInt(1)},
                    {"shapes", Attribute::ofInts({2, 7, 5, 1, 6})}},
                   2,
                   kF32,
                   [](DType, std::mt19937 &rng) -> Inputs {
                     return {randomTensor(rng, DType::F32, {35}),
                             randomTensor(rng, DType::F32, {6})};
                   }});
  cases.push_back({"AllGather_one_rank", kMpcDomain, "AllGather", one, 2, kF32,
                   [](DType, std::mt19937 &rng) -> Inputs {
                     return {randomTensor(rng, DType::F32, {35}),
                             randomTensor(rng, DType::F32, {6}),
                             randomTensor(rng, DType::F32, {7, 5}),
                             randomTensor(rng, DType::F32, {2, 3})};
                   }});
}

// --- the transformer / residual-MLP family -----------------------------------

Tensor int64Tensor(std::vector<int64_t> dims, std::vector<int64_t> v) {
  return Tensor::fromInt64s(dims, v);
}

Tensor int32Tensor(std::vector<int64_t> dims, const std::vector<int32_t> &v) {
  Tensor t(DType::I32, dims);
  for (size_t k = 0; k < v.size(); ++k)
    t.data<int32_t>()[k] = v[k];
  return t;
}

Tensor randomBools(std::mt19937 &rng, std::vector<int64_t> dims) {
  Tensor t(DType::Bool, dims);
  std::bernoulli_distribution d(0.7);
  for (int64_t k = 0; k < t.numel(); ++k)
    t.data<uint8_t>()[k] = d(rng) ? 1 : 0;
  return t;
}

/// Softmax of random scores along the last axis, computed in double and
/// stored as t (the Y a SoftmaxGrad reads); log-softmax when `log`.
Tensor softmaxOf(std::mt19937 &rng, DType t, std::vector<int64_t> dims,
                 bool log) {
  Tensor x = randomTensor(rng, DType::F32, dims, -3, 3);
  int64_t len = dims.back(), rows = x.numel() / len;
  Tensor y(DType::F32, dims);
  for (int64_t r = 0; r < rows; ++r) {
    double sum = 0;
    for (int64_t j = 0; j < len; ++j)
      sum += std::exp(double(x.data<float>()[r * len + j]));
    for (int64_t j = 0; j < len; ++j) {
      double v = double(x.data<float>()[r * len + j]);
      y.data<float>()[r * len + j] =
          float(log ? v - std::log(sum) : std::exp(v) / sum);
    }
  }
  return t == DType::F32 ? y : y.castTo(t);
}

void addSoftmax(std::vector<OpCase> &cases) {
  struct Shape {
    const char *name;
    std::vector<int64_t> dims;
    int64_t axis;
  };
  // A row shorter than a warp, one spanning several lane strides, and an
  // inner axis (rows strided in memory).
  for (const Shape &sh :
       {Shape{"short", {4, 2, 16, 16}, -1}, Shape{"long", {5, 1000}, -1},
        Shape{"inner", {3, 7, 5}, 1}})
    for (bool log : {false, true}) {
      std::vector<int64_t> dims = sh.dims;
      std::string op = log ? "LogSoftmax" : "Softmax";
      cases.push_back({op + "_" + sh.name,
                       "",
                       op,
                       {{"axis", i(sh.axis)}},
                       1,
                       kFloats,
                       [=](DType t, std::mt19937 &rng) -> Inputs {
                         return {randomTensor(rng, t, dims, -4, 4)};
                       },
                       Compare::Tolerance});
      // The island as fold-widening-casts writes it: X as stored, the
      // softmax in fp32.
      if (!log)
        cases.push_back({std::string("SoftmaxTo_") + sh.name,
                         kMpcDomain,
                         "SoftmaxTo",
                         {{"axis", i(sh.axis)}, {"to", i(1)}},
                         1,
                         kFloats,
                         [=](DType t, std::mt19937 &rng) -> Inputs {
                           return {randomTensor(rng, t, dims, -4, 4)};
                         },
                         Compare::Tolerance});
      // With the attention's scaling Div by one element of X's dtype, and
      // writing the Cast down for the next product too (Ylow, fp16 or bf16).
      for (int low : {0, 10, 16})
        if (!log)
          cases.push_back(
              {std::string(low == 0    ? "DivSoftmaxTo_"
                           : low == 10 ? "DivSoftmaxTo_low_"
                                       : "DivSoftmaxTo_lowbf16_") +
                   sh.name,
               kMpcDomain,
               "DivSoftmaxTo",
               {{"axis", i(sh.axis)}, {"to", i(1)}, {"low", i(low ? low : 10)}},
               size_t(low ? 2 : 1),
               kFloats,
               [=](DType t, std::mt19937 &rng) -> Inputs {
                 Tensor d(DType::F32, {});
                 d.data<float>()[0] = 3.0f;
                 return {randomTensor(rng, t, dims, -12, 12),
                         t == DType::F32 ? d : d.castTo(t)};
               },
               Compare::Tolerance});
    }
  // mpc.AddTo (fold-widening-casts): the residual stream's fp32 Add reading
  // the case's 16-bit branch as stored, and a sum writing its Cast down
  // beside it (Clow) or as itself (`to` fp16/bf16): the CPU's bits.
  for (DType to : {DType::F32, DType::F16, DType::BF16})
    for (bool withLow : {false, true})
      cases.push_back(
          {std::string("AddTo_to_") + dtypeName(to) + (withLow ? "_low" : ""),
           kMpcDomain,
           "AddTo",
           {{"to", i(toOnnxDataType(to))},
            {"low", i(toOnnxDataType(DType::BF16))}},
           size_t(withLow ? 2 : 1),
           kFloats,
           [=](DType t, std::mt19937 &rng) -> Inputs {
             return {randomTensor(rng, DType::F32, {33, 65}, -4, 4),
                     randomTensor(rng, t, {33, 65}, -4, 4)};
           }});
  for (bool log : {false, true}) {
    std::string op = log ? "LogSoftmaxGrad" : "SoftmaxGrad";
    // Same dtypes, and an fp32 Y meeting the case's dY (autocast's island).
    for (bool fwd32 : {false, true})
      cases.push_back(
          {op + (fwd32 ? "_fwd_fp32" : "_same"),
           kMpcDomain,
           op,
           {{"axis", i(-1)}},
           1,
           kFloats,
           [=](DType t, std::mt19937 &rng) -> Inputs {
             return {randomTensor(rng, t, {6, 4, 37}),
                     softmaxOf(rng, fwd32 ? DType::F32 : t, {6, 4, 37}, log)};
           },
           Compare::Tolerance});
  }
  // The gradient through the attention's scaling Div and the Cast down, as
  // fold-widening-casts writes it: dY as stored, Y and D fp32, dX fp16.
  cases.push_back({"SoftmaxGradDiv",
                   kMpcDomain,
                   "SoftmaxGradDiv",
                   {{"axis", i(-1)}, {"to", i(10)}},
                   1,
                   kFloats,
                   [=](DType t, std::mt19937 &rng) -> Inputs {
                     Tensor d(DType::F32, {});
                     d.data<float>()[0] = 8.0f;
                     return {randomTensor(rng, t, {6, 4, 37}),
                             softmaxOf(rng, DType::F32, {6, 4, 37}, false), d};
                   },
                   Compare::Tolerance});
  // The gradient as fold-widening-casts writes it: dY as stored, Y and dX
  // in fp32.
  cases.push_back({"SoftmaxGradAs",
                   kMpcDomain,
                   "SoftmaxGradAs",
                   {{"axis", i(-1)}},
                   1,
                   kFloats,
                   [=](DType t, std::mt19937 &rng) -> Inputs {
                     return {randomTensor(rng, t, {6, 4, 37}),
                             softmaxOf(rng, DType::F32, {6, 4, 37}, false)};
                   },
                   Compare::Tolerance});
}

/// mean and inv_std (fp32, shape `stats`) of x over its last n elements
/// per row, in double, for a LayerNormalizationGrad case.
std::pair<Tensor, Tensor>
layerNormStats(const Tensor &x, std::vector<int64_t> stats, int64_t n) {
  int64_t rows = x.numel() / n;
  std::vector<float> mean(static_cast<size_t>(rows)),
      inv(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    double sum = 0, sq = 0;
    for (int64_t j = 0; j < n; ++j)
      sum += x.getAsDouble(r * n + j);
    double m = sum / double(n);
    for (int64_t j = 0; j < n; ++j)
      sq += (x.getAsDouble(r * n + j) - m) * (x.getAsDouble(r * n + j) - m);
    mean[size_t(r)] = float(m);
    inv[size_t(r)] = float(1 / std::sqrt(sq / double(n) + 1e-5));
  }
  return {Tensor::fromFloats(stats, mean), Tensor::fromFloats(stats, inv)};
}

void addLayerNorm(std::vector<OpCase> &cases) {
  // The transformer's shape (rows of 32), a long row with a large mean
  // (two-pass statistics), and a 2-axis normalisation with a scale that
  // broadcasts and no bias.
  cases.push_back({"LayerNormalization_rows",
                   "",
                   "LayerNormalization",
                   {{"axis", i(-1)}, {"epsilon", f(1e-5f)}},
                   3,
                   kFloats,
                   [](DType t, std::mt19937 &rng) -> Inputs {
                     return {randomTensor(rng, t, {4, 16, 32}, -2, 2),
                             randomTensor(rng, t, {32}, 0.5f, 1.5f),
                             randomTensor(rng, t, {32}, -0.5f, 0.5f)};
                   },
                   Compare::Tolerance});
  cases.push_back({"LayerNormalization_long_offset",
                   "",
                   "LayerNormalization",
                   {{"axis", i(-1)}},
                   3,
                   kFloats,
                   [](DType t, std::mt19937 &rng) -> Inputs {
                     return {randomTensor(rng, t, {3, 777}, 90, 110),
                             randomTensor(rng, t, {777}, 0.5f, 1.5f),
                             randomTensor(rng, t, {777}, -0.5f, 0.5f)};
                   },
                   Compare::Tolerance});
  cases.push_back({"LayerNormalization_two_axes_no_bias",
                   "",
                   "LayerNormalization",
                   {{"axis", i(1)}},
                   3,
                   kFloats,
                   [](DType t, std::mt19937 &rng) -> Inputs {
                     return {randomTensor(rng, t, {3, 4, 5}),
                             randomTensor(rng, t, {5}, 0.5f, 1.5f),
                             std::nullopt};
                   },
                   Compare::Tolerance});
  // mpc.LayerNormalizationTo (fold-widening-casts): Y in fp16 alone (a
  // pre-LN block), and fp32 Y with its fp16/bf16 copy (Ylow, a post-LN one).
  for (auto [name, to, low] :
       {std::tuple("fp16", DType::F16, DType::Undefined),
        std::tuple("fp32_ylow_fp16", DType::F32, DType::F16),
        std::tuple("fp32_ylow_bf16", DType::F32, DType::BF16)}) {
    Builder::Attrs attrs = {
        {"axis", i(-1)}, {"epsilon", f(1e-5f)}, {"to", i(toOnnxDataType(to))}};
    if (low != DType::Undefined)
      attrs.push_back({"low", i(toOnnxDataType(low))});
    cases.push_back({std::string("LayerNormalizationTo_") + name, kMpcDomain,
                     "LayerNormalizationTo", attrs,
                     size_t(low != DType::Undefined ? 4 : 3), kFloats,
                     [](DType t, std::mt19937 &rng) -> Inputs {
                       return {randomTensor(rng, t, {4, 16, 96}, -2, 2),
                               randomTensor(rng, t, {96}, 0.5f, 1.5f),
                               randomTensor(rng, t, {96}, -0.5f, 0.5f)};
                     },
                     Compare::Tolerance});
  }
  struct GradCase {
    const char *name;
    std::vector<int64_t> x, stats, scale;
    int64_t axis, n;
    bool onlyDx;
  };
  for (const GradCase &gc :
       {GradCase{"rows", {4, 16, 32}, {4, 16, 1}, {32}, -1, 32, false},
        GradCase{"two_axes", {3, 4, 5}, {3, 1, 1}, {1, 5}, 1, 20, false},
        GradCase{"dx_only", {6, 50}, {6, 1}, {50}, -1, 50, true},
        // Many chunks of rows: 24 columns are whole 16-byte units in every
        // dtype (the packed dScale/dBias kernel), 18 in none.
        GradCase{"long_rows", {3, 200, 24}, {3, 200, 1}, {24}, -1, 24, false},
        GradCase{"long_rows_unpacked",
                 {3, 200, 18},
                 {3, 200, 1},
                 {18},
                 -1,
                 18,
                 false}}) {
    GradCase c = gc;
    cases.push_back({std::string("LayerNormalizationGrad_") + gc.name,
                     kMpcDomain,
                     "LayerNormalizationGrad",
                     {{"axis", i(gc.axis)}},
                     size_t(gc.onlyDx ? 1 : 3),
                     kFloats,
                     [=](DType t, std::mt19937 &rng) -> Inputs {
                       Tensor x = randomTensor(rng, t, c.x, -2, 2);
                       auto [mean, inv] = layerNormStats(x, c.stats, c.n);
                       return {randomTensor(rng, t, c.x), x,
                               randomTensor(rng, t, c.scale, 0.5f, 1.5f), mean,
                               inv};
                     },
                     Compare::Tolerance});
    // An autocast island's fp16/bf16 dY (the case's dtype) beside its fp32
    // X, scale and results, as fold-widening-casts hands it over (the
    // kernels' MixedAccess).
    cases.push_back({std::string("LayerNormalizationGrad_half_dy_") + gc.name,
                     kMpcDomain,
                     "LayerNormalizationGrad",
                     {{"axis", i(gc.axis)}},
                     size_t(gc.onlyDx ? 1 : 3),
                     {DType::F16, DType::BF16},
                     [=](DType t, std::mt19937 &rng) -> Inputs {
                       Tensor x = randomTensor(rng, DType::F32, c.x, -2, 2);
                       auto [mean, inv] = layerNormStats(x, c.stats, c.n);
                       return {
                           randomTensor(rng, t, c.x), x,
                           randomTensor(rng, DType::F32, c.scale, 0.5f, 1.5f),
                           mean, inv};
                     },
                     Compare::Tolerance});
  }
}

void addRmsNorm(std::vector<OpCase> &cases) {
  // What fuse-rmsnorm makes of LlamaRMSNorm's arithmetic: rows of 32, a
  // 2-axis normalisation with a broadcasting scale; the gradient with both
  // outputs over many chunks of rows (packed and not), and dX alone.
  struct Case {
    const char *name;
    std::vector<int64_t> x, scale;
    int64_t axis;
  };
  for (const Case &c : {Case{"rows", {4, 16, 32}, {32}, -1},
                        Case{"two_axes", {3, 4, 5}, {1, 5}, 1},
                        Case{"long_rows", {3, 200, 24}, {24}, -1},
                        Case{"long_rows_unpacked", {3, 200, 18}, {18}, -1}}) {
    Builder::Attrs attrs = {{"axis", i(c.axis)}, {"epsilon", f(1e-5f)}};
    cases.push_back({std::string("RMSNormalization_") + c.name, kMpcDomain,
                     "RMSNormalization", attrs, 1, kFloats,
                     [=](DType t, std::mt19937 &rng) -> Inputs {
                       return {randomTensor(rng, t, c.x, -2, 2),
                               randomTensor(rng, t, c.scale, 0.5f, 1.5f)};
                     },
                     Compare::Tolerance});
    for (size_t outs : {size_t(2), size_t(1)})
      cases.push_back({std::string("RMSNormalizationGrad_") + c.name +
                           (outs == 1 ? "_dx_only" : ""),
                       kMpcDomain, "RMSNormalizationGrad", attrs, outs, kFloats,
                       [=](DType t, std::mt19937 &rng) -> Inputs {
                         return {randomTensor(rng, t, c.x),
                                 randomTensor(rng, t, c.x, -2, 2),
                                 randomTensor(rng, t, c.scale, 0.5f, 1.5f)};
                       },
                       Compare::Tolerance});
    // RMSNormalizationTo (fold-widening-casts): fp16 Y alone, and fp32 Y
    // with its fp16 copy.
    for (bool ylow : {false, true}) {
      Builder::Attrs to = attrs;
      to.push_back({"to", i(toOnnxDataType(ylow ? DType::F32 : DType::F16))});
      if (ylow)
        to.push_back({"low", i(toOnnxDataType(DType::F16))});
      cases.push_back(
          {std::string("RMSNormalizationTo_") + c.name + (ylow ? "_ylow" : ""),
           kMpcDomain, "RMSNormalizationTo", to, size_t(ylow ? 2 : 1), kFloats,
           [=](DType t, std::mt19937 &rng) -> Inputs {
             return {randomTensor(rng, t, c.x, -2, 2),
                     randomTensor(rng, t, c.scale, 0.5f, 1.5f)};
           },
           Compare::Tolerance});
    }
    // A narrower dY (the case's dtype) beside fp32 X and scale.
    cases.push_back({std::string("RMSNormalizationGrad_half_dy_") + c.name,
                     kMpcDomain,
                     "RMSNormalizationGrad",
                     attrs,
                     2,
                     {DType::F16, DType::BF16},
                     [=](DType t, std::mt19937 &rng) -> Inputs {
                       return {
                           randomTensor(rng, t, c.x),
                           randomTensor(rng, DType::F32, c.x, -2, 2),
                           randomTensor(rng, DType::F32, c.scale, 0.5f, 1.5f)};
                     },
                     Compare::Tolerance});
  }
}

void addGeluFamily(std::vector<OpCase> &cases) {
  // What fuse-gelu makes of an opset < 20 export's GELU arithmetic.
  for (const char *op : {"Gelu", "GeluTanh"})
    cases.push_back({std::string("mpc_") + op,
                     kMpcDomain,
                     op,
                     {},
                     1,
                     kFloats,
                     [](DType t, std::mt19937 &rng) -> Inputs {
                       return {randomTensor(rng, t, {7, 301}, -5, 5)};
                     },
                     Compare::Tolerance});
  for (const char *approx : {"none", "tanh"}) {
    Builder::Attrs attrs = {{"approximate", Attribute::ofString(approx)}};
    cases.push_back({std::string("Gelu_") + approx, "", "Gelu", attrs, 1,
                     kFloats,
                     [](DType t, std::mt19937 &rng) -> Inputs {
                       return {randomTensor(rng, t, {7, 301}, -5, 5)};
                     },
                     Compare::Tolerance});
    cases.push_back({std::string("GeluGrad_") + approx, kMpcDomain, "GeluGrad",
                     attrs, 1, kFloats,
                     [](DType t, std::mt19937 &rng) -> Inputs {
                       return {randomTensor(rng, t, {7, 301}),
                               randomTensor(rng, t, {7, 301}, -5, 5)};
                     },
                     Compare::Tolerance});
  }
  for (bool fwd32 : {false, true})
    cases.push_back(
        {std::string("ErfGrad") + (fwd32 ? "_fwd_fp32" : "_same"),
         kMpcDomain,
         "ErfGrad",
         {},
         1,
         kFloats,
         [=](DType t, std::mt19937 &rng) -> Inputs {
           return {randomTensor(rng, t, {5, 211}),
                   randomTensor(rng, fwd32 ? DType::F32 : t, {5, 211}, -3, 3)};
         },
         Compare::Tolerance});
}

void addReductions(std::vector<OpCase> &cases) {
  struct ReduceCase {
    const char *name;
    std::vector<int64_t> axes;
    int64_t keepdims;
    std::vector<int64_t> kept, out; ///< X [4, 5, 6] with 1s where reduced
  };
  const std::vector<int64_t> x = {4, 5, 6};
  for (const ReduceCase &rc :
       {ReduceCase{"middle", {1}, 1, {4, 1, 6}, {4, 1, 6}},
        ReduceCase{"outer_inner", {0, -1}, 0, {1, 5, 1}, {5}},
        ReduceCase{"last", {2}, 1, {4, 5, 1}, {4, 5, 1}},
        ReduceCase{"all", {0, 1, 2}, 0, {1, 1, 1}, {}}})
    for (const char *op : {"ReduceSum", "ReduceMean", "ReduceMax"}) {
      ReduceCase c = rc;
      cases.push_back({std::string(op) + "_" + rc.name,
                       "",
                       op,
                       {{"keepdims", i(rc.keepdims)}},
                       1,
                       kFloats,
                       [=](DType t, std::mt19937 &rng) -> Inputs {
                         return {randomTensor(rng, t, x, -2, 2),
                                 int64Tensor({int64_t(c.axes.size())}, c.axes)};
                       }});
      if (std::string(op) == "ReduceMax")
        continue;
      bool mean = std::string(op) == "ReduceMean";
      cases.push_back(
          {std::string("ReduceGrad_") + (mean ? "mean_" : "sum_") + rc.name,
           kMpcDomain,
           "ReduceGrad",
           {{"keepdims", i(rc.keepdims)}, {"mean", i(mean)}},
           1,
           kFloats,
           [=](DType t, std::mt19937 &rng) -> Inputs {
             return {randomTensor(rng, t, c.out), randomTensor(rng, t, x),
                     int64Tensor({int64_t(c.axes.size())}, c.axes)};
           }});
    }
  // A NaN wins a maximum.
  cases.push_back(
      {"ReduceMax_nan",
       "",
       "ReduceMax",
       {{"keepdims", i(0)}},
       1,
       kFloats,
       [](DType t, std::mt19937 &rng) -> Inputs {
         Tensor x = randomTensor(rng, DType::F32, {3, 8});
         x.data<float>()[10] = NAN;
         return {t == DType::F32 ? x : x.castTo(t), int64Tensor({1}, {1})};
       }});
}

void addGather(std::vector<OpCase> &cases) {
  // The embedding lookup: rows of a table by int64 indices (repeats and a
  // negative one); and an inner axis with int32 indices.
  cases.push_back({"Gather_embedding",
                   "",
                   "Gather",
                   {},
                   1,
                   kFloats,
                   [](DType t, std::mt19937 &rng) -> Inputs {
                     return {randomTensor(rng, t, {10, 32}),
                             int64Tensor({2, 4}, {3, 0, 9, 3, -1, 5, 3, 0})};
                   }});
  cases.push_back({"Gather_axis1_int32",
                   "",
                   "Gather",
                   {{"axis", i(1)}},
                   1,
                   kFloats,
                   [](DType t, std::mt19937 &rng) -> Inputs {
                     return {randomTensor(rng, t, {3, 7, 2}),
                             int32Tensor({5}, {6, 0, -7, 2, 2})};
                   }});
  // The embedding gradient: repeated indices add up (in index order on
  // both backends, so exactly); rows no index names are 0.
  cases.push_back({"GatherGrad_embedding",
                   kMpcDomain,
                   "GatherGrad",
                   {},
                   1,
                   kFloats,
                   [](DType t, std::mt19937 &rng) -> Inputs {
                     std::uniform_int_distribution<int64_t> d(-12, 11);
                     std::vector<int64_t> idx(64);
                     for (int64_t &v : idx)
                       v = d(rng);
                     return {randomTensor(rng, t, {4, 16, 32}),
                             int64Tensor({4, 16}, idx),
                             randomTensor(rng, t, {12, 32})};
                   }});
  cases.push_back({"GatherGrad_axis1_int32",
                   kMpcDomain,
                   "GatherGrad",
                   {{"axis", i(1)}},
                   1,
                   kFloats,
                   [](DType t, std::mt19937 &rng) -> Inputs {
                     return {randomTensor(rng, t, {3, 5, 2}),
                             int32Tensor({5}, {6, 0, -7, 2, 2}),
                             randomTensor(rng, t, {3, 7, 2})};
                   }});
  struct TransposeCase {
    const char *name;
    std::vector<int64_t> dims;
    std::optional<std::vector<int64_t>> perm;
  };
  for (const TransposeCase &tc :
       {TransposeCase{"weights", {40, 24}, std::nullopt},
        TransposeCase{
            "heads", {4, 16, 2, 16}, std::vector<int64_t>{0, 2, 1, 3}},
        TransposeCase{"keys", {4, 16, 2, 16}, std::vector<int64_t>{0, 2, 3, 1}},
        TransposeCase{
            "rank5", {2, 3, 1, 4, 5}, std::vector<int64_t>{4, 0, 3, 1, 2}}}) {
    std::vector<int64_t> dims = tc.dims;
    Builder::Attrs attrs;
    if (tc.perm)
      attrs.push_back({"perm", Attribute::ofInts(*tc.perm)});
    cases.push_back({std::string("Transpose_") + tc.name, "", "Transpose",
                     attrs, 1, kFloats,
                     [=](DType t, std::mt19937 &rng) -> Inputs {
                       return {randomTensor(rng, t, dims)};
                     }});
  }
}

void addDropout(std::vector<OpCase> &cases) {
  // The mask comes from the shared counter-based generator: the same bits
  // on both backends, and y = x * scale rounded once.
  for (float ratio : {0.1f, 0.5f, 1.0f}) {
    std::string name =
        "Dropout_train_" + std::to_string(int(std::lround(ratio * 100)));
    cases.push_back({name,
                     "",
                     "Dropout",
                     {{"seed", i(42)}},
                     2,
                     kFloats,
                     [=](DType t, std::mt19937 &rng) -> Inputs {
                       return {randomTensor(rng, t, {9, 1003}),
                               f32Scalar(ratio), boolScalar(true)};
                     }});
  }
  cases.push_back({"Dropout_inference",
                   "",
                   "Dropout",
                   {},
                   2,
                   kFloats,
                   [](DType t, std::mt19937 &rng) -> Inputs {
                     return {randomTensor(rng, t, {5, 17}), f32Scalar(0.5f),
                             boolScalar(false)};
                   }});
  for (bool training : {true, false})
    cases.push_back(
        {std::string("DropoutGrad_") + (training ? "train" : "inference"),
         kMpcDomain,
         "DropoutGrad",
         {},
         1,
         kFloats,
         [=](DType t, std::mt19937 &rng) -> Inputs {
           return {randomTensor(rng, t, {6, 77}), randomBools(rng, {6, 77}),
                   f32Scalar(0.3f), boolScalar(training)};
         }});
}

void addClipGradNorm(std::vector<OpCase> &cases) {
  // Three gradients, one spanning several chunks; a max_norm that clips and
  // one that does not (coefficient 1).
  for (bool clips : {true, false})
    cases.push_back(
        {std::string("ClipGradNorm_") + (clips ? "clips" : "within"),
         kMpcDomain,
         "ClipGradNorm",
         {{"max_norm", f(clips ? 1.0f : 1e6f)}},
         4,
         kFloats,
         [](DType t, std::mt19937 &rng) -> Inputs {
           return {randomTensor(rng, t, {100}), randomTensor(rng, t, {40000}),
                   randomTensor(rng, t, {3, 7})};
         },
         Compare::Tolerance});
}

void addShapeMoves(std::vector<OpCase> &cases) {
  // Byte copies: exact. Expand broadcasts a row and a column; Slice takes
  // steps both ways with negative and clamped bounds; Concat and Split
  // move blocks along an inner axis.
  cases.push_back({"Expand_broadcast",
                   "",
                   "Expand",
                   {},
                   1,
                   kFloats,
                   [](DType t, std::mt19937 &rng) -> Inputs {
                     return {randomTensor(rng, t, {4, 1, 8}),
                             int64Tensor({4}, {3, 4, 5, 8})};
                   }});
  cases.push_back(
      {"Slice_steps",
       "",
       "Slice",
       {},
       1,
       kFloats,
       [](DType t, std::mt19937 &rng) -> Inputs {
         return {randomTensor(rng, t, {6, 10, 3}), int64Tensor({2}, {1, -2}),
                 int64Tensor({2}, {100, -11}), int64Tensor({2}, {0, 1}),
                 int64Tensor({2}, {2, -3})};
       }});
  cases.push_back({"Concat_axis1",
                   "",
                   "Concat",
                   {{"axis", i(1)}},
                   1,
                   kFloats,
                   [](DType t, std::mt19937 &rng) -> Inputs {
                     return {randomTensor(rng, t, {2, 3, 4}),
                             randomTensor(rng, t, {2, 1, 4}),
                             randomTensor(rng, t, {2, 5, 4})};
                   }});
  cases.push_back(
      {"Split_sizes",
       "",
       "Split",
       {{"axis", i(-1)}},
       2,
       kFloats,
       [](DType t, std::mt19937 &rng) -> Inputs {
         return {randomTensor(rng, t, {4, 3, 10}), int64Tensor({2}, {3, 7})};
       }});
}

void addCompare(std::vector<OpCase> &cases) {
  // Values on a coarse grid, so that equal pairs occur; a NaN compares
  // unequal and unordered on both backends.
  auto grid = [](std::mt19937 &rng, DType t, std::vector<int64_t> dims) {
    Tensor x = randomTensor(rng, DType::F32, dims, -2, 2);
    for (int64_t k = 0; k < x.numel(); ++k)
      x.data<float>()[k] = std::round(x.data<float>()[k] * 2) / 2;
    x.data<float>()[0] = NAN;
    return t == DType::F32 ? x : x.castTo(t);
  };
  for (const char *op :
       {"Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"}) {
    cases.push_back({std::string(op) + "_bcast",
                     "",
                     op,
                     {},
                     1,
                     kFloats,
                     [=](DType t, std::mt19937 &rng) -> Inputs {
                       return {grid(rng, t, {4, 1, 9}), grid(rng, t, {3, 9})};
                     }});
    cases.push_back(
        {std::string(op) + "_int64",
         "",
         op,
         {},
         1,
         {DType::I64},
         [](DType, std::mt19937 &rng) -> Inputs {
           return {randomLabels(rng, {5, 6}, 4), randomLabels(rng, {6}, 4)};
         }});
  }
  // The logical ops on bool operands, broadcast.
  for (const char *op : {"And", "Or", "Xor"})
    cases.push_back(
        {std::string(op) + "_bcast",
         "",
         op,
         {},
         1,
         {DType::Bool},
         [](DType, std::mt19937 &rng) -> Inputs {
           return {randomBools(rng, {4, 1, 9}), randomBools(rng, {3, 9})};
         }});
  cases.push_back({"Where_bcast",
                   "",
                   "Where",
                   {},
                   1,
                   kFloats,
                   [](DType t, std::mt19937 &rng) -> Inputs {
                     return {randomBools(rng, {4, 1, 9}),
                             randomTensor(rng, t, {3, 9}),
                             randomTensor(rng, t, {})};
                   }});
  cases.push_back({"Where_int64",
                   "",
                   "Where",
                   {},
                   1,
                   {DType::I64},
                   [](DType, std::mt19937 &rng) -> Inputs {
                     return {randomBools(rng, {7, 5}),
                             randomLabels(rng, {7, 5}, 100),
                             randomLabels(rng, {5}, 100)};
                   }});
}
// --- convolution, batch norm and pooling (cuDNN and the pool kernels) -----

/// The output spatial sizes of a Conv with `attrs` over x and w (the
/// window resolver the kernels use), as [N, M, out...].
std::vector<int64_t> convOutputDims(const Builder::Attrs &attrs,
                                    const std::vector<int64_t> &x,
                                    const std::vector<int64_t> &w) {
  Graph g;
  Node *node = g.createNode("Conv", {}, 1, "conv");
  for (const auto &kv : attrs)
    node->setAttr(kv.first, kv.second);
  std::vector<int64_t> wk(w.begin() + 2, w.end());
  WindowAttrs a = readWindowAttrs(*node, WindowKind::Conv, x.size() - 2, wk);
  WindowGeometry geo =
      resolveWindow(*node, a, std::vector<int64_t>(x.begin() + 2, x.end()));
  std::vector<int64_t> dims = {x[0], w[0]};
  dims.insert(dims.end(), geo.out.begin(), geo.out.end());
  return dims;
}

Attribute is(std::vector<int64_t> v) { return Attribute::ofInts(v); }

/// The output dims of a pool with `attrs` over x.
std::vector<int64_t> poolOutputDims(const Builder::Attrs &attrs,
                                    const std::vector<int64_t> &x) {
  Graph g;
  Node *node = g.createNode("MaxPool", {}, 1, "pool");
  for (const auto &kv : attrs)
    node->setAttr(kv.first, kv.second);
  WindowAttrs a = readWindowAttrs(*node, WindowKind::Pool, x.size() - 2);
  WindowGeometry geo =
      resolveWindow(*node, a, std::vector<int64_t>(x.begin() + 2, x.end()));
  std::vector<int64_t> dims = {x[0], x[1]};
  dims.insert(dims.end(), geo.out.begin(), geo.out.end());
  return dims;
}

void addConvolutions(std::vector<OpCase> &cases) {
  struct ConvCase {
    const char *name;
    std::vector<int64_t> x, w;
    Builder::Attrs attrs;
    bool bias;
  };
  // The CNN's two convolutions (pads 1; stride 2 with 2 groups), dilation
  // with uneven strides, pads that differ at the two ends (explicit and
  // SAME_UPPER with an even kernel: padded on the device first), depthwise,
  // 1-D (run as 2-D) and 3-D.
  const std::vector<ConvCase> convs = {
      {"cnn1",
       {2, 3, 16, 16},
       {8, 3, 3, 3},
       {{"pads", is({1, 1, 1, 1})}},
       true},
      {"cnn2_groups_stride",
       {2, 8, 8, 8},
       {16, 4, 3, 3},
       {{"pads", is({1, 1, 1, 1})}, {"strides", is({2, 2})}, {"group", i(2)}},
       true},
      {"dilated",
       {2, 4, 11, 10},
       {6, 4, 3, 3},
       {{"strides", is({2, 1})},
        {"dilations", is({1, 2})},
        {"pads", is({1, 2, 1, 2})}},
       false},
      {"asymmetric_pads",
       {1, 3, 8, 7},
       {5, 3, 2, 3},
       {{"pads", is({0, 1, 1, 2})}},
       true},
      {"same_upper",
       {2, 2, 7, 6},
       {3, 2, 2, 2},
       {{"auto_pad", Attribute::ofString("SAME_UPPER")}},
       false},
      {"depthwise",
       {2, 6, 9, 9},
       {6, 1, 3, 3},
       {{"group", i(6)}, {"pads", is({1, 1, 1, 1})}},
       true},
      {"conv1d",
       {3, 3, 20},
       {4, 3, 5},
       {{"strides", is({2})}, {"pads", is({2, 2})}},
       true},
      {"conv3d",
       {1, 2, 5, 6, 7},
       {3, 2, 2, 3, 3},
       {{"pads", is({0, 1, 1, 0, 1, 1})}},
       false},
      // Channels in multiples of 8: fp16 and bf16 run channels-last
      // (runtime/cuda/conv_plan.h), symmetric and explicitly padded.
      {"nhwc",
       {2, 16, 12, 10},
       {32, 16, 3, 3},
       {{"pads", is({1, 1, 1, 1})}},
       true},
      {"nhwc_asymmetric_stride",
       {2, 8, 9, 9},
       {16, 8, 2, 3},
       {{"pads", is({0, 1, 1, 2})}, {"strides", is({2, 1})}},
       false},
  };
  for (const ConvCase &cc : convs) {
    ConvCase c = cc;
    std::vector<int64_t> y = convOutputDims(c.attrs, c.x, c.w);
    cases.push_back({std::string("Conv_") + c.name, "", "Conv", c.attrs, 1,
                     kFloats,
                     [=](DType t, std::mt19937 &rng) -> Inputs {
                       Inputs in = {randomTensor(rng, t, c.x),
                                    randomTensor(rng, t, c.w, -0.5f, 0.5f)};
                       if (c.bias)
                         in.push_back(randomTensor(rng, t, {c.w[0]}));
                       return in;
                     },
                     Compare::Tolerance});
    Builder::Attrs withKernel = c.attrs;
    withKernel.push_back(
        {"kernel_shape", is(std::vector<int64_t>(c.w.begin() + 2, c.w.end()))});
    // The gradients, and the same with an fp32 dY meeting the case's
    // weights or activations (widened to fp32 on the device).
    for (bool dy32 : {false, true}) {
      if (dy32 && std::string(c.name) != "cnn2_groups_stride" &&
          std::string(c.name) != "asymmetric_pads")
        continue;
      std::string suffix = std::string(c.name) + (dy32 ? "_dy_fp32" : "");
      cases.push_back({"ConvGradInput_" + suffix, kMpcDomain, "ConvGradInput",
                       c.attrs, 1, kFloats,
                       [=](DType t, std::mt19937 &rng) -> Inputs {
                         return {randomTensor(rng, dy32 ? DType::F32 : t, y),
                                 randomTensor(rng, t, c.w, -0.5f, 0.5f),
                                 int64Tensor({int64_t(c.x.size())}, c.x)};
                       },
                       Compare::Tolerance});
      cases.push_back({"ConvGradWeight_" + suffix, kMpcDomain, "ConvGradWeight",
                       withKernel, 1, kFloats,
                       [=](DType t, std::mt19937 &rng) -> Inputs {
                         return {randomTensor(rng, dy32 ? DType::F32 : t, y),
                                 randomTensor(rng, t, c.x)};
                       },
                       Compare::Tolerance});
    }
  }
  // ConvTranspose: stride 2 with output_padding (a data gradient whose
  // output is one larger than the convolution reaches), groups, and an
  // output_shape that makes the pads uneven.
  struct TransposeCase {
    const char *name;
    std::vector<int64_t> x, w;
    Builder::Attrs attrs;
  };
  for (const TransposeCase &tc :
       {TransposeCase{"stride_output_padding",
                      {2, 4, 5, 5},
                      {4, 3, 3, 3},
                      {{"strides", is({2, 2})},
                       {"pads", is({1, 1, 1, 1})},
                       {"output_padding", is({1, 1})}}},
        TransposeCase{"groups", {1, 4, 6, 5}, {4, 2, 3, 2}, {{"group", i(2)}}},
        TransposeCase{
            "output_shape",
            {1, 3, 4, 4},
            {3, 2, 3, 3},
            {{"strides", is({2, 2})}, {"output_shape", is({10, 9})}}}}) {
    TransposeCase c = tc;
    cases.push_back({std::string("ConvTranspose_") + c.name, "",
                     "ConvTranspose", c.attrs, 1, kFloats,
                     [=](DType t, std::mt19937 &rng) -> Inputs {
                       int64_t group = 1;
                       for (const auto &kv : c.attrs)
                         if (kv.first == "group")
                           group = kv.second.i;
                       return {randomTensor(rng, t, c.x),
                               randomTensor(rng, t, c.w, -0.5f, 0.5f),
                               randomTensor(rng, t, {c.w[1] * group})};
                     },
                     Compare::Tolerance});
  }
}

void addBatchNorm(std::vector<OpCase> &cases) {
  // Training mode as the CNN has it (X of the case's dtype, fp32
  // statistics), with the saved batch mean and variance of the 5-output
  // form, with statistics of X's own dtype, a rank-2 X, and inference mode.
  struct BnCase {
    const char *name;
    std::vector<int64_t> x;
    bool training, statsOfX;
    size_t outputs;
  };
  for (const BnCase &bc :
       {BnCase{"train", {8, 8, 16, 16}, true, false, 3},
        BnCase{"train_saved_stats", {4, 3, 5, 7}, true, false, 5},
        BnCase{"train_stats_of_x", {4, 5, 6}, true, true, 3},
        BnCase{"train_rank2", {16, 10}, true, false, 3},
        BnCase{"inference", {4, 3, 5, 5}, false, false, 1}}) {
    BnCase c = bc;
    int64_t ch = c.x[1];
    cases.push_back({std::string("BatchNormalization_") + c.name,
                     "",
                     "BatchNormalization",
                     {{"training_mode", i(c.training)},
                      {"momentum", f(0.8f)},
                      {"epsilon", f(1e-5f)}},
                     c.outputs,
                     kFloats,
                     [=](DType t, std::mt19937 &rng) -> Inputs {
                       DType st = c.statsOfX ? t : DType::F32;
                       return {randomTensor(rng, t, c.x, -1, 3),
                               randomTensor(rng, st, {ch}, 0.5f, 1.5f),
                               randomTensor(rng, st, {ch}, -0.5f, 0.5f),
                               randomTensor(rng, st, {ch}, -0.5f, 0.5f),
                               randomTensor(rng, st, {ch}, 0.5f, 2)};
                     },
                     Compare::Tolerance});
  }
  struct GradCase {
    const char *name;
    std::vector<int64_t> x;
    bool dy32, given;
    size_t outputs;
  };
  for (const GradCase &gc :
       {GradCase{"batch", {8, 8, 16, 16}, false, false, 3},
        GradCase{"batch_dy_fp32", {4, 3, 5, 7}, true, false, 3},
        GradCase{"batch_dx_only", {6, 4, 9}, false, false, 1},
        GradCase{"given_stats", {4, 3, 5, 7}, false, true, 3}}) {
    GradCase c = gc;
    int64_t ch = c.x[1];
    cases.push_back(
        {std::string("BatchNormalizationGrad_") + c.name,
         kMpcDomain,
         "BatchNormalizationGrad",
         {{"epsilon", f(1e-5f)}},
         c.outputs,
         kFloats,
         [=](DType t, std::mt19937 &rng) -> Inputs {
           Inputs in = {randomTensor(rng, c.dy32 ? DType::F32 : t, c.x),
                        randomTensor(rng, t, c.x, -1, 3),
                        randomTensor(rng, DType::F32, {ch}, 0.5f, 1.5f)};
           if (c.given) {
             in.push_back(randomTensor(rng, DType::F32, {ch}, 0, 1));
             in.push_back(randomTensor(rng, DType::F32, {ch}, 0.5f, 2));
           }
           return in;
         },
         // With given statistics it is mpc's own kernel, in the CPU's order.
         c.given ? Compare::Exact : Compare::Tolerance});
  }
}

/// Values on a coarse grid, so that max windows hold ties.
Tensor gridTensor(std::mt19937 &rng, DType t, std::vector<int64_t> dims) {
  Tensor x = randomTensor(rng, DType::F32, dims, -2, 2);
  for (int64_t k = 0; k < x.numel(); ++k)
    x.data<float>()[k] = std::round(x.data<float>()[k] * 4) / 4;
  return t == DType::F32 ? x : x.castTo(t);
}

void addPools(std::vector<OpCase> &cases) {
  // The pooling kernels walk windows in the CPU's order: exact bytes.
  struct PoolCase {
    const char *name;
    std::vector<int64_t> x;
    Builder::Attrs attrs;
  };
  const std::vector<PoolCase> pools = {
      {"cnn_2x2",
       {8, 8, 16, 16},
       {{"kernel_shape", is({2, 2})}, {"strides", is({2, 2})}}},
      {"overlap_pads",
       {2, 3, 9, 7},
       {{"kernel_shape", is({3, 3})},
        {"strides", is({2, 2})},
        {"pads", is({1, 1, 1, 1})}}},
      {"ceil_dilated",
       {1, 2, 10, 9},
       {{"kernel_shape", is({3, 2})},
        {"strides", is({2, 3})},
        {"dilations", is({2, 1})},
        {"ceil_mode", i(1)}}},
      {"pool1d", {3, 2, 11}, {{"kernel_shape", is({3})}, {"pads", is({1, 1})}}},
      {"pool3d",
       {1, 2, 4, 5, 6},
       {{"kernel_shape", is({2, 2, 3})},
        {"strides", is({1, 2, 2})},
        {"pads", is({0, 1, 1, 1, 0, 1})}}},
  };
  for (const PoolCase &pc : pools) {
    PoolCase c = pc;
    std::vector<int64_t> y = poolOutputDims(c.attrs, c.x);
    cases.push_back(
        {std::string("MaxPool_") + c.name, "", "MaxPool", c.attrs,
         std::string(c.name) == "overlap_pads" ? size_t(2) : size_t(1), kFloats,
         [=](DType t, std::mt19937 &rng) -> Inputs {
           return {gridTensor(rng, t, c.x)};
         }});
    cases.push_back(
        {std::string("MaxPoolGrad_") + c.name, kMpcDomain, "MaxPoolGrad",
         c.attrs, 1, kFloats, [=](DType t, std::mt19937 &rng) -> Inputs {
           return {randomTensor(rng, t, y), gridTensor(rng, t, c.x)};
         }});
    Builder::Attrs avg = c.attrs;
    if (std::string(c.name) == "overlap_pads")
      avg.push_back({"count_include_pad", i(1)});
    cases.push_back({std::string("AveragePool_") + c.name, "", "AveragePool",
                     avg, 1, kFloats,
                     [=](DType t, std::mt19937 &rng) -> Inputs {
                       return {randomTensor(rng, t, c.x)};
                     }});
    cases.push_back({std::string("AveragePoolGrad_") + c.name, kMpcDomain,
                     "AveragePoolGrad", avg, 1, kFloats,
                     [=](DType t, std::mt19937 &rng) -> Inputs {
                       return {randomTensor(rng, t, y),
                               int64Tensor({int64_t(c.x.size())}, c.x)};
                     }});
  }
  // MaxPool's Indices in column-major storage order, and an fp32 dY
  // meeting the case's X in MaxPoolGrad (the CNN's fp16 step has it).
  cases.push_back({"MaxPool_indices_column_major",
                   "",
                   "MaxPool",
                   {{"kernel_shape", is({2, 3})},
                    {"strides", is({1, 2})},
                    {"storage_order", i(1)}},
                   2,
                   kFloats,
                   [](DType t, std::mt19937 &rng) -> Inputs {
                     return {gridTensor(rng, t, {2, 2, 5, 7})};
                   }});
  cases.push_back({"MaxPoolGrad_dy_fp32",
                   kMpcDomain,
                   "MaxPoolGrad",
                   {{"kernel_shape", is({2, 2})}, {"strides", is({2, 2})}},
                   1,
                   kFloats,
                   [](DType t, std::mt19937 &rng) -> Inputs {
                     return {randomTensor(rng, DType::F32, {2, 3, 4, 4}),
                             gridTensor(rng, t, {2, 3, 8, 8})};
                   }});
  for (const auto &dims :
       {std::vector<int64_t>{4, 6, 7, 7}, std::vector<int64_t>{3, 5, 9}})
    cases.push_back({"GlobalAveragePool_rank" + std::to_string(dims.size()),
                     "",
                     "GlobalAveragePool",
                     {},
                     1,
                     kFloats,
                     [=](DType t, std::mt19937 &rng) -> Inputs {
                       return {randomTensor(rng, t, dims)};
                     }});
}
} // namespace

const std::vector<OpCase> &opCases() {
  static const std::vector<OpCase> cases = [] {
    std::vector<OpCase> c;
    addElementwise(c);
    addCasts(c);
    addBackward(c);
    addMatrixProducts(c);
    addLosses(c);
    addTraining(c);
    addSoftmax(c);
    addLayerNorm(c);
    addRmsNorm(c);
    addGeluFamily(c);
    addReductions(c);
    addGather(c);
    addDropout(c);
    addClipGradNorm(c);
    addCompare(c);
    addConvolutions(c);
    addBatchNorm(c);
    addPools(c);
    addShapeMoves(c);
    addGatherLossOptim(c);
    addElementwiseMore(c);
    addSelection(c);
    return c;
  }();
  return cases;
}

} // namespace backend_ops
} // namespace mpc
