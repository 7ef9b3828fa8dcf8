// End to end: the bounds of --grad-accum and how a window's micro-batches
// are made (passes/optimizer/grad_accum.h, Trainer::optimizerStep).
//
// K is at most kMaxGradAccum wherever it comes from (the option the passes
// check, a compiled model's mpc.grad_accum); a window asks for each
// micro-batch only when it runs, so a run holds one micro-batch, not K, and
// trains exactly as with the K made up front.
#include "passes/onnx/onnx_io.h"
#include "passes/optimizer/grad_accum.h"
#include "passes/pipeline.h"
#include "runtime/trainer.h"
#include "support/diagnostics.h"
#include "tests/e2e/batch_split.h"

#include <gtest/gtest.h>

using namespace mpc;
using test::bytesOf;
using test::fp32Options;

namespace {

const std::string &kModels = test::modelsDir();

std::unique_ptr<Model> compiledMlp(int64_t k) {
  auto model = loadModel(kModels + "mlp_seed.onnx");
  Statistics stats;
  runPipeline(*model, defaultPipeline(), fp32Options("adam", k),
              PipelineConfig{}, stats);
  return model;
}

TEST(GradAccumWindow, EachMicroBatchIsMadeWhenItsTurnComes) {
  auto backend = createCpuBackend();
  Trainer lazy(compiledMlp(4), *backend), eager(compiledMlp(4), *backend);
  int64_t batch = 0;
  Dataset data =
      Dataset::fromNpz(kModels + "mlp_seed_data.npz", lazy.dataInputs(batch));
  const std::string counter = *lazy.model().meta("mpc.grad_accum_counter");
  for (int64_t s = 0; s < 2; ++s) {
    // Micro-batch j is asked for after j of them have run (the counter
    // state counts them), and only once.
    std::vector<int64_t> asked;
    StepRecord a = lazy.optimizerStep([&](int64_t j) {
      EXPECT_EQ(lazy.state(counter).getAsDouble(0), double(j));
      asked.push_back(j);
      return data.batch(s * 4 + j, batch, false, 0);
    });
    EXPECT_EQ(asked, (std::vector<int64_t>{0, 1, 2, 3}));
    std::vector<Trainer::Batch> micro;
    for (int64_t j = 0; j < 4; ++j)
      micro.push_back(data.batch(s * 4 + j, batch, false, 0));
    StepRecord b = eager.optimizerStep(micro);
    EXPECT_EQ(a.loss, b.loss);
    EXPECT_EQ(a.step, b.step);
  }
  EXPECT_EQ(lazy.stepsDone(), 2);
  for (const std::string &p : splitList(*lazy.model().meta("mpc.params")))
    EXPECT_EQ(bytesOf(lazy.state(p)), bytesOf(eager.state(p))) << p;
}

TEST(GradAccumWindow, KIsBoundedWhereverItComesFrom) {
  CompileOptions o;
  o.gradAccum = kMaxGradAccum;
  EXPECT_NO_THROW(checkGradAccum(o));
  for (int64_t k : {int64_t(0), kMaxGradAccum + 1, int64_t(1000000),
                    std::numeric_limits<int64_t>::max()}) {
    o.gradAccum = k;
    try {
      checkGradAccum(o);
      ADD_FAILURE() << "accepted --grad-accum=" << k;
    } catch (const Error &e) {
      EXPECT_EQ(std::string(e.what()),
                "--grad-accum: must be an integer from 1 to 65536, got " +
                    std::to_string(k));
    }
  }
  // A compiled model edited to ask for more micro-batches than that.
  auto backend = createCpuBackend();
  for (const char *k : {"65537", "1000000", "9223372036854775807",
                        "99999999999999999999", "0", "4x"}) {
    auto model = compiledMlp(2);
    model->setMeta("mpc.grad_accum", k);
    try {
      Trainer t(std::move(model), *backend);
      ADD_FAILURE() << "accepted mpc.grad_accum=" << k;
    } catch (const Error &e) {
      EXPECT_EQ(std::string(e.what()),
                std::string("mpc.grad_accum: expected an integer from 1 to "
                            "65536 (mpc-opt --grad-accum), got '") +
                    k + "'");
    }
  }
}

} // namespace
