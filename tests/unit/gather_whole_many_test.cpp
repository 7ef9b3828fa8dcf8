// gatherWholeMany (runtime/sharded_state.h): sharded state gathered whole
// in buckets of collectives rather than one per tensor. Every rank gets
// every tensor's bits, whatever the mix of dtypes and sizes, a tensor
// larger than a bucket, an empty one, and one rank (no world).
#include "runtime/sharded_state.h"
#include "support/diagnostics.h"
#include "tests/support/thread_world.h"

#include <gtest/gtest.h>

#include <random>

using namespace mpc;

namespace {

/// Tensors of mixed dtypes and sizes with random bytes.
std::vector<Tensor> someState() {
  std::mt19937 rng(7);
  std::vector<Tensor> t;
  const std::vector<std::pair<DType, std::vector<int64_t>>> kinds = {
      {DType::F32, {20, 10}}, {DType::F16, {7}},   {DType::F32, {1}},
      {DType::BF16, {3, 5}},  {DType::F32, {0}},   {DType::I64, {2, 2}},
      {DType::F32, {301}},    {DType::F16, {2, 9}}};
  for (const auto &[dtype, dims] : kinds) {
    Tensor x = Tensor::zeros(dtype, dims);
    for (uint8_t &b : x.bytes)
      b = uint8_t(rng());
    t.push_back(std::move(x));
  }
  return t;
}

TEST(GatherWholeMany, EveryRankGetsEveryTensorWholeInBucketsOfAnySize) {
  const std::vector<Tensor> whole = someState();
  for (int ranks : {2, 3}) {
    // 64 bytes: several buckets, and the 301-float tensor (404 bytes a
    // chunk on 3 ranks) alone in its own; the default: one bucket.
    for (size_t bucket : {size_t(64), kGatherBucketBytes}) {
      SCOPED_TRACE(std::to_string(ranks) + " ranks, buckets of " +
                   std::to_string(bucket) + " bytes");
      test::ThreadWorld world(ranks);
      std::vector<std::vector<Tensor>> got(static_cast<size_t>(ranks));
      world.run([&](int r) {
        std::vector<Tensor> chunks;
        for (const Tensor &t : whole)
          chunks.push_back(chunkOf(t, ranks, r));
        std::vector<const Tensor *> parts;
        std::vector<std::vector<int64_t>> dims;
        for (size_t i = 0; i < whole.size(); ++i) {
          parts.push_back(&chunks[i]);
          dims.push_back(whole[i].dims);
        }
        got[size_t(r)] =
            gatherWholeMany(&world.rank(r), parts, dims, ranks, bucket);
      });
      for (int r = 0; r < ranks; ++r) {
        ASSERT_EQ(got[size_t(r)].size(), whole.size());
        for (size_t i = 0; i < whole.size(); ++i) {
          EXPECT_EQ(got[size_t(r)][i].dtype, whole[i].dtype) << i;
          EXPECT_EQ(got[size_t(r)][i].dims, whole[i].dims) << i;
          EXPECT_EQ(got[size_t(r)][i].bytes, whole[i].bytes)
              << "rank " << r << ", tensor " << i;
        }
      }
    }
  }
}

TEST(GatherWholeMany, OneRankWithoutAWorldGetsItsOwnTensors) {
  const std::vector<Tensor> whole = someState();
  std::vector<const Tensor *> parts;
  std::vector<std::vector<int64_t>> dims;
  std::vector<Tensor> chunks;
  chunks.reserve(whole.size());
  for (const Tensor &t : whole) {
    chunks.push_back(chunkOf(t, 1, 0));
    parts.push_back(&chunks.back());
    dims.push_back(t.dims);
  }
  std::vector<Tensor> got = gatherWholeMany(nullptr, parts, dims, 1, 64);
  ASSERT_EQ(got.size(), whole.size());
  for (size_t i = 0; i < whole.size(); ++i)
    EXPECT_EQ(got[i].bytes, whole[i].bytes) << i;
}

TEST(GatherWholeMany, AChunkOfTheWrongSizeIsRefused) {
  Tensor chunk = Tensor::zeros(DType::F32, {5});
  try {
    gatherWholeMany(nullptr, {&chunk}, {{20, 10}}, 1);
    FAIL() << "no error";
  } catch (const Error &e) {
    EXPECT_STREQ(e.what(), "a chunk of 5 elements where 200 were expected");
  }
}

} // namespace
