// The one table of passes: name, summary, options, entry point.
//
// mpc-opt's --help, --list-passes and pipeline parsing read this table only;
// nothing registers itself anywhere else.
#pragma once

#include "passes/pass.h"

#include <string>
#include <vector>

namespace mpc {

struct PassInfo {
  const char *name;    ///< kebab-case flag, e.g. "loss-scale"
  const char *summary; ///< one line for --list-passes
  const char *options; ///< pass options accepted in name{...}, "" if none
  void (*run)(Model &, PassContext &);
  /// An analysis: the pass reads the model and leaves it as it was (it may
  /// only report statistics), so the verifier, which passed before it, is
  /// not run again after it.
  bool preservesModel = false;
};

/// Every pass, in default pipeline order.
const std::vector<PassInfo> &passRegistry();
/// The pass with this name, or nullptr.
const PassInfo *findPass(const std::string &name);

/// One pipeline element: a pass and its options from name{k=v,...}.
struct PipelineEntry {
  const PassInfo *pass;
  std::map<std::string, std::string> options;
};

/// Parses "a,b{k=v,k2=v2},c"; throws Error naming an unknown pass.
std::vector<PipelineEntry> parsePipeline(const std::string &text);
/// The default training pipeline (every pass in table order).
std::vector<PipelineEntry> defaultPipeline();

/// The passes that read a compile flag ("--optimizer": optimizer and
/// user-optimizer); empty for a flag no pass reads (output, printing).
std::vector<std::string> passesReadingFlag(const std::string &flag);
/// Throws Error naming every flag of `givenFlags` that no pass of
/// `pipeline` reads: a --passes list that leaves out the optimizer would
/// otherwise ignore --optimizer and --lr and write a step that trains
/// nothing.
void checkFlagsReachPipeline(const std::vector<std::string> &givenFlags,
                             const std::vector<PipelineEntry> &pipeline);

} // namespace mpc
