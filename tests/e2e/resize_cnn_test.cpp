// End to end: a small encoder-decoder through F.interpolate's nearest x2,
// bilinear x2 with align_corners and bilinear x0.25, and pixel_shuffle /
// pixel_unshuffle (models/resize_cnn.onnx, made by
// models/make_torch_modules_models.py), compiled by the full pipeline and
// trained on the CPU.
//
// The three Resize nodes are lowered at import to Gathers
// (passes/onnx/resize_lowering.h), whose scatter-add gradient is the
// interpolations' gradient; pixel_shuffle's DepthToSpace to Reshape,
// Transpose, Reshape (passes/onnx/depth_space_lowering.h). fp32 SGD and Adam
// match PyTorch's own training to 1e-4 relative loss at every one of 30 steps;
// fp16 and bf16 follow fp32.
#include "tests/e2e/parity_harness.h"

using namespace mpc;
using namespace mpc::parity;

TEST(ResizeCnnParity, SgdMatchesPyTorch) {
  expectMatchesPyTorch("resize_cnn.onnx", "resize_cnn_data.npz", "sgd",
                       "resize_cnn_ref_sgd.csv", 1e-4);
}

TEST(ResizeCnnParity, AdamMatchesPyTorch) {
  expectMatchesPyTorch("resize_cnn.onnx", "resize_cnn_data.npz", "adam",
                       "resize_cnn_ref_adam.csv", 1e-4);
}

TEST(ResizeCnnParity, NoResizeIsLeft) {
  auto model = compile("resize_cnn.onnx", options("adam", DType::F16));
  int gathers = 0;
  for (const Node *n : model->training->algorithm->nodeList()) {
    EXPECT_NE(n->opType(), "Resize") << n->describe();
    EXPECT_NE(n->opType(), "DepthToSpace") << n->describe();
    gathers += n->opType() == "Gather";
  }
  // nearest: 2 axes x 1 Gather; each bilinear: 2 axes x 2 Gathers.
  EXPECT_EQ(gathers, 2 + 4 + 4);
}

// Measured over 60 Adam steps: fp16 within 1.6e-3 of fp32, bf16 within
// 8.7e-4; the loss falls from 2.32 to 2.04 (fp16 skips an overflowing step
// after that, as GradScaler would, and the runs part).
TEST(ResizeCnnMixedPrecision, Fp16AndBf16FollowFp32) {
  expectFollowsFp32("resize_cnn.onnx", "resize_cnn_data.npz", "adam",
                    DType::F16, 60, 0.005, 0.95);
  expectFollowsFp32("resize_cnn.onnx", "resize_cnn_data.npz", "adam",
                    DType::BF16, 60, 0.01, 0.95);
}
