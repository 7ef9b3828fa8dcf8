// End to end: overflow provenance (runtime/overflow_provenance.h) on the
// seed's MLP in fp16. A huge initial loss scale overflows the fp16 gradients:
// the first inf is in a backward node. A huge finite input overflows the
// forward Cast of x to fp16. Re-running the step for the diagnosis changes
// nothing: the state after the step is bit-identical to a run without it.
#include "passes/onnx/onnx_io.h"
#include "passes/pipeline.h"
#include "runtime/trainer.h"
#include "support/diagnostics.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace mpc;

namespace {

const std::string kModels = std::string(MPC_SOURCE_DIR) + "/models/";

std::unique_ptr<Model> compileSeedFp16(double initScale) {
  CompileOptions o;
  o.precision = DType::F16;
  o.optimizer = "adam";
  o.lr = 1e-2;
  if (initScale > 0)
    o.initScale = initScale;
  auto model = loadModel(kModels + "mlp_seed.onnx");
  Statistics stats;
  runPipeline(*model, defaultPipeline(), o, PipelineConfig{}, stats);
  return model;
}

std::vector<std::pair<std::string, Tensor>> firstBatch(const Trainer &t) {
  int64_t batch = 0;
  auto specs = t.dataInputs(batch);
  Dataset data = Dataset::fromNpz(kModels + "mlp_seed_data.npz", specs);
  return data.batch(0, batch, false, 0);
}

} // namespace

TEST(OverflowProvenance, HugeScaleOverflowsFirstInABackwardNode) {
  auto backend = createCpuBackend();
  Trainer t(compileSeedFp16(std::ldexp(1.0, 40)), *backend);
  t.debugOverflow = true;
  StepRecord r = t.step(firstBatch(t));
  ASSERT_TRUE(r.skipped);
  ASSERT_TRUE(r.overflow.found);
  EXPECT_TRUE(r.overflow.backward) << r.overflow.line(r.step);
  EXPECT_TRUE(r.overflow.op == "Cast" || r.overflow.op == "Gemm")
      << r.overflow.line(r.step);
  EXPECT_GT(r.overflow.infCount, 0) << r.overflow.line(r.step);
  std::string line = r.overflow.line(r.step);
  EXPECT_EQ(line.rfind("step 1 overflowed first at node '" + r.overflow.node +
                           "' (" + r.overflow.op + ", backward): max |x| = ",
                       0),
            0u)
      << line;
}

TEST(OverflowProvenance, DiagnosisLeavesTheStepUnchanged) {
  auto backend = createCpuBackend();
  Trainer plain(compileSeedFp16(std::ldexp(1.0, 40)), *backend);
  Trainer debug(compileSeedFp16(std::ldexp(1.0, 40)), *backend);
  debug.debugOverflow = true;
  for (int i = 0; i < 3; ++i) {
    StepRecord a = plain.step(firstBatch(plain));
    StepRecord b = debug.step(firstBatch(debug));
    EXPECT_EQ(a.skipped, b.skipped);
    EXPECT_EQ(a.loss, b.loss);
    EXPECT_FALSE(a.overflow.found); // not asked for
    EXPECT_EQ(b.overflow.found, b.skipped);
  }
  for (const Value *init : plain.model().training->algorithm->initializers())
    if (init->isState) {
      EXPECT_EQ(plain.state(init->name()).bytes,
                debug.state(init->name()).bytes)
          << init->name();
    }
}

TEST(OverflowProvenance, HugeInputOverflowsTheForwardCast) {
  auto backend = createCpuBackend();
  Trainer t(compileSeedFp16(0), *backend);
  t.debugOverflow = true;
  auto b = firstBatch(t);
  b[0].second.data<float>()[0] = 1e6f; // finite, but > fp16's 65504
  StepRecord r = t.step(b);
  ASSERT_TRUE(r.skipped);
  ASSERT_TRUE(r.overflow.found);
  EXPECT_FALSE(r.overflow.backward) << r.overflow.line(r.step);
  EXPECT_EQ(r.overflow.op, "Cast") << r.overflow.line(r.step);
  EXPECT_EQ(r.overflow.infCount, 1) << r.overflow.line(r.step);
  EXPECT_EQ(r.overflow.nanCount, 0) << r.overflow.line(r.step);
  // A step that does not overflow reports nothing.
  StepRecord next = t.step(firstBatch(t));
  EXPECT_FALSE(next.skipped);
  EXPECT_FALSE(next.overflow.found);
}
