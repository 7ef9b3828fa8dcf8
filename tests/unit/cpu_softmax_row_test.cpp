// The CPU softmax's fp32 row terms (kernels/cpu/softmax_support.h): the
// maximum taken in interleaved chains must give the terms of the shared
// serial formula (softmaxRowTerms with the same vector exp) bit for bit, and
// the sum must be the sixteen-lane sum the header states (element j into
// lane j mod 16, lanes joined pairwise), within the serial sum's rounding,
// over rows of every length up to a few vectors holding NaNs, infinities,
// signed zeros, subnormals and ties for the maximum anywhere.
#include "kernels/cpu/softmax_support.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

namespace mpc {
namespace {

uint32_t bitsOf(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

float serialMax(const std::vector<float> &row) {
  float m = -INFINITY;
  for (float v : row)
    m = softmaxMax(m, v);
  return m;
}

/// The stated order, written out another way: lane sums by index, then the
/// tree as explicit pairs.
float laneSumReference(const std::vector<float> &terms) {
  float lane[16] = {};
  for (size_t j = 0; j < terms.size(); ++j)
    lane[j % 16] += terms[j];
  for (int k = 0; k < 8; ++k)
    lane[k] = lane[k] + lane[k + 8];
  for (int k = 0; k < 4; ++k)
    lane[k] = lane[k] + lane[k + 4];
  for (int k = 0; k < 2; ++k)
    lane[k] = lane[k] + lane[k + 2];
  return lane[0] + lane[1];
}

TEST(CpuSoftmaxRow, ChainedMaxAndTermsMatchTheSerialFormula) {
  const float specials[] = {std::numeric_limits<float>::quiet_NaN(),
                            INFINITY,
                            -INFINITY,
                            0.0f,
                            -0.0f,
                            std::numeric_limits<float>::denorm_min(),
                            -1e-40f,
                            3.5f,
                            3.5f,
                            -1e30f,
                            88.0f};
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 4.0f);
  std::uniform_int_distribution<int> pick(0, 3);
  int checked = 0;
  for (int64_t len = 0; len <= 40; ++len)
    for (int trial = 0; trial < 60; ++trial) {
      std::vector<float> row(static_cast<size_t>(len));
      for (float &v : row)
        v = pick(rng) == 0 ? specials[std::uniform_int_distribution<size_t>(
                                 0, std::size(specials) - 1)(rng)]
                           : normal(rng);
      // The chained maximum: the serial value (a zero maximum's sign aside).
      float chained = cpu::rowMax(len, row.data());
      float serial = serialMax(row);
      if (serial == 0.0f)
        EXPECT_EQ(chained, 0.0f);
      else
        EXPECT_EQ(bitsOf(chained), bitsOf(serial)) << "length " << len;
      std::vector<float> a = row, b = row;
      SoftmaxRowStats<float> sa = cpu::rowTerms(len, a.data());
      SoftmaxRowStats<float> sb = softmaxRowTerms(
          len, b.data(), [](float *r, int64_t n) { cpu::expInPlace(r, n); });
      for (int64_t j = 0; j < len; ++j)
        ASSERT_EQ(bitsOf(a[size_t(j)]), bitsOf(b[size_t(j)]))
            << "length " << len << " element " << j;
      const float lanes = laneSumReference(a);
      if (std::isnan(lanes)) {
        ASSERT_TRUE(std::isnan(sa.sum)) << "length " << len;
        ASSERT_TRUE(std::isnan(sb.sum)) << "length " << len;
      } else {
        ASSERT_EQ(bitsOf(sa.sum), bitsOf(lanes)) << "length " << len;
        // Terms in [0, 1]: both orders within len roundings of the sum.
        ASSERT_LE(std::fabs(sa.sum - sb.sum),
                  float(len) * 0x1p-23f * std::fabs(sb.sum))
            << "length " << len;
      }
      ++checked;
    }
  EXPECT_EQ(checked, 41 * 60);
}

// A row the lanes sum differently from the serial order: 1 then sixteen
// halves of the last place of 1 (each lost one at a time, kept when
// gathered in one lane first).
TEST(CpuSoftmaxRow, SumIsTheLaneOrder) {
  std::vector<float> row(33, 0.0f);
  row[0] = 1.0f;
  for (size_t j = 1; j < 33; j += 2)
    row[j] = 0x1p-24f;
  float serial = 0;
  for (float v : row)
    serial += v;
  EXPECT_EQ(serial, 1.0f);
  EXPECT_EQ(cpu::rowSum(int64_t(row.size()), row.data()),
            laneSumReference(row));
  EXPECT_EQ(laneSumReference(row), 1.0f + 0x1p-20f);
}

// The maximum in the last chain, in the tail and at the very end: each lane
// of the eight chains and of the tail must be looked at.
TEST(CpuSoftmaxRow, MaximumFoundInEveryPosition) {
  for (int64_t len = 1; len <= 33; ++len)
    for (int64_t at = 0; at < len; ++at) {
      std::vector<float> row(size_t(len), -2.0f);
      row[size_t(at)] = 5.0f;
      EXPECT_EQ(cpu::rowMax(len, row.data()), 5.0f)
          << "length " << len << " at " << at;
    }
  std::vector<float> nans(9, std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(cpu::rowMax(9, nans.data()), -INFINITY);
}

} // namespace
} // namespace mpc
