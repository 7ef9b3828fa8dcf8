// Float64 finite-difference checks of the normalisations' gradient rules
// (passes/gradients/normalization.cpp): mpc.RMSNormalization (fuse-rmsnorm),
// LayerNormalization, and BatchNormalization in training mode (plain and
// as --sync-batchnorm rewrites it) and inference mode.
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
    {"LayerNormalization", "BatchNormalization", "mpc.RMSNormalization"});

/// Training-mode batch norms: NCHW with the running statistics, [N, C] with
/// another epsilon, opset 13 (BatchNormalization-9, training means asking
/// for the running statistics), and only X trained (the backward still needs
/// the batch statistics). `prefix` starts each case's name.
std::vector<GradCase> batchNormTrainingCases(const std::string &prefix) {
  std::vector<Data> stats = {{"double[3] rm = {0.1, -0.2, 0.3}"},
                             {"double[3] rv = {1.0, 0.5, 2.0}"}};
  std::vector<GradCase> cases;
  cases.push_back(one(prefix + " NCHW, running stats outputs",
                      {{"x", {4, 3, 2, 3}}, {"s", {3}, 0.5, 1.5}, {"b", {3}}},
                      "y, m, v = BatchNormalization <training_mode = 1, "
                      "momentum = 0.8> (x, s, b, rm, rv)",
                      stats));
  cases.push_back(one(prefix + " [N, C], Y only, epsilon 0.1",
                      {{"x", {5, 3}}, {"s", {3}, 0.5, 1.5}, {"b", {3}}},
                      "y = BatchNormalization <training_mode = 1, epsilon = "
                      "0.1> (x, s, b, rm, rv)",
                      stats));
  cases.push_back(one(prefix + " opset 13",
                      {{"x", {3, 3, 4}}, {"s", {3}, 0.5, 1.5}, {"b", {3}}},
                      "y, m, v = BatchNormalization (x, s, b, rm, rv)", stats,
                      13));
  GradCase onlyX = one(prefix + ", scale and bias frozen",
                       {{"x", {4, 3, 2, 2}}, {"s", {3}, 0.5, 1.5}, {"b", {3}}},
                       "y = BatchNormalization <training_mode = 1> (x, s, b, "
                       "rm, rv)",
                       stats);
  onlyX.frozen = "^[sb]$";
  cases.push_back(onlyX);
  return cases;
}

} // namespace

// What fuse-rmsnorm makes of RMS-norm arithmetic: over the last axis, over
// two axes with a broadcasting scale, and with x frozen (dScale alone).
TEST(GradCheckNormalization, RMSNormalization) {
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

TEST(GradCheckNormalization, LayerNormalization) {
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

TEST(GradCheckNormalization, BatchNormalizationTrainingMode) {
  checkAll(batchNormTrainingCases("BN training"));
}

TEST(GradCheckNormalization, BatchNormalizationTrainingModeSynced) {
  // --sync-batchnorm's rewrite (passes/sync_batch_norm.cpp) in a world of
  // one rank: its statistics and its hand-written backward (the global
  // sums' formula) against the plain op's forward, in fp64. The step's loss
  // must also equal the forward graph's to 1e-12 (the harness checks).
  std::vector<GradCase> cases = batchNormTrainingCases("synced BN");
  for (GradCase &c : cases)
    c.syncBatchNorm = true;
  checkAll(cases);
}

TEST(GradCheckNormalization, BatchNormalizationInferenceMode) {
  checkAll({one("BN inference", {{"x", {2, 3, 2, 2}}, {"s", {3}}, {"b", {3}}},
                "y = BatchNormalization (x, s, b, rm, rv)",
                {{"double[3] rm = {0.1, -0.2, 0.3}"},
                 {"double[3] rv = {1.0, 0.5, 2.0}"}})});
}
