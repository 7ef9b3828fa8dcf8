// The pipeline's verify after every pass is skipped after a pass that says it
// changed nothing (PassContext::changedNothing), and only then; the passes
// that say so say it only when they found nothing to do.
#include "passes/pass.h"
#include "passes/pipeline.h"
#include "passes/registry.h"
#include "support/diagnostics.h"
#include "tests/unit/relu_chain.h"

#include <gtest/gtest.h>

namespace mpc {
namespace {

/// Breaks the model (y declared fp16, which Relu of fp32 cannot give), as a
/// buggy pass would.
void breakType(Model &m) { m.graph->outputs()[0]->dtype = DType::F16; }

void breaksAndSaysSo(Model &m, PassContext &) { breakType(m); }
/// Lies: says it changed nothing. Only the skipped verify lets it through.
void breaksButSaysUnchanged(Model &m, PassContext &ctx) {
  breakType(m);
  ctx.changedNothing = true;
}
void saysUnchanged(Model &, PassContext &ctx) { ctx.changedNothing = true; }
/// Changes nothing, but does not say so.
void silent(Model &, PassContext &) {}

/// What the last `probe` pass saw in PassContext::unchangedSinceVerify.
bool probed = false;
void probe(Model &, PassContext &ctx) {
  probed = ctx.unchangedSinceVerify;
  ctx.changedNothing = true;
}

const PassInfo kTestPasses[] = {
    {"breaks", "", breaksAndSaysSo},
    {"breaks-but-says-unchanged", "", breaksButSaysUnchanged},
    {"says-unchanged", "", saysUnchanged},
    {"silent", "", silent},
    {"probe", "", probe},
};

/// Runs the named passes (test passes or registered ones); returns the
/// verifier's message, empty when the pipeline passed.
std::string run(Model &m, const std::vector<std::string> &names,
                bool verifyEach = true, PassTimings *timings = nullptr) {
  std::vector<PipelineEntry> pipeline;
  for (const std::string &name : names) {
    const PassInfo *info = findPass(name);
    for (const PassInfo &p : kTestPasses)
      if (name == p.name)
        info = &p;
    pipeline.push_back({info, {}});
  }
  CompileOptions opts;
  PipelineConfig config;
  config.verifyEach = verifyEach;
  config.timings = timings;
  Statistics stats;
  try {
    runPipeline(m, pipeline, opts, config, stats);
  } catch (const Error &e) {
    return e.what();
  }
  return "";
}

bool ranVerifyEach(const PassTimings &t) {
  for (const PassTiming &row : t.rows())
    if (row.name == "verify-each")
      return true;
  return false;
}

TEST(VerifyEach, AChangedModelIsVerified) {
  ReluChain c;
  std::string msg = run(c.m, {"verify", "breaks"});
  EXPECT_NE(msg.find("verifier failed after pass 'breaks'"), std::string::npos)
      << msg;
}

TEST(VerifyEach, SkippedAfterAPassThatSaysItChangedNothing) {
  ReluChain c;
  PassTimings timings;
  EXPECT_EQ(run(c.m, {"verify", "says-unchanged"}, true, &timings), "");
  EXPECT_FALSE(ranVerifyEach(timings));
  // The skip is what lets a lying pass through: the verify did not run.
  ReluChain liar;
  EXPECT_EQ(run(liar.m, {"verify", "breaks-but-says-unchanged"}), "");
}

TEST(VerifyEach, APassThatDoesNotSaySoIsVerified) {
  ReluChain c;
  PassTimings timings;
  EXPECT_EQ(run(c.m, {"verify", "silent"}, true, &timings), "");
  EXPECT_TRUE(ranVerifyEach(timings));
}

TEST(VerifyEach, AnUnverifiedModelIsVerifiedEvenIfUnchanged) {
  // No verify before the pass: that it changed nothing proves nothing.
  ReluChain c;
  breakType(c.m);
  std::string msg = run(c.m, {"says-unchanged"});
  EXPECT_NE(msg.find("verifier failed after pass 'says-unchanged'"),
            std::string::npos)
      << msg;
}

TEST(VerifyEach, UnchangedSinceVerifyStaysCorrect) {
  // plan-memory trusts this flag (passes/verify.h).
  ReluChain a;
  run(a.m, {"verify", "says-unchanged", "probe"});
  EXPECT_TRUE(probed);
  ReluChain b;
  run(b.m, {"verify", "says-unchanged", "probe"}, /*verifyEach=*/false);
  EXPECT_TRUE(probed) << "nothing changed since the verify";
  ReluChain c;
  run(c.m, {"verify", "silent", "probe"}, /*verifyEach=*/false);
  EXPECT_FALSE(probed) << "silent may have changed the model";
  ReluChain d;
  run(d.m, {"says-unchanged", "probe"}, /*verifyEach=*/false);
  EXPECT_FALSE(probed) << "never verified";
  ReluChain e;
  run(e.m, {"verify", "silent", "says-unchanged", "probe"});
  EXPECT_TRUE(probed) << "verified after silent";
}

/// Runs one registered pass alone; returns whether it said it changed
/// nothing.
bool saidUnchanged(Model &m, const char *pass,
                   const CompileOptions &opts = CompileOptions()) {
  PassContext ctx{opts, {}, {}};
  findPass(pass)->run(m, ctx);
  return ctx.changedNothing;
}

TEST(VerifyEach, CleanupSaysUnchangedOnlyWhenItRemovedNothing) {
  ReluChain c;
  EXPECT_TRUE(saidUnchanged(c.m, "cleanup"));
  c.m.graph->createNode("Relu", {c.x}, 1, "dead");
  EXPECT_FALSE(saidUnchanged(c.m, "cleanup"));
  EXPECT_EQ(c.m.graph->numNodes(), 2u);
  EXPECT_TRUE(saidUnchanged(c.m, "cleanup"));
}

TEST(VerifyEach, FuseGeluSaysUnchangedOnlyWhenItFusedNothing) {
  ReluChain c;
  EXPECT_TRUE(saidUnchanged(c.m, "fuse-gelu"));
  // y = x * 0.5 * (1 + erf(x / sqrt2)): one GELU.
  Model m;
  Graph &g = *m.graph;
  Value *x = g.addInput("x", DType::F32, {Dim(4)});
  auto scalar = [&](const char *name, float v) {
    Value *c = g.addInitializer(
        name, std::make_shared<Tensor>(Tensor::fromFloats({}, {v})));
    c->isState = false;
    return c;
  };
  auto op = [&](const char *type, Value *l, Value *r) {
    Value *o = g.createNode(type, {l, r}, 1)->output(0);
    o->setType(DType::F32, {Dim(4)});
    return o;
  };
  Value *e = g.createNode("Erf", {op("Div", x, scalar("s", 1.41421356f))}, 1)
                 ->output(0);
  e->setType(DType::F32, {Dim(4)});
  Value *y = op("Mul", op("Mul", x, scalar("h", 0.5f)),
                op("Add", e, scalar("one", 1.0f)));
  g.addOutput(y);
  EXPECT_FALSE(saidUnchanged(m, "fuse-gelu"));
  EXPECT_EQ(g.numNodes(), 1u);
}

TEST(VerifyEach, FoldConstantsSaysUnchangedOnlyRightAfterAVerifyAndNoFold) {
  // Right after a verify that found every type as inferred, a run that
  // folds nothing changes nothing; it cannot tell otherwise.
  auto verified = [](Model &m) {
    CompileOptions opts;
    PassContext ctx{opts, {}, {}};
    runVerify(m, ctx);
  };
  auto fold = [](Model &m, bool unchangedSinceVerify) {
    CompileOptions opts;
    PassContext ctx{opts, {}, {}};
    ctx.unchangedSinceVerify = unchangedSinceVerify;
    runFoldConstants(m, ctx);
    return ctx.changedNothing;
  };
  ReluChain c;
  verified(c.m);
  EXPECT_FALSE(fold(c.m, false));
  EXPECT_TRUE(fold(c.m, true));
  // Undeclared: inference gives a's type back.
  c.a->dtype = DType::Undefined;
  verified(c.m);
  EXPECT_FALSE(fold(c.m, true));
  EXPECT_EQ(c.a->dtype, DType::F32);
  verified(c.m);
  EXPECT_TRUE(fold(c.m, true));
  // A Constant node becomes an initializer.
  Node *k = c.m.graph->createNode("Constant", {}, 1, "k");
  k->setAttr("value", Attribute::ofTensor(Tensor::fromFloats({}, {1.0f})));
  k->output(0)->setType(DType::F32, {});
  c.m.graph->addOutput(k->output(0));
  verified(c.m);
  EXPECT_FALSE(fold(c.m, true));
}

TEST(VerifyEach, RecomputeAndUserOptimizerSayUnchangedWhenOff) {
  ReluChain c;
  // The default (auto, not asked for) on a model without a training step.
  EXPECT_TRUE(saidUnchanged(c.m, "recompute"));
  EXPECT_TRUE(saidUnchanged(c.m, "user-optimizer")) << "no user optimizer";
  CompileOptions none;
  none.recompute = "none";
  EXPECT_TRUE(saidUnchanged(c.m, "recompute", none));
  CompileOptions opts;
  opts.recompute = "auto";
  opts.recomputeGiven = true;
  EXPECT_THROW(saidUnchanged(c.m, "recompute", opts), Error)
      << "no training step";
}

} // namespace
} // namespace mpc
