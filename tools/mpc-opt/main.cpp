// mpc-opt: compiles an ONNX model (with its loss) into one mixed-precision
// training step, or runs chosen passes on it (--passes=) for tests.
//
// A thin main: flags in, pipeline from passes/registry.h, model out. Bad input
// of any kind is one line on stderr and exit code 1, and no output file.
#include "passes/inference_model.h"
#include "passes/memory_report.h"
#include "passes/onnx/onnx_io.h"
#include "passes/pipeline.h"
#include "passes/precision_map.h"
#include "passes/support/diagnostics.h"
#include "passes/support/file_io.h"
#include "passes/support/out_of_memory.h"
#include "passes/support/path_identity.h"
#include "passes/training_info.h"
#include "tools/mpc-opt/compiler_blas_threads.h"
#include "tools/mpc-opt/opt_flags.h"

#include "onnx/onnx_pb.h"

#include <cstdlib>
#include <iostream>
#include <sstream>
#include <sys/stat.h>

using namespace mpc;

namespace {

using Flags = OptFlags;

// mpc-opt's outputs are renamed into place but not fsynced: like a compiler's
// object files they are made again from the input (passes/support/file_io.h).
constexpr Fsync kOutputSync = Fsync::No;

/// --report=memory / --report-json: the compiled step's plan next to the
/// same model compiled in fp32 (no casts, no loss scaling).
void reportMemory(const Model &model, const Flags &f) {
  MemoryPlan chosen = planCompiledModel(model);
  std::unique_ptr<Model> base = loadModel(f.input);
  CompileOptions fp32 = f.options;
  fp32.precision = DType::F32;
  fp32.lossScale = "none";
  PipelineConfig config;
  config.verifyEach = false;
  Statistics stats;
  runPipeline(*base,
              f.passesGiven ? parsePipeline(f.passes)
                            : defaultPipelineFor(*base),
              fp32, config, stats);
  MemoryPlan baseline = planCompiledModel(*base);
  std::string label = dtypeName(f.options.precision);
  if (f.reportMemory)
    (f.output == "-" ? std::cerr : std::cout)
        << memoryReportTable(chosen, label, baseline);
  if (!f.reportJson.empty()) {
    std::string json = memoryReportJson(chosen, label, baseline), error;
    if (!writeFileAtomically(f.reportJson, json.data(), json.size(), error,
                             kOutputSync))
      throw Error("--report-json: " + error);
  }
}

/// How the compiled model is written to `path`: not fsynced, with external
/// data when asked (else past 2 GiB), never over a file the input model
/// reads (the output may replace the input model itself).
ModelWriteOptions writeOptions(const Flags &f, const std::string &path) {
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

/// Runs fn and adds its wall time to `timings` under name (when timing).
template <typename Fn>
auto timed(PassTimings *timings, const std::string &name, Fn &&fn) {
  struct Add {
    PassTimings *timings;
    const std::string &name;
    TimePoint start;
    ~Add() {
      if (timings)
        timings->add(name, start);
    }
  } add{timings, name, TimePoint::now()};
  return fn();
}

/// Compiles one model; returns the bytes to write, or, with `writeTo` and a
/// binary output, serializes the model straight into that file (atomically)
/// and returns "".
std::string compile(std::unique_ptr<Model> model, const Flags &f,
                    PassTimings *timings,
                    const std::string *writeTo = nullptr) {
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
  // The nodes later passes add are recorded only when the precision map is
  // kept (--explain, --dot).
  config.afterPass = [&](const std::string &pass, const Model &m) {
    if (f.options.recordPrecision)
      recordNodesAddedBy(m, pass);
    if (f.printAfterAll || pass == f.printAfter)
      std::cerr << "// ----- after " << pass << "\n" << printModelText(m);
  };
  // --input-shape and --batch fix the step's shapes; the forward users
  // deploy keeps the ones the export declared (passes/inference_model.h).
  std::unique_ptr<Graph> generic;
  if (!f.passesGiven && !model->training &&
      (!f.options.inputShapes.empty() || f.options.batch > 0))
    generic = model->graph->clone();
  Statistics stats;
  runPipeline(*model, pipeline, f.options, config, stats);
  keepShapeGenericForward(*model, std::move(generic));
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

/// Splits text on lines starting with "// -----".
std::vector<std::string> splitChunks(const std::string &text) {
  std::vector<std::string> chunks(1);
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("// -----", 0) == 0) {
      chunks.emplace_back();
      continue;
    }
    chunks.back() += line + "\n";
  }
  return chunks;
}

/// Refuses (Error) an output (-o and the data file beside it, --dot,
/// --report-json) that is the input model, one of its external data files or
/// another output, by identity (passes/support/path_identity.h).
void refuseOutputsOverInputs(const Flags &f) {
  std::vector<FileRole> inputs, outputs;
  inputs.push_back({"the input model", f.input});
  // A pipe is read once, by the import: only a file is looked into here.
  struct stat st {};
  if (::stat(f.input.c_str(), &st) == 0 && S_ISREG(st.st_mode))
    for (const std::string &data : externalDataFiles(f.input))
      inputs.push_back({"the input model's external data", data});
  outputs.push_back({"-o", f.output});
  if (f.emit != "text" && f.output != "-")
    outputs.push_back({"-o's data file", externalDataPath(f.output)});
  outputs.push_back({"--dot", f.dotFile});
  outputs.push_back({"--report-json", f.reportJson});
  refuseOutputsOverInputs(inputs, outputs);
  refuseSharedOutputs(outputs);
}

std::string withFile(const std::string &file, const std::string &msg) {
  return msg.rfind(file, 0) == 0 ? msg : file + ": " + msg;
}

} // namespace

