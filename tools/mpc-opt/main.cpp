// mpc-opt: compiles an ONNX model (with its loss) into one mixed-precision
// training step, or runs chosen passes on it (--passes=) for tests.
//
// A thin main: flags in (opt_flags.h), each model compiled by compile_model.h,
// its output written. Bad input of any kind is one line on stderr and exit
// code 1, and no output file.
#include "passes/onnx/onnx_io.h"
#include "passes/pipeline.h"
#include "support/diagnostics.h"
#include "support/file_io.h"
#include "support/out_of_memory.h"
#include "support/path_identity.h"
#include "tools/mpc-opt/compile_model.h"
#include "tools/mpc-opt/compiler_blas_threads.h"
#include "tools/mpc-opt/opt_flags.h"

#include <cstdlib>
#include <iostream>
#include <sstream>
#include <sys/stat.h>

using namespace mpc;

namespace {

using Flags = OptFlags;

/// The import leaves lowering to the pipeline's lower-onnx pass, so that
/// --print-after, --stats and --time-passes see it and --passes= (no pass)
/// shows the model as imported.
const ImportOptions kLoweredByPipeline{/*lower=*/false};

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
/// another output, by identity (support/path_identity.h).
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
  if (flags.helpMarkdown) {
    std::cout << optHelpMarkdown();
    return 0;
  }
  if (flags.listPasses) {
    for (const PassInfo &p : passRegistry()) {
      std::string options;
      for (const std::string &o : passOptionNames(p))
        options += (options.empty() ? "" : " ") + o + "=";
      std::string before;
      for (const char *later : p.runsBefore)
        before += (before.empty() ? "" : ", ") + std::string(later);
      std::cout << p.name << "\t" << p.summary
                << (options.empty() ? "" : "  {" + options + "}")
                << (before.empty() ? "" : "  [before " + before + "]") << "\n";
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
      std::string out = compileModel(
          timed(timings, "import",
                [&] {
                  return whileAllocating("loading it", [&] {
                    return loadModel(flags.input, WeightBytes::InFile,
                                     kLoweredByPipeline);
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
        auto import = [&] {
          return parseModelText(chunks[i], flags.input, kLoweredByPipeline);
        };
        combined +=
            compileModel(timed(timings, "import", import), flags, timings);
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
