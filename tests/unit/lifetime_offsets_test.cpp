// LifetimeOffsets (passes/lifetime_offsets.h) against the quadratic first fit
// it replaced in the memory planner: the same offset for every buffer, on
// random lifetimes and on lifetimes shaped like a training step's.
#include "passes/lifetime_offsets.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

namespace mpc {
namespace {

struct Buf {
  int64_t first, last;
  size_t bytes, offset = 0;
};

size_t alignUp(size_t n, size_t a) { return (n + a - 1) / a * a; }

/// The planner's previous loop: collect the placed buffers whose lifetimes
/// overlap, sort their ranges, and take the first gap.
void placeQuadratic(std::vector<Buf> &bufs, size_t alignment) {
  for (size_t i = 0; i < bufs.size(); ++i) {
    std::vector<std::pair<size_t, size_t>> busy;
    for (size_t j = 0; j < i; ++j)
      if (bufs[j].first <= bufs[i].last && bufs[i].first <= bufs[j].last)
        busy.push_back({bufs[j].offset, bufs[j].offset + bufs[j].bytes});
    std::sort(busy.begin(), busy.end());
    size_t at = 0;
    for (const auto &r : busy) {
      if (r.first >= at + bufs[i].bytes)
        break;
      at = std::max(at, alignUp(r.second, alignment));
    }
    bufs[i].offset = at;
  }
}

void placeTree(std::vector<Buf> &bufs, int64_t times, size_t alignment) {
  LifetimeOffsets tree(times);
  for (Buf &b : bufs) {
    b.offset = tree.lowestFit(b.first, b.last, b.bytes, alignment);
    tree.place(b.first, b.last, b.offset, b.bytes);
  }
}

TEST(LifetimeOffsets, MatchesTheQuadraticFirstFitOnRandomLifetimes) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 300; ++trial) {
    int64_t times = 1 + int64_t(rng() % 200);
    // Powers of two (rounded up by a mask) and one that is not (divided).
    static constexpr size_t kAlignments[] = {1, 4, 256, 48};
    size_t alignment = kAlignments[trial % 4];
    size_t count = 1 + rng() % 300;
    std::vector<Buf> bufs;
    for (size_t i = 0; i < count; ++i) {
      int64_t a = int64_t(rng() % times), b = int64_t(rng() % times);
      // Some long-lived buffers, some empty ones, sizes around the alignment.
      if (rng() % 10 == 0) {
        a = 0;
        b = times - 1;
      }
      size_t bytes = rng() % 8 == 0 ? 0 : 1 + rng() % 1000;
      bufs.push_back({std::min(a, b), std::max(a, b), bytes});
    }
    // The planner places the largest first (stable).
    std::stable_sort(bufs.begin(), bufs.end(), [](const Buf &x, const Buf &y) {
      return x.bytes > y.bytes;
    });
    std::vector<Buf> expected = bufs, got = bufs;
    placeQuadratic(expected, alignment);
    placeTree(got, times, alignment);
    for (size_t i = 0; i < count; ++i)
      ASSERT_EQ(got[i].offset, expected[i].offset)
          << "trial " << trial << " buffer " << i << " [" << got[i].first
          << ", " << got[i].last << "] bytes " << got[i].bytes;
  }
}

TEST(LifetimeOffsets, MatchesTheQuadraticFirstFitOnStepLikeLifetimes) {
  // What a training step looks like: forward values saved until their
  // backward use (nested lifetimes, a few sizes), short temporaries between,
  // and state updates at the end; sizes sorted as the planner sorts them or
  // shuffled, across several alignments.
  std::mt19937 rng(11);
  for (int trial = 0; trial < 60; ++trial) {
    int64_t layers = 1 + int64_t(rng() % 24), perLayer = 2 + rng() % 6;
    int64_t times = 2 * layers * perLayer + 8;
    const size_t sizes[] = {256, 1024, 4096, 8192, 32768, 65536, 4, 100};
    size_t alignment = trial % 4 == 0 ? 1 : (trial % 4 == 1 ? 64 : 256);
    std::vector<Buf> bufs;
    for (int64_t t = 0; t < layers * perLayer; ++t) {
      size_t bytes = sizes[rng() % 6];
      bufs.push_back({t, times - 1 - t - int64_t(rng() % 3), bytes});
      for (int k = int(rng() % 3); k > 0; --k) {
        int64_t a = int64_t(rng() % times);
        bufs.push_back(
            {a, std::min<int64_t>(times - 1, a + rng() % 4), sizes[rng() % 8]});
      }
    }
    if (trial % 3)
      std::stable_sort(
          bufs.begin(), bufs.end(),
          [](const Buf &x, const Buf &y) { return x.bytes > y.bytes; });
    else
      std::shuffle(bufs.begin(), bufs.end(), rng);
    std::vector<Buf> expected = bufs, got = bufs;
    placeQuadratic(expected, alignment);
    placeTree(got, times, alignment);
    for (size_t i = 0; i < bufs.size(); ++i)
      ASSERT_EQ(got[i].offset, expected[i].offset)
          << "trial " << trial << " buffer " << i << " [" << got[i].first
          << ", " << got[i].last << "] bytes " << got[i].bytes;
  }
}

TEST(LifetimeOffsets, ManySpansASetMoveThePool) {
  // Buffers smaller than the alignment leave gaps, so their spans never
  // merge: each leaf's set grows to dozens of spans, past the pool's first
  // room (8 spans a leaf), so sets and then the pool itself move while
  // spans are appended, extended and inserted. A 1-byte buffer between two
  // spans lands in a gap; one that overlaps a span's end extends it.
  for (size_t alignment : {size_t(256), size_t(48)}) {
    std::mt19937 rng(5);
    const int64_t times = 64;
    std::vector<Buf> bufs;
    for (int round = 0; round < 40; ++round)
      for (int64_t t = 0; t < times; ++t) {
        int64_t last = std::min<int64_t>(times - 1, t + int64_t(rng() % 3));
        bufs.push_back({t, last, 1 + rng() % 200});
      }
    std::vector<Buf> expected = bufs, got = bufs;
    placeQuadratic(expected, alignment);
    placeTree(got, times, alignment);
    for (size_t i = 0; i < bufs.size(); ++i)
      ASSERT_EQ(got[i].offset, expected[i].offset)
          << "alignment " << alignment << " buffer " << i << " ["
          << got[i].first << ", " << got[i].last << "] bytes " << got[i].bytes;
  }
}

TEST(LifetimeOffsets, UnsortedOrderAndOneTimeStep) {
  // Small buffers before large ones, everything live at the one time step.
  std::vector<Buf> bufs = {{0, 0, 10}, {0, 0, 300}, {0, 0, 0}, {0, 0, 5}};
  std::vector<Buf> expected = bufs, got = bufs;
  placeQuadratic(expected, 256);
  placeTree(got, 1, 256);
  for (size_t i = 0; i < bufs.size(); ++i)
    EXPECT_EQ(got[i].offset, expected[i].offset) << i;
  EXPECT_EQ(got[1].offset, 256u);
  EXPECT_EQ(got[3].offset, 768u);
}

} // namespace
} // namespace mpc
