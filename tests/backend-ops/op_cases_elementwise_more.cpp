// The backend-ops cases of the piecewise ops (LeakyRelu, Clip, Max, Min,
// Sum and their gradients), mpc.LogSigmoid and its gradient, Not, CastLike,
// Range, Trilu, CumSum, the random draws, and the vectorised paths of the
// elementwise, Not and cast kernels.
//
// The vector cases have 4096 + 7 elements: 16-byte groups through the
// vector body, then a tail the scalar loop takes (kernels/cuda/
// vector_split.h). Ties and NaNs are drawn on purpose where an op has a
// rule for them (Max/Min and their gradient, Clip).
#include "op_cases.h"

#include "ir/mpc_ops.h"

#include <cmath>

namespace mpc {
namespace backend_ops {
namespace {

const std::vector<DType> kFloats = {DType::F32, DType::F16, DType::BF16};
/// What Clip, Max, Min and Sum take on both backends.
const std::vector<DType> kNumeric = {DType::F32, DType::F16, DType::BF16,
                                     DType::F64, DType::I64, DType::I32,
                                     DType::I8,  DType::U8};
const std::vector<DType> kFloatsF64 = {DType::F32, DType::F16, DType::BF16,
                                       DType::F64};

/// Elements of the vector cases: whole 16-byte groups and a tail.
constexpr int64_t kVectorCount = 4096 + 7;

Attribute f(float v) { return Attribute::ofFloat(v); }
Attribute i(int64_t v) { return Attribute::ofInt(v); }

/// A scalar of dtype t.
Tensor scalarOf(DType t, double v) { return Tensor::scalar(t, v); }

/// Small integers in [lo, hi] as dtype t: Max/Min operands that tie often.
Tensor tiedTensor(std::mt19937 &rng, DType t, std::vector<int64_t> dims,
                  int lo = -2, int hi = 2) {
  std::uniform_int_distribution<int> d(lo, hi);
  Tensor x(t, dims);
  for (int64_t k = 0; k < x.numel(); ++k)
    x.setFromDouble(k, d(rng));
  return x;
}

/// Values of dtype t for the numeric ops: floats from randomTensor with
/// NaN, +inf and -inf first; integers in [0, 100] (uint8 has no negatives).
Tensor numericTensor(std::mt19937 &rng, DType t, std::vector<int64_t> dims);

/// randomTensor with NaN, +inf and -inf at its first three elements.
Tensor withSpecials(Tensor x) {
  x.setFromDouble(0, NAN);
  x.setFromDouble(1, INFINITY);
  x.setFromDouble(2, -INFINITY);
  return x;
}

Tensor numericTensor(std::mt19937 &rng, DType t, std::vector<int64_t> dims) {
  if (isFloating(t))
    return withSpecials(randomTensor(rng, t, dims));
  return tiedTensor(rng, t, dims, 0, 100);
}

void addUnaryMore(std::vector<OpCase> &c) {
  // mpc.LogSigmoid over the range where log(sigmoid(x)) in two steps
  // gives 0 or -inf (|x| up to 100), with NaN and both infinities; its
  // gradient with dY in each float dtype and X in fp32, as autocast's fp32
  // island leaves it, and in dY's dtype.
  c.push_back(
      {"LogSigmoid",
       kMpcDomain,
       "LogSigmoid",
       {},
       1,
       kFloats,
       [](DType t, std::mt19937 &rng) -> Inputs {
         return {withSpecials(randomTensor(rng, t, {5, 67}, -100, 100))};
       },
       Compare::Tolerance});
  c.push_back({"LogSigmoid_vec",
               kMpcDomain,
               "LogSigmoid",
               {},
               1,
               kFloats,
               [](DType t, std::mt19937 &rng) -> Inputs {
                 return {randomTensor(rng, t, {kVectorCount}, -8, 8)};
               },
               Compare::Tolerance});
  for (bool fp32X : {false, true})
    c.push_back({std::string("LogSigmoidGrad_") + (fp32X ? "x_fp32" : "x_same"),
                 kMpcDomain,
                 "LogSigmoidGrad",
                 {},
                 1,
                 kFloats,
                 [=](DType t, std::mt19937 &rng) -> Inputs {
                   return {
                       randomTensor(rng, t, {7, 45}),
                       withSpecials(randomTensor(rng, fp32X ? DType::F32 : t,
                                                 {7, 45}, -100, 100))};
                 },
                 Compare::Tolerance});
  c.push_back({"LeakyRelu",
               "",
               "LeakyRelu",
               {},
               1,
               kFloats,
               [](DType t, std::mt19937 &rng) -> Inputs {
                 return {withSpecials(randomTensor(rng, t, {3, 101}))};
               }});
  c.push_back({"LeakyRelu_alpha_vec",
               "",
               "LeakyRelu",
               {{"alpha", f(0.2f)}},
               1,
               kFloats,
               [](DType t, std::mt19937 &rng) -> Inputs {
                 return {randomTensor(rng, t, {kVectorCount})};
               }});
  c.push_back({"Not_vec",
               "",
               "Not",
               {},
               1,
               {DType::Bool},
               [](DType, std::mt19937 &rng) -> Inputs {
                 Tensor x(DType::Bool, {kVectorCount});
                 std::bernoulli_distribution d(0.5);
                 for (int64_t k = 0; k < x.numel(); ++k)
                   x.data<uint8_t>()[k] = d(rng) ? 1 : 0;
                 return {x};
               }});
  c.push_back(
      {"Not_scalar",
       "",
       "Not",
       {},
       1,
       {DType::Bool},
       [](DType, std::mt19937 &) -> Inputs { return {boolScalar(true)}; }});
  // IsNaN and IsInf (each sign switched off in turn) over values with NaNs
  // and infinities of both signs among them.
  struct Predicate {
    const char *name, *op;
    int64_t negative, positive;
  };
  for (Predicate p :
       {Predicate{"IsNaN", "IsNaN", 1, 1}, Predicate{"IsInf", "IsInf", 1, 1},
        Predicate{"IsInf_positive", "IsInf", 0, 1},
        Predicate{"IsInf_negative", "IsInf", 1, 0}})
    c.push_back({p.name,
                 "",
                 p.op,
                 {{"detect_negative", Attribute::ofInt(p.negative)},
                  {"detect_positive", Attribute::ofInt(p.positive)}},
                 1,
                 kFloats,
                 [](DType t, std::mt19937 &rng) -> Inputs {
                   Tensor x = randomTensor(rng, t, {kVectorCount});
                   const double special[] = {std::nan(""), INFINITY, -INFINITY};
                   for (int64_t k = 0; k < x.numel(); k += 5)
                     x.setFromDouble(k, special[(k / 5) % 3]);
                   return {x};
                 }});
  // Clip: both bounds, one of them (an omitted input), inverted bounds
  // (hi wins), the opset-6 attributes, and NaN/inf inputs.
  struct ClipCase {
    const char *name;
    bool lo, hi;
    float vlo, vhi;
  };
  for (ClipCase k : {ClipCase{"both", true, true, -0.5f, 0.25f},
                     ClipCase{"min_only", true, false, -0.25f, 0},
                     ClipCase{"max_only", false, true, 0, 0.5f},
                     ClipCase{"inverted", true, true, 0.5f, -0.5f},
                     ClipCase{"none", false, false, 0, 0}}) {
    c.push_back({std::string("Clip_") + k.name,
                 "",
                 "Clip",
                 {},
                 1,
                 kNumeric,
                 [=](DType t, std::mt19937 &rng) -> Inputs {
                   // Integer bounds inside [0, 100], in the same order.
                   auto bound = [&](float v) {
                     return scalarOf(t, isFloating(t) ? v : 50 + 40 * v);
                   };
                   Inputs in = {numericTensor(rng, t, {7, 33})};
                   in.push_back(k.lo ? std::optional<Tensor>(bound(k.vlo))
                                     : std::nullopt);
                   if (k.hi)
                     in.push_back(bound(k.vhi));
                   return in;
                 }});
  }
  c.push_back({"Clip_attrs",
               "",
               "Clip",
               {{"min", f(-0.5f)}, {"max", f(0.75f)}},
               1,
               kFloatsF64,
               [](DType t, std::mt19937 &rng) -> Inputs {
                 return {randomTensor(rng, t, {kVectorCount})};
               }});
}

void addGradMore(std::vector<OpCase> &c) {
  for (DType fwd : kFloats) {
    c.push_back({std::string("LeakyReluGrad_fwd_") + dtypeName(fwd),
                 kMpcDomain,
                 "LeakyReluGrad",
                 {{"alpha", f(0.1f)}},
                 1,
                 kFloats,
                 [=](DType t, std::mt19937 &rng) -> Inputs {
                   return {randomTensor(rng, t, {kVectorCount}),
                           randomTensor(rng, fwd, {kVectorCount})};
                 }});
    // Bounds of X's dtype as inputs; X on the bounds (ties count as
    // inside) through small integers.
    c.push_back({std::string("ClipGrad_fwd_") + dtypeName(fwd),
                 kMpcDomain,
                 "ClipGrad",
                 {},
                 1,
                 kFloats,
                 [=](DType t, std::mt19937 &rng) -> Inputs {
                   return {randomTensor(rng, t, {9, 57}),
                           tiedTensor(rng, fwd, {9, 57}), scalarOf(fwd, -1),
                           scalarOf(fwd, 1)};
                 }});
  }
  c.push_back({"ClipGrad_min_only",
               kMpcDomain,
               "ClipGrad",
               {},
               1,
               kFloats,
               [](DType t, std::mt19937 &rng) -> Inputs {
                 return {randomTensor(rng, t, {kVectorCount}),
                         randomTensor(rng, t, {kVectorCount}),
                         scalarOf(DType::F32, -0.25)};
               }});
  c.push_back({"ClipGrad_max_only",
               kMpcDomain,
               "ClipGrad",
               {},
               1,
               kFloats,
               [](DType t, std::mt19937 &rng) -> Inputs {
                 return {randomTensor(rng, t, {40}), randomTensor(rng, t, {40}),
                         std::nullopt, scalarOf(DType::F32, 0.25)};
               }});
  c.push_back(
      {"ClipGrad_attrs",
       kMpcDomain,
       "ClipGrad",
       {{"min", f(-0.5f)}, {"max", f(0.5f)}},
       1,
       kFloats,
       [](DType t, std::mt19937 &rng) -> Inputs {
         return {randomTensor(rng, t, {40}), randomTensor(rng, t, {40})};
       }});
}

void addVariadic(std::vector<OpCase> &c) {
  struct Shapes {
    const char *name;
    std::vector<std::vector<int64_t>> dims;
  };
  const std::vector<Shapes> shapes = {
      {"one", {{5, 6}}},
      {"two", {{kVectorCount}, {kVectorCount}}},
      {"three_bcast", {{4, 1, 5}, {3, 1}, {5}}},
      {"scalar", {{}, {6, 7}}},
  };
  for (const char *op : {"Max", "Min", "Sum"})
    for (const Shapes &sh : shapes) {
      std::vector<std::vector<int64_t>> dims = sh.dims;
      std::string name = std::string(op);
      c.push_back({name + "_" + sh.name,
                   "",
                   op,
                   {},
                   1,
                   kNumeric,
                   [=](DType t, std::mt19937 &rng) -> Inputs {
                     // Max/Min: few values, many ties; integer Sums wrap
                     // in int8 and uint8.
                     bool sum = name == "Sum", fp = isFloating(t);
                     Inputs in;
                     for (const auto &d : dims)
                       in.push_back(sum && fp ? randomTensor(rng, t, d)
                                    : sum     ? tiedTensor(rng, t, d, 0, 100)
                                    : fp      ? tiedTensor(rng, t, d)
                                              : tiedTensor(rng, t, d, 0, 4));
                     return in;
                   }});
    }
  // NaN in one operand wins in Max and Min, whichever side it is on.
  for (const char *op : {"Max", "Min"})
    c.push_back({std::string(op) + "_nan",
                 "",
                 op,
                 {},
                 1,
                 kFloatsF64,
                 [](DType t, std::mt19937 &rng) -> Inputs {
                   Tensor a = withSpecials(randomTensor(rng, t, {8}));
                   Tensor b = randomTensor(rng, t, {8});
                   b.setFromDouble(5, NAN);
                   return {a, b};
                 }});
  // ExtremumGrad: Y is the Max (or Min) of three broadcasting operands of
  // small integers, so many positions tie; every index.
  for (int64_t index : {0, 1, 2})
    for (bool isMax : {true, false}) {
      std::string name = std::string("ExtremumGrad_") +
                         (isMax ? "max" : "min") + "_index" +
                         std::to_string(index);
      c.push_back({name,
                   kMpcDomain,
                   "ExtremumGrad",
                   {{"index", i(index)}},
                   1,
                   kFloats,
                   [=](DType t, std::mt19937 &rng) -> Inputs {
                     Tensor x0 = tiedTensor(rng, t, {4, 3}, -1, 1);
                     Tensor x1 = tiedTensor(rng, t, {3}, -1, 1);
                     Tensor x2 = tiedTensor(rng, DType::F32, {4, 1}, -1, 1);
                     Tensor y(t, {4, 3});
                     for (int64_t r = 0; r < 4; ++r)
                       for (int64_t k = 0; k < 3; ++k) {
                         double v[3] = {x0.getAsDouble(r * 3 + k),
                                        x1.getAsDouble(k), x2.getAsDouble(r)};
                         double e = v[0];
                         for (double w : v)
                           e = isMax ? std::max(e, w) : std::min(e, w);
                         y.setFromDouble(r * 3 + k, e);
                       }
                     return {randomTensor(rng, t, {4, 3}), y, x0, x1, x2};
                   }});
    }
}

void addCastLikeAndRange(std::vector<OpCase> &c) {
  for (DType from : kFloats)
    for (DType to : kFloats)
      c.push_back(
          {std::string("CastLike_") + dtypeName(from) + "_to_" + dtypeName(to),
           "",
           "CastLike",
           {},
           1,
           {from},
           [=](DType, std::mt19937 &rng) -> Inputs {
             return {withSpecials(
                         randomTensor(rng, from, {kVectorCount}, -7e4f, 7e4f)),
                     randomTensor(rng, to, {2})};
           }});
  struct RangeCase {
    const char *name;
    double start, limit, delta;
  };
  for (RangeCase r : {RangeCase{"up", 2, 131, 3}, RangeCase{"down", 10, -7, -2},
                      RangeCase{"empty", 5, 1, 1}}) {
    c.push_back({std::string("Range_") + r.name,
                 "",
                 "Range",
                 {},
                 1,
                 {DType::I64, DType::I32, DType::F64, DType::F32, DType::F16,
                  DType::BF16},
                 [=](DType t, std::mt19937 &) -> Inputs {
                   return {scalarOf(t, r.start), scalarOf(t, r.limit),
                           scalarOf(t, r.delta)};
                 }});
  }
  c.push_back(
      {"Range_fraction",
       "",
       "Range",
       {},
       1,
       {DType::F64, DType::F32, DType::F16, DType::BF16},
       [](DType t, std::mt19937 &) -> Inputs {
         return {scalarOf(t, 0.5), scalarOf(t, 77.25), scalarOf(t, 0.375)};
       }});
}

/// Trilu over batched non-square matrices, every dtype, k before, on and
/// beyond the diagonal, and omitted.
void addTrilu(std::vector<OpCase> &c) {
  for (int upper : {0, 1})
    for (int64_t k : {int64_t(-2), int64_t(0), int64_t(1), int64_t(7)})
      for (bool given : {true, false}) {
        if (!given && k != 0)
          continue;
        std::string name = std::string("Trilu_") + (upper ? "upper" : "lower") +
                           (given ? "_k" + std::to_string(k + 2) : "_nok");
        c.push_back({name,
                     "",
                     "Trilu",
                     {{"upper", i(upper)}},
                     1,
                     kNumeric,
                     [=](DType t, std::mt19937 &rng) -> Inputs {
                       Inputs in = {numericTensor(rng, t, {2, 3, 5, 4})};
                       if (given)
                         in.push_back(int64Scalar(k));
                       return in;
                     }});
      }
}

/// The random draws: the same (base, i) rules on both backends
/// (kernels/common/random_math.h). Uniform and Bernoulli are one fp32
/// fused multiply-add or comparison: exact. The normal draw takes log, sqrt
/// and cos in double, whose device and libm results may differ in the last
/// bit of a double, so it is compared within the tolerance.
void addRandom(std::vector<OpCase> &c) {
  c.push_back({"RandomUniformLike",
               "",
               "RandomUniformLike",
               {{"low", f(-2.0f)}, {"high", f(3.0f)}},
               1,
               kFloats,
               [](DType t, std::mt19937 &rng) -> Inputs {
                 return {randomTensor(rng, t, {7, 301})};
               }});
  c.push_back({"RandomUniformLike_to_fp16",
               "",
               "RandomUniformLike",
               {{"dtype", i(10)}, {"seed", f(3.0f)}},
               1,
               {DType::F32},
               [](DType t, std::mt19937 &rng) -> Inputs {
                 return {randomTensor(rng, t, {5, 33})};
               }});
  c.push_back({"RandomNormalLike",
               "",
               "RandomNormalLike",
               {{"mean", f(0.5f)}, {"scale", f(2.0f)}},
               1,
               kFloats,
               [](DType t, std::mt19937 &rng) -> Inputs {
                 return {randomTensor(rng, t, {7, 301})};
               },
               Compare::Tolerance});
  for (const char *op : {"RandomUniform", "RandomNormal"})
    c.push_back({std::string(op) + "_bf16",
                 "",
                 op,
                 {{"shape", Attribute::ofInts({3, 4, 129})}, {"dtype", i(16)}},
                 1,
                 {DType::BF16},
                 [](DType, std::mt19937 &) -> Inputs { return {}; },
                 std::string(op) == "RandomNormal" ? Compare::Tolerance
                                                   : Compare::Exact});
  c.push_back({"Bernoulli",
               "",
               "Bernoulli",
               {},
               1,
               kFloats,
               [](DType t, std::mt19937 &rng) -> Inputs {
                 return {randomTensor(rng, t, {9, 257}, 0, 1)};
               }});
}

/// CumSum along every axis of a [3, 5, 7] tensor, every combination of
/// exclusive and reverse, every dtype the device sums.
void addCumSum(std::vector<OpCase> &c) {
  for (int64_t axis : {int64_t(0), int64_t(1), int64_t(-1)})
    for (int exclusive : {0, 1})
      for (int reverse : {0, 1})
        c.push_back(
            {"CumSum_axis" + std::to_string(axis + 1) + "_ex" +
                 std::to_string(exclusive) + "_rev" + std::to_string(reverse),
             "",
             "CumSum",
             {{"exclusive", i(exclusive)}, {"reverse", i(reverse)}},
             1,
             {DType::F32, DType::F16, DType::BF16, DType::I64, DType::I32},
             [=](DType t, std::mt19937 &rng) -> Inputs {
               return {numericTensor(rng, t, {3, 5, 7}), int64Scalar(axis)};
             }});
}

/// The existing unary, binary and cast kernels on vector-sized operands:
/// the group body and the tail, a broadcast scalar on either side.
void addVectorPaths(std::vector<OpCase> &c) {
  for (const char *op : {"Relu", "Neg", "Abs", "Sqrt"})
    c.push_back({std::string(op) + "_vec",
                 "",
                 op,
                 {},
                 1,
                 kFloats,
                 [](DType t, std::mt19937 &rng) -> Inputs {
                   return {randomTensor(rng, t, {kVectorCount}, 0, 4)};
                 }});
  c.push_back({"Exp_vec",
               "",
               "Exp",
               {},
               1,
               kFloats,
               [](DType t, std::mt19937 &rng) -> Inputs {
                 return {randomTensor(rng, t, {kVectorCount}, -4, 4)};
               },
               Compare::Tolerance});
  struct Shapes {
    const char *name;
    std::vector<int64_t> a, b;
  };
  for (const char *op : {"Add", "Sub", "Mul", "Div"})
    for (const Shapes &sh : {Shapes{"vec", {kVectorCount}, {kVectorCount}},
                             Shapes{"vec_scalar", {kVectorCount}, {}},
                             Shapes{"scalar_vec", {1}, {kVectorCount}}}) {
      std::vector<int64_t> da = sh.a, db = sh.b;
      c.push_back({std::string(op) + "_" + sh.name,
                   "",
                   op,
                   {},
                   1,
                   kFloats,
                   [=](DType t, std::mt19937 &rng) -> Inputs {
                     return {randomTensor(rng, t, da, 0.5f, 2),
                             randomTensor(rng, t, db, 0.5f, 2)};
                   }});
    }
  for (DType fwd : kFloats)
    c.push_back({std::string("ReluGrad_vec_fwd_") + dtypeName(fwd),
                 kMpcDomain,
                 "ReluGrad",
                 {},
                 1,
                 kFloats,
                 [=](DType t, std::mt19937 &rng) -> Inputs {
                   return {randomTensor(rng, t, {kVectorCount}),
                           randomTensor(rng, fwd, {kVectorCount})};
                 }});
  for (DType from : kFloats)
    for (DType to : kFloats)
      if (from != to)
        c.push_back(
            {std::string("Cast_vec_") + dtypeName(from) + "_to_" +
                 dtypeName(to),
             "",
             "Cast",
             {{"to", i(toOnnxDataType(to))}},
             1,
             {from},
             [=](DType, std::mt19937 &rng) -> Inputs {
               return {randomTensor(rng, from, {kVectorCount}, -7e4f, 7e4f)};
             }});
}

} // namespace

void addElementwiseMore(std::vector<OpCase> &cases) {
  addUnaryMore(cases);
  addGradMore(cases);
  addVariadic(cases);
  addCastLikeAndRange(cases);
  addTrilu(cases);
  addCumSum(cases);
  addRandom(cases);
  addVectorPaths(cases);
}

} // namespace backend_ops
} // namespace mpc
