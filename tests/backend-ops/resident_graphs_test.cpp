// The CUDA backend's graphs and device memory around the trainer
// (ctest cuda-resident; skipped, with the reason, without a usable GPU).
//
// A capture that fails falls back to running the step eagerly, with the
// same bits as graphs off and nothing replayed; the trainer's and the
// evaluator's plans keep a graph each, so evaluation passes between steps
// capture nothing after their first two batches; the shared scratch
// workspace holds the CNN's cuDNN scratch and the device's measured
// footprint covers the arenas. The decisions under this are tested without
// a GPU in graph_cache_test.cpp and workspace_plan_test.cpp.
#include "runtime/cuda/cuda_backend.h"
#include "runtime/evaluator.h"
#include "tests/e2e/parity_harness.h"

#include <gtest/gtest.h>

using namespace mpc;

namespace {

std::unique_ptr<Backend> cudaWith(CudaBackendOptions options,
                                  std::string &why) {
  return createCudaBackend(why, options);
}

#define REQUIRE_CUDA_WITH(backend, options)                                    \
  std::string whyNoCuda;                                                       \
  std::unique_ptr<Backend> backend = cudaWith(options, whyNoCuda);             \
  if (!backend)                                                                \
  GTEST_SKIP() << "cuda-resident skipped: no usable CUDA GPU: " << whyNoCuda

struct TrainRun {
  std::vector<double> losses;
  std::vector<double> evals;
  std::vector<uint8_t> firstState;
  CudaMemoryStats afterFirstEval, atEnd;
};

/// `steps` steps of `model`, with an evaluation of the training data's
/// first batches after every `evalEvery` steps (0: none).
TrainRun train(Backend &backend, const char *model, const char *data, DType t,
               int steps, int evalEvery) {
  Trainer tr(parity::compile(model, parity::options("adam", t)), backend);
  int64_t batch = 0;
  auto specs = tr.dataInputs(batch);
  Dataset set = Dataset::fromNpz(parity::modelsDir() + data, specs);
  std::unique_ptr<Evaluator> eval;
  if (evalEvery)
    eval = std::make_unique<Evaluator>(tr, backend, batch);
  TrainRun r;
  for (int i = 0; i < steps; ++i) {
    r.losses.push_back(
        tr.step(set.batch(tr.stepsDone(), batch, false, 0)).loss);
    if (evalEvery && (i + 1) % evalEvery == 0) {
      r.evals.push_back(eval->evaluate(tr, set, data, nullptr).loss);
      if (r.evals.size() == 2)
        r.afterFirstEval = cudaMemoryStats(backend);
    }
  }
  r.atEnd = cudaMemoryStats(backend);
  for (const Value *init : tr.model().training->algorithm->initializers())
    if (init->isState) {
      const Tensor &s = tr.state(init->name());
      r.firstState.assign(s.bytes.data(), s.bytes.data() + s.bytes.size());
      break;
    }
  return r;
}

TEST(CudaResidentGraphs, AFailedCaptureRunsTheStepEagerlyWithTheSameBits) {
  CudaBackendOptions failing;
  failing.failCaptures = true;
  REQUIRE_CUDA_WITH(fallback, failing);
  CudaBackendOptions off;
  off.graphs = false;
  std::string why;
  std::unique_ptr<Backend> plain = cudaWith(off, why);
  ASSERT_TRUE(plain) << why;
  TrainRun a =
      train(*fallback, "mlp_seed.onnx", "mlp_seed_data.npz", DType::F16, 8, 0);
  TrainRun b =
      train(*plain, "mlp_seed.onnx", "mlp_seed_data.npz", DType::F16, 8, 0);
  EXPECT_EQ(a.losses, b.losses); // the failed capture's step ran, once
  EXPECT_EQ(a.firstState, b.firstState);
  EXPECT_EQ(a.atEnd.graphCaptures, 0u);
  EXPECT_EQ(a.atEnd.graphLaunches, 0u);
}

TEST(CudaResidentGraphs, EvaluationPassesReplayTheirOwnGraph) {
  REQUIRE_CUDA_WITH(graphs, CudaBackendOptions{});
  CudaBackendOptions off;
  off.graphs = false;
  std::string why;
  std::unique_ptr<Backend> plain = cudaWith(off, why);
  ASSERT_TRUE(plain) << why;
  TrainRun g =
      train(*graphs, "mlp_seed.onnx", "mlp_seed_data.npz", DType::F16, 12, 3);
  TrainRun p =
      train(*plain, "mlp_seed.onnx", "mlp_seed_data.npz", DType::F16, 12, 3);
  EXPECT_EQ(g.losses, p.losses);
  EXPECT_EQ(g.evals, p.evals);
  ASSERT_EQ(g.evals.size(), 4u);
  // The trainer's and the evaluator's graphs are captured by the second
  // pass (the trainer's once more at most, if the evaluator's first batch
  // outgrew the shared workspace); the passes after it capture nothing.
  EXPECT_GE(g.afterFirstEval.graphCaptures, 2u);
  EXPECT_LE(g.afterFirstEval.graphCaptures, 3u);
  EXPECT_EQ(g.atEnd.graphCaptures, g.afterFirstEval.graphCaptures);
  EXPECT_EQ(g.atEnd.deviceAllocations, g.afterFirstEval.deviceAllocations);
}

TEST(CudaResidentGraphs, TheCnnScratchIsSharedAndTheFootprintMeasured) {
  REQUIRE_CUDA_WITH(backend, CudaBackendOptions{});
  TrainRun r = train(*backend, "cnn.onnx", "cnn_data.npz", DType::F16, 4, 0);
  EXPECT_GT(r.atEnd.workspaceBytes, 0u); // cuDNN's workspaces, one buffer
  EXPECT_GE(r.atEnd.accountedBytes,
            r.atEnd.arenaBytes + r.atEnd.workspaceBytes);
  // The device really held at least the arena and the workspace.
  EXPECT_GE(r.atEnd.measuredPeakBytes,
            r.atEnd.arenaBytes + r.atEnd.workspaceBytes);
}

TEST(CudaResidentGraphs, PerNodeScratchStaysReachableAndAgrees) {
  REQUIRE_CUDA_WITH(shared, CudaBackendOptions{});
  ::setenv("MPC_CUDA_SHARED_SCRATCH", "0", 1);
  std::string why;
  std::unique_ptr<Backend> perNode = cudaWith(CudaBackendOptions{}, why);
  ::unsetenv("MPC_CUDA_SHARED_SCRATCH");
  ASSERT_TRUE(perNode) << why;
  TrainRun a = train(*shared, "cnn.onnx", "cnn_data.npz", DType::F16, 4, 0);
  TrainRun b = train(*perNode, "cnn.onnx", "cnn_data.npz", DType::F16, 4, 0);
  EXPECT_EQ(a.losses, b.losses);
  EXPECT_EQ(a.firstState, b.firstState);
  EXPECT_EQ(b.atEnd.workspaceBytes, 0u);
}

} // namespace
