// End to end, on the CPU: the executor's device-resident mode
// (runtime/executor.h) with a test backend whose "device" memory is host
// memory, so the CPU kernels run on it.
//
// The test backend behaves like the CUDA backend where the executor can
// tell: it allocates the arena, counts every copy and synchronisation, and
// records the second step of a plan and replays the recording afterwards
// (a CUDA graph), setting only the step's seed. Training the e2e models
// through it must give the CPU backend's trajectory bit for bit, with one
// arena per plan, only the batch uploaded and only the fetched scalars
// downloaded per step, and one synchronisation per step. The refusals
// (a data-dependent shape, an op that must read device data on the host)
// name the node.
#include "passes/onnx/onnx_io.h"
#include "runtime/executor.h"
#include "support/diagnostics.h"
#include "tests/e2e/parity_harness.h"
#include "tests/e2e/resident_test_backend.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>

using namespace mpc;
using mpc::testing::ResidentCpuBackend;

namespace {

std::vector<uint8_t> bytesOf(const Tensor &t) {
  return std::vector<uint8_t>(t.bytes.data(), t.bytes.data() + t.bytes.size());
}

struct Case {
  const char *model, *data, *optimizer;
  DType precision;
  int64_t gradAccum = 1;  ///< micro-batches per optimizer step
  double maxGradNorm = 0; ///< --max-grad-norm (0: no clipping)
};

class ResidentTrajectory : public ::testing::TestWithParam<Case> {};

TEST_P(ResidentTrajectory, MatchesTheCpuBackendBitForBit) {
  const Case &c = GetParam();
  CompileOptions o = parity::options(c.optimizer, c.precision);
  o.gradAccum = c.gradAccum;
  o.maxGradNorm = c.maxGradNorm;
  auto cpu = createCpuBackend();
  ResidentCpuBackend dev;
  Trainer ref(parity::compile(c.model, o), *cpu);
  Trainer res(parity::compile(c.model, o), dev);
  ASSERT_TRUE(res.executor().resident());
  ASSERT_FALSE(ref.executor().resident());
  int64_t batch = 0;
  auto specs = ref.dataInputs(batch);
  Dataset data = Dataset::fromNpz(parity::modelsDir() + c.data, specs);
  const int64_t steps = 6;
  ResidentCpuBackend::Counts before;
  for (int64_t i = 0; i < steps; ++i) {
    auto b = data.batch(i, batch, false, 0);
    if (i == 1)
      before = dev.counts;
    StepRecord a = ref.step(b), r = res.step(b);
    EXPECT_EQ(a.loss, r.loss) << "step " << i + 1;
    EXPECT_TRUE(std::isfinite(r.loss) && r.loss > 0) << r.loss;
    EXPECT_EQ(a.lossScale, r.lossScale) << "step " << i + 1;
    EXPECT_EQ(a.skipped, r.skipped) << "step " << i + 1;
    // The clip's norm is fetched with the loss, the CPU's to the bit.
    ASSERT_EQ(r.gradNorm.has_value(), c.maxGradNorm > 0) << "step " << i + 1;
    if (r.gradNorm) {
      EXPECT_EQ(*a.gradNorm, *r.gradNorm) << "step " << i + 1;
      EXPECT_TRUE(std::isfinite(*r.gradNorm) && *r.gradNorm > 0) << *r.gradNorm;
    }
  }
  // One arena; per step after the first: the batch up, one sync.
  EXPECT_EQ(dev.counts.arenas, 1u);
  EXPECT_EQ(res.executor().arenaAllocations(), 1u);
  size_t later = size_t(steps - 1);
  EXPECT_EQ(dev.counts.uploads - before.uploads, later * specs.size());
  EXPECT_EQ(dev.counts.syncs - before.syncs, later);
  EXPECT_EQ(dev.counts.replays, size_t(steps - 2));
  // Fetched: the loss (and found_inf, scale with loss scaling; the
  // gradient norm with clipping).
  EXPECT_LE(dev.counts.downloads - before.downloads,
            later * (c.maxGradNorm > 0 ? 5 : 4));
  // The state, downloaded on demand, is the CPU backend's.
  for (const Value *init : ref.model().training->algorithm->initializers()) {
    if (init->isState) {
      EXPECT_EQ(bytesOf(ref.state(init->name())),
                bytesOf(res.state(init->name())))
          << init->name();
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Models, ResidentTrajectory,
    ::testing::Values(
        Case{"mlp_seed.onnx", "mlp_seed_data.npz", "adam", DType::F16},
        Case{"mlp_seed.onnx", "mlp_seed_data.npz", "sgd", DType::F32},
        Case{"cnn.onnx", "cnn_data.npz", "adam", DType::F16},
        Case{"transformer.onnx", "transformer_data.npz", "adam", DType::F16},
        Case{"resmlp.onnx", "resmlp_data.npz", "sgd", DType::F16},
        // The accumulation buffers and counter are state the device
        // rewrites; the counter is fetched after each run.
        Case{"mlp_seed.onnx", "mlp_seed_data.npz", "adam", DType::F16, 3},
        // --max-grad-norm: the norm is fetched after each run too.
        Case{"mlp_seed.onnx", "mlp_seed_data.npz", "adam", DType::F16, 1, 0.5},
        Case{"mlp_seed.onnx", "mlp_seed_data.npz", "sgd", DType::F32, 3, 0.5}),
    [](const ::testing::TestParamInfo<Case> &info) {
      std::string n = info.param.model;
      n = n.substr(0, n.find('.')) + "_" + info.param.optimizer + "_" +
          (info.param.precision == DType::F16 ? "fp16" : "fp32");
      if (info.param.gradAccum > 1)
        n += "_accum" + std::to_string(info.param.gradAccum);
      if (info.param.maxGradNorm > 0)
        n += "_clip";
      return n;
    });

TEST(ResidentExecutor, ReplansOnNewShapesAndKeepsTheState) {
  const char *text = R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[N,4] x) => (float[N,4] y, float[4] s)
   <float[4] w = {1.0, 2.0, 3.0, 4.0}, float[4] b = {0.5, 0.5, 0.5, 0.5},
    int64[1] axes = {0}> {
  t = Mul(x, w)
  y = Add(t, b)
  s = ReduceSum<keepdims = 0>(y, axes)
})";
  auto m = parseModelText(text, "replan.onnxtext");
  ResidentCpuBackend dev;
  auto cpu = createCpuBackend();
  ExecutorOptions opts;
  opts.fetchAfterRun = {"s"};
  Executor e(*m->graph, dev, opts), h(*m->graph, *cpu);
  for (int64_t n : {2, 2, 2, 3, 3, 3, 3}) {
    std::vector<float> x(size_t(n) * 4);
    for (size_t i = 0; i < x.size(); ++i)
      x[i] = float(i) * 0.25f - 1.0f;
    e.setInput("x", Tensor::fromFloats({n, 4}, x));
    h.setInput("x", Tensor::fromFloats({n, 4}, x));
    e.run();
    h.run();
    EXPECT_EQ(e.output("s").toFloats(), h.output("s").toFloats());
    EXPECT_EQ(e.output("y").toFloats(), h.output("y").toFloats());
    EXPECT_EQ(e.plannedDims("y"), (std::vector<int64_t>{n, 4}));
  }
  EXPECT_EQ(e.arenaAllocations(), 2u); // one per input shape
  EXPECT_EQ(dev.counts.replays, 1u + 2u);
  // The constant axes are mirrored: ReduceSum may read them on the host.
  dev.hostInputs["ReduceSum"] = 2u;
  Executor again(*m->graph, dev, opts);
  again.setInput("x", Tensor::fromFloats({1, 4}, {1, 1, 1, 1}));
  try {
    again.run();
  } catch (const Error &err) {
    ADD_FAILURE() << err.what();
  }
}

TEST(ResidentExecutor, RefusesANodeThatReadsDeviceDataOnTheHost) {
  const char *text = R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[5,3] table, int64[4] idx) => (float[4,3] y) {
  y = Gather<axis = 0>(table, idx)
})";
  auto m = parseModelText(text, "gather.onnxtext");
  ResidentCpuBackend dev;
  dev.hostInputs["Gather"] = 2u; // as if its indices were read on the host
  Executor e(*m->graph, dev);
  e.setInput("table", Tensor::fromFloats({5, 3}, std::vector<float>(15, 1)));
  Tensor idx(DType::I64, {4});
  e.setInput("idx", idx);
  try {
    e.run();
    FAIL() << "ran a node that reads device data on the host";
  } catch (const Error &err) {
    std::string what = err.what();
    EXPECT_NE(what.find("Gather"), std::string::npos) << what;
    EXPECT_NE(what.find("device-resident"), std::string::npos) << what;
    EXPECT_NE(what.find("input 1 is data"), std::string::npos) << what;
  }
  EXPECT_EQ(dev.counts.nodeRuns, 0u); // refused before any kernel ran
}

TEST(ResidentExecutor, RefusesADataDependentShapeNamingTheNode) {
  const char *text = R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[2,6] x, int64[2] shape) => (float[?,?] y) {
  y = Reshape(x, shape)
})";
  auto m = parseModelText(text, "reshape.onnxtext");
  ResidentCpuBackend dev;
  Executor e(*m->graph, dev);
  e.setInput("x", Tensor::fromFloats({2, 6}, std::vector<float>(12, 1)));
  Tensor shape(DType::I64, {2});
  shape.data<int64_t>()[0] = 3;
  shape.data<int64_t>()[1] = 4;
  e.setInput("shape", shape);
  try {
    e.run();
    FAIL() << "planned a data-dependent shape";
  } catch (const Error &err) {
    std::string what = err.what();
    EXPECT_NE(what.find("Reshape"), std::string::npos) << what;
    EXPECT_NE(what.find("not known before the step"), std::string::npos)
        << what;
  }
  EXPECT_EQ(dev.counts.nodeRuns, 0u);
}

} // namespace
