// A batch handed over by the caller (mpc.Trainer.step and .evaluate), checked
// against the inputs of the graph that will read it: every input present,
// nothing else, each array's samples as runtime/data/sample_check.h wants
// them, and the batch size the graph was planned for. Errors name the input.
#pragma once

#include "runtime/data/dataset.h"
#include "runtime/trainer.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace mpc {

/// Orders `arrays` (name, samples) as `specs` and checks them; `samples`:
/// the samples each must hold (0: any, the same for all). `what` starts
/// each message ("batch", "micro-batch 2"). Returns the checked batch,
/// integer arrays converted to the inputs' dtypes.
Trainer::Batch checkBatch(std::vector<std::pair<std::string, Tensor>> arrays,
                          const std::vector<DataInputSpec> &specs,
                          int64_t samples, const std::string &what);

} // namespace mpc
