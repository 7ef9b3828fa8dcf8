// Tests of the shared per-element optimizer and loss-scaling math.
//
// SGD (momentum, dampening, nesterov, weight decay) and Adam/AdamW are run
// for several steps and compared with reference formulas written here in
// double precision from the PyTorch documentation's algorithms; the GradScaler
// update is driven through a sequence of clean and overflowing steps.
#include "kernels/common/loss_scale_math.h"
#include "kernels/common/optimizer_math.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

using namespace mpc;

namespace {

/// Gradients that change sign and size from step to step.
double gradAt(int step, int i) {
  return std::sin(0.7 * step + 1.3 * i) * (1.0 + 0.25 * i) - 0.1 * step;
}

struct SgdCase {
  double lr, momentum, dampening, wd;
  bool nesterov;
};

void checkSgd(const SgdCase &c) {
  const int numElems = 5, numSteps = 6;
  std::vector<float> p(numElems), buf(numElems, 0.0f);
  std::vector<double> pd(numElems), bufd(numElems, 0.0);
  for (int i = 0; i < numElems; ++i)
    p[i] = float(0.5 - 0.3 * i), pd[i] = p[i];
  for (int step = 0; step < numSteps; ++step) {
    SgdScalars s =
        sgdScalars(c.lr, c.momentum, c.dampening, c.wd, c.nesterov, step);
    for (int i = 0; i < numElems; ++i) {
      float g = float(gradAt(step, i));
      sgdUpdate(p[i], g, buf[i], s);
      // Reference: torch.optim.SGD's documented algorithm, in double.
      double d = double(g) + c.wd * pd[i];
      if (c.momentum != 0) {
        bufd[i] = step == 0 ? d : c.momentum * bufd[i] + (1 - c.dampening) * d;
        d = c.nesterov ? d + c.momentum * bufd[i] : bufd[i];
      }
      pd[i] -= c.lr * d;
    }
  }
  for (int i = 0; i < numElems; ++i) {
    EXPECT_NEAR(p[i], pd[i], 1e-6 * std::max(1.0, std::fabs(pd[i])))
        << "element " << i;
    if (c.momentum != 0) {
      EXPECT_NEAR(buf[i], bufd[i], 1e-6 * std::max(1.0, std::fabs(bufd[i])));
    }
  }
}

struct AdamCase {
  double lr, beta1, beta2, eps, wd;
  bool decoupled;
};

void checkAdam(const AdamCase &c) {
  const int numElems = 5, numSteps = 5;
  std::vector<float> p(numElems), m(numElems, 0.f), v(numElems, 0.f);
  std::vector<double> pd(numElems), md(numElems, 0.0), vd(numElems, 0.0);
  std::vector<double> p0(numElems);
  for (int i = 0; i < numElems; ++i)
    p[i] = float(0.4 - 0.2 * i), pd[i] = p[i], p0[i] = p[i];
  for (int step = 0; step < numSteps; ++step) {
    AdamScalars s =
        adamScalars(c.lr, c.beta1, c.beta2, c.eps, c.wd, c.decoupled, step);
    double t = step + 1;
    for (int i = 0; i < numElems; ++i) {
      float g = float(gradAt(step, i));
      adamUpdate(p[i], g, m[i], v[i], s);
      // Reference: torch.optim.Adam / AdamW's documented algorithm.
      double gd = g;
      if (c.wd != 0 && !c.decoupled)
        gd += c.wd * pd[i];
      if (c.wd != 0 && c.decoupled)
        pd[i] *= 1 - c.lr * c.wd;
      md[i] = c.beta1 * md[i] + (1 - c.beta1) * gd;
      vd[i] = c.beta2 * vd[i] + (1 - c.beta2) * gd * gd;
      double bc1 = 1 - std::pow(c.beta1, t), bc2 = 1 - std::pow(c.beta2, t);
      pd[i] -= c.lr / bc1 * md[i] / (std::sqrt(vd[i]) / std::sqrt(bc2) + c.eps);
    }
  }
  for (int i = 0; i < numElems; ++i) {
    EXPECT_NEAR(m[i], md[i], 1e-6 * std::max(1.0, std::fabs(md[i])));
    EXPECT_NEAR(v[i], vd[i], 1e-6 * std::max(1.0, std::fabs(vd[i])));
    // The accumulated update must agree to ~fp32 precision of the update
    // itself, not merely of the parameter.
    double delta = pd[i] - p0[i], got = double(p[i]) - p0[i];
    EXPECT_NEAR(got, delta, 1e-5 * std::fabs(delta) + 1e-7) << "element " << i;
  }
}

} // namespace

