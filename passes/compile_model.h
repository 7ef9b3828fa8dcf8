// The compile of one loaded model, as mpc-opt and the Python module's
// mpc.compile run it: the pipeline, plus what both keep beside it — the
// shape-generic forward users deploy when --input-shape/--batch fix the
// step's shapes, and the precision map of the nodes each pass adds.
#pragma once

#include "passes/pipeline.h"

#include <vector>

namespace mpc {

/// Runs `pipeline` on `model` (imported unlowered: lower-onnx is its first
/// pass) with `options`. `pipelineGiven`: the user chose the passes
/// (--passes), which keep the forward as they leave it. With
/// options.recordPrecision the nodes each pass adds are recorded for
/// explainPrecision. `config`'s own afterPass hook runs after those.
void compileLoadedModel(Model &model,
                        const std::vector<PipelineEntry> &pipeline,
                        bool pipelineGiven, const CompileOptions &options,
                        PipelineConfig config, Statistics &stats);

} // namespace mpc
