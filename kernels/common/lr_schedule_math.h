// The learning-rate schedules of mpc.LearningRate: the learning rate of an
// optimizer update from the number of updates applied before it.
//
// They follow the closed forms users get from PyTorch and transformers,
// computed in double as Python computes them (the result is the Python
// float torch.optim reads from param_group["lr"]):
//   warmup       s < W: s / max(1, W)       (every transformers schedule)
//   constant     1                          (get_constant_schedule_with_warmup)
//   linear       max(0, (T - s) / max(1, T - W))
//                                           (get_linear_schedule_with_warmup)
//   cosine       p = (s - W) / max(1, T - W);
//                f = 0.5 (1 + cos(pi p)); max(0, f (1 - r) + r)
//                (get_cosine_schedule_with_warmup; with r = min_lr_ratio,
//                get_cosine_with_min_lr_schedule_with_warmup, and without
//                warmup torch's CosineAnnealingLR(T_max=T, eta_min=r lr))
//   cosine_with_restarts
//                p as cosine; p >= 1: 0; else
//                max(0, 0.5 (1 + cos(pi ((cycles p) mod 1))))
//                (get_cosine_with_hard_restarts_schedule_with_warmup)
//   polynomial   s > T: lr_end / lr; else
//                ((lr - lr_end) (1 - (s - W) / (T - W)) ^ power + lr_end) / lr
//                (get_polynomial_decay_schedule_with_warmup)
//   inverse_sqrt 1 / sqrt((s + timescale - W) / timescale)
//                (get_inverse_sqrt_schedule)
//   warmup_stable_decay  (get_wsd_schedule; its own warmup, from R)
//                s < W: max(0, warm(s / max(1, W)) (1 - R) + R);
//                then 1 for `stable_steps`; then for `decay_steps`, q the
//                decay's progress, max(0, decay(q) (1 - R) + R); then R.
//                warm: p, 0.5 (1 - cos(pi p)) or 1 - sqrt(1 - p); decay:
//                1 - q, 0.5 (1 + cos(pi q)) or 1 - sqrt(q)
//                (linear, cosine, 1-sqrt)
//   step         gamma ^ floor((s - W) / step_size)   (torch's StepLR)
//   exponential  gamma ^ (s - W)                      (torch's ExponentialLR)
// lr = base_lr * factor. StepLR and ExponentialLR multiply the previous lr
// by gamma in place of the power; the closed form is their
// _get_closed_form_lr, within a few double ulps of it. Past T the linear
// schedule stays at 0 and the cosine goes up again, as transformers' do.
//
// The CPU kernel, the CUDA kernel and mpc-run's progress line call the same
// function; the device's cos and pow are within 2 ulp of the host's in
// double, so the rates agree to the last bit but on a rounding tie.
#pragma once

#include "ir/host_device.h"

#include <cmath>
#include <cstdint>

