// Epochs, the schedule's end and durations for mpc-run (run_length.h).
#include "runtime/run_length.h"

#include "support/diagnostics.h"

#include <cmath>
#include <cstdio>

namespace mpc {

EpochPlan planEpochs(int64_t samples, int64_t batch, int64_t microBatches,
                     int64_t ranks, const std::string &source) {
  EpochPlan p;
  int64_t perRank = 0;
  if (__builtin_mul_overflow(batch, microBatches, &perRank) ||
      __builtin_mul_overflow(perRank, ranks, &p.globalBatch))
    throw Error("a step's global batch (" + std::to_string(batch) + " x " +
                std::to_string(microBatches) + " x " + std::to_string(ranks) +
                ") is more samples than 64 bits count");
  p.stepsPerEpoch = samples / p.globalBatch;
  if (p.stepsPerEpoch == 0) {
    std::string parts = std::to_string(batch);
    if (microBatches > 1)
      parts += " x " + std::to_string(microBatches) + " micro-batches";
    if (ranks > 1)
      parts += " x " + std::to_string(ranks) + " ranks";
    throw Error(source + ": holds " + std::to_string(samples) +
                " samples, fewer than one optimizer step takes (" + parts +
                (parts == std::to_string(batch)
                     ? ""
                     : " = " + std::to_string(p.globalBatch)) +
                ")");
  }
  p.leftOut = samples % p.globalBatch;
  p.batchesPerEpoch = p.stepsPerEpoch * microBatches * ranks;
  return p;
}

std::optional<int64_t> lrScheduleEnd(const LrSchedule &s) {
  switch (s.kind) {
  case LrScheduleKind::Linear:
  case LrScheduleKind::Cosine:
  case LrScheduleKind::CosineRestarts:
  case LrScheduleKind::Polynomial:
    return s.totalSteps;
  case LrScheduleKind::WarmupStableDecay:
    return s.warmupSteps + s.stableSteps + s.decaySteps;
  default:
    return std::nullopt;
  }
}

namespace {

const char *kindName(LrScheduleKind k) {
  switch (k) {
  case LrScheduleKind::Linear:
    return "linear";
  case LrScheduleKind::Cosine:
    return "cosine";
  case LrScheduleKind::CosineRestarts:
    return "cosine_with_restarts";
  case LrScheduleKind::Polynomial:
    return "polynomial";
  case LrScheduleKind::WarmupStableDecay:
    return "warmup_stable_decay";
  default:
    return "";
  }
}

std::string rate(double lr) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", lr);
  return buf;
}

} // namespace

std::string lrScheduleWarning(const LrSchedule &s, int64_t runEnd) {
  std::optional<int64_t> end = lrScheduleEnd(s);
  if (!end || runEnd <= *end)
    return "";
  std::string at = std::to_string(*end), steps = std::to_string(runEnd);
  std::string msg = std::string("the learning-rate schedule (") +
                    kindName(s.kind) + ") decays to " +
                    rate(scheduledLr(s, *end)) + " at step " + at +
                    ", the run takes " + steps + " steps; after step " + at;
  // transformers' cosine is periodic past its end: the rate climbs back.
  if (s.kind == LrScheduleKind::Cosine)
    msg += " the rate rises again (to " + rate(scheduledLr(s, runEnd - 1)) +
           " at the last step)";
  else
    msg += " the rate stays at " + rate(scheduledLr(s, runEnd - 1));
  return msg + (s.kind == LrScheduleKind::WarmupStableDecay
                    ? " (mpc-opt --lr-stable-steps and --lr-decay-steps set "
                      "where it ends)"
                    : " (mpc-opt --total-steps sets where it ends)");
}

std::string formatDuration(double seconds) {
  char buf[32];
  if (!(seconds >= 0) || std::isinf(seconds))
    return "?";
  if (seconds < 1)
    std::snprintf(buf, sizeof buf, "%.2fs", seconds);
  else if (seconds < 10)
    std::snprintf(buf, sizeof buf, "%.1fs", seconds);
  else if (seconds < 60)
    std::snprintf(buf, sizeof buf, "%.0fs", seconds);
  else if (seconds < 3600) {
    long s = std::lround(seconds);
    std::snprintf(buf, sizeof buf, "%ldm%02lds", s / 60, s % 60);
  } else {
    long m = std::lround(seconds / 60);
    std::snprintf(buf, sizeof buf, "%ldh%02ldm", m / 60, m % 60);
  }
  return buf;
}

} // namespace mpc
