// The training run's policies that depend only on counters: when the
// validation set is evaluated, what counts as a better validation loss,
// when --early-stop ends the run, and when a run of skipped steps cannot
// recover (--max-skipped-steps, --min-loss-scale).
//
// They are functions of the global step and of the counters a checkpoint
// keeps, never of the process's own step count, so that a run resumed from
// a checkpoint meets the same evaluations, best losses and stops as the
// straight run (runtime/training_session.h applies them).
#pragma once

#include <cstdint>

namespace mpc {

/// Whether the validation set is evaluated after global step `step` on the
/// --eval-every=N cadence (N = 0: no cadence, only after the last step).
bool evalDueAt(int64_t step, int64_t evalEvery);

/// Records a scheduled evaluation's `loss` against the run's `best` (NaN:
/// none yet) and the evaluations since it: returns true, with `best` set
/// and the count cleared, when the loss is lower; a NaN loss is never the
/// best. The counters are those Trainer keeps in its checkpoints.
bool recordEvalLoss(double loss, double &best, int64_t &evalsSinceBest);

/// Whether --early-stop=N (0: never) ends the run after this many
/// evaluations without a lower loss.
inline bool earlyStopDue(int64_t evalsSinceBest, int64_t earlyStop) {
  return earlyStop > 0 && evalsSinceBest >= earlyStop;
}

/// --max-skipped-steps counts the skipped steps in a row that cannot
/// recover: the scale is below the floor, or a skip did not lower it (a
/// static scale, or NaN or inf, which backoff leaves as they are), so every
/// step to come overflows as this one did.
class SkippedStepLimit {
public:
  /// `limit` 0: never stops.
  SkippedStepLimit(int64_t limit, double minLossScale)
      : limit_(limit), minLossScale_(minLossScale) {}

  /// Whether `scale` is below --min-loss-scale or not a finite number.
  bool belowFloor(double scale) const;
  /// Whether the next step should trace an overflow (it costs a second run
  /// of a skipped step): only when a stop may need the diagnosis.
  bool wantsDiagnosis(double nextScale) const {
    return limit_ > 0 && (belowFloor(nextScale) || inARow_ > 0);
  }
  /// Counts a step that used `usedScale`, after which the scale is
  /// `nextScale`; returns true when the run must stop.
  bool record(bool skipped, double usedScale, double nextScale);
  /// The unrecoverable skipped steps in a row so far.
  int64_t inARow() const { return inARow_; }
  double minLossScale() const { return minLossScale_; }

private:
  int64_t limit_ = 0;
  double minLossScale_ = 1;
  int64_t inARow_ = 0;
};

/// How often the progress line is printed: every tenth of the run's steps
/// (every step of a run of fewer than ten), and after the last.
inline int64_t progressEvery(int64_t steps) {
  return steps >= 10 ? steps / 10 : 1;
}

} // namespace mpc
