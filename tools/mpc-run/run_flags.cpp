// mpc-run's command line (tools/mpc-run/run_flags.h).
#include "tools/mpc-run/run_flags.h"

#include "runtime/memory_limit.h"
#include "support/diagnostics.h"
#include "support/int_parse.h"
#include "support/path_identity.h"

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <limits>

namespace mpc {
namespace {

/// --epochs' bound: a million passes over the data.
constexpr int64_t kMaxEpochs = 1000000;
/// --nproc-per-node's bound: more ranks than any machine has GPUs or cores.
constexpr int64_t kMaxLocalRanks = 1024;

const char *const kUsage =
    R"(usage: mpc-run MODEL [options]
       mpc-run MODEL --infer --input NAME=FILE... --output-dir=DIR

Trains MODEL, a training step compiled by mpc-opt.

  --device=cpu|cuda|auto  backend (default auto, or $MPC_DEVICE when set:
                          cuda when this build has the CUDA backend and a
                          usable GPU is there, else cpu); cuda needs a CUDA
                          build and a GPU, and fails naming why otherwise;
                          a CUDA build's backend is the plugin
                          libmpc_cuda_backend.so beside mpc-run (or
                          $MPC_CUDA_PLUGIN), loaded only for cuda and auto
  --steps=N               steps to run (default 100; after --resume: N more);
                          optimizer steps of K micro-batches each for a model
                          compiled with --grad-accum=K
  --epochs=N              train to N epochs in all (after --resume: the
                          steps left of them; exclusive with --steps); an
                          epoch is samples / (batch x K x ranks) steps, its
                          last partial step left out (drop_last)
  --data=FILE.npz         arrays named after the step's data inputs
  --synthetic             random data of the right shapes instead
  --batch=B               batch size (must match a static batch dim); the
                          micro-batch size with --grad-accum
  --shuffle --seed=S      a new shuffled order every epoch (default: in
                          order); each epoch takes its full batches only
  --log=FILE.csv          step,loss,loss_scale,skipped,ms per step, and lr
                          with mpc-opt --lr-schedule (also
                          --log-file=FILE.csv: torchrun takes --log itself)
  --eval-data=FILE.npz    a validation set: the loss of the model's forward
                          in inference form (batch norms on running
                          statistics, fp32) on its full batches, after the
                          last step and every --eval-every=N steps; rows
                          step,eval_loss,samples in --eval-log=FILE.csv;
                          --save-best=CKPT.onnx checkpoints the lowest;
                          --eval-ema evaluates the parameters' moving
                          average (mpc-opt --ema-decay); --early-stop=N
                          stops after N evaluations without a lower loss
  --save=CKPT.onnx        checkpoint at the end (and every --save-every=N)
  --resume=CKPT.onnx      continue bit-for-bit from a checkpoint
  --external-data         --save, --save-best and --export-inference files
                          keep their tensors in FILE.data beside FILE (ONNX
                          external data); one that would pass 2 GiB always
                          does
  --export-inference=F    write the inference graph with trained weights;
                          --outputs=NAME,NAME: the values it computes
                          (default: every output but the loss),
                          --precision=fp32|fp16|bf16: its weights' type
  --export-safetensors=F  write the trained parameters and buffers as
                          safetensors under their state_dict names, for
                          torch's model.load_state_dict(load_file(F))
  --export-ema            both exports: the parameters' moving average
                          (mpc-opt --ema-decay) in their place
                          With no --data/--synthetic and no --steps or
                          --epochs, mpc-run only loads MODEL (and --resume)
                          and writes the exports.
  --quiet                 no progress lines
  --debug-overflow        on a step that overflows, re-run it checking every
                          node's output and report the first inf/nan node
                          (with --device=cuda: runs the step staged)
  --cuda-resident=on|off  cuda: keep the whole step on the GPU, one arena,
                          one synchronisation per step (default on); off:
                          copy every node's inputs and outputs (debugging)
  --cuda-graphs=on|off    cuda, resident: capture the step as a CUDA graph
                          on its second run and replay it (default on;
                          MPC_CUDA_GRAPHS=0 also turns it off;
                          MPC_CUDA_PROFILE=1 turns it off and prints each
                          op's device time per step to stderr at exit)
  --min-loss-scale=F      loss-scale floor (default 1): after
  --max-skipped-steps=N   N (default 100) consecutive skipped steps with the
                          scale below the floor, stop with exit 1 and name
                          the node that overflowed (0: never stop)
  --nproc-per-node=N      start N ranks on this machine (a model compiled
                          with --data-parallel; each its local rank's GPU
                          with cuda), as torchrun --standalone would
  --collective-timeout=S  data parallel: a collective that hears nothing
                          from a rank for S seconds (default 300) ends every
                          rank with a line naming it (a stopped, hung or
                          unreachable rank); give it to every rank
  --memory-limit=BYTES    refuse, before the first step, a model whose
                          planned peak exceeds BYTES (K, M, G suffixes;
                          0: no check). Default: the device's free memory
                          (cpu: MemAvailable, cuda: cudaMemGetInfo)

Data parallel: `mpc-run --nproc-per-node=N MODEL ...` (or `mpirun -np N
mpc-run MODEL ...`) trains a model compiled with mpc-opt --data-parallel on
N ranks: on the cpu, or on cuda with one GPU per rank (the local rank's;
NCCL). Without MPI, one process per rank started
with torchrun's variables (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT;
`torchrun --nproc-per-node=N --no-python mpc-run MODEL ...`, or any script)
meets over TCP at MASTER_ADDR (MPC_RENDEZVOUS_TIMEOUT=S, default 300 s;
MPC_MASTER_PORT chooses rank 0's port). Step i's global batch is
samples [i*N*B, (i+1)*N*B) of the data (in the shuffled order with
--shuffle); rank r takes the r-th B of them. Rank 0 prints, logs and writes
--save and --export-inference; the logged loss is the mean over the ranks.

Integer flags are decimal and bounded: step counts (--steps, --save-every,
--eval-every, --early-stop, --max-skipped-steps) at most 10^12, --epochs at
most 10^6, --batch at most 2^31-1, --nproc-per-node at most 1024.

Inference (--infer) runs MODEL's main graph forward, on any supported model
(for a compiled model: the inference graph on its current parameters).

  --input NAME=FILE       a graph input from FILE: .npy, or a serialized ONNX
                          TensorProto (.pb); also --input=NAME=FILE. Repeatable.
  --input FILE            the next graph input in graph order not given by
                          name (a path holding '=' is written --input =PATH)
  --output-dir=DIR        writes each graph output as DIR/NAME.npy (DIR is
                          created if missing). Characters of NAME other than
                          letters, digits, '.', '-' and '_' become '_'; a name
                          taken twice gets _2, _3, ... appended.
)";

} // namespace

const char *runUsage() { return kUsage; }

RunFlags parseRunFlags(int argc, const char *const *argv) {
  RunFlags f;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i], key = arg, val;
    bool hasVal = false;
    size_t eq = arg.find('=');
    if (arg.rfind("--", 0) == 0 && eq != std::string::npos) {
      key = arg.substr(0, eq);
      val = arg.substr(eq + 1);
      hasVal = true;
    }
    auto need = [&]() -> const std::string & {
      if (!hasVal || val.empty())
        throw Error(key + ": expects a value (" + key + "=...)");
      return val;
    };
    // --input and --output-dir also take their value as the next argument.
    auto needOrNext = [&]() -> const std::string & {
      if (!hasVal) {
        if (i + 1 >= argc)
          throw Error(key + ": expects a value (" + key + " VALUE)");
        val = argv[++i];
        hasVal = true;
      }
      if (val.empty())
        throw Error(key + ": expects a value");
      return val;
    };
    static const char *kTrainingFlags[] = {"--steps",
                                           "--epochs",
                                           "--export-safetensors",
                                           "--outputs",
                                           "--precision",
                                           "--data",
                                           "--synthetic",
                                           "--batch",
                                           "--shuffle",
                                           "--seed",
                                           "--log",
                                           "--log-file",
                                           "--eval-data",
                                           "--eval-every",
                                           "--eval-log",
                                           "--save-best",
                                           "--eval-ema",
                                           "--early-stop",
                                           "--export-ema",
                                           "--save",
                                           "--save-every",
                                           "--resume",
                                           "--export-inference",
                                           "--external-data",
                                           "--debug-overflow",
                                           "--min-loss-scale",
                                           "--max-skipped-steps",
                                           "--memory-limit",
                                           "--cuda-resident",
                                           "--cuda-graphs",
                                           "--nproc-per-node",
                                           "--collective-timeout"};
    for (const char *t : kTrainingFlags)
      if (key == t)
        f.trainingFlags.push_back(key);
    if (arg == "-h" || arg == "--help") {
      f.help = true;
      return f;
    } else if (key == "--device") {
      f.device = need();
      if (f.device != "cpu" && f.device != "cuda" && f.device != "auto")
        throw Error("--device: expected cpu, cuda or auto, got '" + f.device +
                    "'");
    } else if (key == "--cuda-resident" || key == "--cuda-graphs") {
      std::string v = need();
      if (v != "on" && v != "off")
        throw Error(key + ": expected on or off, got '" + v + "'");
      (key == "--cuda-resident" ? f.cudaResident : f.cudaGraphs) = v == "on";
    } else if (key == "--steps") {
      f.steps = parseIntFlag(key, need(), 0, kMaxStepsFlag);
      f.stepsGiven = true;
    } else if (key == "--epochs") {
      f.epochs = parseIntFlag(key, need(), 1, kMaxEpochs);
    } else if (key == "--data") {
      f.data = need();
    } else if (arg == "--synthetic") {
      f.synthetic = true;
    } else if (key == "--batch") {
      f.batch = parseIntFlag(key, need(), 1, kMaxDimFlag);
    } else if (arg == "--shuffle") {
      f.shuffle = true;
    } else if (key == "--seed") {
      f.seed = uint64_t(
          parseIntFlag(key, need(), 0, std::numeric_limits<int64_t>::max()));
      f.seedGiven = true;
    } else if (key == "--log" || key == "--log-file") {
      f.log = need();
    } else if (key == "--save") {
      f.save = need();
    } else if (key == "--save-every") {
      f.saveEvery = parseIntFlag(key, need(), 1, kMaxStepsFlag);
    } else if (arg == "--external-data") {
      f.externalData = true;
    } else if (key == "--eval-data") {
      f.evalData = need();
    } else if (key == "--eval-every") {
      f.evalEvery = parseIntFlag(key, need(), 1, kMaxStepsFlag);
    } else if (key == "--eval-log") {
      f.evalLog = need();
    } else if (key == "--save-best") {
      f.saveBest = need();
    } else if (key == "--early-stop") {
      f.earlyStop = parseIntFlag(key, need(), 1, kMaxStepsFlag);
    } else if (arg == "--eval-ema") {
      f.evalEma = true;
    } else if (arg == "--export-ema") {
      f.exportEma = true;
    } else if (key == "--resume") {
      f.resume = need();
    } else if (key == "--export-inference") {
      f.exportInference = need();
    } else if (key == "--export-safetensors") {
      f.exportSafetensors = need();
    } else if (key == "--outputs") {
      std::string list = need();
      for (size_t at = 0;;) {
        size_t comma = list.find(',', at);
        std::string name = list.substr(at, comma - at);
        if (name.empty())
          throw Error("--outputs: expected NAME,NAME,... (an empty name in '" +
                      list + "')");
        f.exportOutputs.push_back(name);
        if (comma == std::string::npos)
          break;
        at = comma + 1;
      }
    } else if (key == "--precision") {
      const std::string &v = need();
      if (v == "fp32")
        f.exportPrecision = DType::F32;
      else if (v == "fp16")
        f.exportPrecision = DType::F16;
      else if (v == "bf16")
        f.exportPrecision = DType::BF16;
      else
        throw Error("--precision: expected fp32, fp16 or bf16, got '" + v +
                    "'");
    } else if (arg == "--debug-overflow") {
      f.debugOverflow = true;
    } else if (key == "--min-loss-scale") {
      const std::string &v = need();
      f.minLossScale = parseDecimal(v).value_or(NAN);
      if (!(f.minLossScale >= 0))
        throw Error("--min-loss-scale: expected a number >= 0, got '" + v +
                    "'");
    } else if (key == "--max-skipped-steps") {
      f.maxSkippedSteps = parseIntFlag(key, need(), 0, kMaxStepsFlag);
    } else if (key == "--memory-limit") {
      f.memoryLimit = parseByteSize(key, need());
      f.memoryLimitGiven = true;
    } else if (key == "--nproc-per-node") {
      f.nprocPerNode = parseIntFlag(key, need(), 1, kMaxLocalRanks);
    } else if (key == "--collective-timeout") {
      const std::string &v = need();
      f.collectiveTimeout = parseDecimal(v).value_or(NAN);
      // At most 10^6 s: a bound, and one the clocks' milliseconds hold.
      if (!(f.collectiveTimeout > 0) || !(f.collectiveTimeout <= 1e6))
        throw Error("--collective-timeout: expected seconds, a number > 0 "
                    "and at most 1000000, got '" +
                    v + "'");
    } else if (arg == "--quiet") {
      f.quiet = true;
    } else if (arg == "--infer") {
      f.infer = true;
    } else if (key == "--input") {
      f.inputs.push_back(needOrNext());
    } else if (key == "--output-dir") {
      f.outputDir = needOrNext();
    } else if (!arg.empty() && arg[0] == '-') {
      throw Error("unknown flag '" + arg + "' (see mpc-run --help)");
    } else if (f.model.empty()) {
      f.model = arg;
    } else {
      throw Error("unexpected argument '" + arg + "'");
    }
  }
  if (f.model.empty())
    throw Error("no model (usage: mpc-run MODEL --data=FILE.npz --steps=N)");
  if (f.infer) {
    if (!f.trainingFlags.empty())
      throw Error(f.trainingFlags[0] + ": is a training flag; --infer does "
                                       "not take it");
    if (f.outputDir.empty())
      throw Error("--infer needs --output-dir=DIR (where the outputs go)");
    return f;
  }
  if (!f.inputs.empty())
    throw Error("--input: only with --infer (training reads --data=FILE.npz)");
  if (!f.outputDir.empty())
    throw Error("--output-dir: only with --infer");
  if (f.epochs > 0 && f.stepsGiven)
    throw Error("--epochs and --steps are exclusive (--epochs=N runs N "
                "epochs of samples / (batch x micro-batches x ranks) steps)");
  if (!f.exportOutputs.empty() && f.exportInference.empty())
    throw Error("--outputs: chooses the outputs of --export-inference=F, "
                "which is not given");
  if (f.exportPrecision && f.exportInference.empty())
    throw Error("--precision: only with --export-inference (the type of the "
                "exported model); the training precision is chosen by "
                "mpc-opt --precision");
  if (f.exportInference.empty() && f.exportSafetensors.empty() && f.exportEma)
    throw Error("--export-ema needs --export-inference=FILE.onnx or "
                "--export-safetensors=FILE.safetensors");
  for (const std::string *out : {&f.exportInference, &f.exportSafetensors})
    for (const std::string *in : {&f.model, &f.resume, &f.data, &f.evalData})
      if (!out->empty() && !in->empty() && sameFileByIdentity(*out, *in))
        throw Error(std::string(out == &f.exportInference
                                    ? "--export-inference"
                                    : "--export-safetensors") +
                    ": " + *out + " is an input of this run (" + *in +
                    "); write the export to another file");
  f.exportOnly = f.data.empty() && !f.synthetic && !f.stepsGiven &&
                 f.epochs == 0 &&
                 !(f.exportInference.empty() && f.exportSafetensors.empty());
  if (f.exportOnly) {
    // Nothing trains: a flag about training would be silently ignored.
    static const char *kNeedData[] = {"--log",
                                      "--log-file",
                                      "--save-every",
                                      "--eval-data",
                                      "--eval-every",
                                      "--eval-log",
                                      "--save-best",
                                      "--eval-ema",
                                      "--early-stop",
                                      "--shuffle",
                                      "--seed",
                                      "--batch",
                                      "--debug-overflow",
                                      "--min-loss-scale",
                                      "--max-skipped-steps"};
    for (const std::string &given : f.trainingFlags)
      for (const char *flag : kNeedData)
        if (given == flag)
          throw Error(given + ": trains, but with no --data or --synthetic "
                              "(and no --steps) mpc-run only writes the "
                              "exports");
    return f;
  }
  if (f.data.empty() && !f.synthetic)
    throw Error("no data: give --data=FILE.npz or --synthetic (with neither, "
                "and no --steps, mpc-run only writes --export-inference and "
                "--export-safetensors)");
  if (!f.data.empty() && f.synthetic)
    throw Error("--data and --synthetic are exclusive");
  if (f.saveEvery > 0 && f.save.empty())
    throw Error("--save-every needs --save=CKPT.onnx");
  if (f.externalData && f.save.empty() && f.saveBest.empty() &&
      f.exportInference.empty())
    throw Error("--external-data: writes the --save, --save-best and "
                "--export-inference files; give one of them");
  if (f.evalData.empty() && f.evalEvery > 0)
    throw Error("--eval-every needs --eval-data=FILE.npz");
  if (f.evalData.empty() && !f.evalLog.empty())
    throw Error("--eval-log needs --eval-data=FILE.npz");
  if (f.evalData.empty() && !f.saveBest.empty())
    throw Error("--save-best needs --eval-data=FILE.npz");
  if (f.evalData.empty() && f.earlyStop > 0)
    throw Error("--early-stop needs --eval-data=FILE.npz (and --eval-every "
                "to evaluate during the run)");
  if (f.evalData.empty() && f.evalEma)
    throw Error("--eval-ema needs --eval-data=FILE.npz");
  return f;
}

} // namespace mpc
