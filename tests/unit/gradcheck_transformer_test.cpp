// Float64 finite-difference checks of the transformer and residual-MLP
// family's gradient rules (passes/gradients/transformer.cpp), plus a small
// pre-LN transformer block and a residual MLP differentiated end to end.
//
// Every op here is declared to GradCheck.EveryRuleIsCovered through
// coverGradientRules; the procedure is gradcheck_harness.h's.
#include "tests/unit/gradcheck_harness.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

using namespace mpc;
using namespace mpc::gradcheck;

namespace {

const bool kCovered = coverGradientRules(
    {"LayerNormalization", "Gather", "Slice", "Split", "Where", "Expand",
     "Gelu", "LeakyRelu", "Clip", "Max", "Min", "Sum", "ReduceMax", "CastLike",
     "Dropout", "GatherElements", "mpc.Gelu", "mpc.GeluTanh",
     "mpc.RMSNormalization"});

GradCase one(const std::string &name, std::vector<Param> params,
             const std::string &body, std::vector<Data> data = {},
             int64_t opset = 17) {
  GradCase c;
  c.name = name;
  c.params = std::move(params);
  c.body = body;
  c.data = std::move(data);
  c.opset = opset;
  return c;
}

} // namespace

// What fuse-rmsnorm makes of RMS-norm arithmetic: over the last axis, over
// two axes with a broadcasting scale, and with x frozen (dScale alone).
TEST(GradCheckTransformer, RMSNormalization) {
  std::vector<GradCase> cases;
  cases.push_back(one("RMS axis -1", {{"x", {2, 3, 4}}, {"s", {4}, 0.5, 1.5}},
                      "y = mpc.RMSNormalization <axis = -1> (x, s)"));
  cases.push_back(one("RMS axis 1, epsilon 0.1, broadcast scale",
                      {{"x", {2, 3, 4}}, {"s", {1, 4}, 0.5, 1.5}},
                      "y = mpc.RMSNormalization <axis = 1, epsilon = 0.1> "
                      "(x, s)"));
  GradCase frozenX = one("RMS frozen x", {{"x", {3, 5}}, {"s", {5}}},
                         "y = mpc.RMSNormalization (x, s)");
  frozenX.frozen = "^x$";
  cases.push_back(frozenX);
  checkAll(cases);
}

TEST(GradCheckTransformer, LayerNormalization) {
  std::vector<GradCase> cases;
  cases.push_back(one("LN axis -1", {{"x", {2, 3, 4}}, {"s", {4}}, {"b", {4}}},
                      "y = LayerNormalization <axis = -1> (x, s, b)"));
  cases.push_back(one("LN axis 1, epsilon 0.1",
                      {{"x", {2, 3, 4}}, {"s", {3, 4}}, {"b", {3, 4}}},
                      "y = LayerNormalization <axis = 1, epsilon = 0.1> (x, "
                      "s, b)"));
  // Scale and bias broadcast onto the normalised shape [3,4]: their
  // gradients are summed back to their own shapes.
  cases.push_back(one("LN broadcast scale/bias",
                      {{"x", {2, 3, 4}}, {"s", {4}}, {"b", {1, 4}}},
                      "y = LayerNormalization <axis = 1> (x, s, b)"));
  cases.push_back(one("LN no bias", {{"x", {3, 5}}, {"s", {5}}},
                      "y = LayerNormalization (x, s)"));
  cases.push_back(one("LN axis 0", {{"x", {2, 3}}, {"s", {2, 3}}},
                      "y = LayerNormalization <axis = 0> (x, s)"));
  // Only the affine parameters train (dX is not computed), and only x.
  GradCase frozenX =
      one("LN frozen x", {{"x", {2, 3, 4}}, {"s", {4}}, {"b", {4}}},
          "y = LayerNormalization (x, s, b)");
  frozenX.frozen = "^x$";
  cases.push_back(frozenX);
  GradCase onlyX = frozenX;
  onlyX.name = "LN frozen scale and bias";
  onlyX.frozen = "^[sb]$";
  cases.push_back(onlyX);
  // The forward writes its mean and inv_std to outputs the graph already
  // names (one of them omitted): the node is rebuilt with all three.
  cases.push_back(one("LN with an omitted Mean output",
                      {{"x", {2, 4}}, {"s", {4}}, {"b", {4}}},
                      "y, , inv = LayerNormalization (x, s, b)"));
  checkAll(cases);
}

