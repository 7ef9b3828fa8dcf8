// mpc.compile (python/compile_step.h): mpc-opt's compile of one model,
// without its output and report flags.
#include "python/compile_step.h"

#include "passes/compile_flags.h"
#include "passes/compile_model.h"
#include "passes/inference_model.h"
#include "passes/onnx/import_lowering.h"
#include "passes/onnx/onnx_io.h"
#include "passes/pipeline.h"
#include "passes/training_info.h"
#include "support/diagnostics.h"

#include "onnx/onnx_pb.h"

#include <algorithm>

namespace mpc {
namespace {

/// Loads the model and runs the default pipeline on it with `o`.
std::unique_ptr<Model> compileLoaded(const std::string &modelPath,
                                     const CompileOptions &o,
                                     std::vector<std::string> *notes);

} // namespace

CompiledStep compileStep(const std::string &modelPath,
                         const std::vector<CompileFlagArg> &flags,
                         std::vector<std::string> *notes) {
  CompileOptions o;
  std::vector<std::string> given;
  for (const auto &[key, value] : flags) {
    const std::string *v = value ? &*value : nullptr;
    if (!applyCompileFlag(o, key, v))
      throw Error("unknown compile flag '" + key +
                  "' (mpc-opt --help lists them)");
    // As mpc-opt counts them: --precision=fp32 asks for no casts, which a
    // pipeline without autocast gives as well.
    if (!(key == "--precision" && value && *value == "fp32"))
      given.push_back(key);
  }
  // mpc-opt's checks of the flags together, before the model is read.
  checkCompileFlags(o, given);

  try {
    o.recordPrecision = true; // Step.explain reads it
    return CompiledStep{compileLoaded(modelPath, o, notes), o};
  } catch (const Error &e) {
    // As mpc-opt says it: the model's file first.
    std::string what = e.what();
    throw Error(what.rfind(modelPath, 0) == 0 ? what : modelPath + ": " + what);
  }
}

namespace {

std::unique_ptr<Model> compileLoaded(const std::string &modelPath,
                                     const CompileOptions &o,
                                     std::vector<std::string> *notes) {
  // Lowered by the pipeline's first pass, as mpc-opt imports.
  std::unique_ptr<Model> model =
      loadModel(modelPath, WeightBytes::Own, ImportOptions{/*lower=*/false});
  std::vector<PipelineEntry> pipeline = defaultPipelineFor(*model);
  PipelineConfig config;
  config.note = [notes](const std::string &note) {
    if (notes)
      notes->push_back(note);
  };
  Statistics stats;
  compileLoadedModel(*model, pipeline, /*pipelineGiven=*/false, o, config,
                     stats);
  return model;
}

} // namespace

std::unique_ptr<Model> reloadCompiled(const Model &model,
                                      const std::string &sourceName) {
  onnx::ModelProto proto;
  exportModel(model, proto);
  return importModel(std::move(proto), sourceName, ".");
}

} // namespace mpc
