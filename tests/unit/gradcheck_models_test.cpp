// Float64 finite-difference checks of whole models differentiated end to
// end: a small pre-LN transformer block and a residual MLP, through the
// gradient rules of several categories at once (passes/gradients/).
//
// The procedure is gradcheck_harness.h's.
#include "tests/unit/gradcheck_harness.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

using namespace mpc;
using namespace mpc::gradcheck;

TEST(GradCheckModels, PreLnTransformerBlock) {
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

TEST(GradCheckModels, ResidualMlpWithMse) {
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
