// mpc-run: trains a compiled model (mpc-opt's output) on the CPU or GPU, or
// runs any supported model forward (--infer).
//
// A thin main: the flags (tools/mpc-run/run_flags.h), then the launcher of
// local ranks (--nproc-per-node), the forward run (--infer,
// tools/mpc-run/infer.h) or the training run (tools/mpc-run/train.h, a
// TrainingSession of runtime/training_session.h). Bad input (flags, data,
// checkpoints, input files) is one line and exit 1.
#include "kernels/collective.h"
#include "kernels/cpu/parallel.h"
#include "runtime/world/launched_world.h"
#include "support/diagnostics.h"
#include "support/out_of_memory.h"
#include "tools/mpc-run/backend_choice.h"
#include "tools/mpc-run/infer.h"
#include "tools/mpc-run/local_launcher.h"
#include "tools/mpc-run/openmp_spin.h"
#include "tools/mpc-run/run_flags.h"
#include "tools/mpc-run/train.h"

#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

using namespace mpc;

namespace {

/// The data-parallel world of a multi-rank launch (nullptr: one rank); the
/// error path aborts it so that no rank waits for one that failed.
std::unique_ptr<Collective> gWorld;

/// "rank R: " in a multi-rank launch, where lines of several ranks mix.
std::string rankPrefix() {
  return gWorld ? "rank " + std::to_string(gWorld->rank()) + ": " : "";
}

/// Prints the error line (one write: the ranks' lines must not interleave)
/// and returns exit code 1; in a multi-rank launch every rank ends, so that
/// none waits in a collective for this one.
int failed(const std::string &msg) {
  std::string line = "mpc-run: " + rankPrefix() + msg + "\n";
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fflush(stderr);
  if (gWorld)
    gWorld->abort(1);
  return 1;
}

} // namespace

int main(int argc, char **argv) {
  boundOpenMpSpin(argv); // may run this program again, libgomp told
  RunFlags flags;
  try {
    flags = parseRunFlags(argc, argv);
    if (flags.help) {
      std::cout << runUsage();
      return 0;
    }
    if (flags.helpMarkdown) {
      std::cout << runHelpMarkdown();
      return 0;
    }
    if (flags.nprocPerNode > 1) {
      if (launchedWorldSize() > 1)
        throw LaunchError("--nproc-per-node starts the ranks itself, but "
                          "this process is one of " +
                          std::to_string(launchedWorldSize()) +
                          " ranks a launcher started");
      // Every argument but --nproc-per-node goes to the ranks.
      std::vector<std::string> args;
      for (int i = 1; i < argc; ++i)
        if (std::string(argv[i]).rfind("--nproc-per-node=", 0) != 0)
          args.push_back(argv[i]);
      return launchLocalRanks(int(flags.nprocPerNode), args);
    }
    if (flags.threads > 0)
      cpu::setThreadCount(int(flags.threads));
    flags.device = resolveDevice(flags.device);
    if (flags.infer && launchedWorldSize() > 1)
      throw Error("--infer runs as one process, not as one of " +
                  std::to_string(launchedWorldSize()) + " launched ranks");
    int rc = flags.infer ? runInfer(flags) : runTraining(flags, gWorld);
    gWorld.reset(); // finalises MPI
    return rc;
  } catch (const LaunchError &e) {
    return failed(e.what()); // about the launch, not the model
  } catch (const Error &e) {
    std::string msg = e.what();
    // Messages about an input file or the output directory already start
    // with that path; they are not about the model.
    auto startsWithPath = [&](const std::string &path) {
      return !path.empty() && msg.rfind(path + ":", 0) == 0;
    };
    bool aboutAFile = startsWithPath(flags.outputDir) ||
                      startsWithPath(flags.log) ||
                      startsWithPath(flags.evalLog);
    for (const std::string &spec : flags.inputs)
      aboutAFile |= startsWithPath(spec.substr(spec.find('=') + 1));
    // A data source, or a file in one (a directory's NAME.npy).
    std::vector<std::string> sources = {flags.data, flags.evalData};
    sources.insert(sources.end(), flags.moreData.begin(), flags.moreData.end());
    sources.insert(sources.end(), flags.moreEvalData.begin(),
                   flags.moreEvalData.end());
    for (const std::string &source : sources)
      aboutAFile |= startsWithPath(source) ||
                    (!source.empty() && msg.rfind(source + "/", 0) == 0);
    if (!flags.model.empty() && !aboutAFile && msg.rfind(flags.model, 0) != 0 &&
        msg.find(".npz") == std::string::npos &&
        msg.find(".onnx") == std::string::npos && msg.rfind("--", 0) != 0 &&
        msg.rfind("MPC_", 0) != 0) // a flag's or an environment variable's
      msg = flags.model + ": " + msg;
    return failed(msg);
  } catch (const std::bad_alloc &) {
    // Sizes the input controls are checked before they are allocated; this
    // is what remains (a busy machine, a low ulimit -v): one line, exit 1.
    return failed(flags.model + ": " + outOfMemoryMessage("running it"));
  } catch (const std::length_error &) {
    return failed(flags.model + ": " + outOfMemoryMessage("running it") +
                  " (a size past what it can hold)");
  } catch (const std::exception &e) {
    return failed(std::string("internal error: ") + e.what());
  }
}
