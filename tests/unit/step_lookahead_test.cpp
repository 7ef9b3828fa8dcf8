// The run loop's rule for launching a training step before the last one's
// results are read (runtime/step_lookahead.h): never across a step after
// which the state is observed (an evaluation, a checkpoint, the last step)
// or the run may stop (the skipped-step limit), nor with a diagnosis
// wanted; and MPC_STEP_LOOKAHEAD's values.
#include "runtime/step_lookahead.h"
#include "support/diagnostics.h"

#include <gtest/gtest.h>

using namespace mpc;

namespace {

/// A step in the middle of a long run with nothing due after it.
LookaheadQuery middle() {
  LookaheadQuery q;
  q.enabled = true;
  q.done = 5;
  q.steps = 100;
  q.globalStep = 5;
  return q;
}

TEST(StepLookahead, AheadInTheMiddleOfARunOnlyWhenEnabled) {
  EXPECT_TRUE(mayLaunchAhead(middle()));
  LookaheadQuery q = middle();
  q.enabled = false;
  EXPECT_FALSE(mayLaunchAhead(q));
}

TEST(StepLookahead, NeverPastTheLastStep) {
  LookaheadQuery q = middle();
  q.done = q.steps - 1;
  EXPECT_TRUE(mayLaunchAhead(q));
  q.done = q.steps;
  EXPECT_FALSE(mayLaunchAhead(q));
  q.done = q.steps + 1;
  EXPECT_FALSE(mayLaunchAhead(q));
}

// The cadence counts global steps (a resumed run's too); a run without a
// validation set has none.
TEST(StepLookahead, NotAcrossAnEvaluation) {
  LookaheadQuery q = middle();
  q.evaluates = true;
  q.evalEvery = 4;
  q.globalStep = 8;
  q.done = 3; // a resumed run: its third step is global step 8
  EXPECT_FALSE(mayLaunchAhead(q));
  q.globalStep = 9;
  EXPECT_TRUE(mayLaunchAhead(q));
  q.evaluates = false;
  q.globalStep = 8;
  EXPECT_TRUE(mayLaunchAhead(q));
  // Without a cadence the only evaluation follows the last step.
  q.evaluates = true;
  q.evalEvery = 0;
  EXPECT_TRUE(mayLaunchAhead(q));
}

// --save-every counts this run's steps.
TEST(StepLookahead, NotAcrossACheckpoint) {
  LookaheadQuery q = middle();
  q.saveEvery = 5;
  q.done = 10;
  EXPECT_FALSE(mayLaunchAhead(q));
  q.done = 11;
  EXPECT_TRUE(mayLaunchAhead(q));
  q.saveEvery = 0;
  q.done = 10;
  EXPECT_TRUE(mayLaunchAhead(q));
}

TEST(StepLookahead, NotWithADiagnosisOfEverySkippedStep) {
  LookaheadQuery q = middle();
  q.debugOverflow = true;
  EXPECT_FALSE(mayLaunchAhead(q));
}

// The launched step and the one after it could each be skipped: the limit
// must be out of reach of both.
TEST(StepLookahead, NotWhereTheSkippedStepLimitCouldStopTheRun) {
  LookaheadQuery q = middle();
  q.skipLimit = 100;
  q.skippedInARow = 97;
  EXPECT_TRUE(mayLaunchAhead(q));
  q.skippedInARow = 98;
  EXPECT_FALSE(mayLaunchAhead(q));
  q.skippedInARow = 99;
  EXPECT_FALSE(mayLaunchAhead(q));
  // A limit of 1 or 2 stops within two steps of any step.
  for (int64_t limit : {1, 2}) {
    q.skipLimit = limit;
    q.skippedInARow = 0;
    EXPECT_FALSE(mayLaunchAhead(q)) << limit;
  }
  q.skipLimit = 3;
  EXPECT_TRUE(mayLaunchAhead(q));
  q.skipLimit = 0; // no limit
  q.skippedInARow = 1000;
  EXPECT_TRUE(mayLaunchAhead(q));
}

TEST(StepLookahead, EnvironmentSwitch) {
  EXPECT_TRUE(stepLookaheadEnabled(nullptr, true));
  EXPECT_FALSE(stepLookaheadEnabled(nullptr, false));
  EXPECT_FALSE(stepLookaheadEnabled("", false));
  EXPECT_FALSE(stepLookaheadEnabled("0", true));
  EXPECT_TRUE(stepLookaheadEnabled("1", false));
  for (const char *bad : {"2", "on", "yes", " 1", "1 ", "-1", "01"}) {
    try {
      stepLookaheadEnabled(bad, true);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const Error &e) {
      EXPECT_NE(std::string(e.what()).find("MPC_STEP_LOOKAHEAD='" +
                                           std::string(bad) + "'"),
                std::string::npos)
          << e.what();
    }
  }
}

} // namespace
