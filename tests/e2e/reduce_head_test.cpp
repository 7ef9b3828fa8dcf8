// End to end: normalised embeddings against normalised prototypes with a
// contrastive loss (models/reduce_head.onnx, made by
// models/make_torch_modules_models.py), compiled by the full pipeline and
// trained on the CPU.
//
// Its export has the reductions the importer lowers
// (passes/onnx/reduce_lowering.h): F.normalize's ReduceL2, torch.logsumexp's
// ReduceLogSumExp, amin's ReduceMin and vector_norm(ord=1)'s ReduceL1. fp32
// SGD and Adam match PyTorch's own training to 1e-4 relative loss at every
// one of 30 steps; fp16 and bf16 follow fp32.
#include "tests/e2e/parity_harness.h"

using namespace mpc;
using namespace mpc::parity;

TEST(ReduceHeadParity, SgdMatchesPyTorch) {
  expectMatchesPyTorch("reduce_head.onnx", "reduce_head_data.npz", "sgd",
                       "reduce_head_ref_sgd.csv", 1e-4);
}

TEST(ReduceHeadParity, AdamMatchesPyTorch) {
  expectMatchesPyTorch("reduce_head.onnx", "reduce_head_data.npz", "adam",
                       "reduce_head_ref_adam.csv", 1e-4);
}

// Measured over 50 Adam steps: fp16 within 2.8e-4 of fp32, bf16 within
// 1.5e-3; the loss falls from 3.49 to 2.30.
TEST(ReduceHeadMixedPrecision, Fp16AndBf16FollowFp32) {
  expectFollowsFp32("reduce_head.onnx", "reduce_head_data.npz", "adam",
                    DType::F16, 50, 0.002, 0.8);
  expectFollowsFp32("reduce_head.onnx", "reduce_head_data.npz", "adam",
                    DType::BF16, 50, 0.01, 0.8);
}
