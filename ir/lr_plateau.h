// torch.optim.lr_scheduler.ReduceLROnPlateau (mode "min", threshold_mode
// "rel"): mpc-run's --lr-schedule=reduce_lr_on_plateau steps it with each
// validation loss (--eval-data). The rate is the step's fp64 state
// `learning_rate` (passes/optimizer/lr_schedule.h), which the trainer sets
// between steps; the rule's counters are kept in checkpoints.
#pragma once

#include <cstdint>
#include <limits>
#include <string>

namespace mpc {

/// mpc-opt's --lr-factor, --lr-patience, --lr-threshold, --lr-cooldown,
/// --min-lr (torch's defaults), written in mpc.lr_plateau.
struct LrPlateauConfig {
  double factor = 0.1;
  int64_t patience = 10;
  double threshold = 1e-4;
  int64_t cooldown = 0;
  double minLr = 0;
  double eps = 1e-8; ///< a reduction smaller than this is not made
};

/// The rule's counters (torch's best, num_bad_epochs, cooldown_counter).
struct LrPlateauState {
  double best = std::numeric_limits<double>::infinity();
  int64_t badEvals = 0;
  int64_t cooldownLeft = 0;
};

/// One scheduler.step(metric) on the rate `lr`: returns the new rate.
double stepLrPlateau(const LrPlateauConfig &config, LrPlateauState &state,
                     double metric, double lr);

/// "factor=0.1,patience=10,threshold=0.0001,cooldown=0,min_lr=0".
std::string formatLrPlateau(const LrPlateauConfig &config);
/// The inverse; an Error naming `what` for anything else.
LrPlateauConfig parseLrPlateau(const std::string &text,
                               const std::string &what);

} // namespace mpc
