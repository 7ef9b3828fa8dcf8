// mpc-run's command line: every flag parsed and checked against the others
// (no file is read), from one flag table (run_flags.cpp) that --help and
// --help-markdown print. A library function, so that tests/fuzz drives it.
#pragma once

#include "ir/types.h"
#include "kernels/collective.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace mpc {

struct RunFlags {
  bool help = false;         ///< -h, --help: print runUsage()
  bool helpMarkdown = false; ///< --help-markdown: print runHelpMarkdown()
  std::string model;
  std::string device; ///< cpu, cuda or auto; "" until resolved
  int64_t steps = 100;
  bool stepsGiven = false;
  /// --epochs=N: train to N epochs in all (0: --steps decides).
  int64_t epochs = 0;
  /// --data: the first source; given again, the next ones (shards).
  std::string data;
  std::vector<std::string> moreData;
  bool synthetic = false;
  int64_t batch = 0;
  bool shuffle = false;
  bool seedGiven = false;
  uint64_t seed = 0;
  std::string log, save, resume, exportInference;
  /// --export-safetensors: the parameters and buffers for torch.
  std::string exportSafetensors;
  /// --outputs and --precision of --export-inference.
  std::vector<std::string> exportOutputs;
  std::optional<DType> exportPrecision;
  /// No data and no --steps/--epochs, an export asked for: load, export,
  /// train nothing.
  bool exportOnly = false;
  int64_t saveEvery = 0;
  bool externalData = false; ///< --external-data
  /// --eval-data: the validation set; its loss every --eval-every steps
  /// (0: after the last step only), rows in --eval-log.
  std::string evalData, evalLog;
  std::vector<std::string> moreEvalData; ///< --eval-data given again
  int64_t evalEvery = 0;
  /// --save-best: the checkpoint of the lowest validation loss.
  std::string saveBest;
  /// --eval-ema, --export-ema: evaluate / export the parameters' moving
  /// average (mpc-opt --ema-decay) in place of the parameters.
  bool evalEma = false, exportEma = false;
  /// --eval-metrics (runtime/eval_metrics.h) of --eval-output.
  std::string evalMetrics, evalOutput;
  /// --tensorboard=DIR: event files of the steps and evaluations.
  std::string tensorboard;
  /// --early-stop=N: stop once N validation runs in a row found no lower
  /// loss than the best (0: never).
  int64_t earlyStop = 0;
  bool quiet = false;
  /// --verbose: the CPU's kernel families for products and convolutions.
  bool verbose = false;
  /// --threads=N: the CPU's pool of threads (0: kernels/cpu/parallel.h's
  /// default, the cores).
  int64_t threads = 0;
  bool debugOverflow = false;
  double minLossScale = 1;
  int64_t maxSkippedSteps = 100;
  bool memoryLimitGiven = false;
  size_t memoryLimit = 0;
  bool cudaResident = true, cudaGraphs = true;
  /// --cudnn-deterministic=false: cuDNN's fastest convolution algorithms,
  /// nondeterministic ones too.
  bool cudnnDeterministic = true;
  /// --nproc-per-node=N: start N local ranks (tools/mpc-run/local_launcher.h).
  int64_t nprocPerNode = 1;
  /// --collective-timeout=S: how long a collective waits for a silent rank.
  double collectiveTimeout = kDefaultCollectiveTimeoutSeconds;

  bool infer = false;
  /// --input values as given: "NAME=FILE" or "FILE".
  std::vector<std::string> inputs;
  std::string outputDir;
  /// Training-only flags given, to reject them with --infer.
  std::vector<std::string> trainingFlags;
};

/// mpc-run --help's text, generated from the flag table.
std::string runUsage();
/// The same as Markdown (mpc-run's part of docs/flags.md).
std::string runHelpMarkdown();

/// Parses mpc-run's arguments (argv[0] is the program); an Error naming the
/// flag for anything malformed, out of range or contradictory. -h/--help
/// and --help-markdown return at once with `help` / `helpMarkdown` set.
RunFlags parseRunFlags(int argc, const char *const *argv);

} // namespace mpc
