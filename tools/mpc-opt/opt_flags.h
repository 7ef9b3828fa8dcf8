// mpc-opt's command line: every flag parsed and checked against the others
// (no file is read), from its flag table and the compile flags'
// (passes/compile_flags.h). A library function, so that tests/fuzz drives it.
#pragma once

#include "passes/pass.h"

#include <string>
#include <vector>

namespace mpc {

struct OptFlags {
  bool help = false;         ///< -h, --help: print optUsage()
  bool helpMarkdown = false; ///< --help-markdown: print optHelpMarkdown()
  bool listPasses = false;   ///< --list-passes: print the pass table
  std::string input;
  std::string output;
  bool outputGiven = false;
  bool externalData = false; ///< --external-data
  std::string emit = "onnx";
  std::string passes;
  bool passesGiven = false;
  bool printAfterAll = false;
  std::string printAfter;
  bool printTypes = false;
  bool verifyEach = true;
  bool splitInputFile = false;
  bool stats = false;
  bool timePasses = false;
  bool explain = false;
  std::string dotFile;
  bool reportMemory = false;  ///< --report=memory
  bool reportKernels = false; ///< --report=kernels
  std::string reportJson;     ///< --report-json=FILE
  CompileOptions options;
  /// The flags given (names before '='): a --passes list must run a pass
  /// that reads each of them (checkFlagsReachPipeline).
  std::vector<std::string> given;
};

/// mpc-opt --help's text, generated from the flag tables.
std::string optUsage();
/// The same as Markdown (mpc-opt's part of docs/flags.md).
std::string optHelpMarkdown();

/// Parses mpc-opt's arguments (argv[0] is the program); an Error naming the
/// flag for anything malformed, out of range or contradictory. -h/--help,
/// --help-markdown and --list-passes return at once with `help`,
/// `helpMarkdown` / `listPasses` set.
OptFlags parseOptFlags(int argc, const char *const *argv);

} // namespace mpc
