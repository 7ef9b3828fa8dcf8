// The one table of passes: name, summary, options, entry point.
//
// mpc-opt's --help, --list-passes and pipeline parsing read this table only;
// nothing registers itself anywhere else.
#pragma once

#include "passes/pass.h"

#include <string>
#include <string_view>
#include <vector>

namespace mpc {

struct PassInfo {
  const char *name;    ///< kebab-case flag, e.g. "loss-scale"
  const char *summary; ///< one line for --list-passes
  void (*run)(Model &, PassContext &);
  /// An analysis: the pass reads the model and leaves it as it was (it may
  /// only report statistics), so the verifier, which passed before it, is
  /// not run again after it.
  bool preservesModel = false;
  /// The metadata entry (ir/step_metadata.h) whose presence says the pass
  /// has run on the model; empty for passes that may run again.
  std::string_view records = {};
  /// Passes this one must run before: the order it needs, declared once.
  /// Checked when a --passes list names them the other way round, and by
  /// the pass itself on a model where one of them already ran (an earlier
  /// mpc-opt call): checkPassOrder.
  std::vector<const char *> runsBefore = {};
};

/// Every pass, in default pipeline order.
const std::vector<PassInfo> &passRegistry();
/// The pass with this name, or nullptr.
const PassInfo *findPass(const std::string &name);

/// What a pass checks first: throws "<pass>: already applied (<key> is
/// set)" when its records entry is present, and "<pass>: must run before
/// <later> (<key> is set)" when a pass of its runsBefore already ran.
void checkPassOrder(const Model &model, const char *pass);

/// One pipeline element: a pass and its options from name{k=v,...}.
struct PipelineEntry {
  const PassInfo *pass;
  std::map<std::string, std::string> options;
};

/// Parses "a,b{k=v k2=v2},c" (options separated by blanks or commas; an
/// item without '=' continues a list value: fp32-ops=Softmax,Exp). Throws
/// Error naming an unknown pass, an option the pass does not have, or a
/// value its flag refuses. A list that does not start with lower-onnx gets
/// it in front (every other pass knows only the lowered ops); one naming it
/// after another pass is refused. "" is no pass at all.
std::vector<PipelineEntry> parsePipeline(const std::string &text);

/// A pass's options: the compile flags it reads, without "--"
/// (autocast: precision, fp32-ops, fp16-ops, fp32-nodes). Each means what
/// its flag means, for that pass only.
std::vector<std::string> passOptionNames(const PassInfo &pass);
/// `options` with entry's pass options applied (passes/compile_flags.h):
/// autocast{precision=bf16} is --precision=bf16 for that pass. Throws Error
/// naming the pass and option for an unknown option or a bad value.
CompileOptions withPassOptions(const CompileOptions &options,
                               const PipelineEntry &entry);
/// The compile flags ("--precision") pass `pass` reads.
std::vector<std::string> compileFlagsReadBy(const std::string &pass);
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
