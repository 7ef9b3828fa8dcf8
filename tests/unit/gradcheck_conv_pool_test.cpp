// Float64 finite-difference checks of the convolutions' and pools' gradient
// rules (passes/gradients/conv_pool.cpp): Conv over every window attribute,
// ConvTranspose, the pools, and a small CNN (with a BatchNormalization)
// differentiated end to end.
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
    {"Conv", "ConvTranspose", "MaxPool", "AveragePool", "GlobalAveragePool"});

std::string ints(const std::vector<int64_t> &v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i)
    s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

} // namespace

// --- Conv
// ----------------------------------------------------------------------

TEST(GradCheckConvPool, Conv2dStridesPadsDilationsGroups) {
  std::vector<GradCase> cases;
  for (int64_t stride : {1, 2})
    for (const auto &pads : std::vector<std::vector<int64_t>>{
             {0, 0, 0, 0}, {1, 1, 1, 1}, {0, 1, 2, 0}})
      for (int64_t dilation : {1, 2})
        for (int64_t group : {1, 2}) {
          std::string attrs = "<strides = " + ints({stride, stride}) +
                              ", pads = " + ints(pads) +
                              ", dilations = " + ints({dilation, dilation}) +
                              ", group = " + std::to_string(group) + ">";
          // C = 4 input channels, M = 4 output channels; W is [M, C/g, 3, 2]
          // (a non-square kernel catches swapped spatial dims).
          bool bias = group == 1;
          cases.push_back(
              one("Conv" + attrs + (bias ? " bias" : ""),
                  bias ? std::vector<Param>{{"x", {2, 4, 6, 5}},
                                            {"w", {4, 4 / group, 3, 2}},
                                            {"b", {4}}}
                       : std::vector<Param>{{"x", {2, 4, 6, 5}},
                                            {"w", {4, 4 / group, 3, 2}}},
                  "y = Conv " + attrs + (bias ? " (x, w, b)" : " (x, w)")));
        }
  checkAll(cases);
}

TEST(GradCheckConvPool, ConvAutoPad) {
  // SAME_* with stride 2 on an even and an odd size (the odd pad goes to
  // the end for UPPER, the beginning for LOWER); VALID drops the rest.
  std::vector<GradCase> cases;
  for (const char *pad : {"SAME_UPPER", "SAME_LOWER", "VALID"})
    for (int64_t size : {6, 7}) {
      std::string attrs = std::string("<auto_pad = \"") + pad +
                          "\", strides = [2, 2], kernel_shape = [3, 3]>";
      cases.push_back(
          one("Conv " + std::string(pad) + " size " + std::to_string(size),
              {{"x", {1, 2, size, size}}, {"w", {3, 2, 3, 3}}, {"b", {3}}},
              "y = Conv " + attrs + " (x, w, b)"));
    }
  checkAll(cases);
}

TEST(GradCheckConvPool, Conv1dAnd3d) {
  checkAll(
      {one("Conv 1-D stride 2 pad 1 dilation 2",
           {{"x", {2, 3, 9}}, {"w", {2, 3, 3}}, {"b", {2}}},
           "y = Conv <strides = [2], pads = [1, 1], dilations = [2]> (x, w, "
           "b)"),
       one("Conv 3-D stride 1x2x1 pads",
           {{"x", {1, 2, 4, 5, 3}}, {"w", {2, 2, 2, 3, 2}}},
           "y = Conv <strides = [1, 2, 1], pads = [1, 0, 1, 0, 1, 1]> (x, "
           "w)"),
       one("Conv depthwise", {{"x", {2, 3, 5, 5}}, {"w", {6, 1, 3, 3}}},
           "y = Conv <group = 3, pads = [1, 1, 1, 1]> (x, w)")});
}

TEST(GradCheckConvPool, ConvOnlyWeightsTrain) {
  // X frozen: no ConvGradInput is built, the weight and bias still check.
  GradCase c = one("Conv frozen x",
                   {{"x", {2, 2, 5, 5}}, {"w", {3, 2, 3, 3}}, {"b", {3}}},
                   "y = Conv <strides = [2, 2]> (x, w, b)");
  c.frozen = "^x$";
  checkAll({c});
}

// --- ConvTranspose
// -------------------------------------------------------------

