// The memory plan's saved_for_backward: the forward's buffers that the
// backward reads, counted on the seed MLP, whose saved values are few
// enough to name.
#include "passes/memory_plan.h"
#include "passes/memory_report.h"
#include "passes/onnx/onnx_io.h"
#include "passes/pipeline.h"
#include "passes/registry.h"

#include <gtest/gtest.h>

namespace mpc {
namespace {

MemoryPlan plannedMlp(DType precision) {
  auto m = loadModel(std::string(MPC_SOURCE_DIR) + "/models/mlp_seed.onnx");
  CompileOptions o;
  o.precision = precision;
  o.optimizer = "adam";
  Statistics stats;
  runPipeline(*m, defaultPipeline(), o, PipelineConfig{}, stats);
  return planCompiledModel(*m);
}

size_t savedOf(const MemoryPlan &p, MemoryClass c) {
  return p.savedForBackward[size_t(c)];
}

// x[64,10] -> fc1 (20) -> Relu -> fc2 (2) -> SoftmaxCrossEntropyLoss. The
// batch x is an input (not saved: it lives through the step); fc1's output
// is not read back (Relu's gradient reads Relu's output).
TEST(SavedForBackward, SeedMlpFp32) {
  MemoryPlan p = plannedMlp(DType::F32);
  // Relu's output [64,20] (fc2's weight gradient and Relu's) and the loss's
  // log-probabilities [64,2], in fp32.
  EXPECT_EQ(savedOf(p, MemoryClass::Activations), 64 * 20 * 4 + 64 * 2 * 4u);
  EXPECT_EQ(savedOf(p, MemoryClass::WorkingCopies), 0u);
  EXPECT_EQ(savedOf(p, MemoryClass::Inputs), 0u);
  EXPECT_EQ(savedOf(p, MemoryClass::Parameters), 0u);
}

TEST(SavedForBackward, SeedMlpFp16) {
  MemoryPlan p = plannedMlp(DType::F16);
  // Relu's output in fp16 and the log-probabilities in fp32. The fp16
  // copies of x (fc1's weight gradient) and of fc2.weight (the gradient
  // flowing into Relu) are not saved: x and the master weight are there all
  // step, and the backward casts them again (shrink-saved).
  EXPECT_EQ(savedOf(p, MemoryClass::Activations), 64 * 20 * 2 + 64 * 2 * 4u);
  EXPECT_EQ(savedOf(p, MemoryClass::WorkingCopies), 0u);
  std::string json = memoryReportJson(p, "fp16", plannedMlp(DType::F32));
  EXPECT_NE(json.find("\"saved_for_backward\": {\"bytes\": 3072, "
                      "\"by_class\": {\"parameters\": 0, "
                      "\"working_copies\": 0,"),
            std::string::npos)
      << json;
}

TEST(SavedForBackward, SeedMlpFp16WithoutShrinkSaved) {
  // The default pipeline less shrink-saved and weight-copies (which makes
  // the weights' copies state), and without the default recompute (which
  // would cast the copies again in the backward too): the two fp16 copies
  // are saved.
  auto m = loadModel(std::string(MPC_SOURCE_DIR) + "/models/mlp_seed.onnx");
  CompileOptions o;
  o.precision = DType::F16;
  o.optimizer = "adam";
  o.recompute = "none";
  std::vector<PipelineEntry> pipeline;
  for (const PipelineEntry &e : defaultPipeline())
    if (std::string(e.pass->name) != "shrink-saved" &&
        std::string(e.pass->name) != "weight-copies")
      pipeline.push_back(e);
  Statistics stats;
  runPipeline(*m, pipeline, o, PipelineConfig{}, stats);
  MemoryPlan p = planCompiledModel(*m);
  EXPECT_EQ(savedOf(p, MemoryClass::Activations),
            64 * 20 * 2 + 64 * 10 * 2 + 64 * 2 * 4u);
  EXPECT_EQ(savedOf(p, MemoryClass::WorkingCopies), 2 * 20 * 2u);
}

} // namespace
} // namespace mpc
