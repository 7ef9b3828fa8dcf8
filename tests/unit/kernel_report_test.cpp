// reportKernels (passes/kernel_report.h): launches and bytes per kernel
// class from a graph's static shapes, as mpc-opt --report=kernels prints.
#include "passes/kernel_report.h"

#include "ir/mpc_ops.h"

#include <gtest/gtest.h>

namespace mpc {
namespace {

const KernelClassCount *find(const KernelReport &r, const std::string &cls) {
  for (const KernelClassCount &c : r.classes)
    if (c.name == cls)
      return &c;
  return nullptr;
}

TEST(KernelReport, LaunchesAndBytesPerClassFromShapes) {
  Model m;
  Graph &g = *m.graph;
  // fp16 [4x8] x [8x2] -> fp16 [4x2], cast to fp32, viewed as [8], Relu.
  Value *a = g.addInput("a", DType::F16, {Dim(4), Dim(8)});
  Value *b = g.addInput("b", DType::F16, {Dim(8), Dim(2)});
  Node *mm = g.createNode("MatMul", {a, b}, 1);
  mm->output(0)->setType(DType::F16, {Dim(4), Dim(2)});
  Node *cast = g.createNode("Cast", {mm->output(0)}, 1);
  cast->setAttr("to", Attribute::ofInt(1));
  cast->output(0)->setType(DType::F32, {Dim(4), Dim(2)});
  Value *shape = g.addInput("shape", DType::I64, {Dim(1)});
  Node *view = g.createNode("Reshape", {cast->output(0), shape}, 1);
  view->output(0)->setType(DType::F32, {Dim(8)});
  Node *relu = g.createNode("Relu", {view->output(0)}, 1);
  relu->output(0)->setType(DType::F32, {Dim(8)});
  Node *adam = g.createNode("Adam", {relu->output(0)}, 1, "", kMpcDomain);
  adam->output(0)->setType(DType::F32, {Dim(8)});
  g.addOutput(adam->output(0));

  KernelReport r = reportKernels(m);
  const KernelClassCount *mmC = find(r, "matmul"), *castC = find(r, "cast");
  ASSERT_TRUE(mmC && castC);
  EXPECT_EQ(mmC->launches, 1);
  EXPECT_EQ(mmC->bytesRead, (4 * 8 + 8 * 2) * 2);
  EXPECT_EQ(mmC->bytesWritten, 4 * 2 * 2);
  EXPECT_EQ(castC->launches, 1);
  EXPECT_EQ(castC->bytesRead, 8 * 2);
  EXPECT_EQ(castC->bytesWritten, 8 * 4);
  ASSERT_TRUE(find(r, "activation"));
  EXPECT_EQ(find(r, "activation")->bytesRead, 8 * 4);
  ASSERT_TRUE(find(r, "optimizer"));
  // The Reshape is a view: no launch, no bytes, no class.
  EXPECT_EQ(r.total.launches, 4);
  EXPECT_EQ(r.total.bytesRead, 96 + 16 + 32 + 32);
  EXPECT_EQ(r.total.bytesWritten, 16 + 32 + 32 + 32);
  EXPECT_EQ(r.total.unsized, 0);
  // Most bytes first.
  EXPECT_EQ(r.classes.front().name, "matmul");
  std::string table = r.table();
  EXPECT_NE(table.find("matmul"), std::string::npos) << table;
  EXPECT_NE(table.find("total"), std::string::npos) << table;
  EXPECT_NE(r.json().find("\"class\": \"cast\", \"launches\": 1, "
                          "\"bytes_read\": 16, \"bytes_written\": 32"),
            std::string::npos)
      << r.json();
}

TEST(KernelReport, SymbolicShapesAreCountedAsUnsized) {
  Model m;
  Graph &g = *m.graph;
  Value *x = g.addInput("x", DType::F32, {Dim::symbolic("N"), Dim(4)});
  Node *relu = g.createNode("Relu", {x}, 1);
  relu->output(0)->setType(DType::F32, {Dim::symbolic("N"), Dim(4)});
  g.addOutput(relu->output(0));
  KernelReport r = reportKernels(m);
  EXPECT_EQ(r.total.launches, 1);
  EXPECT_EQ(r.total.unsized, 1);
  EXPECT_EQ(r.total.bytesRead, 0);
  EXPECT_NE(r.table().find("not concrete"), std::string::npos);
}

TEST(KernelReport, ClassesOfTheStepsOps) {
  Graph g("g");
  Value *x = g.addInput("x", DType::F32, {Dim(2)});
  auto cls = [&](const std::string &op, const std::string &domain) {
    return kernelClass(*g.createNode(op, {x}, 1, "", domain));
  };
  EXPECT_EQ(cls("Cast", ""), "cast");
  EXPECT_EQ(cls("Gemm", ""), "matmul");
  EXPECT_EQ(cls("FusedMatMul", kMpcDomain), "matmul");
  EXPECT_EQ(cls("LayerNormalization", ""), "normalization");
  EXPECT_EQ(cls("LayerNormalizationGrad", kMpcDomain), "normalization");
  EXPECT_EQ(cls("DivSoftmaxTo", kMpcDomain), "softmax");
  EXPECT_EQ(cls("GeluGrad", kMpcDomain), "activation");
  EXPECT_EQ(cls("SoftmaxCrossEntropyLoss", ""), "loss");
  EXPECT_EQ(cls("UnscaleGradients", kMpcDomain), "optimizer");
  EXPECT_EQ(cls("SumToShapeAs", kMpcDomain), "reduction");
  EXPECT_EQ(cls("Transpose", ""), "copy");
  EXPECT_EQ(cls("Add", ""), "elementwise");
  EXPECT_EQ(cls("Reshape", ""), "");
}

} // namespace
} // namespace mpc