TEST(GradCheckTransformer, GatherEmbeddingAndAxes) {
  std::vector<GradCase> cases;
  // Repeated and negative indices accumulate into the same rows.
  cases.push_back(one("Gather embedding", {{"w", {5, 3}}},
                      "y = Gather (w, tok)",
                      {{"int64[2,4] tok = {0, 4, 4, -1, 2, 0, 1, -5}"}}));
  cases.push_back(one("Gather axis 1", {{"w", {3, 5}}},
                      "y = Gather <axis = 1> (w, idx)",
                      {{"int64[3] idx = {4, 1, 4}"}}));
  cases.push_back(one("Gather axis -1 of rank 3", {{"w", {2, 3, 4}}},
                      "y = Gather <axis = -1> (w, idx)",
                      {{"int32[2,2] idx = {3, 0, -1, 2}"}}));
  cases.push_back(one("Gather scalar index", {{"w", {4, 3}}},
                      "y = Gather (w, idx)", {{"int64 idx = {2}"}}));
  checkAll(cases);
}

TEST(GradCheckTransformer, GatherElements) {
  std::vector<GradCase> cases;
  // Repeated and negative indices accumulate into the same element; an
  // element no index names gets a zero gradient.
  cases.push_back(one("GatherElements axis 0", {{"x", {3, 2}}},
                      "y = GatherElements (x, idx)",
                      {{"int64[4,2] idx = {0, 2, -1, 1, 2, 2, 0, -2}"}}));
  cases.push_back(one("GatherElements axis -1, fewer rows", {{"x", {3, 4}}},
                      "y = GatherElements <axis = -1> (x, idx)",
                      {{"int32[2,3] idx = {3, 0, 3, -4, 1, 1}"}}));
  cases.push_back(one("GatherElements axis 1 of rank 3", {{"x", {2, 3, 2}}},
                      "y = GatherElements <axis = 1> (x, idx)",
                      {{"int64[2,1,2] idx = {2, 0, 1, 1}"}}));
  checkAll(cases);
}

TEST(GradCheckTransformer, Slice) {
  std::vector<GradCase> cases;
  cases.push_back(one("Slice starts/ends", {{"x", {4, 5}}},
                      "y = Slice (x, st, en)",
                      {{"int64[2] st = {1, 0}"}, {"int64[2] en = {3, 4}"}}));
  cases.push_back(one("Slice axes and steps", {{"x", {4, 6}}},
                      "y = Slice (x, st, en, ax, sp)",
                      {{"int64[1] st = {5}"},
                       {"int64[1] en = {0}"},
                       {"int64[1] ax = {-1}"},
                       {"int64[1] sp = {-2}"}}));
  cases.push_back(one("Slice clamped bounds, step 2", {{"x", {3, 7}}},
                      "y = Slice (x, st, en, ax, sp)",
                      {{"int64[2] st = {-100, 1}"},
                       {"int64[2] en = {100, 1000}"},
                       {"int64[2] ax = {0, 1}"},
                       {"int64[2] sp = {1, 2}"}}));
  // Steps without axes: the omitted axes input keeps its position.
  cases.push_back(one("Slice omitted axes", {{"x", {4, 5}}},
                      "y = Slice (x, st, en, , sp)",
                      {{"int64[2] st = {0, 4}"},
                       {"int64[2] en = {4, 0}"},
                       {"int64[2] sp = {3, -1}"}}));
  cases.push_back(one(
      "Slice opset 9 attributes", {{"x", {4, 5}}},
      "y = Slice <starts = [1, 1], ends = [4, 3], axes = [0, 1]> (x)", {}, 9));
  checkAll(cases);
}

