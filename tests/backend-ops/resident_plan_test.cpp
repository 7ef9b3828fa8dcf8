// The device-resident plan of the compiled models under the CUDA backend's
// rules, decided without a GPU (ctest backend-ops-cpu).
//
// A device-resident step is refused before it starts when a value has no
// static shape or a node must read on the host a value computed from data
// (runtime/cuda/cuda_ops.h, CudaOpEntry::hostInputs). Here the executor
// plans and runs each model gpu-check trains, in fp16 and fp32, with and
// without --max-grad-norm, on the CPU test backend of
// tests/e2e/resident_test_backend.h answering with the CUDA table's rule
// (cuda::supportsResident): every step must be accepted (the
// axes, ratios and exponents those nodes read are constants the executor
// mirrors), every value gets static dims inside the arena, and the CUDA rule
// must refuse a Dropout whose ratio is data, naming the node.
#include "op_cases.h"
#include "passes/onnx/onnx_io.h"
#include "runtime/cuda/cuda_ops.h"
#include "support/diagnostics.h"
#include "tests/e2e/parity_harness.h"
#include "tests/e2e/resident_test_backend.h"

#include <gtest/gtest.h>

using namespace mpc;
using mpc::testing::ResidentCpuBackend;

namespace {

void useCudaRule(ResidentCpuBackend &dev) {
  dev.residentCheck = [](const Node &n, const std::vector<bool> &known,
                         std::string &why) {
    return cuda::supportsResident(n, known, why);
  };
}

TEST(ResidentPlanCuda, TheCompiledModelsRunResidentUnderTheCudaRules) {
  struct Case {
    const char *model, *data;
  };
  for (const Case &c : {Case{"mlp_seed.onnx", "mlp_seed_data.npz"},
                        Case{"transformer.onnx", "transformer_data.npz"},
                        Case{"transformer_gelu20.onnx", "transformer_data.npz"},
                        Case{"resmlp.onnx", "resmlp_data.npz"},
                        Case{"cnn.onnx", "cnn_data.npz"}})
    for (DType precision : {DType::F16, DType::F32})
      for (double clip : {0.0, 1.0}) { // gpu-check also runs --max-grad-norm
        SCOPED_TRACE(std::string(c.model) + " " + dtypeName(precision) +
                     (clip ? " --max-grad-norm=1" : ""));
        ResidentCpuBackend dev;
        useCudaRule(dev);
        CompileOptions o = parity::options("adam", precision);
        o.maxGradNorm = clip;
        Trainer t(parity::compile(c.model, o), dev);
        int64_t batch = 0;
        auto specs = t.dataInputs(batch);
        Dataset data = Dataset::fromNpz(parity::modelsDir() + c.data, specs);
        try {
          for (int64_t i = 0; i < 3; ++i)
            t.step(data.batch(t.stepsDone(), batch, false, 0));
        } catch (const Error &e) {
          ADD_FAILURE() << e.what();
          continue;
        }
        const Executor &e = t.executor();
        ASSERT_TRUE(e.resident());
        ASSERT_NE(e.plan(), nullptr);
        // Every value of the step has static dims and a place in the arena.
        EXPECT_TRUE(e.plan()->unplanned.empty());
        for (const auto &kv : e.plan()->placement)
          EXPECT_LE(kv.second.offset + kv.second.bytes, e.arenaBytes())
              << kv.first->name();
        EXPECT_EQ(dev.counts.arenas, 1u);
      }
}

TEST(ResidentPlanCuda, ADropoutRatioFromDataIsRefusedNamingTheNode) {
  const char *text = R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[4,8] x, float ratio) => (float[4,8] y) {
  y = Dropout(x, ratio)
})";
  auto m = parseModelText(text, "dropout.onnxtext");
  ResidentCpuBackend dev;
  useCudaRule(dev);
  Executor e(*m->graph, dev);
  e.setInput("x", Tensor::fromFloats({4, 8}, std::vector<float>(32, 1)));
  e.setInput("ratio", Tensor::fromFloats({}, {0.25f}));
  try {
    e.run();
    FAIL() << "the cuda rule accepted a ratio computed from data";
  } catch (const Error &err) {
    std::string what = err.what();
    EXPECT_NE(what.find("Dropout"), std::string::npos) << what;
    EXPECT_NE(what.find("'ratio'"), std::string::npos) << what;
    EXPECT_NE(what.find("--cuda-resident=off"), std::string::npos) << what;
  }
  EXPECT_EQ(dev.counts.nodeRuns, 0u);
}

} // namespace
