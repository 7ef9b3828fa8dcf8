// The CUDA backend's asynchronous resident steps under the run loop
// (ctest cuda-resident; skipped, with the reason, without a usable GPU):
// a run whose host launches each step before reading the last one's
// results (runtime/step_lookahead.h), its steps replayed as CUDA graphs,
// logs the losses, scales and flags of a synchronous run without graphs,
// writes the same checkpoints and evaluates to the same losses. The rule
// and the loop are tested without a GPU in tests/unit/step_lookahead_test.cpp
// and tests/e2e/step_lookahead_test.cpp (a resident test backend whose
// downloads arrive late).
#include "runtime/cuda/cuda_backend.h"
#include "runtime/training_session.h"
#include "tests/e2e/parity_harness.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

using namespace mpc;

namespace {

std::string readFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

/// The step log without its wall-time column (the 5th).
std::string withoutTimes(const std::string &log) {
  std::istringstream in(log);
  std::string line, out;
  while (std::getline(in, line)) {
    std::stringstream cs(line);
    std::string cell;
    for (int i = 0; std::getline(cs, cell, ','); ++i)
      if (i != 4)
        out += cell + ",";
    out += "\n";
  }
  return out;
}

struct Files {
  std::string log, evalLog, checkpoint;
  CudaMemoryStats stats;
};

Files run(const CudaBackendOptions &options, const char *lookahead,
          const std::string &dir, std::string &why) {
  std::unique_ptr<Backend> cuda = createCudaBackend(why, options);
  if (!cuda)
    return {};
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  ::setenv("MPC_STEP_LOOKAHEAD", lookahead, 1);
  TrainingOptions o;
  o.model = "mlp_seed.onnx";
  o.data = parity::modelsDir() + "mlp_seed_data.npz";
  o.evalData = o.data;
  o.steps = 20;
  o.evalEvery = 7;
  o.saveEvery = 5;
  o.quiet = true;
  o.log = dir + "/log.csv";
  o.evalLog = dir + "/eval.csv";
  o.save = ::testing::TempDir() + "/cuda_lookahead_ckpt.onnx";
  TrainingSession s(
      parity::compile("mlp_seed.onnx", parity::options("adam", DType::F16)), o,
      *cuda);
  TrainingSummary sum = s.run();
  ::unsetenv("MPC_STEP_LOOKAHEAD");
  EXPECT_TRUE(sum.failure.empty()) << sum.failure;
  EXPECT_EQ(sum.steps, 20);
  return {withoutTimes(readFile(o.log)), readFile(o.evalLog), readFile(o.save),
          cudaMemoryStats(*cuda)};
}

TEST(CudaResidentLookahead, GraphsAndLookaheadGiveTheSynchronousRun) {
  std::string why;
  const std::string root = ::testing::TempDir() + "/cuda_lookahead";
  Files ahead = run(CudaBackendOptions{}, "1", root + "/ahead", why);
  if (!why.empty())
    GTEST_SKIP() << "cuda-resident skipped: no usable CUDA GPU: " << why;
  CudaBackendOptions off;
  off.graphs = false;
  Files sync = run(off, "0", root + "/sync", why);
  ASSERT_TRUE(why.empty()) << why;
  EXPECT_EQ(ahead.log, sync.log);
  EXPECT_EQ(ahead.evalLog, sync.evalLog);
  EXPECT_TRUE(ahead.checkpoint == sync.checkpoint);
  EXPECT_GT(ahead.stats.graphLaunches, 0u); // replayed, not eager
  EXPECT_EQ(sync.stats.graphLaunches, 0u);
  // Graphs on, lookahead off: the same again.
  Files graphsOnly = run(CudaBackendOptions{}, "0", root + "/graphs", why);
  EXPECT_EQ(graphsOnly.log, sync.log);
  EXPECT_TRUE(graphsOnly.checkpoint == sync.checkpoint);
}

} // namespace
