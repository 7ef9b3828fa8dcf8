// Float64 finite-difference checks of the gather rules
// (passes/gradients/gather_scatter.cpp): Gather (the embedding) over its
// axes, and GatherElements. GatherND, ScatterND and ScatterElements are
// checked in gradcheck_test.cpp (IndexTupleOps).
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

const bool kCovered = coverGradientRules({"Gather", "GatherElements"});

} // namespace

TEST(GradCheckGatherScatter, GatherEmbeddingAndAxes) {
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

TEST(GradCheckGatherScatter, GatherElements) {
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
