// nodeFlops: the FLOP rule the memory report and --memory-budget count with.
#include "passes/flop_count.h"

#include "ir/mpc_ops.h"

#include <gtest/gtest.h>

#include <limits>

namespace mpc {
namespace {

TEST(FlopCount, ProductsAreTwiceTheirMultiplyAddsElementwiseOnePerElement) {
  Graph g("g");
  Value *a = g.addInput("a", DType::F32, {Dim(2), Dim(8), Dim(16)});
  Value *b = g.addInput("b", DType::F32, {Dim(16), Dim(4)});
  Node *mm = g.createNode("MatMul", {a, b}, 1);
  mm->output(0)->setType(DType::F32, {Dim(2), Dim(8), Dim(4)});
  EXPECT_EQ(nodeFlops(*mm), 2 * 2 * 8 * 4 * 16);

  // A transposed operand contracts its second to last dim.
  Value *at = g.addInput("at", DType::F32, {Dim(16), Dim(8)});
  Node *fm = g.createNode("FusedMatMul", {at, b}, 1, "", kMpcDomain);
  fm->setAttr("transA", Attribute::ofInt(1));
  fm->output(0)->setType(DType::F32, {Dim(8), Dim(4)});
  EXPECT_EQ(nodeFlops(*fm), 2 * 8 * 4 * 16);

  // Gemm with a bias adds one per output element.
  Value *x = g.addInput("x", DType::F32, {Dim(8), Dim(16)});
  Value *c = g.addInput("c", DType::F32, {Dim(4)});
  Node *gemm = g.createNode("Gemm", {x, b, c}, 1);
  gemm->output(0)->setType(DType::F32, {Dim(8), Dim(4)});
  EXPECT_EQ(nodeFlops(*gemm), 2 * 8 * 4 * 16 + 8 * 4);

  // Conv: each output element is a dot product over Cin/group x kernel.
  Value *img = g.addInput("img", DType::F32, {Dim(1), Dim(3), Dim(8), Dim(8)});
  Value *w = g.addInput("w", DType::F32, {Dim(6), Dim(3), Dim(3), Dim(3)});
  Node *conv = g.createNode("Conv", {img, w}, 1);
  conv->output(0)->setType(DType::F32, {Dim(1), Dim(6), Dim(6), Dim(6)});
  EXPECT_EQ(nodeFlops(*conv), 2 * (6 * 6 * 6) * (3 * 3 * 3));

  // Elementwise: one per element; a reduction: one per input element.
  Node *relu = g.createNode("Relu", {x}, 1);
  relu->output(0)->setType(DType::F32, {Dim(8), Dim(16)});
  EXPECT_EQ(nodeFlops(*relu), 8 * 16);
  Node *sum = g.createNode("ReduceSum", {x}, 1);
  sum->output(0)->setType(DType::F32, {Dim(1), Dim(16)});
  EXPECT_EQ(nodeFlops(*sum), 8 * 16);

  // Moving bytes is no arithmetic; unknown shapes count nothing.
  Node *tr = g.createNode("Transpose", {x}, 1);
  tr->output(0)->setType(DType::F32, {Dim(16), Dim(8)});
  EXPECT_EQ(nodeFlops(*tr), 0);
  Value *d = g.addInput("d", DType::F32, {Dim::symbolic("N"), Dim(16)});
  Node *mmd = g.createNode("MatMul", {d, b}, 1);
  mmd->output(0)->setType(DType::F32, {Dim::symbolic("N"), Dim(4)});
  EXPECT_EQ(nodeFlops(*mmd), 0);
}

// Dims whose products pass 2^63 (a hostile model the planner refuses later)
// saturate instead of overflowing: UBSan failed absurd-models.test on this.
TEST(FlopCount, CountsPastInt64SaturateInsteadOfOverflowing) {
  const int64_t most = std::numeric_limits<int64_t>::max();
  Graph g("g");
  Value *x = g.addInput("x", DType::F32, {Dim(int64_t(1) << 62), Dim(10)});
  Value *w = g.addInput("w", DType::F32, {Dim(10), Dim(10)});
  Node *mm = g.createNode("MatMul", {x, w}, 1);
  mm->output(0)->setType(DType::F32, {Dim(int64_t(1) << 62), Dim(10)});
  EXPECT_EQ(nodeFlops(*mm), most);
  Node *relu = g.createNode("Relu", {x}, 1);
  relu->output(0)->setType(DType::F32, {Dim(int64_t(1) << 62), Dim(10)});
  EXPECT_EQ(nodeFlops(*relu), most);
  StepFlops f;
  f.forward = most;
  f.backward = most;
  EXPECT_EQ(f.total(), most);
  EXPECT_EQ(saturatingAdd(most, 1), most);
  EXPECT_EQ(saturatingAdd(2, 3), 5);
}

} // namespace
} // namespace mpc
