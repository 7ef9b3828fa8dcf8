// The plan-memory pass skips inferring the step's types again right after a
// verify that found them as inferred (passes/verify.h), and only then: the
// pipeline tells it whether the model is still as that verify left it.
#include "passes/pass.h"
#include "passes/pipeline.h"
#include "passes/registry.h"
#include "passes/verify.h"
#include "support/diagnostics.h"
#include "tests/unit/relu_chain.h"

#include <gtest/gtest.h>

namespace mpc {
namespace {

void verify(Model &m) {
  CompileOptions opts;
  PassContext ctx{opts, {}, {}};
  runVerify(m, ctx);
}

/// A pass that changes the model without telling anyone: y's declared type
/// is forgotten (inference would give it back).
void forgetOutputType(Model &m, PassContext &) {
  Value *y = m.graph->outputs()[0];
  y->dtype = DType::Undefined;
  y->hasShape = false;
  y->dims.clear();
}

Statistics runPasses(Model &m, const std::vector<const char *> &names,
                     bool verifyEach) {
  static const PassInfo forget{"forget-output-type", "", forgetOutputType};
  std::vector<PipelineEntry> pipeline;
  for (const char *name : names)
    pipeline.push_back(
        {std::string(name) == forget.name ? &forget : findPass(name), {}});
  CompileOptions opts;
  PipelineConfig config;
  config.verifyEach = verifyEach;
  Statistics stats;
  runPipeline(m, pipeline, opts, config, stats);
  return stats;
}

TEST(LastVerifyFoundTypesAsInferred, OnlyWhenEveryOutputWasDeclaredSo) {
  ReluChain c;
  EXPECT_FALSE(lastVerifyFoundTypesAsInferred(c.m, *c.m.graph, 17))
      << "no verify yet";
  verify(c.m);
  EXPECT_TRUE(lastVerifyFoundTypesAsInferred(c.m, *c.m.graph, 17));
  EXPECT_FALSE(lastVerifyFoundTypesAsInferred(c.m, *c.m.graph, 13))
      << "verify inferred at another opset";
  // An undeclared middle value: inference would give it a type.
  c.a->dtype = DType::Undefined;
  c.a->hasShape = false;
  c.a->dims.clear();
  verify(c.m);
  EXPECT_FALSE(lastVerifyFoundTypesAsInferred(c.m, *c.m.graph, 17));
}

TEST(LastVerifyFoundTypesAsInferred, NotForAValueMadeSinceOrAnotherGraph) {
  ReluChain c;
  verify(c.m);
  Graph other("other");
  EXPECT_FALSE(lastVerifyFoundTypesAsInferred(c.m, other, 17));
  Node *n = c.m.graph->createNode("Relu", {c.y}, 1, "third");
  n->output(0)->setType(DType::F32, {Dim(4)});
  EXPECT_FALSE(lastVerifyFoundTypesAsInferred(c.m, *c.m.graph, 17));
}

TEST(PlanMemoryPass, PlansTheSameRightAfterVerifyAsAlone) {
  ReluChain alone, afterVerify;
  Statistics a = runPasses(alone.m, {"plan-memory"}, true);
  Statistics b = runPasses(afterVerify.m, {"verify", "plan-memory"}, true);
  ASSERT_TRUE(a.count("plan-memory.peak_bytes"));
  for (const char *key :
       {"plan-memory.peak_bytes", "plan-memory.live_peak_bytes",
        "plan-memory.no_reuse_bytes", "plan-memory.in_place_writes"})
    EXPECT_EQ(a[key], b[key]) << key;
}

TEST(PlanMemoryPass, InfersAgainAfterAPassThatWasNotVerified) {
  // With --no-verify-each the memo is the first verify's: y's type, which
  // that verify saw declared, is gone, and only inference gives it back.
  ReluChain c;
  Statistics stats =
      runPasses(c.m, {"verify", "forget-output-type", "plan-memory"}, false);
  EXPECT_FALSE(stats.count("plan-memory.skipped_symbolic_shapes"));
  EXPECT_EQ(stats["plan-memory.no_reuse_bytes"], 3 * 16);
  EXPECT_EQ(c.y->dtype, DType::Undefined) << "the model is left as it was";
}

} // namespace
} // namespace mpc
