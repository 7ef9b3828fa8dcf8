// Float64 finite-difference checks of data-movement gradient rules
// (passes/gradients/shape_ops.cpp): Slice, Split and Expand. Reshape,
// Flatten, (Un)Squeeze, Transpose and Concat are checked in
// gradcheck_test.cpp.
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

const bool kCovered = coverGradientRules({"Slice", "Split", "Expand"});

} // namespace

TEST(GradCheckShapeOps, Slice) {
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

TEST(GradCheckShapeOps, Split) {
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

TEST(GradCheckShapeOps, Expand) {
  std::vector<GradCase> cases;
  cases.push_back(one("Expand", {{"x", {3, 1}}}, "y = Expand (x, s)",
                      {{"int64[3] s = {2, 3, 4}"}}));
  cases.push_back(one("Expand to a smaller-rank shape", {{"x", {2, 1, 3}}},
                      "y = Expand (x, s)", {{"int64[2] s = {4, 1}"}}));
  checkAll(cases);
}
