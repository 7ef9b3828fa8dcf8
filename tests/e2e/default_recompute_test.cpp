// The default compile recomputes cheap saved values (softmax islands from
// their fp16 input, elementwise chains) in the backward; against the same
// step with --recompute=none it must train to the same bits: the same losses
// and parameters over several steps, fewer bytes saved for the backward, a
// planned peak no larger, the recomputation within its share of the step's
// FLOPs, and the executor's measured peak still the plan's.
#include "planned_run.h"

#include "passes/flop_count.h"
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

class DefaultRecompute : public testing::TestWithParam<Case> {};

TEST_P(DefaultRecompute, SameBitsAsNoneNoMoreSaved) {
  const Case &c = GetParam();
  std::vector<double> losses[2];
  std::vector<std::vector<uint8_t>> params[2];
  size_t saved[2] = {0, 0}, peak[2] = {0, 0};
  StepFlops flops;
  for (int byDefault = 0; byDefault < 2; ++byDefault) {
    CompileOptions o = parity::options("adam", c.precision);
    if (!byDefault) {
      o.recompute = "none";
      o.recomputeGiven = true;
    }
    auto compiled = parity::compile(c.model, o);
    if (byDefault)
      flops = countStepFlops(*compiled);
    MemoryPlan plan = planCompiledModel(*compiled);
    saved[byDefault] = savedBytes(plan);
    peak[byDefault] = plan.arenaBytes;
    PlannedRun run = trainAsPlanned(*compiled, plan, c.data, 5);
    losses[byDefault] = std::move(run.losses);
    params[byDefault] = std::move(run.params);
  }
  EXPECT_EQ(losses[0], losses[1]);
  ASSERT_FALSE(params[0].empty());
  EXPECT_TRUE(params[0] == params[1]) << "parameters differ after 5 steps";
  // Every case recomputes something (the test would pass vacuously
  // otherwise), and saves fewer bytes for it.
  EXPECT_GT(flops.recompute, 0);
  EXPECT_LE(double(flops.recompute), 0.03 * double(flops.total()));
  EXPECT_LT(saved[1], saved[0]);
  EXPECT_LE(peak[1], peak[0]);
}

// Attention softmax islands (transformer, gpt2, llama, clip), GELU and
// other activation chains (act_mlp, mae), the ReLU after an fp32 batch norm
// (norm_cnn), tanh/sigmoid recurrences (rnn_lm).
INSTANTIATE_TEST_SUITE_P(
    Zoo, DefaultRecompute,
    testing::Values(
        Case{"transformer.onnx", "transformer_data.npz", DType::F16},
        Case{"transformer.onnx", "transformer_data.npz", DType::BF16},
        Case{"gpt2_tiny.onnx", "gpt2_tiny_data.npz", DType::F16},
        Case{"llama_tiny.onnx", "llama_tiny_data.npz", DType::F16},
        Case{"clip_text_tiny.onnx", "clip_text_tiny_data.npz", DType::F16},
        Case{"act_mlp.onnx", "act_mlp_data.npz", DType::F16},
        Case{"mae_tiny.onnx", "mae_tiny_data.npz", DType::F16},
        Case{"norm_cnn.onnx", "norm_cnn_data.npz", DType::F16},
        Case{"rnn_lm.onnx", "rnn_lm_data.npz", DType::F32}),
    caseName);

} // namespace
} // namespace mpc
