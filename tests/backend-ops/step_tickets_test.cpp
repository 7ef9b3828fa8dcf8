// The CUDA backend's bookkeeping of asynchronous resident steps
// (runtime/cuda/step_tickets.h), without a GPU: two slots used in turn, the
// slot a step needs waited for before it is reused, and a step's device
// error reported by the wait on its own ticket, not by the submit of the
// next step that waited for its slot, nor lost.
#include "runtime/cuda/step_tickets.h"

#include <gtest/gtest.h>

using mpc::cuda::StepTickets;

namespace {

TEST(StepTickets, TwoSlotsInTurnEachWaitedForBeforeReuse) {
  StepTickets t(2);
  EXPECT_EQ(t.current(), 0);
  EXPECT_EQ(t.oldestInFlight(), -1);
  EXPECT_EQ(t.submit(), 1u); // step 1 in slot 0
  EXPECT_EQ(t.current(), 1);
  EXPECT_FALSE(t.inFlight(t.current())); // slot 1 is free: no wait
  EXPECT_EQ(t.submit(), 2u);             // step 2 in slot 1, launched ahead
  EXPECT_EQ(t.current(), 0);
  // Step 3 needs slot 0: step 1 must arrive first, and only step 1.
  ASSERT_TRUE(t.inFlight(t.current()));
  EXPECT_EQ(t.oldestInFlight(t.ticket(t.current())), 0);
  t.arrived(0, "");
  EXPECT_EQ(t.oldestInFlight(t.ticket(t.current())), -1);
  EXPECT_EQ(t.oldestInFlight(), 1); // step 2 still in flight
  EXPECT_EQ(t.submit(), 3u);
  // Waiting for step 3 waits for step 2 first (oldest first).
  EXPECT_EQ(t.oldestInFlight(3), 1);
  t.arrived(1, "");
  EXPECT_EQ(t.oldestInFlight(3), 0);
  t.arrived(0, "");
  EXPECT_EQ(t.oldestInFlight(), -1);
  EXPECT_EQ(t.takeError(3), "");
}

TEST(StepTickets, AnErrorIsReportedByTheWaitOnItsStep) {
  StepTickets t(2);
  uint64_t one = t.submit(), two = t.submit();
  // Step 3's setup waits for slot 0: step 1 found bad labels.
  t.arrived(0, "node 'loss': label out of range");
  // The submit of step 3 reports nothing; the wait on step 1 does, once.
  EXPECT_EQ(t.takeError(0), "");
  EXPECT_EQ(t.takeError(one), "node 'loss': label out of range");
  EXPECT_EQ(t.takeError(one), "");
  t.arrived(1, "");
  EXPECT_EQ(t.takeError(two), "");
}

TEST(StepTickets, AWaitOnALaterStepReportsAnEarlierStepsError) {
  StepTickets t(2);
  t.submit();
  uint64_t two = t.submit();
  t.arrived(0, "first");
  t.arrived(1, "second");
  EXPECT_EQ(t.takeError(two), "first"); // the first, both forgotten
  EXPECT_EQ(t.takeError(UINT64_MAX), "");
}

// synchronize(): what was enqueued since the last submit arrives too; its
// error is the newest, reported by a full wait only.
TEST(StepTickets, WorkSinceTheLastSubmitCountsAsTheNewest) {
  StepTickets t(2);
  uint64_t one = t.submit();
  t.arrived(t.current(), "staged node failed");
  t.arrived(0, "");
  EXPECT_EQ(t.takeError(one), "");
  EXPECT_EQ(t.takeError(UINT64_MAX), "staged node failed");
}

TEST(StepTickets, OneSlotIsSynchronous) {
  StepTickets t(0); // at least one
  EXPECT_EQ(t.submit(), 1u);
  EXPECT_EQ(t.current(), 0);
  EXPECT_TRUE(t.inFlight(0)); // the next step waits for it first
}

} // namespace
