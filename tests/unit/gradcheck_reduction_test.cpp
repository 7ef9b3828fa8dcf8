// Float64 finite-difference checks of ReduceMax's gradient rule
// (passes/gradients/reduction.cpp): every axes form and keepdims. ReduceSum,
// ReduceMean and CumSum are checked in gradcheck_test.cpp.
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

const bool kCovered = coverGradientRules({"ReduceMax"});

} // namespace

TEST(GradCheckReduction, ReduceMax) {
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