TEST(GradCheckTransformer, Split) {
  std::vector<GradCase> cases;
  cases.push_back(one("Split sizes input", {{"x", {2, 6}}},
                      "a, b, c = Split <axis = 1> (x, sp)\n t = Tanh(b)\n "
                      "m = Mul(a, c)\n y = Concat <axis = 1> (m, t, a)",
                      {{"int64[3] sp = {2, 2, 2}"}}, 13));
  // An output nobody reads contributes zeros to the gradient.
  cases.push_back(one("Split unused output", {{"x", {5, 3}}},
                      "a, b = Split (x, sp)\n y = Tanh(a)",
                      {{"int64[2] sp = {2, 3}"}}, 13));
  cases.push_back(one("Split equal pieces", {{"x", {2, 4, 3}}},
                      "a, b = Split <axis = -2> (x)\n y = Mul(a, b)", {}, 13));
  cases.push_back(one("Split num_outputs (opset 18)", {{"x", {7, 2}}},
                      "a, b, c = Split <num_outputs = 3> (x)\n y = Concat "
                      "<axis = 0> (c, b, a)",
                      {}, 18));
  cases.push_back(one("Split attribute (opset 11)", {{"x", {3, 4}}},
                      "a, b = Split <axis = 1, split = [1, 3]> (x)\n "
                      "y = Concat <axis = 1> (b, a)",
                      {}, 11));
  checkAll(cases);
}

TEST(GradCheckTransformer, WhereAndExpand) {
  std::vector<GradCase> cases;
  cases.push_back(one("Where both branches broadcast",
                      {{"a", {2, 3}}, {"b", {3}}}, "y = Where (c, a, b)",
                      {{"bool[2,1] c = {1, 0}"}}));
  cases.push_back(one("Where scalar branch", {{"a", {}}, {"b", {2, 3}}},
                      "y = Where (c, a, b)",
                      {{"bool[2,3] c = {1, 0, 0, 1, 1, 0}"}}));
  cases.push_back(one("Expand", {{"x", {3, 1}}}, "y = Expand (x, s)",
                      {{"int64[3] s = {2, 3, 4}"}}));
  cases.push_back(one("Expand to a smaller-rank shape", {{"x", {2, 1, 3}}},
                      "y = Expand (x, s)", {{"int64[2] s = {4, 1}"}}));
  checkAll(cases);
}

TEST(GradCheckTransformer, Activations) {
  std::vector<GradCase> cases;
  cases.push_back(
      one("Gelu exact", {{"x", {2, 3}, -3, 3}}, "y = Gelu (x)", {}, 20));
  cases.push_back(one("Gelu tanh", {{"x", {2, 3}, -3, 3}},
                      "y = Gelu <approximate = \"tanh\"> (x)", {}, 20));
  // What fuse-gelu makes of an opset < 20 export's GELU arithmetic.
  cases.push_back(one("mpc.Gelu", {{"x", {2, 3}, -3, 3}}, "y = mpc.Gelu (x)"));
  cases.push_back(
      one("mpc.GeluTanh", {{"x", {2, 3}, -3, 3}}, "y = mpc.GeluTanh (x)"));
  cases.push_back(one("LeakyRelu", {{"x", {2, 3}}}, "y = LeakyRelu (x)"));
  cases.push_back(one("LeakyRelu alpha", {{"x", {2, 3}}},
                      "y = LeakyRelu <alpha = -0.3> (x)"));
  cases.push_back(one("Clip min max", {{"x", {3, 4}}}, "y = Clip (x, lo, hi)",
                      {{"double lo = {-0.5}"}, {"double hi = {0.4}"}}, 13));
  cases.push_back(one("Clip max only", {{"x", {3, 4}}}, "y = Clip (x, , hi)",
                      {{"double hi = {0.1}"}}, 13));
  cases.push_back(
      one("Clip no bounds", {{"x", {3, 4}}}, "y = Clip (x)", {}, 13));
  cases.push_back(one("Clip opset 10 attributes", {{"x", {3, 4}}},
                      "y = Clip <min = -0.25, max = 0.5> (x)", {}, 10));
  checkAll(cases);
}

