// shrink-saved against the step without it: the same losses and parameters
// bit for bit over several steps, fewer bytes saved for the backward, a
// planned peak no larger, and the executor's measured peak still the plan's.
#include "planned_run.h"

#include "passes/memory_report.h"
#include "passes/onnx/onnx_io.h"
#include "runtime/state_dict.h"

#include "onnx/onnx_pb.h"

namespace mpc {
namespace {

struct Case {
  const char *model, *data;
  DType precision;
};

std::string caseName(const testing::TestParamInfo<Case> &info) {
  std::string m = info.param.model;
  return m.substr(0, m.find('.')) + "_" + dtypeName(info.param.precision);
}

/// The default pipeline, with or without shrink-saved.
std::unique_ptr<Model> compile(const Case &c, bool shrink) {
  auto model = loadModel(parity::modelsDir() + c.model);
  std::vector<PipelineEntry> pipeline;
  for (const PipelineEntry &e : defaultPipeline())
    if (shrink || std::string(e.pass->name) != "shrink-saved")
      pipeline.push_back(e);
  // Without recompute, whose default would drop the twins on its own.
  CompileOptions o = parity::options("adam", c.precision);
  o.recompute = "none";
  Statistics stats;
  runPipeline(*model, pipeline, o, PipelineConfig{}, stats);
  EXPECT_EQ(shrink, stats.count("shrink-saved.saved-bytes-dropped") == 1);
  return model;
}

class ShrinkSaved : public testing::TestWithParam<Case> {};

TEST_P(ShrinkSaved, SameBitsFewerSavedBytes) {
  const Case &c = GetParam();
  std::vector<double> losses[2];
  std::vector<std::vector<uint8_t>> params[2];
  size_t saved[2] = {0, 0}, peak[2] = {0, 0};
  for (int on = 0; on < 2; ++on) {
    auto compiled = compile(c, on == 1);
    MemoryPlan plan = planCompiledModel(*compiled);
    saved[on] = savedBytes(plan);
    peak[on] = plan.arenaBytes;
    PlannedRun run = trainAsPlanned(*compiled, plan, c.data, 6);
    losses[on] = std::move(run.losses);
    params[on] = std::move(run.params);
  }
  EXPECT_EQ(losses[0], losses[1]);
  ASSERT_FALSE(params[0].empty());
  EXPECT_TRUE(params[0] == params[1]) << "parameters differ after 6 steps";
  EXPECT_LT(saved[1], saved[0]);
  EXPECT_LE(peak[1], peak[0]);
}

// transformer: the attention softmax's fp16 copy is cast again in the
// backward; cnn and norm_cnn: the fp32 copy of a convolution's output that
// the batch norm reads is widened again from the fp16 output.
INSTANTIATE_TEST_SUITE_P(
    Families, ShrinkSaved,
    testing::Values(
        Case{"transformer.onnx", "transformer_data.npz", DType::F16},
        Case{"transformer.onnx", "transformer_data.npz", DType::BF16},
        Case{"cnn.onnx", "cnn_data.npz", DType::F16},
        Case{"norm_cnn.onnx", "norm_cnn_data.npz", DType::F16}),
    caseName);

} // namespace
} // namespace mpc
