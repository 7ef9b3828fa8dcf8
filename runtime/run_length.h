// How long mpc-run trains: epochs counted in optimizer steps, where the
// learning-rate schedule ends against where the run does, and the time left.
//
// An epoch is floor(samples / G) optimizer steps, G = batch x K micro-batches
// x ranks (the global batch of one step); the samples a last partial step
// would take are left out of the epoch (torch's drop_last), in each epoch's
// order (runtime/data/dataset.h). --epochs=E runs to E epochs in all: after
// --resume, the steps that are left of them (a torch script's
// `for epoch in range(start_epoch, epochs)`, transformers' Trainer with
// resume_from_checkpoint).
#pragma once

#include "kernels/common/lr_schedule_math.h"

#include <cstdint>
#include <optional>
#include <string>

namespace mpc {

/// The data's epochs in optimizer steps.
struct EpochPlan {
  int64_t globalBatch = 0;   ///< samples per optimizer step: B x K x ranks
  int64_t stepsPerEpoch = 0; ///< floor(samples / globalBatch)
  int64_t leftOut = 0;       ///< samples of each epoch no full step takes
  /// Dataset::batch's batches per epoch: stepsPerEpoch x K x ranks.
  int64_t batchesPerEpoch = 0;
};

/// The plan for `samples` samples read in steps of `microBatches` batches
/// of `batch` on each of `ranks` ranks. Throws Error naming `source` when
/// they do not fill one step.
EpochPlan planEpochs(int64_t samples, int64_t batch, int64_t microBatches,
                     int64_t ranks, const std::string &source);

/// The data order across steps, micro-batches and ranks: the batch of
/// Dataset::batch (batches of B samples, `batchesPerEpoch` of them an
/// epoch) that rank `rank` of `ranks` reads as micro-batch `j` of the
/// optimizer step after `stepsDone`, with K = `microBatches`. Micro-batch j
/// of step s is global batch s*K + j of N*B samples, the same samples in
/// the same order as batch s of K*N*B, and rank r takes its r-th B: any
/// number of ranks and micro-batches reads the order of one process.
inline int64_t batchIndexOf(int64_t stepsDone, int64_t microBatches, int64_t j,
                            int64_t ranks, int64_t rank) {
  return (stepsDone * microBatches + j) * ranks + rank;
}

/// The update count at which the schedule has decayed all the way: the
/// total steps of linear, cosine, cosine_with_restarts and polynomial, the
/// warmup, stable and decay steps of warmup_stable_decay; nullopt for the
/// schedules that do not end (constant, step, exponential, inverse_sqrt).
std::optional<int64_t> lrScheduleEnd(const LrSchedule &s);

/// The warning for a run whose updates go up to `runEnd` (the schedule's
/// counter after the run's last step) when the schedule ends before:
/// where it ends, at what rate, and what the rate does after; "" when the
/// run stays within the schedule.
std::string lrScheduleWarning(const LrSchedule &s, int64_t runEnd);

/// A duration for progress lines: "0.04s", "4.2s", "42s", "3m05s", "2h07m".
std::string formatDuration(double seconds);

} // namespace mpc
