// End to end: models that torch's dynamo exporter wrote
// (models/make_dynamo_models.py; torch.onnx.export(..., dynamo=True,
// optimize=False), the default exporter from torch 2.9), compiled and
// trained on the CPU as PyTorch trains the modules they came from.
//
// - gpt2_tiny_dynamo: its SplitToSequence/SequenceAt become a Split, and
//   fp32 SGD and Adam match PyTorch (gpt2_tiny's trajectories: the same
//   weights and data) to 1e-4 at every one of 30 steps.
// - gpt2_plain_dynamo: the same GPT-2 called as users call it (default
//   attention, its own causal mask and positions; IsNaN, CumSum and
//   GatherND in the export) matches PyTorch as well.
// - cnn_dynamo: the exporter writes its training-mode batch norm in
//   inference form; mpc puts it back in training mode, so the losses match
//   PyTorch and the running statistics after 30 Adam steps do too.
// - frozen_norm_dynamo: only the seven parameters of the exporter's
//   signature train (a rank-0 temperature among them); the buffer, the
//   eval-mode batch norm's statistics and the scalar constant stay
//   constants.
// - rmsnorm_dynamo: torch.nn.RMSNorm exported at opset 23 as ONNX's
//   RMSNormalization, lowered at import; matches PyTorch as above.
// - attention_dynamo: scaled_dot_product_attention (causal, grouped
//   key/value heads) and nn.MultiheadAttention exported at opset 23 as
//   ONNX's Attention, lowered at import; matches PyTorch as above.
// - cnn_dynamo_optimized: the exporter's ONNX optimizer folded the batch
//   norm into the convolution; the model is refused with how to export it.
#include "passes/onnx/onnx_io.h"
#include "runtime/data/npz.h"
#include "support/diagnostics.h"
#include "tests/e2e/parity_harness.h"

#include <map>
#include <set>

using namespace mpc;
using namespace mpc::parity;

namespace {

/// Trains models/<model> with Adam for 30 steps and returns the trainer's
/// state for every array of models/<final>, checking each against it.
void expectFinalStateMatches(const std::string &model, const std::string &data,
                             const std::string &final,
                             const std::set<std::string> &noiseDriven) {
  auto backend = createCpuBackend();
  Trainer trainer(compile(model, options("adam", DType::F32)), *backend);
  int64_t batch = 0;
  Dataset ds = Dataset::fromNpz(modelsDir() + data, trainer.dataInputs(batch));
  for (int i = 0; i < 30; ++i)
    trainer.step(ds.batch(trainer.stepsDone(), batch, false, 0));
  std::vector<std::pair<std::string, Tensor>> ref;
  std::string err;
  ASSERT_TRUE(readNpz(modelsDir() + final, ref, err)) << err;
  ASSERT_FALSE(ref.empty());
  for (const auto &[name, want] : ref) {
    const Tensor &got = trainer.state(name);
    ASSERT_EQ(got.dims, want.dims) << name;
    // As in cnn_test: a bias before a training-mode batch norm has an exact
    // gradient of 0, so Adam turns both frameworks' rounding noise into
    // steps of up to lr; it and the running mean agree to 30 steps * lr.
    double tol = noiseDriven.count(name) ? 30 * 1e-3 : 1e-5;
    for (int64_t i = 0; i < got.numel(); ++i)
      EXPECT_NEAR(got.getAsDouble(i), want.getAsDouble(i), tol)
          << model << " " << name << "[" << i << "]";
  }
}

} // namespace

TEST(DynamoExportParity, SgdAndAdamMatchPyTorch) {
  struct Case {
    const char *model, *data, *reference;
  };
  for (const Case &c :
       {Case{"gpt2_tiny_dynamo.onnx", "gpt2_tiny_data.npz", "gpt2_tiny_ref_"},
        Case{"gpt2_plain_dynamo.onnx", "gpt2_tiny_data.npz",
             "gpt2_plain_dynamo_ref_"},
        Case{"cnn_dynamo.onnx", "cnn_data.npz", "cnn_dynamo_ref_"},
        Case{"frozen_norm_dynamo.onnx", "resmlp_data.npz",
             "frozen_norm_dynamo_ref_"},
        Case{"rmsnorm_dynamo.onnx", "resmlp_data.npz", "rmsnorm_dynamo_ref_"},
        Case{"attention_dynamo.onnx", "gpt2_tiny_data.npz",
             "attention_dynamo_ref_"}})
    for (const char *optimizer : {"sgd", "adam"})
      expectMatchesPyTorch(c.model, c.data, optimizer,
                           std::string(c.reference) + optimizer + ".csv", 1e-4);
}

TEST(DynamoExport, SequenceSplitBecomesSplitAndMixedPrecisionFollowsFp32) {
  auto model = compile("gpt2_tiny_dynamo.onnx", options("adam", DType::F16));
  std::map<std::string, int> ops;
  for (const Node *n : model->training->algorithm->nodeList())
    ++ops[n->opType()];
  EXPECT_EQ(ops["SplitToSequence"] + ops["SequenceAt"] + ops["Identity"], 0);
  EXPECT_EQ(ops["GatherND"], 0) << "the causal mask did not fold";
  EXPECT_GE(ops["Split"], 2);
  expectFollowsFp32("gpt2_tiny_dynamo.onnx", "gpt2_tiny_data.npz", "adam",
                    DType::F16, 30, 0.01, 0.99);
}

TEST(DynamoExport, TrainingModeBatchNormUpdatesRunningStatsAsPyTorch) {
  auto model = compile("cnn_dynamo.onnx", options("adam", DType::F32));
  std::map<std::string, std::string> bindings(
      model->training->updateBinding.begin(),
      model->training->updateBinding.end());
  EXPECT_TRUE(bindings.count("bn.running_mean"));
  EXPECT_TRUE(bindings.count("bn.running_var"));
  EXPECT_EQ(model->meta("mpc.params")->find("running"), std::string::npos);
  expectFinalStateMatches("cnn_dynamo.onnx", "cnn_data.npz",
                          "cnn_dynamo_ref_adam_final.npz",
                          {"conv1.bias", "bn.running_mean"});
}

TEST(DynamoExport, OnlyTheSignaturesParametersTrain) {
  auto model = compile("frozen_norm_dynamo.onnx", options("adam", DType::F32));
  std::vector<std::string> params = splitList(*model->meta("mpc.params"));
  EXPECT_EQ(std::set<std::string>(params.begin(), params.end()),
            (std::set<std::string>{"temperature", "fc1.weight", "fc1.bias",
                                   "norm.weight", "norm.bias", "fc2.weight",
                                   "fc2.bias"}));
  // The buffer and the eval-mode statistics are constants, not state.
  for (const char *constant :
       {"offset", "norm.running_mean", "norm.running_var"}) {
    const Value *v = model->graph->findValue(constant);
    EXPECT_TRUE(!v || !v->isState) << constant;
  }
  expectFinalStateMatches("frozen_norm_dynamo.onnx", "resmlp_data.npz",
                          "frozen_norm_dynamo_ref_adam_final.npz", {});
}

TEST(DynamoExport, OptimizedExportIsRefusedWithHowToExport) {
  try {
    loadModel(modelsDir() + "cnn_dynamo_optimized.onnx");
    FAIL() << "the optimized export was accepted";
  } catch (const Error &e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("initializer 'conv1.weight' has no role in the torch "
                       "exporter's signature"),
              std::string::npos)
        << msg;
    EXPECT_NE(msg.find("optimize=False"), std::string::npos) << msg;
  }
}
