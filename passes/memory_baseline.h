// The fp32 baseline of a memory report (mpc-opt --report=memory, the Python
// module's Step.memory_report): the same model compiled by the same passes
// with the same options, except fp32 with no loss scaling, then planned.
#pragma once

#include "passes/memory_plan.h"
#include "passes/pass.h"
#include "passes/pipeline.h"

#include <string>
#include <vector>

namespace mpc {

/// Loads `modelPath` again and compiles it with `options` in fp32 (no casts,
/// no loss scaling) through `pipeline` (empty: the model's default
/// pipeline), then plans it as mpc-run will run it (planCompiledModel).
MemoryPlan planFp32Baseline(const std::string &modelPath,
                            const CompileOptions &options,
                            const std::vector<PipelineEntry> &pipeline = {});

} // namespace mpc