TEST(OptimizerMath, SgdPlain) { checkSgd({0.1, 0.0, 0.0, 0.0, false}); }
TEST(OptimizerMath, SgdWeightDecay) { checkSgd({0.1, 0.0, 0.0, 1e-2, false}); }
TEST(OptimizerMath, SgdMomentum) { checkSgd({0.05, 0.9, 0.0, 1e-4, false}); }
TEST(OptimizerMath, SgdMomentumDampening) {
  checkSgd({0.05, 0.9, 0.3, 0.0, false});
}
TEST(OptimizerMath, SgdNesterov) { checkSgd({0.05, 0.9, 0.0, 0.0, true}); }
TEST(OptimizerMath, SgdNesterovWeightDecay) {
  checkSgd({0.05, 0.8, 0.0, 1e-3, true});
}

TEST(OptimizerMath, SgdFirstStepCopiesGradientIntoBuffer) {
  // torch starts the buffer as clone(d_p): dampening does not apply yet.
  float p = 2.0f, buf = 123.0f, g = 0.75f;
  sgdUpdate(p, g, buf, sgdScalars(0.1, 0.9, 0.5, 0.0, false, 0));
  EXPECT_EQ(buf, 0.75f);
  EXPECT_EQ(p, 2.0f + float(-0.1) * 0.75f);
  // Second step: buf = 0.9 * buf + 0.5 * g.
  sgdUpdate(p, g, buf, sgdScalars(0.1, 0.9, 0.5, 0.0, false, 1));
  EXPECT_EQ(buf, 0.75f * 0.9f + 0.5f * 0.75f);
}

TEST(OptimizerMath, Adam) { checkAdam({1e-3, 0.9, 0.999, 1e-8, 0.0, false}); }
TEST(OptimizerMath, AdamLargeLr) {
  checkAdam({1e-2, 0.8, 0.99, 1e-6, 0.0, false});
}
TEST(OptimizerMath, AdamCoupledWeightDecay) {
  checkAdam({1e-3, 0.9, 0.999, 1e-8, 0.1, false});
}
TEST(OptimizerMath, AdamW) { checkAdam({1e-3, 0.9, 0.999, 1e-8, 1e-2, true}); }
TEST(OptimizerMath, AdamWStrongDecay) {
  checkAdam({1e-2, 0.9, 0.999, 1e-8, 0.5, true});
}

TEST(OptimizerMath, AdamFirstStepIsSignedLr) {
  // With m = v = 0, step 0: m = 0.1 g, v = 0.001 g^2, and after bias
  // correction the update is lr * g / (|g| + eps') ~ lr * sign(g).
  float p = 1.0f, m = 0.0f, v = 0.0f;
  adamUpdate(p, -3.0f, m, v, adamScalars(1e-3, 0.9, 0.999, 1e-8, 0, false, 0));
  EXPECT_NEAR(p, 1.0f + 1e-3f, 1e-7);
  EXPECT_FLOAT_EQ(m, -0.3f);
  EXPECT_FLOAT_EQ(v, 0.009f);
}

TEST(OptimizerMath, AdamWDecaysParamNotGradient) {
  float pw = 2.0f, mw = 0, vw = 0, pc = 2.0f, mc = 0, vc = 0;
  adamUpdate(pw, 1.0f, mw, vw,
             adamScalars(0.1, 0.9, 0.999, 1e-8, 0.5, true, 0));
  adamUpdate(pc, 1.0f, mc, vc,
             adamScalars(0.1, 0.9, 0.999, 1e-8, 0.5, false, 0));
  EXPECT_FLOAT_EQ(mw, 0.1f);        // AdamW: m from the raw gradient
  EXPECT_FLOAT_EQ(mc, 0.1f * 2.0f); // Adam: g + wd * p = 2
  EXPECT_NEAR(pw, 2.0 * 0.95 - 0.1, 1e-6);
}

