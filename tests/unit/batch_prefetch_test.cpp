// BatchPrefetcher (runtime/data/batch_prefetch.h): the batch asked for is
// the one made for its index, whether made ahead or not; an error making a
// batch ahead is thrown only when that batch is asked for, on the caller's
// thread; the thread is joined with a batch in the making.
#include "runtime/data/batch_prefetch.h"

#include "support/diagnostics.h"

#include <atomic>
#include <chrono>
#include <gtest/gtest.h>
#include <thread>

namespace mpc {
namespace {

/// A batch holding its index, so a test sees which one it got.
BatchPrefetcher::Batch batchOf(int64_t index) {
  Tensor t = Tensor::scalar(DType::I64, double(index));
  return {{"index", t}};
}

int64_t indexOf(const BatchPrefetcher::Batch &b) {
  return int64_t(b.at(0).second.getAsDouble(0));
}

TEST(BatchPrefetch, GivesTheAskedBatchInOrderAndOutOfOrder) {
  std::atomic<int> made{0};
  BatchPrefetcher p(
      [&](int64_t i) {
        ++made;
        return batchOf(i);
      },
      3);
  EXPECT_EQ(indexOf(p.get(1)), 1);
  EXPECT_EQ(indexOf(p.get(4)), 4); // made ahead
  EXPECT_EQ(indexOf(p.get(7)), 7);
  EXPECT_EQ(indexOf(p.get(2)), 2); // not the one ahead (10): made now
  EXPECT_EQ(indexOf(p.get(5)), 5);
  // 1, 4, 7, 10 (dropped), 2, 5, and 8 in the making or made.
  EXPECT_GE(made.load(), 6);
  EXPECT_LE(made.load(), 7);
}

TEST(BatchPrefetch, AnErrorAheadIsThrownOnlyForItsBatch) {
  auto make = [](int64_t i) {
    if (i == 3)
      throw Error("data.npy: sample 3 is bad");
    return batchOf(i);
  };
  {
    BatchPrefetcher p(make, 1);
    EXPECT_EQ(indexOf(p.get(1)), 1);
    EXPECT_EQ(indexOf(p.get(2)), 2); // 3 fails ahead, silently
    try {
      p.get(3);
      FAIL() << "batch 3 was given";
    } catch (const Error &e) {
      EXPECT_STREQ(e.what(), "data.npy: sample 3 is bad");
    }
    // The prefetcher goes on: the next batch is made afresh.
    EXPECT_EQ(indexOf(p.get(4)), 4);
  }
  {
    // Asked for another batch, the failed one ahead is dropped unseen.
    BatchPrefetcher p(make, 1);
    EXPECT_EQ(indexOf(p.get(2)), 2);
    EXPECT_EQ(indexOf(p.get(0)), 0);
  }
}

TEST(BatchPrefetch, JoinsWithABatchInTheMaking) {
  std::atomic<bool> started{false};
  auto t0 = std::chrono::steady_clock::now();
  {
    BatchPrefetcher p(
        [&](int64_t i) {
          if (i == 1) {
            started = true;
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
          }
          return batchOf(i);
        },
        1);
    p.get(0);
    while (!started)
      std::this_thread::yield();
  } // the destructor waits for batch 1
  EXPECT_GE(std::chrono::steady_clock::now() - t0,
            std::chrono::milliseconds(100));
}

} // namespace
} // namespace mpc
