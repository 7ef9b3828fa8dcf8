// backend-ops: every op the CUDA backend runs, in every dtype, against the
// CPU reference backend.
//
// Each case (op_cases.cpp) runs one node on both backends with the same
// random inputs. The CUDA backend fills every device output buffer with
// NaN bytes before its kernel runs, so an element a kernel does not write
// fails the comparison. Elementwise IEEE math, casts and the training-step
// ops must give the same bytes; matrix products, transcendental functions
// and the loss compare by normalised error ||gpu - cpu|| / ||cpu|| with a
// tolerance per dtype, and a NaN on one side only always fails. Without a
// GPU every test is skipped with the reason (ctest shows "skipped").
#include "op_cases.h"

#include "kernels/cpu/kernel_table.h"
#include "passes/onnx/onnx_io.h"
#include "passes/pipeline.h"
#include "runtime/cuda/cuda_backend.h"
#include "runtime/trainer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <set>

using namespace mpc;
using namespace mpc::backend_ops;

namespace {

/// The shared CUDA backend (poisoning outputs), or nullptr with the reason.
Backend *cudaBackend(std::string &why) {
  static std::string reason;
  static std::unique_ptr<Backend> backend = [] {
    CudaBackendOptions options;
    options.poisonOutputs = true;
    return createCudaBackend(reason, options);
  }();
  why = reason;
  return backend.get();
}

#define REQUIRE_CUDA(backend)                                                  \
  std::string whyNoCuda;                                                       \
  Backend *backend = cudaBackend(whyNoCuda);                                   \
  if (!backend)                                                                \
  GTEST_SKIP() << "backend-ops skipped: no usable CUDA GPU: " << whyNoCuda

double tolerance(DType t) {
  switch (t) {
  case DType::F16:
    return 2e-3;
  case DType::BF16:
    return 1.6e-2;
  default:
    return 2e-5;
  }
}

struct Instance {
  const OpCase *c;
  DType dtype;
};

std::vector<Instance> instances() {
  std::vector<Instance> v;
  for (const OpCase &c : opCases())
    for (DType t : c.dtypes)
      v.push_back({&c, t});
  return v;
}

/// Runs the case's node on `backend` and returns its outputs.
std::vector<Tensor> runOn(Backend &backend, const Node &node,
                          const std::vector<const Tensor *> &inputs) {
  std::vector<Tensor> outs(node.numOutputs());
  KernelContext ctx{node, inputs, {}, 0, {}};
  for (size_t i = 0; i < outs.size(); ++i)
    ctx.outputs.push_back(&outs[i]);
  backend.run(ctx);
  return outs;
}

void compareOutputs(const Tensor &gpu, const Tensor &cpu, Compare compare,
                    DType caseType, const std::string &what) {
  ASSERT_EQ(gpu.dtype, cpu.dtype) << what;
  ASSERT_EQ(gpu.dims, cpu.dims) << what;
  ASSERT_EQ(gpu.byteSize(), cpu.byteSize()) << what;
  if (compare == Compare::Exact || !isFloating(cpu.dtype)) {
    size_t size = dtypeSize(cpu.dtype);
    for (int64_t k = 0; k < cpu.numel(); ++k)
      if (std::memcmp(gpu.bytes.data() + k * size, cpu.bytes.data() + k * size,
                      size) != 0) {
        ADD_FAILURE() << what << ": element " << k << " differs: cuda "
                      << gpu.getAsDouble(k) << ", cpu " << cpu.getAsDouble(k);
        return;
      }
    return;
  }
  double diff = 0, ref = 0;
  for (int64_t k = 0; k < cpu.numel(); ++k) {
    double g = gpu.getAsDouble(k), c = cpu.getAsDouble(k);
    if (std::isnan(g) != std::isnan(c)) {
      ADD_FAILURE() << what << ": element " << k << " is " << g << " on cuda, "
                    << c << " on cpu";
      return;
    }
    if (std::isnan(c)) // NaN on both sides (checked above); NaN != NaN
      continue;
    if (std::isinf(c)) {
      EXPECT_EQ(g, c) << what << " element " << k;
      continue;
    }
    diff += (g - c) * (g - c);
    ref += c * c;
  }
  double err = std::sqrt(diff) / std::max(std::sqrt(ref), 1e-30);
  if (ref == 0)
    err = std::sqrt(diff);
  EXPECT_LE(err, tolerance(caseType)) << what << ": normalised error " << err
                                      << " over " << cpu.numel() << " elements";
}

class CudaVsCpu : public ::testing::TestWithParam<Instance> {};

TEST_P(CudaVsCpu, Matches) {
  REQUIRE_CUDA(cuda);
  const OpCase &c = *GetParam().c;
  DType t = GetParam().dtype;
  std::mt19937 rng(std::hash<std::string>()(c.name) ^ unsigned(t));
  Inputs inputs = c.make(t, rng);
  Graph g;
  std::vector<const Tensor *> ptrs;
  Node *node = buildCaseNode(g, c, inputs, ptrs);
  std::string why;
  ASSERT_TRUE(cuda->supports(*node, why)) << why;
  std::vector<Tensor> want;
  runCpuNode(*node, ptrs, want);
  std::vector<Tensor> got = runOn(*cuda, *node, ptrs);
  for (size_t i = 0; i < want.size(); ++i)
    compareOutputs(got[i], want[i], c.compare, t,
                   c.name + " output " + std::to_string(i));
}

std::string instanceName(const ::testing::TestParamInfo<Instance> &info) {
  return info.param.c->name + "_" + dtypeName(info.param.dtype);
}

INSTANTIATE_TEST_SUITE_P(BackendOps, CudaVsCpu,
                         ::testing::ValuesIn(instances()), instanceName);

// Every op the CUDA backend runs with device code has a case here.
TEST(BackendOpsCoverage, EveryDeviceOpHasACase) {
  REQUIRE_CUDA(cuda);
  std::set<std::string> covered;
  for (const OpCase &c : opCases())
    covered.insert(caseOpName(c));
  for (const std::string &op : cudaDeviceOps())
    EXPECT_TRUE(covered.count(op)) << op << " has no backend-ops case";
}

// In steady state the staging allocates no device memory: the second run
// of a node is served entirely from the cache.
TEST(BackendOpsDevice, SecondRunAllocatesNothing) {
  REQUIRE_CUDA(cuda);
  std::mt19937 rng(7);
  Tensor a = randomTensor(rng, DType::F16, {64, 96});
  Tensor b = randomTensor(rng, DType::F16, {96, 32});
  Graph g;
  Node *node = g.createNode("MatMul",
                            {g.addInput("a", DType::F16, toDims(a.dims)),
                             g.addInput("b", DType::F16, toDims(b.dims))},
                            1, "matmul");
  runOn(*cuda, *node, {&a, &b});
  CudaMemoryStats before = cudaMemoryStats(*cuda);
  runOn(*cuda, *node, {&a, &b});
  CudaMemoryStats after = cudaMemoryStats(*cuda);
  EXPECT_EQ(after.deviceAllocations, before.deviceAllocations);
  EXPECT_GT(after.cacheHits, before.cacheHits);
}

/// Trains `model` (compiled for `precision`, Adam lr 1e-3, clipping at
/// `maxGradNorm` when > 0) 20 steps on the CPU and on the GPU from the
/// same data: the losses (and with clipping the gradient norms) agree to
/// `lossTol` relative, the skipped steps are the same, and the final values of
/// parameter `param` agree to `paramTol`.
void trainsLikeTheCpu(Backend &cuda, const std::string &model, DType precision,
                      double lr, double maxGradNorm, const std::string &param,
                      double lossTol, double paramTol) {
  auto compiled = [&] {
    auto m = loadModel(sourceDir() + "/models/" + model + ".onnx");
    CompileOptions o;
    o.precision = precision;
    o.optimizer = "adam";
    o.lr = lr;
    o.maxGradNorm = maxGradNorm;
    Statistics stats;
    runPipeline(*m, defaultPipeline(), o, PipelineConfig{}, stats);
    return m;
  };
  std::string what = model + " " + dtypeName(precision);
  std::unique_ptr<Backend> cpu = createCpuBackend();
  Trainer onCpu(compiled(), *cpu), onGpu(compiled(), cuda);
  int64_t batch = 0;
  std::vector<DataInputSpec> specs = onCpu.dataInputs(batch);
  // The Gelu variant reads the transformer's data.
  std::string dataName = model == "transformer_gelu20" ? "transformer" : model;
  Dataset data = Dataset::fromNpz(
      sourceDir() + "/models/" + dataName + "_data.npz", specs);
  for (int step = 0; step < 20; ++step) {
    auto b = data.batch(step, batch, false, 0);
    StepRecord c = onCpu.step(b), d = onGpu.step(b);
    EXPECT_EQ(c.skipped, d.skipped) << what << " step " << step;
    EXPECT_NEAR(d.loss, c.loss, lossTol * std::fabs(c.loss))
        << what << " step " << step;
    // The clip's norm, fetched from the device with the loss.
    ASSERT_EQ(d.gradNorm.has_value(), maxGradNorm > 0) << what;
    ASSERT_EQ(c.gradNorm.has_value(), maxGradNorm > 0) << what;
    if (c.gradNorm && !c.skipped)
      EXPECT_NEAR(*d.gradNorm, *c.gradNorm, lossTol * *c.gradNorm)
          << what << " grad norm, step " << step;
  }
  const Tensor &wc = onCpu.state(param), &wg = onGpu.state(param);
  ASSERT_EQ(wc.numel(), wg.numel()) << what;
  for (int64_t k = 0; k < wc.numel(); ++k)
    EXPECT_NEAR(wg.getAsDouble(k), wc.getAsDouble(k), paramTol)
        << what << " " << param << "[" << k << "]";
}

// The seed MLP compiled for fp16 trains on the GPU along the CPU's
// trajectory: the losses of 20 Adam steps agree to 1e-3 relative, and so
// do the final weights.
TEST(BackendOpsModel, MlpSeedTrainsLikeTheCpu) {
  REQUIRE_CUDA(cuda);
  for (DType precision : {DType::F16, DType::F32})
    trainsLikeTheCpu(*cuda, "mlp_seed", precision, 1e-2, 0, "fc1.weight", 1e-3,
                     1e-3);
}

// The transformer (erf GELU; the opset-20 Gelu variant; with gradient
// clipping) and the residual MLP: every node on the device, 20 Adam steps
// along the CPU's losses. Matrix products, softmax, layer-norm and norm sums
// are added in another order on the GPU, so the losses agree to 1e-4 (fp32)
// and 1e-2 (fp16) relative; the weights to 1e-3 and 2e-2 absolute, since
// Adam turns a last-bit difference in a near-zero gradient into up to lr
// per step.
TEST(BackendOpsModel, TransformerTrainsLikeTheCpu) {
  REQUIRE_CUDA(cuda);
  for (DType precision : {DType::F16, DType::F32}) {
    double loss = precision == DType::F32 ? 1e-4 : 1e-2;
    double param = precision == DType::F32 ? 1e-3 : 2e-2;
    trainsLikeTheCpu(*cuda, "transformer", precision, 1e-3, 0, "fc1.weight",
                     loss, param);
    trainsLikeTheCpu(*cuda, "transformer_gelu20", precision, 1e-3, 0,
                     "fc1.weight", loss, param);
    trainsLikeTheCpu(*cuda, "transformer", precision, 1e-3, 1.0, "tok.weight",
                     loss, param);
  }
}

TEST(BackendOpsModel, ResMlpTrainsLikeTheCpu) {
  REQUIRE_CUDA(cuda);
  for (DType precision : {DType::F16, DType::F32}) {
    double loss = precision == DType::F32 ? 1e-4 : 1e-2;
    double param = precision == DType::F32 ? 1e-3 : 2e-2;
    trainsLikeTheCpu(*cuda, "resmlp", precision, 1e-3, 0, "fc1.weight", loss,
                     param);
  }
}

// The CNN (Conv, BatchNormalization in training mode, MaxPool and their
// gradients on cuDNN and the pooling kernels): 20 Adam steps along the
// CPU's losses, with the transformer's tolerances (convolution sums and the
// batch statistics are added in another order on the GPU); the weights of
// the first convolution and the batch norm's running variance (updated on
// the device by the CPU's momentum rule) agree too.
TEST(BackendOpsModel, CnnTrainsLikeTheCpu) {
  REQUIRE_CUDA(cuda);
  for (DType precision : {DType::F16, DType::F32}) {
    double loss = precision == DType::F32 ? 1e-4 : 1e-2;
    double param = precision == DType::F32 ? 1e-3 : 2e-2;
    trainsLikeTheCpu(*cuda, "cnn", precision, 1e-3, 0, "conv1.weight", loss,
                     param);
    trainsLikeTheCpu(*cuda, "cnn", precision, 1e-3, 0, "bn.running_var", loss,
                     param);
  }
}

} // namespace
