// A compiled step's memory report (mpc-opt --report=memory and
// --report-json, the Python module's Step.memory_report): its plan, its
// FLOPs, and the fp32 baseline — the same model compiled by the same passes
// with the same options, except fp32 with no loss scaling, then planned.
#pragma once

#include "passes/flop_count.h"
#include "passes/memory_plan.h"
#include "passes/pass.h"
#include "passes/pipeline.h"

#include <string>
#include <vector>

namespace mpc {

/// Loads `modelPath` again and compiles it with `options` in fp32 (no casts,
/// no loss scaling, no memory budget, fp32 optimizer state) through `pipeline`
/// (empty: the model's default pipeline), then plans it as mpc-run will run it
/// (planCompiledModel).
MemoryPlan planFp32Baseline(const std::string &modelPath,
                            const CompileOptions &options,
                            const std::vector<PipelineEntry> &pipeline = {});

/// What a memory report shows of one compiled step.
struct StepMemoryReport {
  MemoryPlan chosen;   ///< the step as compiled
  MemoryPlan baseline; ///< planFp32Baseline's
  StepFlops flops;     ///< the chosen step's
  std::string label;   ///< its precision ("fp16")
  /// passes/memory_report.h's table and JSON of these.
  std::string table() const;
  std::string json() const;
};

/// The report of `compiled`, compiled from `modelPath` with `options`
/// through `pipeline` (empty: the default).
StepMemoryReport
reportStepMemory(const Model &compiled, const std::string &modelPath,
                 const CompileOptions &options,
                 const std::vector<PipelineEntry> &pipeline = {});

} // namespace mpc
