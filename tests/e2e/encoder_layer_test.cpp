// End to end: torch.nn.TransformerEncoderLayer (pre-LN, GELU, two heads)
// under a causal mask, with an embedding, a final LayerNorm and an LM head
// (models/encoder_layer.onnx, made by models/make_torch_modules_models.py),
// compiled by the full pipeline and trained on the CPU.
//
// The export is what users get from the module itself: MultiheadAttention's
// packed in_proj split by unflatten, whose axis arithmetic is a Mod, and a
// causal mask from torch.triu (Trilu). Both fold at compile time. fp32 SGD
// and Adam match PyTorch's own training to 1e-4 relative loss at every one
// of 30 steps; fp16 and bf16 follow the fp32 trajectory as the hand-written
// transformer block's do.
#include "tests/e2e/parity_harness.h"

using namespace mpc;
using namespace mpc::parity;

TEST(EncoderLayerParity, SgdMatchesPyTorch) {
  expectMatchesPyTorch("encoder_layer.onnx", "encoder_layer_data.npz", "sgd",
                       "encoder_layer_ref_sgd.csv", 1e-4);
}

TEST(EncoderLayerParity, AdamMatchesPyTorch) {
  expectMatchesPyTorch("encoder_layer.onnx", "encoder_layer_data.npz", "adam",
                       "encoder_layer_ref_adam.csv", 1e-4);
}

// The mask and the unflatten are compile-time constants: neither Trilu nor
// Mod (nor the Shape arithmetic around them) is left in the step.
TEST(EncoderLayerParity, MaskAndUnflattenFold) {
  auto model = compile("encoder_layer.onnx", options("adam", DType::F16));
  int products = 0;
  for (const Node *n : model->training->algorithm->nodeList()) {
    EXPECT_NE(n->opType(), "Trilu") << n->describe();
    EXPECT_NE(n->opType(), "Mod") << n->describe();
    EXPECT_NE(n->opType(), "Shape") << n->describe();
    products += n->opType() == "MatMul" || n->opType() == "Gemm" ||
                n->opType() == "FusedMatMul";
  }
  EXPECT_GT(products, 0);
}

TEST(EncoderLayerMixedPrecision, Fp16AndBf16FollowFp32) {
  expectFollowsFp32("encoder_layer.onnx", "encoder_layer_data.npz", "sgd",
                    DType::F16, 100, 0.005, 0.5);
  expectFollowsFp32("encoder_layer.onnx", "encoder_layer_data.npz", "sgd",
                    DType::BF16, 100, 0.03, 0.5);
}
