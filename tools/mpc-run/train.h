// mpc-run's training run: the flags to a TrainingSession
// (runtime/training_session.h), its lines to stderr, the summary to stdout.
#pragma once

#include "kernels/collective.h"
#include "runtime/training_session.h"
#include "tools/mpc-run/run_flags.h"

#include <memory>

namespace mpc {

/// The session's options as the flags give them.
TrainingOptions trainingOptions(const RunFlags &f);

/// Trains (or exports) as the flags ask; `world` is set to the launched
/// data-parallel world, if any (the caller's error path aborts it). Returns
/// the exit code: 0, 1 (the skipped-step limit), 130 (interrupted).
int runTraining(RunFlags f, std::unique_ptr<Collective> &world);

} // namespace mpc
