// The CPU's vector erf and exp (kernels/cpu/vector_math.h): erf within 2 ulp
// of the true value (vector_erf.h: CUDA's erff bound), exp within SLEEF's 1,
// the same bits at every vector width the CPU offers and wherever an element
// sits in the array, and IEEE special values as the C library gives them.
#include "kernels/cpu/vector_math.h"

#include "kernels/common/gelu_math.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

using namespace mpc::cpu;

namespace {

/// Distance in ulps of float `got` from the double `want`, measured in the
/// ulp of the float nearest to `want`.
double ulpError(float got, double want) {
  float near = float(want);
  float up = std::nextafter(std::fabs(near), std::numeric_limits<float>::max());
  double ulp = double(up) - double(std::fabs(near));
  return std::fabs(double(got) - want) / ulp;
}

std::vector<float> sweep() {
  std::vector<float> v;
  std::mt19937 rng(7);
  std::normal_distribution<float> wide(0.0f, 3.0f);
  std::uniform_real_distribution<float> narrow(-1e-3f, 1e-3f);
  for (int i = 0; i < 20000; ++i)
    v.push_back(wide(rng));
  for (int i = 0; i < 2000; ++i)
    v.push_back(narrow(rng));
  for (float x : {0.0f,  -0.0f,  1e-38f, -1e-38f, 1e-45f, 0.5f,    -0.5f,
                  0.84f, 1.0f,   2.0f,   3.9f,    4.0f,   9.0f,    -9.0f,
                  30.0f, -30.0f, 80.0f,  88.7f,   -87.0f, -103.0f, -120.0f})
    v.push_back(x);
  return v;
}

} // namespace

TEST(VectorMath, ErfWithinTwoUlps) {
  std::vector<float> x = sweep(), y = x;
  erfInPlace(y.data(), int64_t(y.size()));
  double worst = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    double e = ulpError(y[i], std::erf(double(x[i])));
    worst = std::max(worst, e);
    ASSERT_LE(e, 2.0) << "erf(" << x[i] << ") = " << y[i];
  }
  EXPECT_GT(worst, 0.0); // it is not the exact function, and the test knows
}

// Every 64th float of [2^-30, 4] and its negative, at every width: both
// polynomial pieces, the seam at 1 and the saturation at 3.92 (above which
// erf is 1 in float).
TEST(VectorMath, ErfWithinTwoUlpsOnADenseGrid) {
  uint32_t lo, hi;
  float from = std::ldexp(1.0f, -30), to = 4.0f;
  std::memcpy(&lo, &from, 4);
  std::memcpy(&hi, &to, 4);
  std::vector<float> x;
  for (uint32_t b = lo; b <= hi; b += 64) {
    float f;
    std::memcpy(&f, &b, 4);
    x.push_back(f);
    x.push_back(-f);
  }
  for (int width : {4, 8, 16}) {
    std::vector<float> y = x;
    erfInPlaceWidth(y.data(), int64_t(y.size()), width);
    double worst = 0;
    float at = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      double e = ulpError(y[i], std::erf(double(x[i])));
      if (e > worst) {
        worst = e;
        at = x[i];
      }
    }
    EXPECT_LE(worst, 2.0) << "width " << width << ": erf(" << at << ")";
    GTEST_LOG_(INFO) << "width " << width << ": " << x.size()
                     << " floats, worst " << worst << " ulp at " << at;
  }
}

TEST(VectorMath, ExpWithinOneUlp) {
  std::vector<float> x = sweep(), y = x;
  expInPlace(y.data(), int64_t(y.size()));
  for (size_t i = 0; i < x.size(); ++i) {
    double want = std::exp(double(x[i]));
    if (want > double(std::numeric_limits<float>::max())) {
      EXPECT_EQ(y[i], std::numeric_limits<float>::infinity()) << x[i];
      continue;
    }
    if (want < double(std::numeric_limits<float>::min())) {
      EXPECT_NEAR(y[i], want, 1.5e-45) << x[i]; // subnormal or flushed to 0
      continue;
    }
    ASSERT_LE(ulpError(y[i], want), 1.0) << "exp(" << x[i] << ") = " << y[i];
  }
}