namespace mpc {

enum class LrScheduleKind : int32_t {
  Constant,
  Linear,
  Cosine,
  Step,
  CosineRestarts,
  Polynomial,
  InverseSqrt,
  WarmupStableDecay
};

/// warmup_stable_decay's warmup_type and decay_type.
enum class LrShape : int32_t { Linear, Cosine, OneMinusSqrt };

/// An mpc.LearningRate node's attributes (exponential is step with
/// step_size 1).
struct LrSchedule {
  LrScheduleKind kind = LrScheduleKind::Constant;
  double baseLr = 1e-3;
  int64_t warmupSteps = 0;
  int64_t totalSteps = 0; ///< linear, cosine, cosine_with_restarts, polynomial
  double minLrRatio = 0;  ///< cosine
  int64_t stepSize = 1;   ///< step
  double gamma = 0.1;     ///< step
  int64_t cycles = 1;     ///< cosine_with_restarts
  double lrEnd = 1e-7;    ///< polynomial: the rate reached at total_steps
  double power = 1;       ///< polynomial
  int64_t timescale = 1;  ///< inverse_sqrt
  int64_t stableSteps = 0, decaySteps = 0; ///< warmup_stable_decay
  LrShape warmupShape = LrShape::Linear, decayShape = LrShape::Cosine;
};

/// warmup_stable_decay's factor (transformers' _get_wsd_scheduler_lambda;
/// num_cycles 0.5).
MPC_HD double wsdFactor(const LrSchedule &s, int64_t step) {
  const double pi = 3.141592653589793, r = s.minLrRatio;
  const int64_t w = s.warmupSteps;
  double f;
  if (step < w) {
    double p = double(step) / double(w > 1 ? w : 1);
    f = s.warmupShape == LrShape::Cosine         ? 0.5 * (1.0 - ::cos(pi * p))
        : s.warmupShape == LrShape::OneMinusSqrt ? 1.0 - ::sqrt(1.0 - p)
                                                 : p;
  } else if (step < w + s.stableSteps) {
    return 1.0;
  } else if (step < w + s.stableSteps + s.decaySteps) {
    double q = double(step - w - s.stableSteps) /
               double(s.decaySteps > 1 ? s.decaySteps : 1);
    f = s.decayShape == LrShape::Cosine         ? 0.5 * (1.0 + ::cos(pi * q))
        : s.decayShape == LrShape::OneMinusSqrt ? 1.0 - ::sqrt(q)
                                                : 1.0 - q;
  } else {
    return r;
  }
  f = f * (1.0 - r) + r;
  return f > 0.0 ? f : 0.0;
}

/// The multiplier of base_lr for the update after `step` applied updates.
MPC_HD double lrFactor(const LrSchedule &s, int64_t step) {
  if (s.kind == LrScheduleKind::WarmupStableDecay)
    return wsdFactor(s, step);
  const int64_t w = s.warmupSteps;
  if (step < w)
    return double(step) / double(w > 1 ? w : 1);
  const int64_t horizonSteps = s.totalSteps - w;
  const double horizon = double(horizonSteps > 1 ? horizonSteps : 1);
  switch (s.kind) {
  case LrScheduleKind::Linear: {
    double f = double(s.totalSteps - step) / horizon;
    return f > 0.0 ? f : 0.0;
  }
  case LrScheduleKind::Cosine: {
    double progress = double(step - w) / horizon;
    double f = 0.5 * (1.0 + ::cos(3.141592653589793 * progress));
    f = f * (1.0 - s.minLrRatio) + s.minLrRatio;
    return f > 0.0 ? f : 0.0;
  }
  case LrScheduleKind::Step:
    return ::pow(s.gamma, double((step - w) / s.stepSize));
  case LrScheduleKind::CosineRestarts: {
    double progress = double(step - w) / horizon;
    if (progress >= 1.0)
      return 0.0;
    double turn = double(s.cycles) * progress; // >= 0: Python's % is fmod
    double f = 0.5 * (1.0 + ::cos(3.141592653589793 * ::fmod(turn, 1.0)));
    return f > 0.0 ? f : 0.0;
  }
  case LrScheduleKind::Polynomial: {
    if (step > s.totalSteps)
      return s.lrEnd / s.baseLr;
    double remaining =
        1.0 - double(step - w) / double(s.totalSteps - w); // T > W
    double decayed = (s.baseLr - s.lrEnd) * ::pow(remaining, s.power) + s.lrEnd;
    return decayed / s.baseLr;
  }
  case LrScheduleKind::InverseSqrt: {
    int64_t shifted = step + (s.timescale - w);
    return 1.0 / ::sqrt(double(shifted) / double(s.timescale));
  }
  default:
    return 1.0;
  }
}

/// The learning rate of the update after `step` applied updates.
MPC_HD double scheduledLr(const LrSchedule &s, int64_t step) {
  return s.baseLr * lrFactor(s, step);
}

} // namespace mpc