int main(int argc, char **argv) {
  useOneBlasThread();
  Flags flags;
  try {
    flags = parseOptFlags(argc, argv);
  } catch (const Error &e) {
    std::cerr << "mpc-opt: " << e.what() << "\n";
    return 1;
  }
  if (flags.help) {
    std::cout << optUsage();
    return 0;
  }
  if (flags.listPasses) {
    for (const PassInfo &p : passRegistry()) {
      std::string options;
      for (const std::string &o : passOptionNames(p))
        options += (options.empty() ? "" : " ") + o + "=";
      std::cout << p.name << "\t" << p.summary
                << (options.empty() ? "" : "  {" + options + "}") << "\n";
    }
    return 0;
  }
  try {
    refuseOutputsOverInputs(flags);
  } catch (const Error &e) {
    std::cerr << "mpc-opt: " << e.what() << "\n";
    return 1;
  }
  PassTimings timingTable;
  PassTimings *timings = flags.timePasses ? &timingTable : nullptr;
  auto printTimings = [&] {
    if (timings)
      std::cerr << timings->report();
  };
  try {
    if (!flags.splitInputFile) {
      // A binary model goes straight into its file; text and "-" are
      // written from the returned bytes.
      bool direct = flags.output != "-" && flags.emit != "text";
      // The weights stay in the mapped input (no copy of most of the file):
      // the compile writes them out as they came in (onnx_io.h).
      std::string out =
          compile(timed(timings, "import",
                        [&] {
                          return whileAllocating("loading it", [&] {
                            return loadModel(flags.input, WeightBytes::InFile);
                          });
                        }),
                  flags, timings, direct ? &flags.output : nullptr);
      if (!direct)
        timed(timings, "write",
              [&] { writeFileAtomically(flags.output, out, kOutputSync); });
      printTimings();
      return 0;
    }
    std::string text = readFile(flags.input);
    std::string combined;
    bool failed = false;
    auto chunks = splitChunks(text);
    for (size_t i = 0; i < chunks.size(); ++i) {
      try {
        if (i)
          combined += "// -----\n";
        combined += compile(
            timed(timings, "import",
                  [&] { return parseModelText(chunks[i], flags.input); }),
            flags, timings);
      } catch (const Error &e) {
        std::cerr << "mpc-opt: " << withFile(flags.input, e.what()) << "\n";
        failed = true;
      }
    }
    if (failed)
      return 1;
    timed(timings, "write",
          [&] { writeFileAtomically(flags.output, combined, kOutputSync); });
    printTimings();
    return 0;
  } catch (const Error &e) {
    std::cerr << "mpc-opt: " << withFile(flags.input, e.what()) << "\n";
    return 1;
  } catch (const std::bad_alloc &) {
    // Sizes the input controls are checked before they are allocated; this
    // is what remains (a busy machine, a low ulimit -v): one line, exit 1.
    std::cerr << "mpc-opt: " << flags.input << ": "
              << outOfMemoryMessage("compiling it") << "\n";
    return 1;
  } catch (const std::length_error &) {
    std::cerr << "mpc-opt: " << flags.input << ": "
              << outOfMemoryMessage("compiling it")
              << " (a size past what it can hold)\n";
    return 1;
  } catch (const std::exception &e) {
    std::cerr << "mpc-opt: " << flags.input << ": internal error: " << e.what()
              << "\n";
    return 1;
  }
}