TEST(VectorMath, SpecialValues) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> e = {inf, -inf, nan, 0.0f, -0.0f};
  erfInPlace(e.data(), 5);
  EXPECT_EQ(e[0], 1.0f);
  EXPECT_EQ(e[1], -1.0f);
  EXPECT_TRUE(std::isnan(e[2]));
  EXPECT_EQ(e[3], 0.0f);
  EXPECT_TRUE(std::signbit(e[4]));
  std::vector<float> x = {inf, -inf, nan, 0.0f};
  expInPlace(x.data(), 4);
  EXPECT_EQ(x[0], inf);
  EXPECT_EQ(x[1], 0.0f);
  EXPECT_TRUE(std::isnan(x[2]));
  EXPECT_EQ(x[3], 1.0f);
}

// The SSE2 (4-wide) and, where the CPU has them, AVX2 (8-wide) and AVX-512
// (16-wide) variants give the same bits: a kernel's result does not depend
// on the machine.
TEST(VectorMath, EveryWidthGivesTheSameBits) {
  std::vector<float> x = sweep();
  size_t bytes = x.size() * sizeof(float);
  std::vector<float> e4 = x, p4 = x;
  erfInPlaceWidth(e4.data(), int64_t(x.size()), 4);
  expInPlaceWidth(p4.data(), int64_t(x.size()), 4);
  for (int width : {8, 16}) {
    std::vector<float> e = x, p = x;
    erfInPlaceWidth(e.data(), int64_t(x.size()), width);
    expInPlaceWidth(p.data(), int64_t(x.size()), width);
    EXPECT_EQ(0, std::memcmp(e4.data(), e.data(), bytes)) << width;
    EXPECT_EQ(0, std::memcmp(p4.data(), p.data(), bytes)) << width;
  }
  if (vectorMathWidth() < 16)
    GTEST_LOG_(INFO) << "this CPU's widest is " << vectorMathWidth()
                     << ": wider variants ran at that width";
}

// An element's result does not depend on the array's length or its place
// in it (tails go through the vector code, padded).
TEST(VectorMath, TailsAreTheBodysBits) {
  std::vector<float> x = sweep();
  x.resize(64);
  std::vector<float> whole = x;
  erfInPlace(whole.data(), 64);
  for (int64_t start = 0; start < 9; ++start)
    for (int64_t n = 1; n <= 13; ++n) {
      std::vector<float> part(x.begin() + start, x.begin() + start + n);
      erfInPlace(part.data(), n);
      for (int64_t i = 0; i < n; ++i)
        ASSERT_EQ(part[size_t(i)], whole[size_t(start + i)])
            << "start " << start << " n " << n;
    }
}

// The one-pass GELU and its derivative are gelu_math.h's expressions around
// the erf and exp above, bit for bit, at every width, tails included.
TEST(VectorMath, GeluIsGeluMathsExpressionsAtEveryWidth) {
  std::vector<float> x = sweep();
  x.resize(x.size() - 3); // a tail that is not a whole vector
  const int64_t n = int64_t(x.size());
  std::mt19937 rng(11);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> g(x.size());
  for (float &v : g)
    v = dist(rng);
  std::vector<float> e(x.size()), p(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    e[i] = mpc::geluErfArgument(x[i]);
    p[i] = mpc::geluExpArgument(x[i]);
  }
  erfInPlace(e.data(), n);
  expInPlace(p.data(), n);
  for (int width : {4, 8, 16}) {
    std::vector<float> y = x, d = g;
    geluInPlaceWidth(y.data(), n, width);
    geluGradInPlaceWidth(d.data(), x.data(), n, width);
    for (size_t i = 0; i < x.size(); ++i) {
      float want = mpc::geluFromErf(x[i], e[i]);
      float wantD = g[i] * mpc::geluDerivativeFromErfExp(x[i], e[i], p[i]);
      if (std::isnan(want))
        ASSERT_TRUE(std::isnan(y[i])) << "width " << width << " x " << x[i];
      else
        ASSERT_EQ(0, std::memcmp(&want, &y[i], 4))
            << "width " << width << " x " << x[i];
      if (std::isnan(wantD))
        ASSERT_TRUE(std::isnan(d[i])) << "width " << width << " x " << x[i];
      else
        ASSERT_EQ(0, std::memcmp(&wantD, &d[i], 4))
            << "width " << width << " x " << x[i];
    }
  }
  std::vector<float> y = x;
  geluInPlace(y.data(), n);
  std::vector<float> y4 = x;
  geluInPlaceWidth(y4.data(), n, 4);
  EXPECT_EQ(0, std::memcmp(y.data(), y4.data(), x.size() * 4));
}
