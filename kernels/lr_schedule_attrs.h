// mpc.LearningRate's attributes, read and checked in one place for every
// user: the optimizer pass (whose errors name mpc-opt's flags), shape
// inference, the CPU kernel, the CUDA runner and mpc-run's progress line.
// The schedules' formulas are kernels/common/lr_schedule_math.h.
#pragma once

#include "ir/graph.h"
#include "kernels/common/lr_schedule_math.h"

#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace mpc {

/// What is wrong with a node's schedule: the attribute at fault and why
/// ("must be >= 1, got 0").
struct LrScheduleProblem {
  std::string attr;
  std::string message;
};

/// An attribute by name (nullptr: not set): a node's, or the optimizer
/// pass's before it makes the node.
using AttributeLookup = std::function<const Attribute *(std::string_view)>;

/// The schedule the attributes describe, or the first problem:
/// `schedule` is one of lrScheduleNames(); base_lr, warmup_steps >= 0;
/// linear, cosine, cosine_with_restarts and polynomial need total_steps >
/// warmup_steps; cosine takes min_lr_ratio in [0, 1];
/// cosine_with_restarts cycles >= 1 (default 1); polynomial lr_end in
/// [0, base_lr) (default 1e-7) and power > 0 (default 1); inverse_sqrt
/// timescale >= 1 (default warmup_steps, else 10000); step needs step_size
/// >= 1; step and exponential take gamma > 0 (default 0.1). With `strict`
/// (mpc-opt's flags) an attribute that does not apply to the schedule is a
/// problem; a node's are ignored, since its function body's completion writes
/// every attribute onto the node (passes/onnx/mpc_functions.cpp).
std::optional<LrScheduleProblem>
readLrSchedule(const AttributeLookup &attr, LrSchedule &schedule, bool strict);

/// readLrSchedule of the node's attributes, with a problem thrown as an
/// Error naming the node.
LrSchedule lrScheduleOf(const Node &node);

/// The schedule names readLrSchedule accepts, for help texts and errors.
const char *lrScheduleNames();

} // namespace mpc
