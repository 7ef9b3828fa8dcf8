// The run loop's rule for launching a training step ahead (see the header).
#include "runtime/step_lookahead.h"

#include "runtime/eval_policy.h"
#include "support/diagnostics.h"

#include <cstring>

namespace mpc {

bool mayLaunchAhead(const LookaheadQuery &q) {
  if (!q.enabled || q.done >= q.steps)
    return false; // off, or the last step: the run ends after it
  // An evaluation after the step reads its state (and may stop the run:
  // --early-stop, --save-best); so does a checkpoint.
  if (q.evaluates && evalDueAt(q.globalStep, q.evalEvery))
    return false;
  if (q.saveEvery > 0 && q.done % q.saveEvery == 0)
    return false;
  // A diagnosis re-runs the step on its state before the update.
  if (q.debugOverflow)
    return false;
  // The launched step and the next could each add one to the skipped steps
  // in a row: the limit must stay out of reach of both (a stop at the next
  // step reports its diagnosis, which is only made when it is launched
  // with the launched step's results known).
  if (q.skipLimit > 0 && q.skippedInARow + 2 >= q.skipLimit)
    return false;
  return true;
}

bool stepLookaheadEnabled(const char *value, bool backendDefault) {
  if (!value || !*value)
    return backendDefault;
  if (std::strcmp(value, "0") == 0)
    return false;
  if (std::strcmp(value, "1") == 0)
    return true;
  throw Error(std::string("MPC_STEP_LOOKAHEAD='") + value +
              "': expected 0 (every step waits for its results) or 1 (the "
              "host launches one step ahead)");
}

} // namespace mpc
