// The cuDNN convolutions' layouts and algorithm choice on the device
// (ctest backend-ops; skipped, with the reason, without a usable GPU).
//
// The backend-ops cases Conv_nhwc*, ConvGradInput_nhwc* and
// ConvGradWeight_nhwc* (channels in multiples of 8) run channels-last in
// fp16 and bf16; here each runs on a backend with NHWC on and one with it
// off (every convolution NCHW), and the two must agree within the dtype's
// tolerance, each against the CPU too; and with
// CudaBackendOptions::cudnnDeterministic false (cuDNN's fastest algorithms,
// nondeterministic ones included) every convolution case still matches the
// CPU. The layout arithmetic itself is tested without a GPU in
// conv_layout_test.cpp.
#include "op_cases.h"

#include "kernels/cpu/kernel_table.h"
#include "runtime/cuda/cuda_backend.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace mpc;
using namespace mpc::backend_ops;

namespace {

std::unique_ptr<Backend> cudaWith(CudaBackendOptions options,
                                  std::string &why) {
  options.poisonOutputs = true;
  return createCudaBackend(why, options);
}

#define REQUIRE_CUDA_WITH(backend, options)                                    \
  std::string whyNoCuda;                                                       \
  std::unique_ptr<Backend> backend = cudaWith(options, whyNoCuda);             \
  if (!backend)                                                                \
  GTEST_SKIP() << "backend-ops skipped: no usable CUDA GPU: " << whyNoCuda

Tensor runOn(Backend &backend, const Node &node,
             const std::vector<const Tensor *> &inputs) {
  std::vector<Tensor> outs(node.numOutputs());
  KernelContext ctx{node, inputs, {}, 0, {}};
  for (size_t i = 0; i < outs.size(); ++i)
    ctx.outputs.push_back(&outs[i]);
  backend.run(ctx);
  return std::move(outs[0]);
}

/// ||a - b|| / ||b||, or -1 when a NaN shows on one side only.
double normalisedError(const Tensor &a, const Tensor &b) {
  double diff = 0, ref = 0;
  for (int64_t k = 0; k < b.numel(); ++k) {
    double x = a.getAsDouble(k), y = b.getAsDouble(k);
    if (std::isnan(x) != std::isnan(y))
      return -1;
    diff += (x - y) * (x - y);
    ref += y * y;
  }
  return std::sqrt(diff) / std::max(std::sqrt(ref), 1e-30);
}

double tolerance(DType t) { return t == DType::BF16 ? 1.6e-2 : 2e-3; }

bool isConvCase(const OpCase &c, bool nhwcOnly) {
  for (const char *op :
       {"Conv_", "ConvGradInput_", "ConvGradWeight_", "ConvTranspose_"})
    if (c.name.rfind(op, 0) == 0)
      return !nhwcOnly || c.name.find("nhwc") != std::string::npos;
  return false;
}

/// Runs every chosen convolution case in fp16 and bf16 on `a` and `b` and
/// on the CPU: `a` against `b` and both against the CPU within tolerance.
void compareBackends(Backend &a, Backend *b, bool nhwcOnly) {
  auto cpu = createCpuBackend();
  size_t ran = 0;
  for (const OpCase &c : opCases()) {
    if (!isConvCase(c, nhwcOnly))
      continue;
    for (DType t : c.dtypes) {
      if (nhwcOnly && t == DType::F32)
        continue;
      std::mt19937 rng(1234);
      Inputs inputs = c.make(t, rng);
      Graph g;
      std::vector<const Tensor *> ptrs;
      Node *node = buildCaseNode(g, c, inputs, ptrs);
      std::string what = c.name + " " + dtypeName(t);
      Tensor want = runOn(*cpu, *node, ptrs);
      Tensor got = runOn(a, *node, ptrs);
      ASSERT_EQ(got.dims, want.dims) << what;
      double e = normalisedError(got, want);
      EXPECT_GE(e, 0) << what << ": NaN on one side";
      EXPECT_LE(e, tolerance(t)) << what << " against the cpu";
      if (b) {
        Tensor other = runOn(*b, *node, ptrs);
        double d = normalisedError(got, other);
        EXPECT_GE(d, 0) << what << ": NaN on one side";
        EXPECT_LE(d, tolerance(t)) << what << ": NHWC against NCHW";
      }
      ++ran;
    }
  }
  EXPECT_GE(ran, nhwcOnly ? 12u : 30u);
}

TEST(BackendOpsConvLayout, NhwcMatchesNchwForwardAndBackward) {
  REQUIRE_CUDA_WITH(nhwc, CudaBackendOptions{});
  CudaBackendOptions off;
  off.convNhwc = false;
  std::string why;
  std::unique_ptr<Backend> nchw = cudaWith(off, why);
  ASSERT_TRUE(nchw) << why;
  compareBackends(*nhwc, nchw.get(), true);
}

TEST(BackendOpsConvLayout, FastNondeterministicAlgorithmsMatchTheCpu) {
  CudaBackendOptions fast;
  fast.cudnnDeterministic = false;
  REQUIRE_CUDA_WITH(backend, fast);
  compareBackends(*backend, nullptr, false);
}

} // namespace