TEST(GradCheckConvPool, ConvTranspose) {
  std::vector<GradCase> cases;
  cases.push_back(one("ConvTranspose default",
                      {{"x", {2, 3, 4, 4}}, {"w", {3, 2, 3, 3}}, {"b", {2}}},
                      "y = ConvTranspose (x, w, b)"));
  cases.push_back(
      one("ConvTranspose stride 2 pads output_padding",
          {{"x", {2, 2, 3, 4}}, {"w", {2, 3, 3, 2}}, {"b", {3}}},
          "y = ConvTranspose <strides = [2, 2], pads = [1, 0, 1, 1], "
          "output_padding = [1, 1]> (x, w, b)"));
  cases.push_back(one("ConvTranspose dilation 2 group 2",
                      {{"x", {1, 4, 3, 3}}, {"w", {4, 1, 2, 2}}},
                      "y = ConvTranspose <dilations = [2, 2], group = 2, "
                      "strides = [2, 1]> (x, w)"));
  cases.push_back(one("ConvTranspose SAME_UPPER stride 2",
                      {{"x", {1, 2, 3, 3}}, {"w", {2, 2, 3, 3}}},
                      "y = ConvTranspose <auto_pad = \"SAME_UPPER\", strides "
                      "= [2, 2]> (x, w)"));
  cases.push_back(one("ConvTranspose output_shape",
                      {{"x", {1, 2, 3, 3}}, {"w", {2, 1, 3, 3}}},
                      "y = ConvTranspose <strides = [2, 2], output_shape = "
                      "[6, 7]> (x, w)"));
  cases.push_back(one("ConvTranspose 1-D",
                      {{"x", {2, 2, 5}}, {"w", {2, 3, 3}}, {"b", {3}}},
                      "y = ConvTranspose <strides = [3], pads = [2, 1]> (x, "
                      "w, b)"));
  checkAll(cases);
}

// --- pools
// ---------------------------------------------------------------------

TEST(GradCheckConvPool, MaxPool) {
  std::vector<GradCase> cases;
  auto add = [&](const std::string &attrs, std::vector<int64_t> x) {
    cases.push_back(
        one("MaxPool" + attrs, {{"x", x}}, "y = MaxPool " + attrs + " (x)"));
  };
  add("<kernel_shape = [2, 2], strides = [2, 2]>", {2, 2, 4, 6});
  // Overlapping windows: an element that wins two windows gets both dY.
  add("<kernel_shape = [3, 3]>", {1, 2, 5, 5});
  add("<kernel_shape = [3, 2], strides = [2, 2], pads = [1, 0, 1, 1], "
      "ceil_mode = 1>",
      {1, 2, 6, 5});
  add("<kernel_shape = [2, 2], dilations = [2, 2], strides = [1, 2]>",
      {1, 1, 5, 6});
  add("<kernel_shape = [3, 3], strides = [2, 2], auto_pad = \"SAME_UPPER\">",
      {1, 2, 6, 6});
  add("<kernel_shape = [3], strides = [2]>", {2, 3, 7});
  checkAll(cases);
}

TEST(GradCheckConvPool, MaxPoolWithIndicesOutput) {
  checkAll({one("MaxPool with Indices", {{"x", {1, 2, 4, 4}}},
                "y, i = MaxPool <kernel_shape = [2, 2], strides = [2, 2]> "
                "(x)")});
}

TEST(GradCheckConvPool, AveragePool) {
  std::vector<GradCase> cases;
  for (int include = 0; include < 2; ++include)
    for (const char *rest :
         {"kernel_shape = [2, 2], strides = [2, 2]",
          "kernel_shape = [3, 3], pads = [1, 1, 1, 1]",
          "kernel_shape = [3, 2], strides = [2, 2], pads = [1, 0, 0, 1], "
          "ceil_mode = 1",
          "kernel_shape = [3, 3], strides = [2, 2], auto_pad = "
          "\"SAME_LOWER\""}) {
      std::string attrs =
          "<count_include_pad = " + std::to_string(include) + ", " + rest + ">";
      cases.push_back(one("AveragePool" + attrs, {{"x", {2, 2, 5, 6}}},
                          "y = AveragePool " + attrs + " (x)"));
    }
  cases.push_back(one("AveragePool 1-D", {{"x", {2, 2, 7}}},
                      "y = AveragePool <kernel_shape = [3], strides = [2], "
                      "pads = [1, 1]> (x)"));
  checkAll(cases);
}

