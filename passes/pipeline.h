// Running a pipeline of passes with verification and printing between them.
#pragma once

#include "passes/registry.h"

#include <functional>
#include <ostream>
#include <string>
#include <vector>

namespace mpc {

/// Time spent in one phase of a compilation (--time-passes): wall clock, and
/// the process's CPU time (user + system), which is what to compare on a
/// shared machine where the wall clock includes waiting for a core.
struct PassTiming {
  std::string name;
  double wall = 0, cpu = 0;
};

/// A point on both clocks.
struct TimePoint {
  double wall = 0, cpu = 0;
  static TimePoint now();
};

/// Times by phase, in the order phases first ran; a phase that runs again
/// (verify after every pass) adds to its row.
class PassTimings {
public:
  /// Adds the time from `start` to now to the row `name`.
  void add(const std::string &name, const TimePoint &start);
  const std::vector<PassTiming> &rows() const { return rows_; }
  /// LLVM-style report: one row per phase with its share of the total.
  std::string report() const;

private:
  std::vector<PassTiming> rows_;
};

struct PipelineConfig {
  /// Run verify after every pass; a failure names the pass (a bug in it).
  bool verifyEach = true;
  /// Called after each pass with its name (printing, --print-after).
  std::function<void(const std::string &pass, const Model &)> afterPass;
  /// When set, each pass's wall time is added under its name, the verifier's
  /// under "verify-each" and the afterPass hook's under "after-pass hooks".
  PassTimings *timings = nullptr;
  /// Receives every note a pass leaves (PassContext::notes); unset: dropped.
  std::function<void(const std::string &note)> note;
};

/// Runs the passes in order. Statistics of each pass are added to `stats`
/// under "pass.counter".
void runPipeline(Model &model, const std::vector<PipelineEntry> &pipeline,
                 const CompileOptions &options, const PipelineConfig &config,
                 Statistics &stats);

/// One "// type: NAME : fp32[64x10]" line per node output of every graph.
std::string printValueTypes(const Model &model);

} // namespace mpc
