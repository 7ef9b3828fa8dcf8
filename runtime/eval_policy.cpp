// The training run's counter-only policies (runtime/eval_policy.h).
#include "runtime/eval_policy.h"

#include <cmath>

namespace mpc {

bool evalDueAt(int64_t step, int64_t evalEvery) {
  return evalEvery > 0 && step % evalEvery == 0;
}

bool recordEvalLoss(double loss, double &best, int64_t &evalsSinceBest) {
  // `loss >= best` is false for a NaN best: the first finite loss wins.
  if (std::isnan(loss) || loss >= best) {
    ++evalsSinceBest;
    return false;
  }
  best = loss;
  evalsSinceBest = 0;
  return true;
}

bool SkippedStepLimit::belowFloor(double scale) const {
  return !(scale >= minLossScale_) || !std::isfinite(scale);
}

bool SkippedStepLimit::record(bool skipped, double usedScale,
                              double nextScale) {
  bool stuck = belowFloor(usedScale) || !(nextScale < usedScale);
  inARow_ = skipped && stuck ? inARow_ + 1 : 0;
  return limit_ > 0 && inARow_ >= limit_;
}

} // namespace mpc
