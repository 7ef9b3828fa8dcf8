// End to end: a CNN with torch.nn.GroupNorm and nn.InstanceNorm2d(affine)
// and SiLU (models/norm_cnn.onnx, made by models/make_torch_modules_models.py),
// compiled by the full pipeline and trained on the CPU.
//
// Both norms export as InstanceNormalization, which the importer lowers to
// LayerNormalization over [N, C, L] and a per-channel affine
// (passes/onnx/instance_norm_lowering.h). fp32 SGD and Adam match PyTorch's
// own training to 1e-4 relative loss at every one of 30 steps; fp16 and bf16
// follow the fp32 trajectory, with the normalisations in fp32.
#include "tests/e2e/parity_harness.h"

using namespace mpc;
using namespace mpc::parity;

TEST(NormCnnParity, SgdMatchesPyTorch) {
  expectMatchesPyTorch("norm_cnn.onnx", "norm_cnn_data.npz", "sgd",
                       "norm_cnn_ref_sgd.csv", 1e-4);
}

TEST(NormCnnParity, AdamMatchesPyTorch) {
  expectMatchesPyTorch("norm_cnn.onnx", "norm_cnn_data.npz", "adam",
                       "norm_cnn_ref_adam.csv", 1e-4);
}

// The same model at opset 16, where ONNX has no LayerNormalization: the
// importer writes the normalisation out in ReduceMean, Sub, Mul, Sqrt and
// Div, and the trajectories are the same.
TEST(NormCnnParity, Opset16MatchesPyTorch) {
  expectMatchesPyTorch("norm_cnn_opset16.onnx", "norm_cnn_data.npz", "sgd",
                       "norm_cnn_ref_sgd.csv", 1e-4);
  expectMatchesPyTorch("norm_cnn_opset16.onnx", "norm_cnn_data.npz", "adam",
                       "norm_cnn_ref_adam.csv", 1e-4);
}

// The compiled fp16 step: the convolutions read fp16, the two lowered norms
// (and their gradients) run in fp32, and GroupNorm's constant unit scale
// and zero bias left no Mul or Add of their own.
TEST(NormCnnMixedPrecision, ConvsInFp16NormsInFp32) {
  auto model = compile("norm_cnn.onnx", options("adam", DType::F16));
  int convs = 0, norms = 0, normGrads = 0;
  for (const Node *n : model->training->algorithm->nodeList()) {
    const std::string &op = n->opType();
    EXPECT_NE(op, "InstanceNormalization") << n->describe();
    std::vector<DType> in = floatInputTypes(*n);
    if (op == "Conv") {
      ++convs;
      for (DType t : in)
        EXPECT_EQ(t, DType::F16) << n->describe();
    }
    if (op == "LayerNormalization" || op == "LayerNormalizationGrad") {
      (op == "LayerNormalization" ? norms : normGrads) += 1;
      for (DType t : in)
        EXPECT_EQ(t, DType::F32) << n->describe();
    }
  }
  EXPECT_EQ(convs, 2);
  EXPECT_EQ(norms, 2);
  EXPECT_EQ(normGrads, 2);
}

// Measured: fp16 within 6e-4 of fp32 over the first 18 Adam steps (its 19th
// overflows at the initial loss scale and is skipped, as GradScaler would;
// the trajectories then part), bf16 within 5e-3 over 50.
TEST(NormCnnMixedPrecision, Fp16AndBf16FollowFp32) {
  expectFollowsFp32("norm_cnn.onnx", "norm_cnn_data.npz", "adam", DType::F16,
                    18, 0.002, 0.9);
  expectFollowsFp32("norm_cnn.onnx", "norm_cnn_data.npz", "adam", DType::BF16,
                    50, 0.01, 0.7);
}