TEST(OptimizerMath, LerpMatchesBothTorchBranches) {
  for (float w : {0.1f, 0.3f, 0.5f, 0.7f, 0.95f})
    for (float a : {-2.0f, 0.0f, 0.3f})
      for (float b : {1.5f, -0.25f}) {
        double want = double(a) + double(w) * (double(b) - double(a));
        EXPECT_NEAR(torchLerp(a, b, w), want, 4e-7)
            << a << " " << b << " " << w;
      }
  // The endpoints are exact in the branch that anchors them.
  EXPECT_EQ(torchLerp(0.3f, 1.7f, 1.0f), 1.7f);
  EXPECT_EQ(torchLerp(0.3f, 1.7f, 0.0f), 0.3f);
}

// --- loss scaling ------------------------------------------------------------

TEST(LossScaleMath, GrowthBackoffSequence) {
  float scale = 65536.0f;
  int64_t tracker = 0;
  auto step = [&](bool inf) {
    updateLossScale(scale, tracker, inf, 2.0, 0.5, 3);
  };
  step(false);
  EXPECT_EQ(scale, 65536.0f);
  EXPECT_EQ(tracker, 1);
  step(false);
  EXPECT_EQ(tracker, 2);
  step(false); // third clean step in a row: grow, reset
  EXPECT_EQ(scale, 131072.0f);
  EXPECT_EQ(tracker, 0);
  step(false);
  step(false);
  EXPECT_EQ(tracker, 2);
  step(true); // overflow: back off and forget the clean streak
  EXPECT_EQ(scale, 65536.0f);
  EXPECT_EQ(tracker, 0);
  step(true);
  EXPECT_EQ(scale, 32768.0f);
  EXPECT_EQ(tracker, 0);
  for (int i = 0; i < 3; ++i)
    step(false);
  EXPECT_EQ(scale, 65536.0f);
  EXPECT_EQ(tracker, 0);
}

TEST(LossScaleMath, GrowthSkippedWhenScaleWouldOverflow) {
  float scale = std::numeric_limits<float>::max() / 1.5f;
  int64_t tracker = 0;
  updateLossScale(scale, tracker, false, 2.0, 0.5, 1);
  EXPECT_EQ(scale, std::numeric_limits<float>::max() / 1.5f);
  EXPECT_EQ(tracker, 0); // the tracker still resets
}

TEST(LossScaleMath, ProductsRoundedFromDouble) {
  float scale = 3.0f;
  int64_t tracker = 5;
  updateLossScale(scale, tracker, true, 2.0, 0.1, 2000);
  EXPECT_EQ(scale, float(3.0 * 0.1));
  scale = 3.0f;
  tracker = 0;
  updateLossScale(scale, tracker, false, 1.1, 0.5, 1);
  EXPECT_EQ(scale, float(3.0 * 1.1));
}

TEST(LossScaleMath, InverseAndUnscale) {
  EXPECT_EQ(inverseLossScale(65536.0f), 1.0f / 65536.0f);
  EXPECT_EQ(inverseLossScale(3.0f), float(1.0 / 3.0));
  float out = 0;
  EXPECT_TRUE(unscaleElement(131072.0f, inverseLossScale(65536.0f), out));
  EXPECT_EQ(out, 2.0f);
  EXPECT_FALSE(
      unscaleElement(std::numeric_limits<float>::infinity(), 0.5f, out));
  EXPECT_FALSE(unscaleElement(std::nanf(""), 0.5f, out));
  EXPECT_TRUE(std::isnan(out));
  EXPECT_TRUE(unscaleElement(-0.0f, 1.0f, out));
  EXPECT_TRUE(std::signbit(out));
  // The finiteness check is on the input, as torch's: a finite value that
  // the multiply overflows is not flagged.
  EXPECT_TRUE(unscaleElement(3e38f, 2.0f, out));
  EXPECT_TRUE(std::isinf(out));
}
