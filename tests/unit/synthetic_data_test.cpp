// --synthetic data (Dataset::synthetic): each sample is drawn when a batch
// takes it, from (seed, input, sample index), so the data holds no memory
// whatever its sample count (a --grad-accum window of 65536 micro-batches
// made none of them up front), and batches are a pure function of (index,
// seed): the same in every run and every resumed run.
#include "runtime/data/dataset.h"

#include <gtest/gtest.h>

#include <cmath>

namespace mpc {
namespace {

std::vector<DataInputSpec> specs() {
  DataInputSpec x, y, mask;
  x.name = "x";
  x.dtype = DType::F32;
  x.sampleDims = {3, 5};
  y.name = "y";
  y.dtype = DType::I64;
  y.numClasses = 7;
  mask.name = "mask";
  mask.dtype = DType::Bool;
  mask.sampleDims = {2};
  return {x, y, mask};
}

TEST(SyntheticData, HoldsNoMemoryWhateverItsSize) {
  // 2^40 samples of 15 floats would be 60 TiB made up front.
  Dataset d = Dataset::synthetic(specs(), int64_t(1) << 40, 7);
  EXPECT_EQ(d.numSamples(), int64_t(1) << 40);
  auto b = d.batch(int64_t(1) << 37, 4, false, 7);
  ASSERT_EQ(b.size(), 3u);
  EXPECT_EQ(b[0].first, "x");
  EXPECT_EQ(b[0].second.dims, (std::vector<int64_t>{4, 3, 5}));
  EXPECT_EQ(b[1].second.dims, (std::vector<int64_t>{4}));
  EXPECT_EQ(b[2].second.dims, (std::vector<int64_t>{4, 2}));
}

TEST(SyntheticData, SamplesAreAFunctionOfSeedAndIndex) {
  Dataset a = Dataset::synthetic(specs(), 64, 3),
          b = Dataset::synthetic(specs(), 64, 3),
          other = Dataset::synthetic(specs(), 64, 4);
  for (int64_t i = 0; i < 4; ++i)
    for (bool shuffle : {false, true}) {
      auto x = a.batch(i, 16, shuffle, 3), y = b.batch(i, 16, shuffle, 3);
      for (size_t k = 0; k < x.size(); ++k)
        EXPECT_EQ(x[k].second.bytes, y[k].second.bytes) << i << " " << k;
    }
  EXPECT_NE(a.batch(0, 16, false, 3)[0].second.bytes,
            other.batch(0, 16, false, 4)[0].second.bytes);
  // A sample is the same in whichever batch takes it: batch 1 of 8 holds
  // samples 8..15, the second half of batch 0 of 16.
  auto whole = a.batch(0, 16, false, 3), half = a.batch(1, 8, false, 3);
  const Tensor &w = whole[0].second, &h = half[0].second;
  for (int64_t e = 0; e < 8 * 15; ++e)
    ASSERT_EQ(w.getAsDouble(8 * 15 + e), h.getAsDouble(e));
}

TEST(SyntheticData, ValuesHaveTheirDistributionAndRange) {
  Dataset d = Dataset::synthetic(specs(), 4096, 11);
  auto b = d.batch(0, 4096, false, 11);
  const Tensor &x = b[0].second, &y = b[1].second, &mask = b[2].second;
  double sum = 0, squares = 0;
  for (int64_t i = 0; i < x.numel(); ++i) {
    double v = x.getAsDouble(i);
    ASSERT_TRUE(std::isfinite(v));
    sum += v;
    squares += v * v;
  }
  double mean = sum / double(x.numel());
  double variance = squares / double(x.numel()) - mean * mean;
  EXPECT_NEAR(mean, 0.0, 0.03); // 61440 draws of N(0, 1)
  EXPECT_NEAR(variance, 1.0, 0.03);
  std::vector<int> seen(7, 0);
  for (int64_t i = 0; i < y.numel(); ++i) {
    int64_t label = int64_t(y.getAsDouble(i));
    ASSERT_GE(label, 0);
    ASSERT_LT(label, 7);
    ++seen[size_t(label)];
  }
  for (int count : seen)
    EXPECT_GT(count, 4096 / 7 / 2); // every class drawn, roughly evenly
  int trues = 0;
  for (int64_t i = 0; i < mask.numel(); ++i)
    trues += mask.getAsDouble(i) != 0;
  EXPECT_GT(trues, 3500);
  EXPECT_LT(trues, 4700);
}

} // namespace
} // namespace mpc
