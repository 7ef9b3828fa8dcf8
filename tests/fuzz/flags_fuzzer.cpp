// Fuzz target: the command-line parsers of mpc-opt and mpc-run
// (tools/mpc-opt/opt_flags.h, tools/mpc-run/run_flags.h).
//
// The input is an argument vector, one argument per line. Both parsers
// read it; each either returns flags inside their documented ranges or
// throws mpc::Error with a one-line message. Anything else (a crash, another
// exception, an out-of-range value let through) is a finding.
#include "support/diagnostics.h"
#include "support/int_parse.h"
#include "tests/fuzz/fuzz_support.h"
#include "tools/mpc-opt/opt_flags.h"
#include "tools/mpc-run/run_flags.h"

#include <string>
#include <vector>

using namespace mpc;

namespace {

/// One argument per line of the input, at most 256 of them.
std::vector<std::string> splitArgs(const uint8_t *data, size_t size) {
  std::vector<std::string> args;
  std::string cur;
  for (size_t i = 0; i < size && args.size() < 256; ++i) {
    if (data[i] == '\n') {
      args.push_back(cur);
      cur.clear();
    } else {
      cur += char(data[i]);
    }
  }
  if (!cur.empty() && args.size() < 256)
    args.push_back(cur);
  return args;
}

void checkOpt(const std::vector<const char *> &argv) {
  OptFlags f;
  try {
    f = parseOptFlags(int(argv.size()), argv.data());
  } catch (const Error &e) {
    fuzz::checkErrorMessage(e.what(), "");
    return;
  }
  if (f.help || f.helpMarkdown || f.listPasses)
    return;
  const CompileOptions &o = f.options;
  fuzz::require(!f.input.empty(), "mpc-opt: parsed without an input model");
  fuzz::require(o.gradAccum >= 1 && o.gradAccum <= 65536,
                "mpc-opt: --grad-accum out of its range");
  fuzz::require(o.batch >= 0 && o.batch <= kMaxDimFlag,
                "mpc-opt: --batch out of its range");
  fuzz::require(o.growthInterval >= 1 && o.growthInterval <= kMaxStepsFlag,
                "mpc-opt: --growth-interval out of its range");
  for (const auto &[name, dims] : o.inputShapes) {
    fuzz::require(!name.empty() && !dims.empty() && dims.size() <= 64,
                  "mpc-opt: --input-shape without a name or dims");
    for (int64_t d : dims)
      fuzz::require(d >= 0 && d <= kMaxDimFlag,
                    "mpc-opt: --input-shape dim out of its range");
  }
  for (const auto *steps : {&o.warmupSteps, &o.totalSteps, &o.lrStepSize,
                            &o.lrCycles, &o.lrTimescale, &o.lrStableSteps,
                            &o.lrDecaySteps, &o.lrPatience, &o.lrCooldown})
    fuzz::require(!*steps || (**steps >= 0 && **steps <= kMaxStepsFlag),
                  "mpc-opt: a step count out of its range");
}

void checkRun(const std::vector<const char *> &argv) {
  RunFlags f;
  try {
    f = parseRunFlags(int(argv.size()), argv.data());
  } catch (const Error &e) {
    fuzz::checkErrorMessage(e.what(), "");
    return;
  }
  if (f.help || f.helpMarkdown)
    return;
  fuzz::require(!f.model.empty(), "mpc-run: parsed without a model");
  fuzz::require(f.nprocPerNode >= 1 && f.nprocPerNode <= 1024,
                "mpc-run: --nproc-per-node out of its range");
  fuzz::require(f.steps >= 0 && f.steps <= kMaxStepsFlag,
                "mpc-run: --steps out of its range");
  fuzz::require(f.epochs >= 0 && f.epochs <= 1000000,
                "mpc-run: --epochs out of its range");
  fuzz::require(f.batch >= 0 && f.batch <= kMaxDimFlag,
                "mpc-run: --batch out of its range");
  for (int64_t n : {f.saveEvery, f.evalEvery, f.earlyStop, f.maxSkippedSteps})
    fuzz::require(n >= 0 && n <= kMaxStepsFlag,
                  "mpc-run: a step count out of its range");
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::vector<std::string> args = splitArgs(data, size);
  std::vector<const char *> argv{"mpc-opt"};
  for (const std::string &a : args)
    argv.push_back(a.c_str());
  checkOpt(argv);
  argv[0] = "mpc-run";
  checkRun(argv);
  return 0;
}
