// The backend-ops cases of GatherElements and its gradient, ScatterElements,
// GatherND and ScatterND, the negative
// log-likelihood loss and its gradient, the gradients of ReduceMax/Min and
// Slice, and ONNX's training operators (Adagrad, Momentum, Adam of
// ai.onnx.preview.training).
//
// Every op here is exact on the GPU: copies, scatter-adds in the CPU's
// order (GatherElementsGrad repeats indices many times, so an order that
// differed would show), per-position losses reduced in position order, tie
// counts, and the optimizers' shared per-element code. The exception is
// Adam after its first update: its bias correction's pow is the device's
// (within 2 ulp in double), compared with the dtype's tolerance.
#include "op_cases.h"

#include "ir/mpc_ops.h"
#include "passes/onnx/gradient_op.h"

#include <algorithm>
#include <cmath>

namespace mpc {
namespace backend_ops {
namespace {

const std::vector<DType> kFloats = {DType::F32, DType::F16, DType::BF16};
/// What the byte-copying ops are checked in: every element size.
const std::vector<DType> kAnyBytes = {DType::F32, DType::F16, DType::BF16,
                                      DType::F64, DType::I64, DType::I32,
                                      DType::Bool};
/// The ONNX training operators' tensor types.
const std::vector<DType> kOptimizerFloats = {DType::F32, DType::F64};

Attribute i(int64_t v) { return Attribute::ofInt(v); }
Attribute f(float v) { return Attribute::ofFloat(v); }

/// Random values of any dtype: floats in [-4, 4), integers in [0, 100),
/// bools.
Tensor randomAny(std::mt19937 &rng, DType t, std::vector<int64_t> dims) {
  if (isFloating(t))
    return t == DType::F64
               ? randomTensor(rng, DType::F32, dims, -4, 4).castTo(t)
               : randomTensor(rng, t, dims, -4, 4);
  return randomLabels(rng, dims, t == DType::Bool ? 2 : 100).castTo(t);
}

/// Indices uniform in [lo, hi] as int64, or int32 when `i32`.
Tensor randomIndices(std::mt19937 &rng, std::vector<int64_t> dims, int64_t lo,
                     int64_t hi, bool i32) {
  std::uniform_int_distribution<int64_t> d(lo, hi);
  std::vector<int64_t> v(size_t(elementCount(dims)));
  for (int64_t &x : v)
    x = d(rng);
  Tensor t = Tensor::fromInt64s(dims, v);
  return i32 ? t.castTo(DType::I32) : t;
}

void addGatherElements(std::vector<OpCase> &cases) {
  // axis 0 with repeated and negative indices; an inner axis with int32
  // indices smaller than data outside the axis; the last axis, rank 3.
  struct Shape {
    const char *name;
    std::vector<int64_t> data, idx;
    int64_t axis;
    bool i32;
  };
  for (const Shape &sh :
       {Shape{"axis0", {5, 4}, {7, 4}, 0, false},
        Shape{"axis1_int32_smaller", {3, 6, 4}, {2, 9, 3}, 1, true},
        Shape{"last", {2, 3, 8}, {2, 3, 5}, -1, false}}) {
    Shape c = sh;
    int64_t r = int64_t(c.data.size());
    int64_t len = c.data[size_t(c.axis < 0 ? c.axis + r : c.axis)];
    cases.push_back({std::string("GatherElements_") + sh.name,
                     "",
                     "GatherElements",
                     {{"axis", i(sh.axis)}},
                     1,
                     kAnyBytes,
                     [=](DType t, std::mt19937 &rng) -> Inputs {
                       return {randomAny(rng, t, c.data),
                               randomIndices(rng, c.idx, -len, len - 1, c.i32)};
                     }});
    // The gradient: with these index counts most data elements receive
    // several contributions, added in index order on both backends.
    std::vector<int64_t> many = c.idx;
    size_t ax = size_t(c.axis < 0 ? c.axis + r : c.axis);
    many[ax] *= 6;
    cases.push_back({std::string("GatherElementsGrad_") + sh.name,
                     kMpcDomain,
                     "GatherElementsGrad",
                     {{"axis", i(sh.axis)}},
                     1,
                     kFloats,
                     [=](DType t, std::mt19937 &rng) -> Inputs {
                       return {randomTensor(rng, t, many),
                               randomIndices(rng, many, -len, len - 1, c.i32),
                               randomTensor(rng, t, c.data)};
                     }});
  }
}

void addScatterElements(std::vector<OpCase> &cases) {
  // Three times as many updates as data elements along axis 1, so most
  // elements take several, applied in index order on both backends: with
  // none the last one wins, the reductions accumulate (rounded to the
  // dtype after each, as the CPU kernel stores them). Negative and int32
  // indices too.
  struct Reduction {
    const char *name;
    std::vector<DType> dtypes;
  };
  const std::vector<DType> numbers = {DType::F32, DType::F16, DType::BF16,
                                      DType::I64, DType::I32};
  for (const Reduction &r :
       {Reduction{"none", kAnyBytes}, Reduction{"add", numbers},
        Reduction{"mul", numbers}, Reduction{"max", numbers},
        Reduction{"min", numbers}})
    for (bool i32 : {false, true}) {
      std::vector<int64_t> data = {3, 5, 2}, idx = {3, 15, 2};
      cases.push_back(
          {std::string("ScatterElements_") + r.name + (i32 ? "_int32" : ""),
           "",
           "ScatterElements",
           {{"axis", i(1)}, {"reduction", Attribute::ofString(r.name)}},
           1,
           r.dtypes,
           [=](DType t, std::mt19937 &rng) -> Inputs {
             // Factors near 1 keep a product of several representable.
             Tensor upd = std::string(r.name) == "mul" && isFloating(t)
                              ? randomTensor(rng, t, idx, 0.5f, 1.5f)
                              : randomAny(rng, t, idx);
             return {randomAny(rng, t, data),
                     randomIndices(rng, idx, -5, 4, i32), upd};
           }});
    }
}

void addIndexTuples(std::vector<OpCase> &cases) {
  // Tuples of 2 indices (in [-4, 3], valid for both indexed dims, negative
  // ones too) naming rows of 3 elements; GatherND also with batch_dims 1.
  // ScatterND's 9 tuples over 20 rows repeat, applied in index order.
  cases.push_back({"GatherND_pairs",
                   "",
                   "GatherND",
                   {},
                   1,
                   kAnyBytes,
                   [](DType t, std::mt19937 &rng) -> Inputs {
                     return {randomAny(rng, t, {4, 5, 3}),
                             randomIndices(rng, {2, 6, 2}, -4, 3, false)};
                   }});
  cases.push_back({"GatherND_batch_dims",
                   "",
                   "GatherND",
                   {{"batch_dims", i(1)}},
                   1,
                   kAnyBytes,
                   [](DType t, std::mt19937 &rng) -> Inputs {
                     return {randomAny(rng, t, {2, 4, 5, 3}),
                             randomIndices(rng, {2, 7, 2}, -4, 3, false)};
                   }});
  const std::vector<DType> numbers = {DType::F32, DType::F16, DType::BF16,
                                      DType::I64, DType::I32};
  for (const char *r : {"none", "add", "mul", "max", "min"})
    cases.push_back({std::string("ScatterND_") + r,
                     "",
                     "ScatterND",
                     {{"reduction", Attribute::ofString(r)}},
                     1,
                     std::string(r) == "none" ? kAnyBytes : numbers,
                     [r](DType t, std::mt19937 &rng) -> Inputs {
                       Tensor upd =
                           std::string(r) == "mul" && isFloating(t)
                               ? randomTensor(rng, t, {9, 3}, 0.5f, 1.5f)
                               : randomAny(rng, t, {9, 3});
                       return {randomAny(rng, t, {4, 5, 3}),
                               randomIndices(rng, {9, 2}, -4, 3, false), upd};
                     }});
}

void addNegativeLogLikelihood(std::vector<OpCase> &cases) {
  struct LossCase {
    const char *name;
    std::vector<int64_t> input;
    Builder::Attrs attrs;
    bool weights;
  };
  for (const LossCase &l :
       {LossCase{"mean", {64, 3}, {}, false},
        LossCase{"ignore_weighted", {16, 5}, {{"ignore_index", i(1)}}, true},
        LossCase{
            "sum", {16, 5}, {{"reduction", Attribute::ofString("sum")}}, false},
        LossCase{"none_weighted_3d",
                 {4, 3, 6},
                 {{"reduction", Attribute::ofString("none")}},
                 true},
        LossCase{"mean_3d_ignore_negative",
                 {3, 4, 5},
                 {{"ignore_index", i(-1)}},
                 false}}) {
    LossCase c = l;
    int64_t classes = l.input[1];
    std::vector<int64_t> labelDims = l.input;
    labelDims.erase(labelDims.begin() + 1);
    bool none = false;
    int64_t ignore = 0;
    bool hasIgnore = false;
    for (const auto &kv : l.attrs) {
      none = none || (kv.first == "reduction" && kv.second.s == "none");
      if (kv.first == "ignore_index") {
        hasIgnore = true;
        ignore = kv.second.i;
      }
    }
    // Labels with the ignored value among them (also when it is outside
    // [0, C), which only an ignored label may be).
    auto labels = [=](std::mt19937 &rng) {
      Tensor t = randomLabels(rng, labelDims, classes);
      if (hasIgnore)
        for (int64_t k = 0; k < t.numel(); k += 3)
          t.data<int64_t>()[k] = ignore;
      return t;
    };
    // The input is log-probabilities (any values do for the kernel).
    cases.push_back(
        {std::string("NegativeLogLikelihoodLoss_") + l.name, "",
         "NegativeLogLikelihoodLoss", l.attrs, 1, kFloats,
         [=](DType t, std::mt19937 &rng) -> Inputs {
           Inputs in = {randomTensor(rng, t, c.input, -4, 0), labels(rng)};
           if (c.weights)
             in.push_back(randomTensor(rng, t, {classes}, 0.5f, 2));
           return in;
         }});
    std::vector<int64_t> dLDims;
    if (none)
      dLDims = labelDims;
    cases.push_back({std::string("NegativeLogLikelihoodLossGrad_") + l.name,
                     kMpcDomain, "NegativeLogLikelihoodLossGrad", l.attrs, 1,
                     kFloats, [=](DType t, std::mt19937 &rng) -> Inputs {
                       Inputs in = {
                           randomTensor(rng, DType::F32, dLDims, 0.5f, 2),
                           randomTensor(rng, t, c.input, -4, 0), labels(rng)};
                       if (c.weights)
                         in.push_back(randomTensor(rng, t, {classes}, 0.5f, 2));
                       return in;
                     }});
  }
}

void addReduceExtremumGrad(std::vector<OpCase> &cases) {
  // X on a coarse grid so that groups have tied extrema; Y the maximum (or
  // the minimum) of each group, computed here; one group's Y matches
  // nothing (all its gradient is dropped, as on the CPU).
  struct ReduceCase {
    const char *name;
    std::vector<int64_t> axes;
    int64_t keepdims;
    std::vector<int64_t> kept; ///< X [4, 5, 6] with 1s where reduced
    bool min;
  };
  const std::vector<int64_t> x = {4, 5, 6};
  for (const ReduceCase &rc :
       {ReduceCase{"max_middle", {1}, 1, {4, 1, 6}, false},
        ReduceCase{"min_outer_inner", {0, -1}, 0, {1, 5, 1}, true},
        ReduceCase{"max_all", {0, 1, 2}, 0, {1, 1, 1}, false}}) {
    ReduceCase c = rc;
    std::vector<int64_t> out;
    for (size_t d = 0; d < x.size(); ++d)
      if (c.keepdims || c.kept[d] != 1)
        out.push_back(c.kept[d]);
    cases.push_back(
        {std::string("ReduceExtremumGrad_") + rc.name,
         kMpcDomain,
         "ReduceExtremumGrad",
         {{"keepdims", i(rc.keepdims)}},
         1,
         kFloats,
         [=](DType t, std::mt19937 &rng) -> Inputs {
           Tensor xs = randomLabels(rng, x, 4).castTo(t);
           int64_t groups = elementCount(c.kept);
           std::vector<float> y(size_t(groups), c.min ? INFINITY : -INFINITY);
           std::vector<int64_t> strides = {x[1] * x[2], x[2], 1};
           for (int64_t k = 0; k < xs.numel(); ++k) {
             int64_t g = 0;
             for (size_t d = 0; d < x.size(); ++d) {
               int64_t coord = (k / strides[d]) % x[d];
               g = g * c.kept[d] + (c.kept[d] == 1 ? 0 : coord);
             }
             float v = float(xs.getAsDouble(k));
             y[size_t(g)] =
                 c.min ? std::min(y[size_t(g)], v) : std::max(y[size_t(g)], v);
           }
           y[0] = 0.5f; // no element of X equals it
           Tensor yt = Tensor::fromFloats(out, y);
           return {randomTensor(rng, t, out), xs,
                   t == DType::F32 ? yt : yt.castTo(t),
                   Tensor::fromInt64s({int64_t(c.axes.size())}, c.axes)};
         }});
  }
}

void addSliceGrad(std::vector<OpCase> &cases) {
  // Steps both ways with negative and clamped bounds (Slice_steps'
  // parameters), and the opset-10 form without axes and steps.
  cases.push_back({"SliceGrad_steps",
                   kMpcDomain,
                   "SliceGrad",
                   {},
                   1,
                   kAnyBytes,
                   [](DType t, std::mt19937 &rng) -> Inputs {
                     return {randomAny(rng, t, {3, 3, 3}),
                             randomAny(rng, t, {6, 10, 3}),
                             Tensor::fromInt64s({2}, {1, -2}),
                             Tensor::fromInt64s({2}, {100, -11}),
                             Tensor::fromInt64s({2}, {0, 1}),
                             Tensor::fromInt64s({2}, {2, -3})};
                   }});
  cases.push_back({"SliceGrad_leading",
                   kMpcDomain,
                   "SliceGrad",
                   {},
                   1,
                   kFloats,
                   [](DType t, std::mt19937 &rng) -> Inputs {
                     return {randomTensor(rng, t, {2, 5}),
                             randomTensor(rng, t, {4, 5}),
                             Tensor::fromInt64s({2}, {1, 0}),
                             Tensor::fromInt64s({2}, {3, 5})};
                   }});
}

void addPreviewOptimizers(std::vector<OpCase> &cases) {
  // Two tensors per node (their runs interleave in the inputs), the first
  // update (T = 0) and a later one, every optional attribute, an fp64 R,
  // and a node that omits its state outputs.
  struct OptimizerCase {
    const char *name, *op;
    Builder::Attrs attrs;
    int64_t t;
    bool r64, stateOutputs;
  };
  const std::vector<int64_t> shapes[2] = {{7, 33}, {129}};
  for (const OptimizerCase &oc :
       {OptimizerCase{"Adagrad_first", "Adagrad", {}, 0, false, true},
        OptimizerCase{"Adagrad_decay",
                      "Adagrad",
                      {{"decay_factor", f(0.1f)},
                       {"epsilon", f(1e-5f)},
                       {"norm_coefficient", f(0.01f)}},
                      3,
                      true,
                      true},
        OptimizerCase{"Momentum_first",
                      "Momentum",
                      {{"alpha", f(0.9f)}, {"beta", f(0.5f)}},
                      0,
                      false,
                      true},
        OptimizerCase{"Momentum_standard",
                      "Momentum",
                      {{"alpha", f(0.9f)},
                       {"beta", f(0.5f)},
                       {"norm_coefficient", f(0.01f)}},
                      4,
                      false,
                      true},
        OptimizerCase{"Momentum_nesterov_x_only",
                      "Momentum",
                      {{"alpha", f(0.9f)},
                       {"beta", f(1.0f)},
                       {"mode", Attribute::ofString("nesterov")}},
                      2,
                      true,
                      false},
        OptimizerCase{"Adam_first", "Adam", {}, 0, false, true},
        OptimizerCase{"Adam_later",
                      "Adam",
                      {{"alpha", f(0.8f)},
                       {"beta", f(0.99f)},
                       {"epsilon", f(1e-4f)},
                       {"norm_coefficient", f(0.01f)},
                       {"norm_coefficient_post", f(0.001f)}},
                      5,
                      false,
                      true}}) {
    OptimizerCase c = oc;
    bool adam = std::string(oc.op) == "Adam";
    bool adagrad = std::string(oc.op) == "Adagrad";
    size_t runs = adam ? 4 : 3, outRuns = c.stateOutputs ? runs - 1 : 1;
    cases.push_back(
        {std::string("Preview") + oc.name, kOnnxPreviewTrainingDomain, oc.op,
         oc.attrs, 2 * outRuns, kOptimizerFloats,
         [=](DType t, std::mt19937 &rng) -> Inputs {
           Tensor r = Tensor::fromFloats({}, {0.05f});
           Inputs in = {c.r64 ? r.castTo(DType::F64) : r,
                        Tensor::fromInt64s({}, {c.t})};
           for (size_t g = 0; g < runs; ++g)
             for (const std::vector<int64_t> &dims : shapes) {
               // X, G in [-1, 1); the squared-gradient state >= 0.
               bool squares = (adagrad && g == 2) || (adam && g == 3);
               Tensor v =
                   randomTensor(rng, DType::F32, dims, squares ? 0 : -1, 1);
               in.push_back(t == DType::F32 ? v : v.castTo(t));
             }
           return in;
         },
         adam &&c.t > 0 ? Compare::Tolerance : Compare::Exact});
  }
}

} // namespace

void addGatherLossOptim(std::vector<OpCase> &cases) {
  addGatherElements(cases);
  addScatterElements(cases);
  addIndexTuples(cases);
  addNegativeLogLikelihood(cases);
  addReduceExtremumGrad(cases);
  addSliceGrad(cases);
  addPreviewOptimizers(cases);
}

} // namespace backend_ops
} // namespace mpc
