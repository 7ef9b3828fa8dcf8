// End to end: the pre-LN transformer block with its LM head
// (models/transformer.onnx, and transformer_gelu20.onnx where GELU is the
// opset-20 Gelu op), compiled by the full pipeline and trained on the CPU.
//
// fp32 SGD and Adam match PyTorch's own training (models/transformer_ref_*
// .csv) to 1e-4 relative loss at every one of 30 steps. fp16 and bf16 follow
// the fp32 trajectory: within 0.5% (fp16) and 3% (bf16) relative loss at
// every one of 100 steps (measured: about 1e-4 / 8e-4 with Adam, 9e-4 /
// 7e-3 with SGD). The compiled fp16 step runs every matrix product in fp16
// and layer norm, softmax and the loss in fp32.
#include "tests/e2e/parity_harness.h"

using namespace mpc;
using namespace mpc::parity;

TEST(TransformerParity, SgdMatchesPyTorch) {
  expectMatchesPyTorch("transformer.onnx", "transformer_data.npz", "sgd",
                       "transformer_ref_sgd.csv", 1e-4);
}

TEST(TransformerParity, AdamMatchesPyTorch) {
  expectMatchesPyTorch("transformer.onnx", "transformer_data.npz", "adam",
                       "transformer_ref_adam.csv", 1e-4);
}

// Opset 20 exports GELU as one Gelu node: the same model, the same
// trajectories.
TEST(TransformerParity, Opset20GeluMatchesPyTorch) {
  expectMatchesPyTorch("transformer_gelu20.onnx", "transformer_data.npz", "sgd",
                       "transformer_ref_sgd.csv", 1e-4);
  expectMatchesPyTorch("transformer_gelu20.onnx", "transformer_data.npz",
                       "adam", "transformer_ref_adam.csv", 1e-4);
}

// The export with a symbolic batch dim: --batch=4 makes the exporter's
// Shape -> Gather -> Unsqueeze -> Concat -> Reshape chains static, and
// fold-constants folds them; the trajectory is the static export's.
TEST(TransformerParity, DynamicBatchFromBatchOptionMatchesPyTorch) {
  expectMatchesPyTorch("transformer_dynbatch.onnx", "transformer_data.npz",
                       "adam", "transformer_ref_adam.csv", 1e-4, 4);
  CompileOptions o = options("sgd", DType::F32);
  o.batch = 4;
  auto model = compile("transformer_dynbatch.onnx", o);
  for (const Node *n : model->training->algorithm->nodeList())
    EXPECT_NE(n->opType(), "Shape") << n->describe() << " was not folded";
}

TEST(TransformerMixedPrecision, Fp16AndBf16FollowFp32) {
  for (const char *opt : {"adam", "sgd"}) {
    expectFollowsFp32("transformer.onnx", "transformer_data.npz", opt,
                      DType::F16, 100, 0.005, 0.5);
    expectFollowsFp32("transformer.onnx", "transformer_data.npz", opt,
                      DType::BF16, 100, 0.03, 0.5);
  }
  expectFollowsFp32("transformer_gelu20.onnx", "transformer_data.npz", "adam",
                    DType::F16, 100, 0.005, 0.5);
}

// What the policy says, on the real export: MatMuls (and the weight-gradient
// Gemms) read fp16, LayerNormalization and its gradient, Softmax and the
// loss read fp32, and no data-movement node (the exporter's head-split
// Reshape/Transpose) sits between a Cast and the Cast that undoes it.
TEST(TransformerMixedPrecision, CompiledStepShowsFp16RegionsAndFp32Islands) {
  auto model = compile("transformer.onnx", options("adam", DType::F16));
  const Graph &g = *model->training->algorithm;
  int matmuls = 0, layerNorms = 0, layerNormGrads = 0;
  for (const Node *n : g.nodeList()) {
    const std::string &op = n->opType();
    std::vector<DType> in = floatInputTypes(*n);
    // fold-transpose makes MatMuls that read a Transpose mpc.FusedMatMul.
    if (op == "MatMul" || op == "Gemm" || op == "FusedMatMul") {
      ++matmuls;
      for (DType t : in)
        EXPECT_EQ(t, DType::F16) << n->describe();
    }
    // (fold-widening-casts: the layer norms write their fp16 Y for the
    // next product themselves, mpc.LayerNormalizationTo, and their
    // gradients read the fp16 dY as stored: every other operand is fp32.)
    if (op == "LayerNormalization" || op == "LayerNormalizationTo" ||
        op == "LayerNormalizationGrad" || op == "Softmax" ||
        op == "SoftmaxGrad" || op == "SoftmaxCrossEntropyLoss") {
      layerNorms += op == "LayerNormalization" || op == "LayerNormalizationTo";
      layerNormGrads += op == "LayerNormalizationGrad";
      for (size_t i = op == "LayerNormalizationGrad" ? 1 : 0; i < in.size();
           ++i)
        EXPECT_EQ(in[i], DType::F32) << n->describe();
      if (op == "LayerNormalizationGrad") {
        EXPECT_EQ(n->input(0)->dtype, DType::F16) << n->describe();
        EXPECT_EQ(n->output(0)->dtype, DType::F32) << n->describe();
      }
    }
    if ((op == "Reshape" || op == "Transpose") && n->input(0) &&
        n->input(0)->producer() &&
        n->input(0)->producer()->opType() == "Cast") {
      // Cast -> data movement -> Cast back is ping-pong.
      DType before = n->input(0)->producer()->input(0)->dtype;
      for (const Use &u : n->output(0)->uses())
        EXPECT_FALSE(u.user->opType() == "Cast" &&
                     u.user->output(0)->dtype == before)
            << "cast ping-pong through " << n->describe();
    }
  }
  EXPECT_GE(matmuls, 9 + 2 * 6); // forward MatMuls and their two gradients
  EXPECT_EQ(layerNorms, 3);
  EXPECT_EQ(layerNormGrads, 3);
}
