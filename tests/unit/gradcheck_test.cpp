// Gradient check of every autodiff rule against central finite differences
// in float64 on the CPU backend.
//
// Each case is a tiny graph in ONNX text whose parameters are fp64
// initializers; unless the op is itself a loss, the loss is
// ReduceSum(op(...) * R) with a fixed random R (a non-trainable constant).
// infer-shapes and autodiff run on it, the training algorithm is executed
// for the analytic gradients, and each parameter element is perturbed by
// +-h in the main graph for (L(p+h) - L(p-h)) / 2h. The procedure lives in
// tests/unit/gradcheck_harness.{h,cpp}, shared with the family files.
#include "passes/gradients/gradient_rules.h"
#include "tests/unit/gradcheck_harness.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <set>
#include <sstream>
#include <string>
#include <vector>

using namespace mpc;

namespace {

using gradcheck::checkAll;
using gradcheck::Data;
using gradcheck::formatDims;
using gradcheck::GradCase;
using gradcheck::randomTensor;

GradCase binaryCase(const std::string &op, std::vector<int64_t> a,
                    std::vector<int64_t> b, double lo = -1, double hi = 1) {
  GradCase c;
  c.name = op + formatDims(a) + formatDims(b);
  c.params = {{"a", a}, {"b", b, lo, hi}};
  c.body = "y = " + op + "(a, b)";
  return c;
}

GradCase unaryCase(const std::string &op, double lo = -1, double hi = 1) {
  GradCase c;
  c.name = op;
  c.params = {{"x", {2, 3}, lo, hi}};
  c.body = "y = " + op + "(x)";
  return c;
}

// --- elementwise -----------------------------------------------------------

TEST(GradCheck, BroadcastingArithmetic) {
  std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> shapes = {
      {{2, 3}, {2, 3}},      {{2, 3, 4}, {3, 1}}, {{2, 3, 4}, {4}},
      {{2, 3, 4}, {}},       {{1, 3}, {2, 1}},    {{3}, {2, 1, 3}},
      {{2, 1, 4}, {1, 3, 1}}};
  std::vector<GradCase> cases;
  for (const char *op : {"Add", "Sub", "Mul"})
    for (const auto &s : shapes)
      cases.push_back(binaryCase(op, s.first, s.second));
  for (const auto &s : shapes)
    cases.push_back(binaryCase("Div", s.first, s.second, 0.5, 2.0));
  checkAll(cases);
}

TEST(GradCheck, SameOperandTwice) {
  // x * x and x + x: both uses of x contribute (fan-out inside one node).
  GradCase sq;
  sq.name = "x*x";
  sq.params = {{"x", {2, 3}}};
  sq.body = "y = Mul(x, x)";
  GradCase twice = sq;
  twice.name = "x+x";
  twice.body = "y = Add(x, x)";
  checkAll({sq, twice});
}

TEST(GradCheck, UnaryMath) {
  checkAll({unaryCase("Relu"), unaryCase("Neg"), unaryCase("Abs"),
            unaryCase("Sqrt", 0.5, 2.0), unaryCase("Exp"),
            unaryCase("Log", 0.5, 2.0), unaryCase("Tanh"), unaryCase("Sigmoid"),
            unaryCase("Erf"), unaryCase("Identity"), unaryCase("Sin", -4, 4),
            unaryCase("Cos", -4, 4)});
}

// GatherND and ScatterND (passes/gradients/gather_scatter.cpp): a repeated
// tuple in GatherND's indices (its gradient sums), row and element tuples,
// ScatterND writing (its overwritten places take no gradient) and adding,
// and ScatterElements the same way.
TEST(GradCheck, IndexTupleOps) {
  GradCase rows;
  rows.name = "GatherND rows, a repeated tuple";
  rows.params = {{"x", {3, 4, 2}}};
  rows.data = {{"int64[4,1] i = {2, 0, 2, 1}"}};
  rows.body = "y = GatherND(x, i)";
  GradCase elems;
  elems.name = "GatherND elements";
  elems.params = {{"x", {3, 4}}};
  elems.data = {{"int64[2,3,2] i = {0, 1, 2, 3, 1, 0, 2, 2, 0, 0, 1, 3}"}};
  elems.body = "y = GatherND(x, i)";
  GradCase write;
  write.name = "ScatterND none";
  write.params = {{"x", {4, 3}}, {"u", {2, 3}}};
  write.data = {{"int64[2,1] i = {3, 1}"}};
  write.body = "y = ScatterND(x, i, u)";
  GradCase add;
  add.name = "ScatterND add, a repeated tuple";
  add.params = {{"x", {4, 3}}, {"u", {3, 3}}};
  add.data = {{"int64[3,1] i = {1, 1, 2}"}};
  add.body = "y = ScatterND <reduction = \"add\"> (x, i, u)";
  add.opset = 18;
  // ScatterElements: elements along an axis, a negative index; with add, a
  // repeated index.
  GradCase elemWrite;
  elemWrite.name = "ScatterElements none, axis 1";
  elemWrite.params = {{"x", {3, 4}}, {"u", {3, 2}}};
  elemWrite.data = {{"int64[3,2] i = {0, 3, 1, -1, 2, 0}"}};
  elemWrite.body = "y = ScatterElements <axis = 1> (x, i, u)";
  GradCase elemAdd;
  elemAdd.name = "ScatterElements add, a repeated index";
  elemAdd.params = {{"x", {4, 3}}, {"u", {2, 3}}};
  elemAdd.data = {{"int64[2,3] i = {1, 0, 3, 1, 2, 3}"}};
  elemAdd.body = "y = ScatterElements <reduction = \"add\"> (x, i, u)";
  elemAdd.opset = 18;
  checkAll({rows, elems, write, add, elemWrite, elemAdd});
}

// The activations the importer lowers (passes/onnx/activation_lowering.h):
// the gradient of each lowering, over a range that crosses its kinks.
TEST(GradCheck, LoweredActivations) {
  std::vector<GradCase> cases = {
      unaryCase("HardSigmoid <alpha = 0.5, beta = 0.6>", -3, 3),
      unaryCase("HardSwish", -4, 4),
      unaryCase("Elu <alpha = 0.7>", -2, 2),
      unaryCase("Selu", -2, 2),
      unaryCase("Celu <alpha = 2.0>", -2, 2),
      unaryCase("Softplus", -3, 3),
      unaryCase("Softsign", -3, 3),
      unaryCase("Reciprocal", 0.5, 2)};
  for (GradCase &c : cases)
    c.name = c.name.substr(0, c.name.find(' '));
  GradCase mish;
  mish.name = "Mish (x * tanh(softplus(x)))";
  mish.params = {{"x", {2, 3}, -3, 3}};
  mish.body = "s = Softplus(x)\n t = Tanh(s)\n y = Mul(x, t)";
  cases.push_back(mish);
  GradCase prelu;
  prelu.name = "PRelu per channel";
  prelu.params = {{"x", {2, 3, 4}, -1, 1}, {"slope", {3, 1}, 0.1, 0.5}};
  prelu.body = "y = PRelu(x, slope)";
  cases.push_back(prelu);
  checkAll(cases);
}

// The reductions the importer lowers (passes/onnx/reduce_lowering.h), with
// axes as an attribute (opset 17) and as an input (opset 18).
TEST(GradCheck, LoweredReductions) {
  auto reduce = [](const std::string &name, const std::string &body,
                   double lo = -1, double hi = 1, int64_t opset = 17) {
    GradCase c;
    c.name = name;
    c.params = {{"x", {3, 4}, lo, hi}};
    c.body = body;
    c.opset = opset;
    return c;
  };
  std::vector<GradCase> cases = {
      reduce("ReduceSumSquare",
             "y = ReduceSumSquare <axes = [1], keepdims = 0> (x)"),
      reduce("ReduceL1", "y = ReduceL1 <axes = [0]> (x)"),
      reduce("ReduceL2", "y = ReduceL2 <axes = [1], keepdims = 0> (x)"),
      reduce("ReduceLogSum", "y = ReduceLogSum <axes = [1]> (x)", 0.5, 2),
      reduce("ReduceLogSumExp keepdims", "y = ReduceLogSumExp <axes = [1]> (x)",
             -3, 3),
      reduce("ReduceLogSumExp all", "y = ReduceLogSumExp <keepdims = 0> (x)",
             -3, 3),
      reduce("ReduceMin", "y = ReduceMin <axes = [0], keepdims = 0> (x)"),
      reduce("ReduceL2 axes input", "y = ReduceL2 <keepdims = 0> (x, ax)", -1,
             1, 18),
      reduce("ReduceMin axes input", "y = ReduceMin (x, ax)", -1, 1, 18)};
  cases[7].data = {{"int64[1] ax = {1}"}};
  cases[8].data = {{"int64[1] ax = {-1}"}};
  // A row of zeros: its norm is 0 and its gradient 0, not NaN (what
  // F.normalize's clipped norm of a zero vector needs).
  GradCase zero = reduce("ReduceL2 of a zero row",
                         "z = Mul(x, mask)\n n = ReduceL2 <axes = [1]> (z)\n"
                         " y = Add(n, z)");
  zero.data = {{"double[3,1] mask = {1.0, 0.0, 1.0}"}};
  zero.frozen = "^mask$";
  cases.push_back(zero);
  checkAll(cases);
}

// Resize through its lowering (passes/onnx/resize_lowering.h): the
// Gathers' scatter-add gradient, nearest and linear, up and down.
TEST(GradCheck, LoweredResize) {
  auto resize = [](const std::string &name, const std::string &attrs,
                   const std::string &scales) {
    GradCase c;
    c.name = name;
    c.params = {{"x", {1, 2, 3, 4}}};
    c.data = {{"double[4] scales = {" + scales + "}"}};
    c.body = "y = Resize <" + attrs + "> (x, , scales)";
    return c;
  };
  checkAll({resize("nearest x2 (nn.Upsample)",
                   "mode = \"nearest\", coordinate_transformation_mode = "
                   "\"asymmetric\", nearest_mode = \"floor\"",
                   "1.0, 1.0, 2.0, 2.0"),
            resize("bilinear x2 half_pixel",
                   "mode = \"linear\", coordinate_transformation_mode = "
                   "\"half_pixel\"",
                   "1.0, 1.0, 2.0, 2.0"),
            resize("bilinear x1.5 align_corners",
                   "mode = \"linear\", coordinate_transformation_mode = "
                   "\"align_corners\"",
                   "1.0, 1.0, 1.5, 1.5"),
            resize("linear down 0.5 pytorch_half_pixel",
                   "mode = \"linear\", coordinate_transformation_mode = "
                   "\"pytorch_half_pixel\"",
                   "1.0, 1.0, 1.0, 0.5")});
}

// DepthToSpace (pixel_shuffle) and SpaceToDepth through their lowering.
TEST(GradCheck, LoweredDepthSpace) {
  GradCase dcr, crd, s2d;
  dcr.name = "DepthToSpace DCR";
  dcr.params = {{"x", {2, 8, 2, 3}}};
  dcr.body = "y = DepthToSpace <blocksize = 2> (x)";
  crd = dcr;
  crd.name = "DepthToSpace CRD";
  crd.body = "y = DepthToSpace <blocksize = 2, mode = \"CRD\"> (x)";
  s2d.name = "SpaceToDepth";
  s2d.params = {{"x", {2, 2, 4, 6}}};
  s2d.body = "y = SpaceToDepth <blocksize = 2> (x)";
  checkAll({dcr, crd, s2d});
}

// Einsum through its lowering (passes/onnx/einsum_lowering.h): batched
// products, outer products, sums, transposes, the ellipsis, an implicit
// output and three operands.
TEST(GradCheck, LoweredEinsum) {
  struct Eq {
    const char *equation;
    std::vector<std::vector<int64_t>> dims;
  };
  std::vector<Eq> eqs = {{"bij,bjk->bik", {{2, 3, 4}, {2, 4, 5}}},
                         {"bhqd,bhkd->bhqk", {{2, 2, 3, 4}, {2, 2, 5, 4}}},
                         {"i,j->ij", {{3}, {4}}},
                         {"ij,ij->i", {{3, 4}, {3, 4}}},
                         {"ij->ji", {{3, 4}}},
                         {"ij->", {{3, 4}}},
                         {"bij,j->bi", {{2, 3, 4}, {4}}},
                         {"...ij,...jk->...ik", {{2, 3, 4}, {2, 4, 2}}},
                         {"ij,jk", {{3, 4}, {4, 2}}},
                         {"ij,jk,kl->il", {{2, 3}, {3, 4}, {4, 2}}},
                         {"abc,cd->dba", {{2, 3, 4}, {4, 5}}}};
  std::vector<GradCase> cases;
  for (const Eq &e : eqs) {
    GradCase c;
    c.name = std::string("Einsum ") + e.equation;
    std::string ins;
    for (size_t i = 0; i < e.dims.size(); ++i) {
      std::string name = std::string(1, char('p' + i));
      c.params.push_back({name, e.dims[i]});
      ins += (i ? ", " : "") + name;
    }
    c.body = std::string("y = Einsum <equation = \"") + e.equation + "\"> (" +
             ins + ")";
    cases.push_back(c);
  }
  checkAll(cases);
}

TEST(GradCheck, CumSum) {
  std::vector<GradCase> cases;
  for (int axis : {0, 1, -1})
    for (int exclusive : {0, 1})
      for (int reverse : {0, 1}) {
        GradCase c;
        c.name = "CumSum axis " + std::to_string(axis) + " exclusive " +
                 std::to_string(exclusive) + " reverse " +
                 std::to_string(reverse);
        c.params = {{"x", {2, 3, 4}}};
        c.data = {{"int64 axis = {" + std::to_string(axis) + "}"}};
        c.body = "y = CumSum <exclusive = " + std::to_string(exclusive) +
                 ", reverse = " + std::to_string(reverse) + "> (x, axis)";
        cases.push_back(c);
      }
  checkAll(cases);
}

// LSTM, GRU and RNN unrolled (passes/onnx/rnn_lowering.h): backpropagation
// through time, every direction, layout 1, initial states, peepholes and
// both GRU reset forms, by autodiff's rules on the unrolled ops.
TEST(GradCheck, UnrolledRecurrentOps) {
  const int64_t t = 3, b = 2, in = 2, h = 3;
  auto rnn = [&](const std::string &name, const std::string &op, int64_t gates,
                 const std::string &attrs, int64_t dirs, bool full) {
    GradCase c;
    c.name = name;
    c.params = {{"x", {t, b, in}},
                {"w", {dirs, gates * h, in}},
                {"r", {dirs, gates * h, h}}};
    std::string ins = "x, w, r";
    if (full) {
      c.params.push_back({"bias", {dirs, 2 * gates * h}});
      c.params.push_back({"h0", {dirs, b, h}});
      ins += ", bias, , h0";
      if (op == "LSTM") {
        c.params.push_back({"c0", {dirs, b, h}});
        c.params.push_back({"p", {dirs, 3 * h}});
        ins += ", c0, p";
      }
    }
    std::string outs = op == "LSTM" ? "yseq, yh, yc" : "yseq, yh";
    c.body = outs + " = " + op + " <hidden_size = " + std::to_string(h) +
             (attrs.empty() ? "" : ", " + attrs) + "> (" + ins + ")\n";
    // The loss reads every output.
    c.body += op == "LSTM" ? " s1 = ReduceSum <keepdims = 0> (yh)\n"
                             " s2 = ReduceSum <keepdims = 0> (yc)\n"
                             " s = Add(s1, s2)\n"
                             " y = Mul(yseq, s)"
                           : " s = ReduceSum <keepdims = 0> (yh)\n"
                             " y = Mul(yseq, s)";
    return c;
  };
  std::vector<GradCase> cases = {
      rnn("LSTM forward", "LSTM", 4, "", 1, false),
      rnn("LSTM bidirectional, bias, states, peepholes", "LSTM", 4,
          "direction = \"bidirectional\"", 2, true),
      rnn("GRU reverse, linear_before_reset", "GRU", 3,
          "direction = \"reverse\", linear_before_reset = 1", 1, true),
      rnn("GRU reset before the product", "GRU", 3, "", 1, true),
      rnn("RNN bidirectional", "RNN", 1, "direction = \"bidirectional\"", 2,
          true)};
  checkAll(cases);
}

// InstanceNormalization through its lowering (passes/onnx/
// instance_norm_lowering.h): LayerNormalization and the affine at opset 17,
// the ReduceMean arithmetic at opset 16; GroupNorm's constant unit scale
// and zero bias.
TEST(GradCheck, LoweredInstanceNormalization) {
  std::vector<GradCase> cases;
  for (int64_t opset : {17, 16}) {
    GradCase c;
    c.name = "InstanceNormalization opset " + std::to_string(opset);
    c.params = {{"x", {2, 3, 2, 3}}, {"s", {3}, 0.5, 1.5}, {"b", {3}}};
    c.body = "y = InstanceNormalization <epsilon = 0.01> (x, s, b)";
    c.opset = opset;
    cases.push_back(c);
  }
  GradCase group;
  group.name = "GroupNorm's export (unit scale, zero bias constants)";
  group.params = {{"x", {2, 2, 5}}};
  group.body = "one = Constant <value = double[2] {1.0, 1.0}> ()\n"
               " zero = Constant <value = double[2] {0.0, 0.0}> ()\n"
               " y = InstanceNormalization (x, one, zero)";
  cases.push_back(group);
  checkAll(cases);
}

// RMSNormalization (opset 23) through its lowering (passes/onnx/
// rms_norm_lowering.h): over the last axis, and over the last two.
TEST(GradCheck, LoweredRMSNormalization) {
  GradCase last;
  last.name = "RMSNormalization over the last axis";
  last.params = {{"x", {3, 4}}, {"w", {4}, 0.5, 1.5}};
  last.body = "y = RMSNormalization <epsilon = 0.01> (x, w)";
  last.opset = 23;
  GradCase two = last;
  two.name = "RMSNormalization over the last two axes";
  two.params = {{"x", {2, 3, 4}}, {"w", {3, 4}, 0.5, 1.5}};
  two.body = "y = RMSNormalization <axis = 1> (x, w)";
  checkAll({last, two});
}

TEST(GradCheck, Pow) {
  GradCase square;
  square.name = "Pow const 2";
  square.params = {{"x", {2, 3}}};
  square.body = "e = Constant <value = double {2.0}> ()\n y = Pow(x, e)";
  GradCase cube = square;
  cube.name = "Pow const 3";
  cube.body = "e = Constant <value = double {3.0}> ()\n y = Pow(x, e)";
  GradCase frac = square;
  frac.name = "Pow const 1.5";
  frac.params = {{"x", {2, 3}, 0.5, 2.0}};
  frac.body = "e = Constant <value = double {1.5}> ()\n y = Pow(x, e)";
  GradCase intExp = square;
  intExp.name = "Pow int64 exponent";
  intExp.body = "e = Constant <value = int64 {3}> ()\n y = Pow(x, e)";
  GradCase tensor = binaryCase("Pow", {2, 3}, {3}, -1.0, 2.0);
  tensor.params[0].lo = 0.5;
  tensor.params[0].hi = 2.0;
  checkAll({square, cube, frac, intExp, tensor});
}

TEST(GradCheck, Cast) {
  // Through fp32 and back: the fp32 rounding limits the finite difference.
  GradCase c;
  c.name = "Cast f64->f32->f64";
  c.params = {{"x", {2, 3}}};
  c.body = "f = Cast <to = 1> (x)\n t = Tanh(f)\n y = Cast <to = 11> (t)";
  c.h = 1e-2;
  c.tol = 2e-3;
  GradCase same = c;
  same.name = "Cast f64->f64";
  same.body = "y = Cast <to = 11> (x)";
  same.h = 1e-6;
  same.tol = 1e-6;
  checkAll({c, same});
}

// --- matrix products
// ----------------------------------------------------------

TEST(GradCheck, GemmEveryAttributeCombination) {
  const int64_t M = 3, K = 4, N = 2;
  std::vector<std::vector<int64_t>> cShapes = {{},     {N},    {M, N},
                                               {1, N}, {M, 1}, {1, 1}};
  std::vector<GradCase> cases;
  for (int transA = 0; transA < 2; ++transA)
    for (int transB = 0; transB < 2; ++transB)
      for (double alpha : {1.0, 0.7})
        for (double beta : {1.0, -1.5})
          for (int ci = -1; ci < int(cShapes.size()); ++ci) {
            GradCase c;
            std::vector<int64_t> a = transA ? std::vector<int64_t>{K, M}
                                            : std::vector<int64_t>{M, K};
            std::vector<int64_t> b = transB ? std::vector<int64_t>{N, K}
                                            : std::vector<int64_t>{K, N};
            c.params = {{"a", a}, {"b", b}};
            std::ostringstream attrs, name;
            char scale[64];
            std::snprintf(scale, sizeof scale, "alpha = %.1f, beta = %.1f",
                          alpha, beta);
            attrs << "<transA = " << transA << ", transB = " << transB << ", "
                  << scale << ">";
            name << "Gemm" << attrs.str();
            std::string inputs = "(a, b)";
            if (ci >= 0) {
              c.params.push_back({"c", cShapes[size_t(ci)]});
              inputs = "(a, b, c)";
              name << " C" << formatDims(cShapes[size_t(ci)]);
            }
            c.name = name.str();
            c.body = "y = Gemm " + attrs.str() + " " + inputs;
            cases.push_back(c);
          }
  checkAll(cases);
}

TEST(GradCheck, MatMulBatchedAndBroadcast) {
  std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> shapes = {
      {{3, 4}, {4, 2}},
      {{2, 3, 4}, {4, 5}},
      {{2, 3, 4}, {2, 4, 5}},
      {{2, 1, 3, 4}, {3, 4, 2}},
      {{1, 3, 4}, {2, 4, 5}},
      {{3, 4}, {2, 4, 5}},
      {{4}, {4, 5}},
      {{4}, {2, 4, 5}},
      {{3, 4}, {4}},
      {{2, 3, 4}, {4}},
      {{4}, {4}}};
  std::vector<GradCase> cases;
  for (const auto &s : shapes)
    cases.push_back(binaryCase("MatMul", s.first, s.second));
  checkAll(cases);
}

// --- shapes ------------------------------------------------------------------

TEST(GradCheck, ReshapeFlattenTransposeSqueeze) {
  std::vector<GradCase> cases;
  auto add = [&](const std::string &name, const std::string &body,
                 std::vector<int64_t> dims = {2, 3, 4},
                 std::vector<Data> data = {}) {
    GradCase c;
    c.name = name;
    c.params = {{"x", dims}};
    c.data = data;
    c.body = body;
    cases.push_back(c);
  };
  add("Reshape 6x4", "y = Reshape(x, s)", {2, 3, 4}, {{"int64[2] s = {6, 4}"}});
  add("Reshape -1", "y = Reshape(x, s)", {2, 3, 4}, {{"int64[1] s = {-1}"}});
  add("Reshape 0", "y = Reshape(x, s)", {2, 3, 4},
      {{"int64[3] s = {0, 4, 3}"}});
  add("Flatten 0", "y = Flatten <axis = 0> (x)");
  add("Flatten 1", "y = Flatten <axis = 1> (x)");
  add("Flatten 2", "y = Flatten <axis = 2> (x)");
  add("Flatten -1", "y = Flatten <axis = -1> (x)");
  add("Transpose default", "y = Transpose(x)");
  add("Transpose 2,0,1", "y = Transpose <perm = [2, 0, 1]> (x)");
  add("Transpose 1,0,2", "y = Transpose <perm = [1, 0, 2]> (x)");
  add("Unsqueeze", "y = Unsqueeze(x, ax)", {2, 3, 4},
      {{"int64[2] ax = {0, 3}"}});
  add("Squeeze", "y = Squeeze(x, ax)", {2, 1, 4}, {{"int64[1] ax = {1}"}});
  add("Squeeze all", "y = Squeeze(x)", {1, 3, 1});
  checkAll(cases);
}

TEST(GradCheck, Concat) {
  std::vector<GradCase> cases;
  for (int axis : {0, 1, -1}) {
    GradCase c;
    c.name = "Concat axis " + std::to_string(axis);
    std::vector<int64_t> a = {2, 3}, b = {2, 3}, d = {2, 3};
    size_t ax = size_t(axis < 0 ? axis + 2 : axis);
    a[ax] = 1;
    b[ax] = 2;
    d[ax] = 3;
    c.params = {{"a", a}, {"b", b}, {"d", d}};
    c.body = "y = Concat <axis = " + std::to_string(axis) + "> (a, b, d)";
    cases.push_back(c);
  }
  // Only the middle input trains: the other slices are not built.
  GradCase partial = cases[0];
  partial.name = "Concat frozen ends";
  partial.frozen = "^[ad]$";
  cases.push_back(partial);
  checkAll(cases);
}

TEST(GradCheck, Trilu) {
  std::vector<GradCase> cases;
  for (const char *upper : {"0", "1"})
    for (const char *k : {"", "-1", "0", "2", "5"}) {
      GradCase c;
      c.name = std::string("Trilu upper=") + upper + " k=" + (*k ? k : "none");
      c.params = {{"x", {2, 3, 4}}};
      std::string attr = std::string("<upper = ") + upper + "> ";
      if (*k) {
        c.data = {{std::string("int64 k = {") + k + "}"}};
        c.body = "y = Trilu " + attr + "(x, k)";
      } else {
        c.body = "y = Trilu " + attr + "(x)";
      }
      cases.push_back(c);
    }
  checkAll(cases);
}

TEST(GradCheck, SymbolicShapes) {
  // With a symbolic batch the backward reads shapes at run time (Shape,
  // Gather and Add for Concat offsets) instead of constants.
  GradCase reshape;
  reshape.name = "Reshape, symbolic batch";
  reshape.params = {{"w", {6}}};
  reshape.data = {{"int64[3] s = {-1, 2, 3}"}};
  reshape.inputs = {{"double[N,6] x", "x", randomTensor({4, 6}, 1)},
                    {"double[N,3,2] r", "r", randomTensor({4, 3, 2}, 2)}};
  reshape.body = "a = Mul(x, w)\n b = Reshape(a, s)\n c = Transpose <perm = "
                 "[0, 2, 1]> (b)\n d = Softmax <axis = 1> (c)\n m = Mul(d, "
                 "r)\n y = ReduceSum <keepdims = 0> (m)";
  reshape.yIsLoss = true;
  GradCase concat;
  concat.name = "Concat, symbolic sizes";
  concat.params = {{"w", {2, 3}}};
  concat.inputs = {{"double[2,K] x", "x", randomTensor({2, 4}, 3)},
                   {"double[2,M] r", "r", randomTensor({2, 11}, 4)}};
  concat.body = "c = Concat <axis = 1> (x, w, x)\n t = Tanh(c)\n m = Mul(t, "
                "r)\n y = ReduceSum <keepdims = 0> (m)";
  concat.yIsLoss = true;
  GradCase linear;
  linear.name = "MatMul [B,S,K] x [K,N], symbolic batch";
  linear.params = {{"w", {4, 3}}, {"b", {3}}};
  linear.inputs = {{"double[B,S,4] x", "x", randomTensor({2, 3, 4}, 5)},
                   {"double[B,S,3] r", "r", randomTensor({2, 3, 3}, 6)}};
  linear.body = "h = MatMul(x, w)\n z = Add(h, b)\n m = Mul(z, r)\n y = "
                "ReduceMean <keepdims = 0> (m)";
  linear.yIsLoss = true;
  GradCase sce;
  sce.name = "SCE, symbolic batch";
  sce.params = {{"w", {3, 4}}};
  sce.inputs = {{"double[N,3] x", "x", randomTensor({5, 3}, 7)}};
  sce.data = {{"int64[5] labels = {0, 3, 1, 1, 2}"}};
  sce.body = "z = MatMul(x, w)\n y = SoftmaxCrossEntropyLoss <reduction = "
             "\"mean\"> (z, labels)";
  sce.yIsLoss = true;
  checkAll({reshape, concat, linear, sce});
}

TEST(GradCheck, LossOfShapeOneByOne) {
  // A loss of shape [1,1] (all dims 1) is a scalar too; the seed has its
  // shape.
  GradCase c;
  c.name = "ReduceSum keepdims=1 loss";
  c.params = {{"x", {2, 3}}};
  c.body = "t = Tanh(x)\n y = ReduceSum <keepdims = 1> (t)";
  c.yIsLoss = true;
  checkAll({c});
}

// --- softmax
// -------------------------------------------------------------------

TEST(GradCheck, SoftmaxAndLogSoftmaxEveryAxis) {
  std::vector<GradCase> cases;
  for (const char *op : {"Softmax", "LogSoftmax"})
    for (int axis : {0, 1, 2, -1, -3}) {
      GradCase c;
      c.name = std::string(op) + " axis " + std::to_string(axis);
      c.params = {{"x", {2, 3, 4}}};
      c.body = "y = " + std::string(op) + " <axis = " + std::to_string(axis) +
               "> (x)";
      cases.push_back(c);
    }
  GradCase dflt = cases[0];
  dflt.name = "Softmax default axis";
  dflt.body = "y = Softmax(x)";
  cases.push_back(dflt);
  // Before opset 13 the ops normalise over all axes from `axis` on. The CPU
  // kernels apply the opset-13 rule whatever the opset (they cannot see
  // it), so only the last axis, where both rules agree, is checked here.
  for (const char *op : {"Softmax", "LogSoftmax"})
    for (int axis : {2}) {
      GradCase c;
      c.name = std::string(op) + " opset 12 axis " + std::to_string(axis);
      c.opset = 12;
      c.params = {{"x", {2, 3, 4}}};
      c.body = "y = " + std::string(op) + " <axis = " + std::to_string(axis) +
               "> (x)";
      cases.push_back(c);
    }
  checkAll(cases);
}

// --- losses
// --------------------------------------------------------------------

GradCase lossCase(const std::string &op, const std::string &attrs, bool weights,
                  bool higherRank) {
  GradCase c;
  c.name =
      op + attrs + (weights ? " weights" : "") + (higherRank ? " [N,C,D]" : "");
  std::vector<int64_t> scores =
      higherRank ? std::vector<int64_t>{3, 4, 2} : std::vector<int64_t>{5, 4};
  c.params = {{"x", scores}};
  if (higherRank)
    c.data = {{"int64[3,2] labels = {0, 3, 1, 1, 2, 0}"}};
  else
    c.data = {{"int64[5] labels = {0, 3, 1, 1, 2}"}};
  std::string inputs = "(x, labels)";
  if (weights) {
    // Class weights are constants of the loss: frozen, never differentiated.
    c.data.push_back({"double[4] cw = {0.5, 2.0, 1.0, 1.5}"});
    inputs = "(x, labels, cw)";
  }
  c.body = "y = " + op + " " + attrs + " " + inputs;
  c.yIsLoss = attrs.find("none") == std::string::npos;
  return c;
}

TEST(GradCheck, SoftmaxCrossEntropyLoss) {
  std::vector<GradCase> cases;
  for (const char *red : {"mean", "sum", "none"})
    for (bool weights : {false, true})
      for (bool higher : {false, true}) {
        std::string attrs = std::string("<reduction = \"") + red + "\">";
        cases.push_back(
            lossCase("SoftmaxCrossEntropyLoss", attrs, weights, higher));
        std::string ignore =
            std::string("<reduction = \"") + red + "\", ignore_index = 1>";
        cases.push_back(
            lossCase("SoftmaxCrossEntropyLoss", ignore, weights, higher));
      }
  // log_prob used downstream too: both outputs carry gradients.
  GradCase both = lossCase("SoftmaxCrossEntropyLoss", "<reduction = \"mean\">",
                           false, false);
  both.name = "SCE loss and log_prob";
  both.body = "l, lp = SoftmaxCrossEntropyLoss <reduction = \"mean\"> (x, "
              "labels)\n m = ReduceMean <keepdims = 0> (lp)\n y = Add(l, m)";
  cases.push_back(both);
  checkAll(cases);
}

TEST(GradCheck, NegativeLogLikelihoodLoss) {
  std::vector<GradCase> cases;
  for (const char *red : {"mean", "sum", "none"})
    for (bool weights : {false, true})
      for (bool higher : {false, true}) {
        std::string attrs = std::string("<reduction = \"") + red + "\">";
        cases.push_back(
            lossCase("NegativeLogLikelihoodLoss", attrs, weights, higher));
        std::string ignore =
            std::string("<reduction = \"") + red + "\", ignore_index = 3>";
        cases.push_back(
            lossCase("NegativeLogLikelihoodLoss", ignore, weights, higher));
      }
  GradCase composed = lossCase("NegativeLogLikelihoodLoss",
                               "<reduction = \"mean\">", false, false);
  composed.name = "LogSoftmax -> NLL";
  composed.body = "lp = LogSoftmax <axis = 1> (x)\n y = "
                  "NegativeLogLikelihoodLoss <reduction = \"mean\"> (lp, "
                  "labels)";
  cases.push_back(composed);
  checkAll(cases);
}

// --- reductions
// ----------------------------------------------------------------

TEST(GradCheck, ReduceSumAndMean) {
  std::vector<std::vector<int64_t>> axesList = {{},   {0},    {1},      {2},
                                                {-1}, {0, 2}, {0, 1, 2}};
  std::vector<GradCase> cases;
  for (const char *op : {"ReduceSum", "ReduceMean"})
    for (int keep = 0; keep < 2; ++keep)
      for (const auto &axes : axesList)
        for (int64_t opset : {13, 17, 18}) {
          GradCase c;
          std::string name = op;
          c.opset = opset;
          c.params = {{"x", {2, 3, 4}}};
          // ReduceSum takes axes as an input from 13, ReduceMean from 18.
          bool axesInput = std::string(op) == "ReduceSum" || opset >= 18;
          std::string keepAttr = "keepdims = " + std::to_string(keep);
          std::string axesText;
          for (size_t i = 0; i < axes.size(); ++i)
            axesText += (i ? ", " : "") + std::to_string(axes[i]);
          if (axes.empty())
            c.body = "y = " + name + " <" + keepAttr + "> (x)";
          else if (axesInput) {
            c.data = {{"int64[" + std::to_string(axes.size()) + "] ax = {" +
                       axesText + "}"}};
            c.body = "y = " + name + " <" + keepAttr + "> (x, ax)";
          } else {
            c.body = "y = " + name + " <" + keepAttr + ", axes = [" + axesText +
                     "]> (x)";
          }
          c.name = name + " opset " + std::to_string(opset) + " " + keepAttr +
                   " axes [" + axesText + "]";
          cases.push_back(c);
        }
  GradCase noop;
  noop.name = "ReduceSum noop_with_empty_axes";
  noop.params = {{"x", {2, 3}}};
  noop.body = "y = ReduceSum <noop_with_empty_axes = 1> (x)";
  cases.push_back(noop);
  checkAll(cases);
}

// --- whole graphs
// ----------------------------------------------------------------

TEST(GradCheck, FanOutSumsGradients) {
  GradCase c;
  c.name = "w used by Mul and Add";
  c.params = {{"w", {2, 3}}, {"x", {2, 3}}};
  c.body = "a = Mul(w, x)\n t = Tanh(a)\n y = Add(t, w)";
  GradCase three = c;
  three.name = "h used three times";
  three.body = "h = Tanh(w)\n a = Mul(h, x)\n b = Sub(a, h)\n c = Mul(b, h)\n"
               " y = Add(c, x)";
  checkAll({c, three});
}

TEST(GradCheck, MlpWithSoftmaxCrossEntropy) {
  GradCase c;
  c.name = "Gemm-Relu-Gemm-SCE";
  c.params = {{"w1", {5, 3}}, {"b1", {5}}, {"w2", {2, 5}}, {"b2", {2}}};
  c.data = {{"double[4,3] x = {0.5, -1.0, 0.3, 1.2, 0.1, -0.7, -0.4, 0.9, "
             "0.2, 0.0, -0.3, 1.1}"},
            {"int64[4] labels = {0, 1, 1, 0}"}};
  c.frozen = "^x$";
  c.body = "h = Gemm <transB = 1> (x, w1, b1)\n r = Relu(h)\n z = Gemm "
           "<transB = 1> (r, w2, b2)\n y = SoftmaxCrossEntropyLoss "
           "<reduction = \"mean\"> (z, labels)";
  c.yIsLoss = true;
  checkAll({c});
}

TEST(GradCheck, EveryRuleIsCovered) {
  // The cases above and the category files cover every op in the rule table;
  // a new rule must add a case here or in its category's file.
  std::set<std::string> covered = {"Abs",
                                   "Add",
                                   "Sub",
                                   "Mul",
                                   "Div",
                                   "Neg",
                                   "Relu",
                                   "Sqrt",
                                   "Exp",
                                   "Log",
                                   "Pow",
                                   "Tanh",
                                   "Sin",
                                   "Cos",
                                   "GatherND",
                                   "ScatterND",
                                   "ScatterElements",
                                   "Sigmoid",
                                   "Erf",
                                   "Identity",
                                   "Cast",
                                   "Gemm",
                                   "MatMul",
                                   "Reshape",
                                   "Flatten",
                                   "Squeeze",
                                   "Unsqueeze",
                                   "Transpose",
                                   "Concat",
                                   "Trilu",
                                   "Softmax",
                                   "LogSoftmax",
                                   "SoftmaxCrossEntropyLoss",
                                   "NegativeLogLikelihoodLoss",
                                   "ReduceSum",
                                   "ReduceMean",
                                   "CumSum"};
  // Category files (gradcheck_<category>_test.cpp) declare what they check.
  for (const std::string &op : gradcheck::familyCoveredGradientRules())
    covered.insert(op);
  for (const std::string &op : opsWithGradients())
    EXPECT_TRUE(covered.count(op)) << "no gradient check for " << op;
}

} // namespace
