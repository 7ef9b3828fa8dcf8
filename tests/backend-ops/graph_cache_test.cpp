// The CUDA backend's graph decisions (runtime/cuda/graph_cache.h), without
// a GPU: which step of which plan is captured, replayed or run eagerly; the
// trainer's and the evaluator's graphs kept side by side; eviction; every
// graph dropped when the addresses they hold go stale; a failed capture
// turning graphs off for good.
#include "runtime/cuda/graph_cache.h"

#include <gtest/gtest.h>

#include <algorithm>

using mpc::cuda::GraphCache;
using Action = GraphCache::Action;

namespace {

void *handle(int i) { return reinterpret_cast<void *>(uintptr_t(0x1000 + i)); }

TEST(GraphCache, WarmUpThenCaptureThenReplay) {
  GraphCache c(true);
  EXPECT_EQ(c.begin(7), Action::Eager); // sizes scratch, picks algorithms
  EXPECT_EQ(c.begin(7), Action::Capture);
  EXPECT_TRUE(c.store(7, handle(1)).empty());
  EXPECT_EQ(c.graph(7), handle(1));
  for (int i = 0; i < 5; ++i)
    EXPECT_EQ(c.begin(7), Action::Replay);
}

TEST(GraphCache, TrainerAndEvaluatorKeepTheirGraphsAcrossSwitches) {
  GraphCache c(true);
  const uint64_t train = 1, eval = 2;
  c.begin(train);
  ASSERT_EQ(c.begin(train), Action::Capture);
  c.store(train, handle(1));
  // An --eval-data pass of three batches: warm-up, capture, replay.
  EXPECT_EQ(c.begin(eval), Action::Eager);
  ASSERT_EQ(c.begin(eval), Action::Capture);
  c.store(eval, handle(2));
  EXPECT_EQ(c.begin(eval), Action::Replay);
  // Training goes on with its own graph, and so does the next pass.
  EXPECT_EQ(c.begin(train), Action::Replay);
  EXPECT_EQ(c.graph(train), handle(1));
  for (int pass = 0; pass < 3; ++pass) {
    EXPECT_EQ(c.begin(eval), Action::Replay) << "pass " << pass;
    EXPECT_EQ(c.begin(train), Action::Replay) << "pass " << pass;
  }
  EXPECT_EQ(c.graphs(), 2u);
}

TEST(GraphCache, EvictsTheLeastRecentlyUsedPastCapacity) {
  GraphCache c(true, 2);
  for (uint64_t plan = 1; plan <= 2; ++plan) {
    c.begin(plan);
    c.begin(plan);
    EXPECT_TRUE(c.store(plan, handle(int(plan))).empty());
  }
  EXPECT_EQ(c.begin(1), Action::Replay); // plan 2 is now the older one
  c.begin(3);
  ASSERT_EQ(c.begin(3), Action::Capture);
  std::vector<void *> evicted = c.store(3, handle(3));
  ASSERT_EQ(evicted.size(), 1u);
  EXPECT_EQ(evicted[0], handle(2));
  EXPECT_EQ(c.graph(2), nullptr);
  EXPECT_EQ(c.begin(2), Action::Capture); // warm already: no second warm-up
  EXPECT_EQ(c.graph(1), handle(1));
}

TEST(GraphCache, StaleAddressesDropEveryGraphAndPlansCaptureAgainAtOnce) {
  GraphCache c(true);
  for (uint64_t plan : {1, 2}) {
    c.begin(plan);
    c.begin(plan);
    c.store(plan, handle(int(plan)));
  }
  std::vector<void *> dropped = c.dropAll();
  std::sort(dropped.begin(), dropped.end());
  EXPECT_EQ(dropped, (std::vector<void *>{handle(1), handle(2)}));
  EXPECT_EQ(c.graphs(), 0u);
  EXPECT_EQ(c.begin(1), Action::Capture);
  EXPECT_EQ(c.begin(2), Action::Capture);
}

TEST(GraphCache, AFailedCaptureTurnsGraphsOffForGood) {
  GraphCache c(true);
  c.begin(1);
  c.begin(1);
  c.store(1, handle(1));
  c.begin(2);
  ASSERT_EQ(c.begin(2), Action::Capture);
  std::vector<void *> all = c.captureFailed();
  EXPECT_EQ(all, std::vector<void *>{handle(1)});
  EXPECT_FALSE(c.enabled());
  for (uint64_t plan : {1, 2, 3})
    for (int i = 0; i < 3; ++i)
      EXPECT_EQ(c.begin(plan), Action::Eager);
}

TEST(GraphCache, AnInterruptedStepStartsItsPlanOverFromAWarmUp) {
  GraphCache c(true);
  c.begin(1);
  ASSERT_EQ(c.begin(1), Action::Capture);
  EXPECT_TRUE(c.abort(1).empty()); // nothing stored yet
  EXPECT_EQ(c.begin(1), Action::Eager);
  EXPECT_EQ(c.begin(1), Action::Capture);
}

TEST(GraphCache, DisabledRunsEverythingEagerly) {
  GraphCache c(false);
  for (int i = 0; i < 4; ++i)
    EXPECT_EQ(c.begin(1), Action::Eager);
}

TEST(GraphCache, ManyShortLivedPlansAreForgottenWithoutLosingGraphs) {
  GraphCache c(true, 4);
  c.begin(1);
  c.begin(1);
  c.store(1, handle(1));
  // A re-plan per shape, 200 of them, each run once.
  for (uint64_t plan = 100; plan < 300; ++plan) {
    EXPECT_EQ(c.begin(plan), Action::Eager);
    if (plan % 50 == 0)
      EXPECT_EQ(c.begin(1), Action::Replay);
  }
  EXPECT_EQ(c.graph(1), handle(1));
  EXPECT_EQ(c.begin(1), Action::Replay);
}

} // namespace
