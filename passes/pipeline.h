// Running a pipeline of passes with verification and printing between them.
#pragma once

#include "passes/registry.h"

#include <functional>
#include <ostream>

namespace mpc {

struct PipelineConfig {
  /// Run verify after every pass; a failure names the pass (a bug in it).
  bool verifyEach = true;
  /// Called after each pass with its name (printing, --print-after).
  std::function<void(const std::string &pass, const Model &)> afterPass;
};

/// Runs the passes in order. Statistics of each pass are added to `stats`
/// under "pass.counter".
void runPipeline(Model &model, const std::vector<PipelineEntry> &pipeline,
                 const CompileOptions &options, const PipelineConfig &config,
                 Statistics &stats);

/// One "// type: NAME : fp32[64x10]" line per node output of every graph.
std::string printValueTypes(const Model &model);

} // namespace mpc
