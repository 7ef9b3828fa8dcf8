// Float64 finite-difference checks of TopK's gradient rule
// (passes/gradients/selection.cpp): the values' gradient scattered back to the
// indices, along the last axis and along axis 0, largest and smallest, a
// full sort (torch.argsort's export, K = the axis' size), and the indices
// reused downstream (GatherElements of another parameter at them), which
// carry no gradient themselves.
//
// Declared to GradCheck.EveryRuleIsCovered through coverGradientRules; the
// procedure is gradcheck_harness.h's. Random values in [-1, 1] are
// distinct far beyond the step h, so no perturbation reorders a line.
#include "tests/unit/gradcheck_harness.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

using namespace mpc;
using namespace mpc::gradcheck;

namespace {

const bool kCovered = coverGradientRules({"TopK"});

GradCase topk(const std::string &name, std::vector<Param> params,
              const std::string &k, const std::string &body) {
  GradCase c;
  c.name = name;
  c.params = std::move(params);
  c.data = {{k}};
  c.body = body;
  return c;
}

TEST(GradCheck, TopK) {
  checkAll({
      topk("TopK largest, last axis", {{"x", {3, 5}}}, "int64[1] k = {3}",
           "y, i = TopK <axis = -1> (x, k)"),
      topk("TopK smallest, axis 0, unsorted", {{"x", {4, 3}}},
           "int64[1] k = {2}",
           "y, i = TopK <axis = 0, largest = 0, sorted = 0> (x, k)"),
      topk("TopK of the whole axis (argsort)", {{"x", {2, 4, 3}}},
           "int64[1] k = {4}", "y, i = TopK <axis = 1, largest = 0> (x, k)"),
      topk("TopK indices reused by GatherElements",
           {{"x", {3, 6}}, {"w", {3, 6}}}, "int64[1] k = {2}",
           "v, i = TopK <axis = 1> (x, k)\n"
           "  g = GatherElements <axis = 1> (w, i)\n"
           "  y = Mul (v, g)"),
  });
}

} // namespace
