// The shared MPC_HD math as nvcc compiles it agrees with the host
// compiler's build, bit for bit, on the CPU.
//
// kernels/common/{half.h,loss_scale_math.h,optimizer_math.h} and the row
// and activation math (softmax_math.h, layer_norm_math.h, gelu_math.h,
// dropout_rng.h, clip_grad_norm_math.h, piecewise_math.h) are included by the
// CUDA kernels and by the CPU kernels. shared_math_nvcc.cu compiles them with
// nvcc (for the device, which is checked by its building, and for the host);
// here every fp16/bf16 pattern, a million random fp32 patterns, random
// optimizer states (ONNX's Adagrad, Momentum and Adam in fp32 and fp64 too)
// and random row/activation operands go through both builds.
#include "ir/half.h"
#include "kernels/common/clip_grad_norm_math.h"
#include "kernels/common/dropout_rng.h"
#include "kernels/common/gelu_math.h"
#include "kernels/common/layer_norm_math.h"
#include "kernels/common/loss_scale_math.h"
#include "kernels/common/optimizer_math.h"
#include "kernels/common/preview_optimizer_math.h"
#include "kernels/common/softmax_math.h"
#include "shared_math_nvcc.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

using namespace mpc;

namespace {

uint32_t bitsOf(float f) { return floatBits(f); }

TEST(SharedMathUnderNvcc, HalfAndBf16Conversions) {
  for (uint32_t k = 0; k < 65536; ++k) {
    ASSERT_EQ(bitsOf(nvcc::halfToFloatHost(uint16_t(k))),
              bitsOf(halfToFloat(uint16_t(k))))
        << k;
    ASSERT_EQ(bitsOf(nvcc::bf16ToFloatHost(uint16_t(k))),
              bitsOf(bf16ToFloat(uint16_t(k))))
        << k;
  }
  std::mt19937 rng(11);
  std::uniform_int_distribution<uint32_t> bits;
  for (int k = 0; k < 1000000; ++k) {
    float f = bitsToFloat(bits(rng));
    ASSERT_EQ(nvcc::floatToHalfHost(f), floatToHalf(f)) << floatBits(f);
    ASSERT_EQ(nvcc::floatToBf16Host(f), floatToBf16(f)) << floatBits(f);
  }
}

TEST(SharedMathUnderNvcc, LossScaling) {
  std::mt19937 rng(12);
  std::uniform_int_distribution<uint32_t> bits;
  for (int k = 0; k < 100000; ++k) {
    float g = bitsToFloat(bits(rng)), inv = inverseLossScale(65536.0f);
    float a = 0, b = 0;
    ASSERT_EQ(nvcc::unscaleHost(g, inv, a), unscaleElement(g, inv, b));
    ASSERT_EQ(floatBits(a), floatBits(b));
  }
  float s1 = 65536, s2 = 65536;
  int64_t t1 = 0, t2 = 0;
  for (int step = 0; step < 50; ++step) {
    bool inf = step % 7 == 3;
    nvcc::updateLossScaleHost(s1, t1, inf);
    updateLossScale(s2, t2, inf, 2.0, 0.5, 3);
    ASSERT_EQ(floatBits(s1), floatBits(s2)) << step;
    ASSERT_EQ(t1, t2) << step;
  }
}

TEST(SharedMathUnderNvcc, OptimizerUpdates) {
  std::mt19937 rng(13);
  std::uniform_real_distribution<float> d(-1, 1);
  for (int64_t step : {0, 1, 10}) {
    AdamScalars adam =
        adamScalars(1e-3, 0.9, 0.999, 1e-8, 0.01, step % 2, step);
    SgdScalars sgd = sgdScalars(0.05, 0.9, 0.1, 1e-4, step == 10, step);
    for (int k = 0; k < 10000; ++k) {
      float p1 = d(rng), g = d(rng), m1 = d(rng) * 0.1f, v1 = std::abs(d(rng));
      float p2 = p1, m2 = m1, v2 = v1;
      nvcc::adamHost(p1, g, m1, v1, adam);
      adamUpdate(p2, g, m2, v2, adam);
      ASSERT_EQ(floatBits(p1), floatBits(p2));
      ASSERT_EQ(floatBits(m1), floatBits(m2));
      ASSERT_EQ(floatBits(v1), floatBits(v2));
      float q1 = d(rng), b1 = d(rng), q2 = q1, b2 = b1;
      nvcc::sgdHost(q1, g, b1, sgd);
      sgdUpdate(q2, g, b2, sgd);
      ASSERT_EQ(floatBits(q1), floatBits(q2));
      ASSERT_EQ(floatBits(b1), floatBits(b2));
    }
  }
}

template <typename C> uint64_t bitsOfAny(C v) {
  uint64_t b = 0;
  std::memcpy(&b, &v, sizeof(C));
  return b;
}

TEST(SharedMathUnderNvcc, OnnxTrainingOperators) {
  std::mt19937 rng(15);
  std::uniform_real_distribution<double> d(-1, 1);
  PreviewHyper adagrad, momentum, nesterov, adam;
  adagrad.kind = PreviewOptimizer::Adagrad;
  adagrad.decayFactor = 0.1;
  adagrad.epsilon = 1e-6;
  adagrad.norm = 0.01;
  momentum.kind = nesterov.kind = PreviewOptimizer::Momentum;
  momentum.alpha = nesterov.alpha = 0.9;
  momentum.beta = nesterov.beta = 0.5;
  nesterov.nesterov = true;
  adam.kind = PreviewOptimizer::Adam;
  adam.alpha = 0.9;
  adam.beta = 0.999;
  adam.epsilon = 1e-6;
  adam.normPost = 0.001;
  for (const PreviewHyper &h : {adagrad, momentum, nesterov, adam})
    for (int64_t t : {0, 1, 7}) {
      PreviewStep a = nvcc::previewStepHost(h, 0.05, t),
                  b = previewStep(h, 0.05, t);
      ASSERT_EQ(bitsOfAny(a.rate), bitsOfAny(b.rate));
      ASSERT_EQ(bitsOfAny(a.beta), bitsOfAny(b.beta));
      for (int k = 0; k < 2000; ++k) {
        double in[4] = {d(rng), d(rng), d(rng), std::abs(d(rng))};
        if (h.kind == PreviewOptimizer::Adagrad)
          in[2] = std::abs(in[2]);
        float inf[4] = {float(in[0]), float(in[1]), float(in[2]), float(in[3])};
        double o1[3] = {}, o2[3] = {};
        float f1[3] = {}, f2[3] = {};
        nvcc::previewUpdateHost(h, a, in, o1);
        previewUpdate<double>(h, b, in, o2);
        nvcc::previewUpdateHost(h, a, inf, f1);
        previewUpdate<float>(h, b, inf, f2);
        for (int g = 0; g < previewOutputRuns(h.kind); ++g) {
          ASSERT_EQ(bitsOfAny(o1[g]), bitsOfAny(o2[g])) << g;
          ASSERT_EQ(bitsOfAny(f1[g]), bitsOfAny(f2[g])) << g;
        }
      }
    }
}

TEST(SharedMathUnderNvcc, RowAndActivationMath) {
  std::mt19937 rng(14);
  std::uniform_real_distribution<float> d(-6, 6);
  std::uniform_int_distribution<uint64_t> bits;
  for (int k = 0; k < 100000; ++k) {
    float a = d(rng), b = d(rng), c = std::abs(d(rng)) + 0.1f, e = d(rng),
          f = d(rng);
    ASSERT_EQ(floatBits(nvcc::softmaxValueHost(a, b, c)),
              floatBits(softmaxValue(a, b, c)));
    ASSERT_EQ(floatBits(nvcc::softmaxGradValueHost(false, a, b, e)),
              floatBits(softmaxGradValue<false>(a, b, e)));
    ASSERT_EQ(floatBits(nvcc::softmaxGradValueHost(true, a, b, e)),
              floatBits(softmaxGradValue<true>(a, b, e)));
    ASSERT_EQ(floatBits(nvcc::layerNormInvStdHost(c, 37, 1e-5)),
              floatBits(layerNormInvStd(c, 37, 1e-5)));
    ASSERT_EQ(floatBits(nvcc::layerNormValueHost(a, b, c, e, f)),
              floatBits(layerNormValue(a, b, c, e, f)));
    ASSERT_EQ(floatBits(nvcc::layerNormGradInputHost(c, a, b, e, f)),
              floatBits(layerNormGradInput(c, a, b, e, f)));
    for (bool t : {false, true}) {
      ASSERT_EQ(floatBits(nvcc::geluForwardHost(a, t)),
                floatBits(geluForward(a, t)));
      ASSERT_EQ(floatBits(nvcc::geluDerivativeHost(a, t)),
                floatBits(geluDerivative(a, t)));
    }
    ASSERT_EQ(floatBits(nvcc::erfGradHost(a, b)),
              floatBits(erfGradValue(a, b)));
    uint64_t base = bits(rng);
    uint32_t thr = uint32_t(bits(rng) & 0xffffff);
    ASSERT_EQ(nvcc::dropoutKeepHost(base, k, thr), dropoutKeep(base, k, thr));
    ASSERT_EQ(floatBits(nvcc::clipCoefficientHost(c, 1.0f)),
              floatBits(clipGradNormCoefficient(c, 1.0f)));
  }
}

// nvcc's and the host compiler's builds of the piecewise rules; ties, NaN
// and infinities drawn on purpose.
TEST(SharedMathUnderNvcc, PiecewiseRules) {
  std::mt19937 rng(15);
  const float specials[] = {0.0f, -0.0f,    1.0f,      -1.0f,
                            NAN,  INFINITY, -INFINITY, 0.5f};
  std::uniform_real_distribution<float> d(-3, 3);
  std::uniform_int_distribution<int> pick(0, 9);
  auto draw = [&] {
    int k = pick(rng);
    return k < 8 ? specials[k] : d(rng);
  };
  for (int k = 0; k < 100000; ++k) {
    float a = draw(), b = draw(), c = draw();
    for (bool flag : {false, true})
      ASSERT_EQ(floatBits(nvcc::piecewiseHost(a, b, c, flag)),
                floatBits(nvcc::piecewiseCombination(a, b, c, flag)))
          << a << " " << b << " " << c << " " << flag;
  }
}

} // namespace