TEST(GradCheckTransformer, MaxMinSum) {
  std::vector<GradCase> cases;
  for (const char *op : {"Max", "Min"}) {
    std::string o = op;
    cases.push_back(one(o + " broadcast", {{"a", {2, 3}}, {"b", {3}}},
                        "y = " + o + " (a, b)"));
    cases.push_back(one(o + " three inputs",
                        {{"a", {2, 1, 3}}, {"b", {4, 1}}, {"c", {}}},
                        "y = " + o + " (a, b, c)"));
    cases.push_back(
        one(o + " one input", {{"a", {2, 3}}}, "y = " + o + " (a)"));
    // Every element ties with itself: half the gradient through each use,
    // and the central difference sees the sum, 1.
    cases.push_back(one(o + " tie with itself", {{"a", {2, 3}}},
                        "t = Tanh(a)\n y = " + o + " (t, t)"));
  }
  cases.push_back(one("Sum", {{"a", {2, 3}}, {"b", {3}}, {"c", {2, 1}}},
                      "y = Sum (a, b, c)"));
  cases.push_back(one("Sum one input", {{"a", {2, 3}}}, "y = Sum (a)"));
  checkAll(cases);
}

TEST(GradCheckTransformer, ReduceMax) {
  std::vector<GradCase> cases;
  for (int keep = 0; keep < 2; ++keep) {
    std::string k = "keepdims = " + std::to_string(keep);
    cases.push_back(one("ReduceMax all " + k, {{"x", {2, 3, 4}}},
                        "y = ReduceMax <" + k + "> (x)"));
    cases.push_back(one("ReduceMax opset 13 axes " + k, {{"x", {2, 3, 4}}},
                        "y = ReduceMax <" + k + ", axes = [0, -1]> (x)", {},
                        13));
    GradCase input =
        one("ReduceMax opset 18 axes input " + k, {{"x", {2, 3, 4}}},
            "y = ReduceMax <" + k + "> (x, ax)", {{"int64[1] ax = {1}"}}, 18);
    cases.push_back(input);
  }
  cases.push_back(one("ReduceMax noop_with_empty_axes", {{"x", {2, 3}}},
                      "y = ReduceMax <noop_with_empty_axes = 1> (x)", {}, 18));
  checkAll(cases);
}

TEST(GradCheckTransformer, CastLike) {
  // Through fp32 and back: fp32 rounding limits the finite difference.
  GradCase c = one("CastLike f64->f32->f64", {{"x", {2, 3}}},
                   "f = CastLike (x, like32)\n t = Tanh(f)\n y = CastLike (t, "
                   "x)",
                   {{"float like32 = {0}"}});
  c.h = 1e-2;
  c.tol = 2e-3;
  GradCase same = one("CastLike f64->f64", {{"x", {2, 3}}},
                      "y = CastLike (x, like64)", {{"double like64 = {0}"}});
  checkAll({c, same});
}

TEST(GradCheckTransformer, Dropout) {
  std::vector<GradCase> cases;
  // Training mode: the forward's mask is drawn from the step seed, which the
  // finite differences repeat; the backward reuses the mask output.
  cases.push_back(one("Dropout training", {{"x", {4, 5}}},
                      "y = Dropout (x, r, t)",
                      {{"double r = {0.3}"}, {"bool t = {1}"}}));
  cases.push_back(one("Dropout training, mask used", {{"x", {3, 4}}},
                      "d, m = Dropout (x, r, t)\n mf = Cast <to = 11> (m)\n "
                      "y = Add(d, mf)",
                      {{"float r = {0.5}"}, {"bool t = {1}"}}));
  cases.push_back(one("Dropout ratio 1", {{"x", {2, 3}}},
                      "d = Dropout (x, r, t)\n y = Add(d, x)",
                      {{"double r = {1.0}"}, {"bool t = {1}"}}));
  cases.push_back(one("Dropout inference mode", {{"x", {2, 3}}},
                      "y = Dropout (x, r)", {{"double r = {0.5}"}}));
  cases.push_back(one("Dropout training_mode false", {{"x", {2, 3}}},
                      "y = Dropout (x, r, t)",
                      {{"double r = {0.5}"}, {"bool t = {0}"}}));
  checkAll(cases);
}

// --- whole graphs ------------------------------------------------------------

