// mpc-run --infer: any supported model run forward on input files.
#pragma once

#include "tools/mpc-run/run_flags.h"

namespace mpc {

/// Reads the --input files, runs the main graph, writes one .npy per
/// output into --output-dir (runtime/inference.h). Returns the exit code.
int runInfer(const RunFlags &f);

} // namespace mpc
