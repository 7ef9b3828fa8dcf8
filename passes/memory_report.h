// mpc-opt --report=memory: the memory plan of a compiled step, by class, for
// the chosen precision next to the fp32 baseline; and the plan-memory pass.
#pragma once

#include "passes/memory_plan.h"
#include "passes/pass.h"

#include <string>

namespace mpc {

struct StepFlops; // passes/flop_count.h

/// Plans the training step exactly as mpc-run will run it (passes/
/// step_graph.h), or the main graph of a model without one. Throws Error
/// naming the first value whose size the shapes do not give (compile with
/// --batch=B or --input-shape for a report). With asWritten, plans the model
/// as written to ONNX and loaded back (exactly what mpc-run executes).
MemoryPlan planCompiledModel(const Model &model, bool asWritten = true);

/// The table: one row per class (bytes live at the peak), then the planned
/// peak (the arena), the live peak and the sum of all tensors; a column per
/// plan and the ratio chosen / baseline; with `flops`, the step's FLOPs
/// and the share of them that recomputation adds.
std::string memoryReportTable(const MemoryPlan &chosen,
                              const std::string &chosenLabel,
                              const MemoryPlan &baseline,
                              const StepFlops *flops = nullptr);

/// SPEC's JSON: {"planned": {...}, "fp32_baseline": {...}, "ratio": R},
/// with `flops` also "flops": {"forward", "backward", "recompute", "step",
/// "recompute_fraction"} (the chosen step's).
std::string memoryReportJson(const MemoryPlan &chosen,
                             const std::string &chosenLabel,
                             const MemoryPlan &baseline,
                             const StepFlops *flops = nullptr);

/// The plan-memory pass: plans the step when its shapes are concrete and
/// records the numbers as statistics (mpc-opt --stats); the model is not
/// changed (the runtime plans again from the shapes its batch gives). With
/// CompileOptions::planMemory off (mpc-opt without --stats) it does nothing.
void runPlanMemory(Model &model, PassContext &ctx);

} // namespace mpc
