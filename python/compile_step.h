// mpc.compile: a model compiled into one training step with mpc-opt's
// default pipeline, from keyword arguments that are mpc-opt's compile flags.
// Plain C++ (no Python types): the binding turns each keyword into a flag.
#pragma once

#include "ir/graph.h"
#include "passes/pass.h"

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace mpc {

/// One compile flag as the command line gives it: "--lr" and its value
/// (nullopt: the flag given bare, a switch).
using CompileFlagArg = std::pair<std::string, std::optional<std::string>>;

/// A compiled step and the options it was compiled with (a memory report
/// compiles the same model again with them, in fp32).
struct CompiledStep {
  std::unique_ptr<Model> model;
  CompileOptions options;
};

/// Loads `modelPath` (binary ONNX or ONNX text) and compiles it as
/// `mpc-opt MODEL <flags>` would (passes/compile_flags.h's table, the same
/// checks of the flags' combination, runPipeline with defaultPipelineFor).
/// The model keeps its precision map (Step.explain). Throws Error with
/// mpc-opt's message for a bad flag, a bad model or a failed pass; `notes`
/// receives the pipeline's notes.
CompiledStep compileStep(const std::string &modelPath,
                         const std::vector<CompileFlagArg> &flags,
                         std::vector<std::string> *notes = nullptr);

/// A fresh copy of a compiled model, as a run reads it from its file: the
/// model exported and imported again (the trainer takes it over).
std::unique_ptr<Model> reloadCompiled(const Model &model,
                                      const std::string &sourceName);

} // namespace mpc
