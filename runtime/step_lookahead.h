// Whether the host may launch training step N+1 before it has read step
// N's results (the loss, the overflow flag, the scale), so that a device
// with asynchronous steps (the CUDA backend's resident step) never idles
// while the host logs, prints and cuts the next batch.
//
// A step launched ahead changes the state (its update) before step N's
// results are read. So it is launched only where nothing after step N
// observes the state or may end the run: no evaluation, checkpoint or last
// step follows N, no overflow diagnosis is wanted, and the skipped-step
// limit cannot stop the run at N nor at N+1 (whose diagnosis the stop
// would report). Every such boundary is known on the host before N's
// results arrive (the cadences are counts; the skip limit needs two more
// skipped steps than it has), so the rule needs no device-side gate, and a
// run's logs, checkpoints and exports are those of a synchronous run.
// A stop request (SIGINT/SIGTERM) is asked of every rank before a launch
// ahead, as it is before every launch: a stop seen there ends the run
// after step N, exactly where a synchronous run would end it.
#pragma once

#include <cstdint>
#include <string>

namespace mpc {

/// What the run loop knows about the step it has just launched.
struct LookaheadQuery {
  bool enabled = false;   ///< asynchronous steps, and not MPC_STEP_LOOKAHEAD=0
  int64_t done = 0;       ///< this run's steps once the launched one is done
  int64_t steps = 0;      ///< this run's planned steps
  int64_t globalStep = 0; ///< the launched step's 1-based global index
  bool evaluates = false; ///< a validation set is evaluated (--eval-data)
  int64_t evalEvery = 0;  ///< its cadence in global steps (0: at the end)
  int64_t saveEvery = 0;  ///< checkpoints every this many of the run's steps
  bool debugOverflow = false; ///< every skipped step is diagnosed
  /// --max-skipped-steps (0: no limit) and the unrecoverable skipped steps
  /// in a row up to the step before the launched one.
  int64_t skipLimit = 0, skippedInARow = 0;
};

/// Whether step done+1 may be launched before the launched step's results
/// are read (see the banner).
bool mayLaunchAhead(const LookaheadQuery &q);

/// MPC_STEP_LOOKAHEAD's answer: `value` "0" (off) or "1" (on); nullptr or
/// "" leaves it to the backend (`backendDefault`). Anything else is an
/// Error naming the variable.
bool stepLookaheadEnabled(const char *value, bool backendDefault);

} // namespace mpc
