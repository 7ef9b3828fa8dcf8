// Float64 finite-difference checks of Dropout's gradient rule
// (passes/gradients/random.cpp): training mode (the step's mask), the mask
// output used downstream, ratio 1, and inference mode.
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

const bool kCovered = coverGradientRules({"Dropout"});

} // namespace

TEST(GradCheckRandom, Dropout) {
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