TEST(GradCheckTransformer, PreLnTransformerBlock) {
  // Embedding + positions, pre-LN single-head attention with the exporter's
  // reshape/transpose head split (2 heads of 2), erf-GELU MLP, residuals,
  // final LN, LM head and SoftmaxCrossEntropy over (B*T, vocab).
  GradCase c;
  c.name = "pre-LN transformer block";
  c.params = {{"emb", {6, 4}}, {"pos", {3, 4}}, {"g1", {4}},    {"b1", {4}},
              {"wq", {4, 4}},  {"wk", {4, 4}},  {"wv", {4, 4}}, {"wo", {4, 4}},
              {"g2", {4}},     {"b2", {4}},     {"w1", {4, 5}}, {"c1", {5}},
              {"w2", {5, 4}},  {"gf", {4}},     {"bf", {4}},    {"wh", {4, 6}}};
  c.data = {{"int64[2,3] tok = {0, 5, 2, 2, 1, 5}"},
            {"int64[6] tgt = {5, 2, 0, 1, 5, 3}"},
            {"int64[4] split = {2, 3, 2, 2}"},
            {"int64[3] merge = {2, 3, 4}"},
            {"int64[2] flat = {6, 6}"},
            {"double scale = {0.7071067811865476}"},
            {"double sqrt2 = {1.4142135623730951}"},
            {"double one = {1.0}"},
            {"double half = {0.5}"}};
  c.body = R"(
  e = Gather (emb, tok)
  x = Add (e, pos)
  h = LayerNormalization (x, g1, b1)
  q0 = MatMul (h, wq)
  k0 = MatMul (h, wk)
  v0 = MatMul (h, wv)
  q1 = Reshape (q0, split)
  k1 = Reshape (k0, split)
  v1 = Reshape (v0, split)
  q = Transpose <perm = [0, 2, 1, 3]> (q1)
  kt = Transpose <perm = [0, 2, 3, 1]> (k1)
  v = Transpose <perm = [0, 2, 1, 3]> (v1)
  s0 = MatMul (q, kt)
  s = Mul (s0, scale)
  p = Softmax (s)
  a0 = MatMul (p, v)
  a1 = Transpose <perm = [0, 2, 1, 3]> (a0)
  a = Reshape (a1, merge)
  o = MatMul (a, wo)
  x2 = Add (x, o)
  h2 = LayerNormalization (x2, g2, b2)
  f0 = MatMul (h2, w1)
  f1 = Add (f0, c1)
  ge = Div (f1, sqrt2)
  er = Erf (ge)
  ea = Add (er, one)
  gm = Mul (f1, ea)
  g = Mul (gm, half)
  f2 = MatMul (g, w2)
  x3 = Add (x2, f2)
  hf = LayerNormalization (x3, gf, bf)
  logits = MatMul (hf, wh)
  lf = Reshape (logits, flat)
  y = SoftmaxCrossEntropyLoss <reduction = "mean"> (lf, tgt))";
  c.yIsLoss = true;
  c.frozen = "^(scale|sqrt2|one|half)$";
  checkAll({c});
}

TEST(GradCheckTransformer, ResidualMlpWithMse) {
  // h = x W0 + b0; h += tanh(h W1 + b1); h += sigmoid(h W2 + b2);
  // loss = mean((h W3 + b3 - t) ** 2), as the PyTorch exporter writes it.
  GradCase c;
  c.name = "residual MLP, MSE";
  c.params = {{"w0", {3, 4}}, {"b0", {3}}, {"w1", {3, 3}}, {"b1", {3}},
              {"w2", {3, 3}}, {"b2", {3}}, {"w3", {2, 3}}, {"b3", {2}}};
  c.data = {{"double[4,4] x = {0.5, -1.0, 0.3, 1.2, 0.1, -0.7, -0.4, 0.9, "
             "0.2, 0.0, -0.3, 1.1, 0.8, 0.6, -0.2, -1.3}"},
            {"double[4,2] t = {0.1, -0.2, 0.3, 0.4, -0.5, 0.6, 0.7, -0.8}"}};
  c.body = R"(
  h0 = Gemm <transB = 1> (x, w0, b0)
  z1 = Gemm <transB = 1> (h0, w1, b1)
  a1 = Tanh (z1)
  h1 = Add (h0, a1)
  z2 = Gemm <transB = 1> (h1, w2, b2)
  a2 = Sigmoid (z2)
  h2 = Add (h1, a2)
  yh = Gemm <transB = 1> (h2, w3, b3)
  d = Sub (yh, t)
  two = Constant <value = double {2.0}> ()
  sq = Pow (d, two)
  y = ReduceMean <keepdims = 0> (sq))";
  c.yIsLoss = true;
  c.frozen = "^(x|t)$";
  checkAll({c});
}
