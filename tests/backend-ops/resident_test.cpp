// The device-resident CUDA step end to end (ctest cuda-resident; skipped,
// with the reason, where there is no usable GPU).
//
// Trains the e2e models (the CNN on cuDNN too) 20 steps on the CUDA backend
// with the step resident on the device and captured as a CUDA graph, against
// the CPU backend's trajectory (relative loss difference: fp16 1e-2, fp32 1e-4;
// skipped steps equal); the same 20 steps with graphs off give the same bits
// (losses and every state tensor); after the first step nothing is allocated on
// the device (cudaMemoryStats), one graph is captured and replayed every step
// after. A label out of range is found on the device and reported naming
// the loss node. The executor logic under all this is tested without a GPU
// in tests/e2e/resident_executor_test.cpp.
#include "runtime/cuda/cuda_backend.h"
#include "tests/e2e/parity_harness.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>

using namespace mpc;

namespace {

std::unique_ptr<Backend> cudaBackend(bool graphs, std::string &why) {
  CudaBackendOptions options;
  options.graphs = graphs;
  return createCudaBackend(why, options);
}

#define REQUIRE_CUDA(backend, graphs)                                          \
  std::string whyNoCuda;                                                       \
  std::unique_ptr<Backend> backend = cudaBackend(graphs, whyNoCuda);           \
  if (!backend)                                                                \
  GTEST_SKIP() << "cuda-resident skipped: no usable CUDA GPU: " << whyNoCuda

struct Case {
  const char *model, *data, *optimizer;
  DType precision;
};

struct TrainRun {
  std::vector<StepRecord> steps;
  std::map<std::string, std::vector<uint8_t>> state;
  CudaMemoryStats afterFirst, atEnd;
};

TrainRun train(Backend &backend, const Case &c, int64_t steps) {
  Trainer t(parity::compile(c.model, parity::options(c.optimizer, c.precision)),
            backend);
  int64_t batch = 0;
  auto specs = t.dataInputs(batch);
  Dataset data = Dataset::fromNpz(parity::modelsDir() + c.data, specs);
  TrainRun r;
  for (int64_t i = 0; i < steps; ++i) {
    r.steps.push_back(t.step(data.batch(t.stepsDone(), batch, false, 0)));
    if (i == 0)
      r.afterFirst = cudaMemoryStats(backend);
  }
  r.atEnd = cudaMemoryStats(backend);
  for (const Value *init : t.model().training->algorithm->initializers())
    if (init->isState) {
      const Tensor &s = t.state(init->name());
      r.state[init->name()].assign(s.bytes.data(),
                                   s.bytes.data() + s.bytes.size());
    }
  return r;
}

class CudaResident : public ::testing::TestWithParam<Case> {};

TEST_P(CudaResident, TrajectoryMatchesCpuAndGraphsChangeNoBit) {
  const Case &c = GetParam();
  REQUIRE_CUDA(graphs, true);
  std::string why;
  std::unique_ptr<Backend> plain = cudaBackend(false, why);
  ASSERT_TRUE(plain) << why;
  auto cpu = createCpuBackend();
  const int64_t steps = 20;
  TrainRun ref = train(*cpu, c, steps);
  TrainRun g = train(*graphs, c, steps);
  TrainRun p = train(*plain, c, steps);
  double tol = c.precision == DType::F32 ? 1e-4 : 1e-2;
  for (int64_t i = 0; i < steps; ++i) {
    const StepRecord &a = ref.steps[size_t(i)], &b = g.steps[size_t(i)];
    EXPECT_LE(std::fabs(a.loss - b.loss),
              tol * std::max(std::fabs(a.loss), 1e-6))
        << "step " << i + 1 << ": cpu " << a.loss << ", cuda " << b.loss;
    EXPECT_EQ(a.skipped, b.skipped) << "step " << i + 1;
    // Graphs on and off: the same kernels on the same data, the same bits.
    EXPECT_EQ(b.loss, p.steps[size_t(i)].loss) << "step " << i + 1;
    EXPECT_EQ(b.lossScale, p.steps[size_t(i)].lossScale) << "step " << i + 1;
  }
  EXPECT_EQ(g.state, p.state);
  // Everything is allocated by the first step; one capture (step 2), then
  // a launch every step from the second on.
  EXPECT_EQ(g.atEnd.deviceAllocations, g.afterFirst.deviceAllocations);
  EXPECT_EQ(p.atEnd.deviceAllocations, p.afterFirst.deviceAllocations);
  EXPECT_EQ(g.atEnd.graphCaptures, 1u);
  EXPECT_EQ(g.atEnd.graphLaunches, size_t(steps - 1));
  EXPECT_EQ(p.atEnd.graphCaptures, 0u);
}

INSTANTIATE_TEST_SUITE_P(
    Models, CudaResident,
    ::testing::Values(
        Case{"mlp_seed.onnx", "mlp_seed_data.npz", "adam", DType::F16},
        Case{"mlp_seed.onnx", "mlp_seed_data.npz", "sgd", DType::F32},
        Case{"transformer.onnx", "transformer_data.npz", "adam", DType::F16},
        Case{"resmlp.onnx", "resmlp_data.npz", "sgd", DType::F16},
        Case{"cnn.onnx", "cnn_data.npz", "adam", DType::F16}),
    [](const ::testing::TestParamInfo<Case> &info) {
      std::string n = info.param.model;
      return n.substr(0, n.find('.')) + "_" + info.param.optimizer + "_" +
             (info.param.precision == DType::F16 ? "fp16" : "fp32");
    });

TEST(CudaResidentErrors, ALabelOutOfRangeNamesTheLossNode) {
  REQUIRE_CUDA(backend, true);
  Trainer t(
      parity::compile("mlp_seed.onnx", parity::options("adam", DType::F16)),
      *backend);
  int64_t batch = 0;
  auto specs = t.dataInputs(batch);
  Dataset data =
      Dataset::fromNpz(parity::modelsDir() + "mlp_seed_data.npz", specs);
  Trainer::Batch b = data.batch(0, batch, false, 0);
  for (auto &kv : b)
    if (kv.second.dtype == DType::I64)
      kv.second.data<int64_t>()[0] = 1 << 20; // no such class
  try {
    t.step(b);
    FAIL() << "a label out of range went unnoticed";
  } catch (const Error &e) {
    std::string what = e.what();
    EXPECT_NE(what.find("SoftmaxCrossEntropyLoss"), std::string::npos) << what;
    EXPECT_NE(what.find("out of range"), std::string::npos) << what;
  }
}

} // namespace
