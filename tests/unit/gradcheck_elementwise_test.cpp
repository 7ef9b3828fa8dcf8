// Float64 finite-difference checks of elementwise gradient rules
// (passes/gradients/elementwise.cpp): Where, Clip, Max, Min, Sum and
// CastLike. The arithmetic and unary math are checked in gradcheck_test.cpp.
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

const bool kCovered =
    coverGradientRules({"Where", "Clip", "Max", "Min", "Sum", "CastLike"});

} // namespace

TEST(GradCheckElementwise, Where) {
  std::vector<GradCase> cases;
  cases.push_back(one("Where both branches broadcast",
                      {{"a", {2, 3}}, {"b", {3}}}, "y = Where (c, a, b)",
                      {{"bool[2,1] c = {1, 0}"}}));
  cases.push_back(one("Where scalar branch", {{"a", {}}, {"b", {2, 3}}},
                      "y = Where (c, a, b)",
                      {{"bool[2,3] c = {1, 0, 0, 1, 1, 0}"}}));
  checkAll(cases);
}

TEST(GradCheckElementwise, Clip) {
  std::vector<GradCase> cases;
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

TEST(GradCheckElementwise, MaxMinSum) {
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

TEST(GradCheckElementwise, CastLike) {
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
