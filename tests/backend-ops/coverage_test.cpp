// Which graphs the CUDA backend takes, decided without a GPU.
//
// supports() reads a table (runtime/cuda/cuda_ops.cpp) and the graph's
// dtypes, so these run on any machine: every node of the compiled seed MLP
// (what tools/gpu-check.sh trains on the GPU) must be supported, and a node
// the device code does not take must be refused with a reason naming it.
#include "op_cases.h"
#include "passes/ir/builder.h"
#include "passes/onnx/onnx_io.h"
#include "passes/pipeline.h"
#include "runtime/cuda/cuda_backend.h"

#include <gtest/gtest.h>

using namespace mpc;

namespace {

std::unique_ptr<Model> compiledSeed(DType precision,
                                    const std::string &optimizer) {
  auto model = loadModel(backend_ops::sourceDir() + "/models/mlp_seed.onnx");
  CompileOptions o;
  o.precision = precision;
  o.optimizer = optimizer;
  o.momentum = optimizer == "sgd" ? 0.9 : 0.0;
  Statistics stats;
  runPipeline(*model, defaultPipeline(), o, PipelineConfig{}, stats);
  return model;
}

TEST(CudaCoverage, EveryNodeOfTheCompiledSeedMlpIsSupported) {
  for (DType precision : {DType::F16, DType::BF16, DType::F32})
    for (const char *optimizer : {"adam", "adamw", "sgd"}) {
      auto model = compiledSeed(precision, optimizer);
      ASSERT_TRUE(model->training);
      size_t nodes = 0;
      for (const auto &n : model->training->algorithm->nodes()) {
        std::string why;
        EXPECT_TRUE(cudaBackendSupports(*n, why))
            << dtypeName(precision) << " " << optimizer << ": " << why;
        ++nodes;
      }
      EXPECT_GT(nodes, 10u);
    }
}

TEST(CudaCoverage, RefusesWhatTheDeviceCodeDoesNotTake) {
  Graph g;
  Builder b(g);
  Value *x = g.addInput("x", DType::F32, toDims({4, 8}));
  Value *i = g.addInput("i", DType::I64, toDims({4}));
  std::string why;
  EXPECT_FALSE(cudaBackendSupports(*b.op("Softmax", {x})->producer(), why));
  EXPECT_NE(why.find("no kernel for op Softmax"), std::string::npos) << why;
  EXPECT_FALSE(cudaBackendSupports(*b.op("Add", {i, i})->producer(), why));
  EXPECT_NE(why.find("int64"), std::string::npos) << why;
  Value *c = b.cast(i, DType::F32);
  EXPECT_FALSE(cudaBackendSupports(*c->producer(), why));
  EXPECT_NE(why.find("int64 to fp32"), std::string::npos) << why;
  EXPECT_TRUE(cudaBackendSupports(*b.op("Relu", {x})->producer(), why)) << why;
  EXPECT_TRUE(cudaBackendSupports(*b.op("Shape", {i})->producer(), why)) << why;
}

TEST(CudaCoverage, NoBackendSaysWhy) {
  std::string why;
  std::unique_ptr<Backend> b = createCudaBackend(why);
  if (b)
    EXPECT_EQ(b->name(), "cuda");
  else
    EXPECT_FALSE(why.empty());
}

} // namespace
