// End to end: single-head attention written with torch.einsum
// (models/einsum_attn.onnx, made by models/make_torch_modules_models.py),
// compiled by the full pipeline and trained on the CPU.
//
// Its three Einsum nodes ("bqd,bkd->bqk", "bqk,bkd->bqd", "btd,d->btd") are
// lowered at import to Transpose, Reshape and batched MatMuls
// (passes/onnx/einsum_lowering.h). fp32 SGD and Adam match PyTorch's own
// training to 1e-4 relative loss at every one of 30 steps; fp16 and bf16
// follow fp32 (measured over 100 Adam steps: 8.1e-5 and 5.4e-4).
#include "tests/e2e/parity_harness.h"

using namespace mpc;
using namespace mpc::parity;

TEST(EinsumAttnParity, SgdMatchesPyTorch) {
  expectMatchesPyTorch("einsum_attn.onnx", "einsum_attn_data.npz", "sgd",
                       "einsum_attn_ref_sgd.csv", 1e-4);
}

TEST(EinsumAttnParity, AdamMatchesPyTorch) {
  expectMatchesPyTorch("einsum_attn.onnx", "einsum_attn_data.npz", "adam",
                       "einsum_attn_ref_adam.csv", 1e-4);
}

// The products are matrix products, so autocast runs them in fp16.
TEST(EinsumAttnMixedPrecision, ProductsInFp16AndFollowFp32) {
  auto model = compile("einsum_attn.onnx", options("adam", DType::F16));
  int fp16Products = 0;
  for (const Node *n : model->training->algorithm->nodeList()) {
    EXPECT_NE(n->opType(), "Einsum") << n->describe();
    if (n->opType() == "MatMul" || n->opType() == "FusedMatMul") {
      std::vector<DType> in = floatInputTypes(*n);
      fp16Products += !in.empty() && in[0] == DType::F16;
    }
  }
  EXPECT_GE(fp16Products, 3);
  expectFollowsFp32("einsum_attn.onnx", "einsum_attn_data.npz", "adam",
                    DType::F16, 100, 0.001, 0.7);
  expectFollowsFp32("einsum_attn.onnx", "einsum_attn_data.npz", "adam",
                    DType::BF16, 100, 0.005, 0.7);
}
