// End to end: the residual MLP with Tanh and Sigmoid branches and an MSE loss
// written as mean((y_hat - y) ** 2) (models/resmlp.onnx: Gemm, Tanh,
// Sigmoid, Add, Sub, Pow, ReduceMean), compiled and trained on the CPU.
//
// fp32 SGD and Adam match PyTorch's own training (models/resmlp_ref_*.csv)
// to 1e-4 relative loss at every one of 30 steps. fp16 and bf16 follow the
// fp32 trajectory: within 0.5% (fp16) and 3% (bf16) relative loss at every
// one of 100 steps (measured: about 1e-3 / 8e-3 with Adam, 2e-3 / 1.7e-2
// with SGD). The compiled fp16 step runs the Gemms, Tanh, Sigmoid and the
// residual Adds in fp16, and the loss (Sub, Pow, ReduceMean) in fp32.
#include "tests/e2e/parity_harness.h"

using namespace mpc;
using namespace mpc::parity;

TEST(ResMlpParity, SgdMatchesPyTorch) {
  expectMatchesPyTorch("resmlp.onnx", "resmlp_data.npz", "sgd",
                       "resmlp_ref_sgd.csv", 1e-4);
}

TEST(ResMlpParity, AdamMatchesPyTorch) {
  expectMatchesPyTorch("resmlp.onnx", "resmlp_data.npz", "adam",
                       "resmlp_ref_adam.csv", 1e-4);
}

TEST(ResMlpMixedPrecision, Fp16AndBf16FollowFp32) {
  for (const char *opt : {"adam", "sgd"}) {
    expectFollowsFp32("resmlp.onnx", "resmlp_data.npz", opt, DType::F16, 100,
                      0.005, 0.1);
    expectFollowsFp32("resmlp.onnx", "resmlp_data.npz", opt, DType::BF16, 100,
                      0.03, 0.1);
  }
}

TEST(ResMlpMixedPrecision, CompiledStepShowsFp16RegionsAndFp32Loss) {
  auto model = compile("resmlp.onnx", options("adam", DType::F16));
  const Graph &g = *model->training->algorithm;
  int gemms = 0, loss = 0;
  for (const Node *n : g.nodeList()) {
    // The backward's recomputed copies of forward nodes (by default) are
    // the same ops on the same types: counted once, in the forward.
    if (n->name().find("_recompute") != std::string::npos)
      continue;
    const std::string &op = n->opType();
    std::vector<DType> in = floatInputTypes(*n);
    if (op == "Gemm" || op == "Tanh" || op == "Sigmoid") {
      gemms += op == "Gemm";
      for (DType t : in)
        EXPECT_EQ(t, DType::F16) << n->describe();
    }
    if (op == "Pow" || op == "ReduceMean" || op == "Sub") {
      // The forward's Sub, Pow and ReduceMean form the fp32 loss island
      // (the backward's Sub in Sigmoid' is elementwise and follows).
      bool forward = n->output(0) && n->output(0)->name().rfind("/", 0) == 0;
      loss += forward || op != "Sub";
      if (forward || op != "Sub") {
        for (DType t : in)
          EXPECT_EQ(t, DType::F32) << n->describe();
      }
    }
  }
  EXPECT_EQ(gemms, 4 * 3 - 1); // forward, dX (not for x), dW
  EXPECT_EQ(loss, 3);
}
