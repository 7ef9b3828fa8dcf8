// mpc-opt's compile of one model (tools/mpc-opt/compile_model.h).
#include "tools/mpc-opt/compile_model.h"

#include "passes/compile_model.h"
#include "passes/inference_model.h"
#include "passes/kernel_report.h"
#include "passes/memory_baseline.h"
#include "passes/memory_report.h"
#include "passes/onnx/import_lowering.h"
#include "passes/onnx/onnx_io.h"
#include "passes/pipeline.h"
#include "passes/precision_map.h"
#include "passes/training_info.h"
#include "support/diagnostics.h"
#include "support/file_io.h"
#include "support/out_of_memory.h"
#include "support/path_identity.h"

#include "onnx/onnx_pb.h"

#include <cstdlib>
#include <iostream>
#include <sstream>
#include <sys/stat.h>

namespace mpc {
namespace {

/// --report=memory / --report-json: the compiled step's plan next to the
/// same model compiled in fp32 (no casts, no loss scaling).
void reportMemory(const Model &model, const OptFlags &f) {
  StepMemoryReport report = reportStepMemory(
      model, f.input, f.options,
      f.passesGiven ? parsePipeline(f.passes) : std::vector<PipelineEntry>{});
  if (f.reportMemory)
    (f.output == "-" ? std::cerr : std::cout) << report.table();
  if (!f.reportJson.empty()) {
    std::string json = report.json(), error;
    if (!writeFileAtomically(f.reportJson, json.data(), json.size(), error,
                             kOutputSync))
      throw Error("--report-json: " + error);
  }
}

/// How the compiled model is written to `path`: not fsynced, with external
/// data when asked (else past 2 GiB), never over a file the input model
/// reads (the output may replace the input model itself).
ModelWriteOptions writeOptions(const OptFlags &f, const std::string &path) {
  ModelWriteOptions o;
  o.externalData = f.externalData ? ExternalData::Always : ExternalData::Auto;
  o.fsync = kOutputSync;
  o.inputFiles = inputFilesToKeep(f.input, path);
  return o;
}

/// Keeps a compiled model (or its proto) allocated until the process exits:
/// mpc-opt exits right after writing it, and freeing every node, value and
/// message of a large step one by one took about a tenth of the compile
/// (clang skips the same work with -disable-free). Held through a static, so
/// leak checkers see it as reachable.
template <typename T> void keepUntilExit(std::unique_ptr<T> object) {
  static auto *kept = new std::vector<T *>; // never destroyed either
  kept->push_back(object.release());
}

} // namespace

std::string compileModel(std::unique_ptr<Model> model, const OptFlags &f,
                         PassTimings *timings, const std::string *writeTo) {
  std::vector<PipelineEntry> pipeline =
      f.passesGiven ? parsePipeline(f.passes) : defaultPipelineFor(*model);
  if (f.passesGiven)
    checkFlagsReachPipeline(f.given, pipeline);
  if (!f.printAfter.empty() && !findPass(f.printAfter))
    throw Error("--print-after: unknown pass '" + f.printAfter + "'");
  PipelineConfig config;
  config.verifyEach = f.verifyEach;
  config.timings = timings;
  config.note = [](const std::string &note) {
    std::cerr << "mpc-opt: note: " << note << "\n";
  };
  config.afterPass = [&](const std::string &pass, const Model &m) {
    if (f.printAfterAll || pass == f.printAfter)
      std::cerr << "// ----- after " << pass << "\n" << printModelText(m);
  };
  Statistics stats;
  compileLoadedModel(*model, pipeline, f.passesGiven, f.options, config, stats);
  if (f.stats)
    for (const auto &kv : stats)
      std::cerr << kv.first << ": " << kv.second << "\n";
  if (f.explain)
    (f.output == "-" ? std::cerr : std::cout) << explainPrecision(*model);
  if (!f.dotFile.empty()) {
    // Before the model is written: a failed --dot leaves no output file.
    std::string dot = precisionDot(*model), error;
    if (!writeFileAtomically(f.dotFile, dot.data(), dot.size(), error,
                             kOutputSync))
      throw Error("--dot: " + error);
  }

  if (f.reportMemory || !f.reportJson.empty())
    timed(timings, "report=memory", [&] { reportMemory(*model, f); });
  if (f.reportKernels)
    (f.output == "-" ? std::cerr : std::cout) << reportKernels(*model).table();

  if (f.emit == "text") {
    std::string text = printModelText(*model);
    if (f.printTypes)
      text += printValueTypes(*model);
    return text;
  }
  if (writeTo && f.emit != "step") {
    // Written from the IR straight into the file, no ModelProto between.
    timed(timings, "export+write",
          [&] { writeModelFile(*model, *writeTo, writeOptions(f, *writeTo)); });
    keepUntilExit(std::move(model));
    return {};
  }
  auto protoOwner = std::make_unique<onnx::ModelProto>();
  onnx::ModelProto &proto = *protoOwner;
  timed(timings, "export", [&] {
    if (f.emit == "step")
      exportStepModel(*model, proto);
    else
      exportModel(*model, proto);
  });
  if (writeTo) {
    timed(timings, "serialize+write", [&] {
      writeModelAtomically(*writeTo, proto, writeOptions(f, *writeTo));
    });
    keepUntilExit(std::move(model));
    keepUntilExit(std::move(protoOwner));
    return {};
  }
  std::string bytes;
  timed(timings, "serialize", [&] {
    if (!proto.SerializeToString(&bytes))
      throw Error("cannot serialize the output model (over 2 GiB?)");
  });
  keepUntilExit(std::move(model));
  keepUntilExit(std::move(protoOwner));
  return bytes;
}

} // namespace mpc
