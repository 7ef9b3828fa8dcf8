// Learning-rate schedules (--lr-schedule, --warmup-steps, ...): the
// optimizer pass's mpc.LearningRate node, whose output every SGD/Adam update
// reads as its `lr` input.
//
// The rate is a function of the optimizer's step counter (updates applied,
// so an update skipped for overflow or inside a --grad-accum window does
// not advance the schedule, as transformers' Trainer and accelerate hold it
// on a skipped step), computed in the step graph: a checkpoint's counter
// resumes the schedule where it was, every rank of a data-parallel run
// computes the same rate, and a CUDA graph replays it with no host value.
#pragma once

#include "passes/pass.h"

#include <string>

namespace mpc {

/// Whether the flags ask for a schedule (any of them set); an Error naming
/// the flag when they do not describe one.
bool checkLrScheduleOptions(const CompileOptions &options);

/// Adds mpc.LearningRate(step) with the flags' schedule from `baseLr` to g;
/// returns its output (fp64 []).
Value *addLearningRate(Graph &g, Value *step, const CompileOptions &options,
                       double baseLr);

/// --lr-schedule=reduce_lr_on_plateau: the rate is not computed in the step
/// but is fp64 state `learning_rate` (the updates read it as their lr
/// input), which mpc-run lowers on plateaus of the validation loss
/// (ir/lr_plateau.h). Its rule's flags go in mpc.lr_plateau, the
/// state's name in mpc.lr_state.
bool isLrPlateau(const CompileOptions &options);
/// Adds that state, initialised to `baseLr`; returns it.
Value *addPlateauRate(Model &model, const CompileOptions &options,
                      double baseLr);

/// " schedule=cosine warmup_steps=10 total_steps=1000": the flags given, for
/// mpc.optimizer ("" without a schedule).
std::string lrScheduleSummary(const CompileOptions &options);

} // namespace mpc
