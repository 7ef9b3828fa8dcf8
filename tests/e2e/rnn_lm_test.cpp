// End to end: a next-token model through nn.LSTM (bidirectional) and
// nn.GRU (models/rnn_lm.onnx, made by models/make_torch_modules_models.py),
// compiled by the full pipeline and trained on the CPU.
//
// The LSTM and GRU nodes are unrolled at import over the 16 steps
// (passes/onnx/rnn_lowering.h); their gradient is backpropagation through
// time by autodiff's rules. fp32 SGD and Adam match PyTorch's own training
// (its cuDNN-free CPU kernels) to 1e-4 relative loss at every one of 30
// steps; fp16 and bf16 follow fp32 (measured over 100 Adam steps: 1.7e-5
// and 1.3e-4).
#include "tests/e2e/parity_harness.h"

using namespace mpc;
using namespace mpc::parity;

TEST(RnnLmParity, SgdMatchesPyTorch) {
  expectMatchesPyTorch("rnn_lm.onnx", "rnn_lm_data.npz", "sgd",
                       "rnn_lm_ref_sgd.csv", 1e-4);
}

TEST(RnnLmParity, AdamMatchesPyTorch) {
  expectMatchesPyTorch("rnn_lm.onnx", "rnn_lm_data.npz", "adam",
                       "rnn_lm_ref_adam.csv", 1e-4);
}

TEST(RnnLmMixedPrecision, Fp16AndBf16FollowFp32) {
  auto model = compile("rnn_lm.onnx", options("adam", DType::F16));
  for (const Node *n : model->training->algorithm->nodeList()) {
    EXPECT_NE(n->opType(), "LSTM") << n->describe();
    EXPECT_NE(n->opType(), "GRU") << n->describe();
  }
  expectFollowsFp32("rnn_lm.onnx", "rnn_lm_data.npz", "adam", DType::F16, 100,
                    0.001, 0.9);
  expectFollowsFp32("rnn_lm.onnx", "rnn_lm_data.npz", "adam", DType::BF16, 100,
                    0.005, 0.9);
}
