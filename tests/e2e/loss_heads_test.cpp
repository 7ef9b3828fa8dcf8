// End to end: binary cross-entropy heads that torch's dynamo exporter wrote
// (models/make_loss_head_models.py: an ELECTRA-like replaced-token
// discriminator and a multi-label classifier, both BCEWithLogitsLoss,
// exported as (1 - y) z - Log(Sigmoid(z))).
//
// - fp32 training matches PyTorch's fp32 trajectories (30 steps, SGD and
//   Adam) as every exported model does.
// - fp16 training lands within 2e-5 of PyTorch's fp32 loss at each of the
//   first 10 steps: fuse-log-sigmoid computes log sigmoid(z) stably in fp32
//   (an fp16 Sigmoid before the Log was 1.2e-4 off).
// - The compiled step has the fused op as an fp32 island, its gradient one
//   mpc.LogSigmoidGrad, and no Sigmoid or Log left of the loss.
#include "ir/mpc_ops.h"
#include "tests/e2e/parity_harness.h"

using namespace mpc;
using namespace mpc::parity;

namespace {

struct Head {
  const char *model, *data, *name;
};

const Head kHeads[] = {
    {"electra_head_dynamo.onnx", "electra_head_data.npz",
     "electra_head_dynamo"},
    {"multilabel_head_dynamo.onnx", "multilabel_head_data.npz",
     "multilabel_head_dynamo"},
};

} // namespace

TEST(LossHeads, Fp32MatchesPyTorch) {
  for (const Head &h : kHeads)
    for (const char *opt : {"sgd", "adam"})
      expectMatchesPyTorch(h.model, h.data, opt,
                           std::string(h.name) + "_ref_" + opt + ".csv", 1e-4);
}

TEST(LossHeads, Fp16LandsWithin2e5OfPyTorchFp32) {
  for (const Head &h : kHeads)
    for (const char *opt : {"sgd", "adam"}) {
      std::vector<double> ref =
          readReference(std::string(h.name) + "_ref_" + opt + ".csv");
      std::vector<StepRecord> run =
          train(compile(h.model, options(opt, DType::F16)), h.data, 10);
      for (size_t i = 0; i < run.size(); ++i) {
        EXPECT_NEAR(run[i].loss, ref[i], 2e-5)
            << h.model << " " << opt << " fp16 step " << i;
        EXPECT_FALSE(run[i].skipped) << h.model << " step " << i;
      }
    }
}

TEST(LossHeads, StepRunsTheLogSigmoidIslandInFp32) {
  for (const Head &h : kHeads) {
    auto model = compile(h.model, options("adam", DType::F16));
    const Graph &step = *model->training->algorithm;
    int fused = 0, grads = 0;
    for (const auto &n : step.nodes()) {
      EXPECT_FALSE(n->isOp("", "Sigmoid") || n->isOp("", "Log"))
          << h.model << ": " << n->opType() << " '" << n->name() << "'";
      if (n->isOp(kMpcDomain, "LogSigmoid")) {
        ++fused;
        EXPECT_EQ(n->input(0)->dtype, DType::F32) << h.model;
        EXPECT_EQ(n->output(0)->dtype, DType::F32) << h.model;
      }
      if (n->isOp(kMpcDomain, "LogSigmoidGrad")) {
        ++grads;
        EXPECT_EQ(n->output(0)->dtype, DType::F32) << h.model;
      }
    }
    EXPECT_EQ(fused, 1) << h.model;
    EXPECT_EQ(grads, 1) << h.model;
  }
}