TEST(GradCheckConvPool, GlobalAveragePool) {
  checkAll({one("GlobalAveragePool 2-D", {{"x", {2, 3, 4, 5}}},
                "y = GlobalAveragePool (x)"),
            one("GlobalAveragePool 1-D", {{"x", {2, 3, 4}}},
                "y = GlobalAveragePool (x)")});
}

// --- a whole CNN
// ---------------------------------------------------------------

TEST(GradCheckConvPool, SmallCnnWithBatchNormAndLoss) {
  // The issue-3 CNN in miniature: Conv -> BatchNormalization(training) ->
  // Relu -> MaxPool -> Conv (stride 2, groups) -> Relu -> Flatten -> Gemm ->
  // SoftmaxCrossEntropyLoss.
  GradCase c = one(
      "Conv-BN-Relu-MaxPool-Conv-Flatten-Gemm-SCE",
      {{"w1", {4, 2, 3, 3}},
       {"b1", {4}},
       {"s", {4}, 0.5, 1.5},
       {"bb", {4}},
       {"w2", {4, 2, 3, 3}},
       {"b2", {4}},
       {"fw", {3, 16}},
       {"fb", {3}}},
      "h = Conv <pads = [1, 1, 1, 1]> (x, w1, b1)\n"
      " n, rm2, rv2 = BatchNormalization <training_mode = 1> (h, s, bb, rm, "
      "rv)\n"
      " r = Relu (n)\n"
      " p = MaxPool <kernel_shape = [2, 2], strides = [2, 2]> (r)\n"
      " k = Conv <strides = [2, 2], pads = [1, 1, 1, 1], group = 2> (p, w2, "
      "b2)\n"
      " r2 = Relu (k)\n"
      " f = Flatten (r2)\n"
      " z = Gemm <transB = 1> (f, fw, fb)\n"
      " y = SoftmaxCrossEntropyLoss <reduction = \"mean\"> (z, labels)",
      {{"double[2,2,8,8] x = {" +
        [] {
          std::string s;
          for (int i = 0; i < 256; ++i)
            s += (i ? ", " : "") + std::to_string(((i * 37) % 17 - 8) / 8.0);
          return s;
        }() +
        "}"},
       {"int64[2] labels = {2, 0}"},
       {"double[4] rm = {0, 0, 0, 0}"},
       {"double[4] rv = {1, 1, 1, 1}"}});
  c.frozen = "^x$";
  c.yIsLoss = true;
  checkAll({c});
}

TEST(GradCheckConvPool, SymbolicBatch) {
  // With a symbolic batch the backward reads X's shape at run time (Shape)
  // for ConvGradInput and AveragePoolGrad, and BatchNormalizationGrad counts
  // the batch at run time.
  GradCase c;
  c.name = "Conv-BN-AveragePool-MaxPool, symbolic batch";
  c.params = {
      {"q", {2, 1, 1}}, {"w", {3, 2, 3, 3}}, {"s", {3}, 0.5, 1.5}, {"b", {3}}};
  c.data = {{"double[3] rm = {0, 0, 0}"}, {"double[3] rv = {1, 1, 1}"}};
  c.inputs = {{"double[N,2,6,6] x", "x", randomTensor({3, 2, 6, 6}, 11)},
              {"double[N,3,2,2] r", "r", randomTensor({3, 3, 2, 2}, 12)}};
  // q makes the Conv's input depend on a parameter: dX is needed.
  c.body = "xq = Mul (x, q)\n"
           " h = Conv <pads = [1, 1, 1, 1]> (xq, w)\n"
           " n = BatchNormalization <training_mode = 1> (h, s, b, rm, rv)\n"
           " a = AveragePool <kernel_shape = [2, 2], strides = [2, 2]> (n)\n"
           " p = MaxPool <kernel_shape = [2, 2], strides = [2, 2], ceil_mode "
           "= 1> (a)\n"
           " m = Mul (p, r)\n"
           " y = ReduceSum <keepdims = 0> (m)";
  c.yIsLoss = true;
  checkAll({c});
}
