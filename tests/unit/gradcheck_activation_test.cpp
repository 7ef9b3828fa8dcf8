// Float64 finite-difference checks of the activations' gradient rules
// (passes/gradients/activation.cpp): Gelu exact and tanh, the fused
// mpc.Gelu / mpc.GeluTanh, LeakyRelu. Relu, Sigmoid, Tanh, Softmax and
// LogSoftmax are checked in gradcheck_test.cpp.
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
    coverGradientRules({"Gelu", "LeakyRelu", "mpc.Gelu", "mpc.GeluTanh"});

} // namespace

TEST(GradCheckActivation, GeluAndLeakyRelu) {
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
  checkAll(cases);
}
