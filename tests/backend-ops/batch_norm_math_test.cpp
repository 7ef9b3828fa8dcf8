// mpc's own batch-norm kernel math (kernels/cuda/batch_norm_math.h)
// against the CPU kernel, on the CPU.
//
// The CUDA forward takes the batch mean and unbiased variance from cuDNN
// and applies the running-statistics rule itself; the backward with given
// statistics is mpc's kernel throughout. Here both are replayed on the
// CPU: from the CPU kernel's own batch statistics, the running statistics
// must be the CPU's bits (ONNX's momentum convention, the unbiased
// variance), and the backward with given statistics, walked row by row and
// then channel by channel as the device threads walk it, the CPU's bytes.
#include "ir/mpc_ops.h"
#include "kernels/cpu/kernel_table.h"
#include "kernels/cuda/batch_norm_math.h"
#include "op_cases.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

using namespace mpc;
using namespace mpc::cuda;
using namespace mpc::backend_ops;

namespace {

std::vector<Tensor> runCpu(const std::string &op,
                           const std::vector<const Tensor *> &in,
                           const Builder::Attrs &attrs, size_t outputs,
                           const std::string &domain = "") {
  Graph g;
  std::vector<Value *> values;
  for (size_t i = 0; i < in.size(); ++i)
    values.push_back(g.addInput("in" + std::to_string(i), in[i]->dtype,
                                toDims(in[i]->dims)));
  Node *node = g.createNode(op, values, outputs, "bn", domain);
  for (const auto &kv : attrs)
    node->setAttr(kv.first, kv.second);
  std::vector<Tensor> out;
  runCpuNode(*node, in, out);
  return out;
}

void expectSameBytes(const Tensor &got, const Tensor &want,
                     const std::string &what) {
  ASSERT_EQ(got.dtype, want.dtype) << what;
  ASSERT_EQ(got.dims, want.dims) << what;
  size_t size = dtypeSize(want.dtype);
  for (int64_t k = 0; k < want.numel(); ++k)
    if (std::memcmp(got.bytes.data() + k * size, want.bytes.data() + k * size,
                    size) != 0) {
      ADD_FAILURE() << what << ": element " << k << " is " << got.getAsDouble(k)
                    << ", the cpu kernel's " << want.getAsDouble(k);
      return;
    }
}

Tensor rounded(DType t, const std::vector<int64_t> &dims,
               const std::vector<float> &v) {
  Tensor f = Tensor::fromFloats(dims, v);
  return t == DType::F32 ? f : f.castTo(t);
}

float at(const Tensor &t, int64_t i) { return float(t.getAsDouble(i)); }

TEST(BatchNormMath, RunningStatisticsAreTheCpuRule) {
  std::mt19937 rng(51);
  const int64_t n = 4, c = 3, inner = 35, count = n * inner;
  for (float momentum : {0.9f, 0.8f, 0.0f}) {
    Tensor x = randomTensor(rng, DType::F32, {n, c, 5, 7}, -1, 3);
    Tensor scale = randomTensor(rng, DType::F32, {c}, 0.5f, 1.5f);
    Tensor bias = randomTensor(rng, DType::F32, {c});
    Tensor mean = randomTensor(rng, DType::F32, {c});
    Tensor var = randomTensor(rng, DType::F32, {c}, 0.5f, 2);
    std::vector<Tensor> out =
        runCpu("BatchNormalization", {&x, &scale, &bias, &mean, &var},
               {{"training_mode", Attribute::ofInt(1)},
                {"momentum", Attribute::ofFloat(momentum)}},
               5);
    // outputs 3 and 4 are the CPU's batch mean and biased variance; what
    // cuDNN hands the kernel is the mean and the unbiased variance.
    std::vector<float> runMean, runVar, saved;
    for (int64_t k = 0; k < c; ++k) {
      float unbiased = at(out[4], k) * (float(count) / float(count - 1));
      runMean.push_back(batchNormRunning(at(mean, k), at(out[3], k), momentum));
      runVar.push_back(batchNormRunning(at(var, k), unbiased, momentum));
      EXPECT_NEAR(batchNormBiasedVar(unbiased, count), at(out[4], k),
                  2e-7 * at(out[4], k));
    }
    std::string what = "momentum " + std::to_string(momentum);
    expectSameBytes(rounded(DType::F32, {c}, runMean), out[1],
                    what + " running mean");
    expectSameBytes(rounded(DType::F32, {c}, runVar), out[2],
                    what + " running var");
  }
}

TEST(BatchNormMath, BackwardWithGivenStatisticsIsTheCpuKernel) {
  std::mt19937 rng(52);
  const int64_t n = 4, c = 3, inner = 35;
  const float epsilon = 1e-5f;
  for (DType t : {DType::F32, DType::F16, DType::BF16}) {
    Tensor dy = randomTensor(rng, t, {n, c, 5, 7});
    Tensor x = randomTensor(rng, t, {n, c, 5, 7}, -1, 3);
    Tensor scale = randomTensor(rng, DType::F32, {c}, 0.5f, 1.5f);
    Tensor mean = randomTensor(rng, DType::F32, {c}, 0, 1);
    Tensor var = randomTensor(rng, DType::F32, {c}, 0.5f, 2);
    std::vector<Tensor> want =
        runCpu("BatchNormalizationGrad", {&dy, &x, &scale, &mean, &var},
               {{"epsilon", Attribute::ofFloat(epsilon)}}, 3, kMpcDomain);
    std::vector<float> rowDy(size_t(n * c)), rowDyXhat(size_t(n * c));
    for (int64_t r = 0; r < n * c; ++r) {
      int64_t ch = r % c, base = r * inner;
      batchNormGivenRowSums([&](int64_t i) { return at(dy, base + i); },
                            [&](int64_t i) { return at(x, base + i); }, inner,
                            at(mean, ch), batchNormInvStd(at(var, ch), epsilon),
                            rowDy[size_t(r)], rowDyXhat[size_t(r)]);
    }
    std::vector<float> dScale, dBias, dx;
    for (int64_t ch = 0; ch < c; ++ch) {
      float s1 = 0.0f, s2 = 0.0f;
      for (int64_t k = 0; k < n; ++k) {
        s1 += rowDy[size_t(k * c + ch)];
        s2 += rowDyXhat[size_t(k * c + ch)];
      }
      dBias.push_back(s1);
      dScale.push_back(s2);
    }
    for (int64_t i = 0; i < dy.numel(); ++i) {
      int64_t ch = (i / inner) % c;
      dx.push_back(batchNormGivenDx(
          at(scale, ch), batchNormInvStd(at(var, ch), epsilon), at(dy, i)));
    }
    std::string what = dtypeName(t);
    expectSameBytes(rounded(t, dy.dims, dx), want[0], what + " dX");
    expectSameBytes(rounded(DType::F32, {c}, dScale), want[1],
                    what + " dScale");
    expectSameBytes(rounded(DType::F32, {c}, dBias), want[2], what + " dBias");
  }
}

} // namespace
