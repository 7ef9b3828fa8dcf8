// The files an mpc-run run reads and writes, checked before any is opened.
#pragma once

#include "tools/mpc-run/run_flags.h"

namespace mpc {

/// Throws Error (one line naming the flag and the file) when an input the
/// run reads (the model, --data, --eval-data, --resume) is not a regular
/// file (a FIFO would be waited on forever), when an output (--log,
/// --eval-log, --save, --save-best, --export-inference,
/// --export-safetensors, and the external data files beside the models)
/// is the same file as an input (the model and its external data, the data
/// sets, the resumed checkpoint and its data) or as another output.
/// Hard and symbolic links count (support/path_identity.h). One
/// exception: --save and --save-best may replace the --resume checkpoint,
/// which the run has read whole before its first step, so that a run can
/// go on checkpointing where it resumed from.
void checkRunFiles(const RunFlags &f);

} // namespace mpc
