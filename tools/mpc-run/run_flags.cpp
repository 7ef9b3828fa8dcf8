// mpc-run's command line (tools/mpc-run/run_flags.h): one table of its flags,
// which the parser, --help and --help-markdown read.
#include "tools/mpc-run/run_flags.h"

#include "runtime/eval_metrics.h"
#include "runtime/memory_limit.h"
#include "support/diagnostics.h"
#include "support/flag_table.h"
#include "support/int_parse.h"
#include "support/path_identity.h"

#include <cmath>
#include <limits>

namespace mpc {
namespace {

/// --epochs' bound: a million passes over the data.
constexpr int64_t kMaxEpochs = 1000000;
/// --nproc-per-node's bound: more ranks than any machine has GPUs or cores.
constexpr int64_t kMaxLocalRanks = 1024;

/// A training flag: --infer refuses it.
const char *const kTrains = "trains";
/// A flag about the training loop: refused when nothing trains (only
/// exports are written).
const char *const kNeedsData = "needs-data";

std::vector<Flag> runFlags(RunFlags &f) {
  using V = const FlagValue &;
  constexpr FlagArg kSwitch = FlagArg::None, kValue = FlagArg::Value;
  const std::vector<std::string> trains = {kTrains},
                                 loop = {kTrains, kNeedsData};
  const char *device = "device", *data = "data and steps", *eval = "evaluation",
             *exports = "checkpoints and exports",
             *numerics = "numerics and memory", *cuda = "cuda",
             *parallel = "data parallel", *infer = "inference";
  auto log = [&f](V v) { f.log = v.text; };
  std::vector<Flag> flags = {
      {"--device", kValue, "=cpu|cuda|auto", device,
       "the backend (default auto, or $MPC_DEVICE when set: cuda when this "
       "build has the CUDA backend and a usable GPU is there, else cpu); "
       "cuda needs a CUDA build and a GPU, and fails naming why otherwise; a "
       "CUDA build's backend is the plugin libmpc_cuda_backend.so beside "
       "mpc-run (or $MPC_CUDA_PLUGIN), loaded only for cuda and auto",
       [&f](V v) {
         f.device = v.oneOf({"cpu", "cuda", "auto"});
       }},
      {"--threads", kValue, "=N", device,
       "the CPU's threads, 1 to 1024 (default: the cores this process may run "
       "on, or OPENBLAS_NUM_THREADS / OMP_NUM_THREADS when set): oneDNN's "
       "products and convolutions, OpenBLAS's and the kernels' own loops "
       "share one pool of N, so no library's threads wait for another's cores",
       [&f](V v) { f.threads = v.integer(1, 1024); }},
      {"--steps", kValue, "=N", data,
       "steps to run (default 100; after --resume: N more); optimizer steps "
       "of K micro-batches each for a model compiled with --grad-accum=K",
       [&f](V v) {
         f.steps = v.integer(0, kMaxStepsFlag);
         f.stepsGiven = true;
       },
       trains},
      {"--epochs", kValue, "=N", data,
       "train to N epochs in all (after --resume: the steps left of them; "
       "exclusive with --steps); an epoch is samples / (batch x K x ranks) "
       "steps, its last partial step left out (drop_last)",
       [&f](V v) { f.epochs = v.integer(1, kMaxEpochs); }, trains},
      {"--data", kValue, "=FILE.npz|DIR", data,
       "arrays named after the step's data inputs: an .npz, or a directory "
       "of NAME.npy files (mapped, read a batch at a time: data bigger than "
       "memory); given again, the sources are read one after another as one "
       "data set (shards, which must agree on the arrays' dtypes)",
       [&f](V v) {
         (f.data.empty() ? f.data : f.moreData.emplace_back()) = v.text;
       },
       trains},
      {"--synthetic", kSwitch, "", data,
       "random data of the right shapes instead",
       [&f](V) { f.synthetic = true; }, trains},
      {"--batch", kValue, "=B", data,
       "batch size (must match a static batch dim); the micro-batch size "
       "with --grad-accum",
       [&f](V v) { f.batch = v.integer(1, kMaxDimFlag); }, loop},
      {"--shuffle", kSwitch, "", data,
       "a new shuffled order every epoch (default: in order); each epoch "
       "takes its full batches only",
       [&f](V) { f.shuffle = true; }, loop},
      {"--seed", kValue, "=S", data,
       "the run's seed: --shuffle's order, --synthetic data, random ops "
       "such as Dropout",
       [&f](V v) {
         f.seed = uint64_t(v.integer(0, std::numeric_limits<int64_t>::max()));
         f.seedGiven = true;
       },
       loop},
      {"--log", kValue, "=FILE.csv", data,
       "step,loss,loss_scale,skipped,ms per step, and lr with mpc-opt "
       "--lr-schedule",
       log, loop},
      {"--log-file", kValue, "=FILE.csv", data,
       "the same as --log (torchrun takes --log itself)", log, loop},
      {"--tensorboard", kValue, "=DIR", data,
       "TensorBoard event files in DIR (created if missing; a new file per "
       "run): train/loss, train/lr, train/loss_scale, train/skipped (0/1) and "
       "train/samples_per_sec per step, eval/loss and eval/METRIC per "
       "evaluation",
       [&f](V v) { f.tensorboard = v.text; }, loop},
      {"--quiet", kSwitch, "", data, "no progress lines",
       [&f](V) { f.quiet = true; }},
      {"--verbose", kSwitch, "", data,
       "after training, name the CPU kernel families that ran the matrix "
       "products and convolutions (oneDNN bf16, BLAS fp32, emulated)",
       [&f](V) { f.verbose = true; }},
      {"--eval-data", kValue, "=FILE.npz|DIR", eval,
       "a validation set: the loss of the model's forward in inference form "
       "(batch norms on running statistics, fp32) on its full batches, after "
       "the last step and every --eval-every steps; the forms of --data, "
       "given again for shards",
       [&f](V v) {
         (f.evalData.empty() ? f.evalData : f.moreEvalData.emplace_back()) =
             v.text;
       },
       loop},
      {"--eval-every", kValue, "=N", eval, "evaluate every N steps as well",
       [&f](V v) { f.evalEvery = v.integer(1, kMaxStepsFlag); }, loop},
      {"--eval-log", kValue, "=FILE.csv", eval,
       "rows step,eval_loss,samples, one per evaluation",
       [&f](V v) { f.evalLog = v.text; }, loop},
      {"--eval-metrics", kValue, "=accuracy,topK", eval,
       "classification metrics beside the loss: the share of samples whose "
       "label (the integer input the loss reads) is the arg-max (accuracy) or "
       "among the K largest (topK, e.g. top5) of --eval-output's scores; a "
       "column each in --eval-log, in the progress line and in --tensorboard",
       [&f](V v) {
         parseEvalMetrics(v.text);
         f.evalMetrics = v.text;
       },
       loop},
      {"--eval-output", kValue, "=NAME", eval,
       "the forward's output of class scores --eval-metrics ranks, its "
       "classes last (default: the only floating output of rank >= 2 besides "
       "the loss)",
       [&f](V v) { f.evalOutput = v.text; }, loop},
      {"--save-best", kValue, "=CKPT.onnx", eval,
       "checkpoint the parameters of the lowest validation loss",
       [&f](V v) { f.saveBest = v.text; }, loop},
      {"--eval-ema", kSwitch, "", eval,
       "evaluate the parameters' moving average (mpc-opt --ema-decay)",
       [&f](V) { f.evalEma = true; }, loop},
      {"--early-stop", kValue, "=N", eval,
       "stop after N evaluations without a lower loss",
       [&f](V v) { f.earlyStop = v.integer(1, kMaxStepsFlag); }, loop},
      {"--save", kValue, "=CKPT.onnx", exports,
       "checkpoint at the end (and every --save-every steps)",
       [&f](V v) { f.save = v.text; }, trains},
      {"--save-every", kValue, "=N", exports, "checkpoint every N steps too",
       [&f](V v) { f.saveEvery = v.integer(1, kMaxStepsFlag); }, loop},
      {"--resume", kValue, "=CKPT.onnx", exports,
       "continue bit-for-bit from a checkpoint",
       [&f](V v) { f.resume = v.text; }, trains},
      {"--external-data", kSwitch, "", exports,
       "--save, --save-best and --export-inference files keep their tensors "
       "in FILE.data beside FILE (ONNX external data); one that would pass 2 "
       "GiB always does",
       [&f](V) { f.externalData = true; }, trains},
      {"--export-inference", kValue, "=F", exports,
       "write the inference graph with trained weights",
       [&f](V v) { f.exportInference = v.text; }, trains},
      {"--outputs", kValue, "=NAME,NAME", exports,
       "the values --export-inference's model computes (default: every "
       "output but the loss)",
       [&f](V v) {
         const std::string &list = v.text;
         for (size_t at = 0;;) {
           size_t comma = list.find(',', at);
           std::string name = list.substr(at, comma - at);
           if (name.empty())
             throw Error(
                 "--outputs: expected NAME,NAME,... (an empty name in '" +
                 list + "')");
           f.exportOutputs.push_back(name);
           if (comma == std::string::npos)
             break;
           at = comma + 1;
         }
       },
       trains},
      {"--precision", kValue, "=fp32|fp16|bf16", exports,
       "the type of --export-inference's weights",
       [&f](V v) {
         const std::string &t = v.oneOf({"fp32", "fp16", "bf16"});
         f.exportPrecision = t == "fp32"   ? DType::F32
                             : t == "fp16" ? DType::F16
                                           : DType::BF16;
       },
       trains},
      {"--export-safetensors", kValue, "=F", exports,
       "write the trained parameters and buffers as safetensors under their "
       "state_dict names, for torch's model.load_state_dict(load_file(F))",
       [&f](V v) { f.exportSafetensors = v.text; }, trains},
      {"--export-ema", kSwitch, "", exports,
       "both exports: the parameters' moving average (mpc-opt --ema-decay) in "
       "their place",
       [&f](V) { f.exportEma = true; }, trains},
      {"--debug-overflow", kSwitch, "", numerics,
       "on a step that overflows, re-run it checking every node's output and "
       "report the first inf/nan node (with --device=cuda: runs the step "
       "staged)",
       [&f](V) { f.debugOverflow = true; }, loop},
      {"--min-loss-scale", kValue, "=F", numerics,
       "loss-scale floor (default 1): see --max-skipped-steps",
       [&f](V v) {
         f.minLossScale = parseDecimal(v.text).value_or(NAN);
         if (!(f.minLossScale >= 0))
           throw Error("--min-loss-scale: expected a number >= 0, got '" +
                       v.text + "'");
       },
       loop},
      {"--max-skipped-steps", kValue, "=N", numerics,
       "after N (default 100) consecutive skipped steps with the scale below "
       "the floor, stop with exit 1 and name the node that overflowed (0: "
       "never stop)",
       [&f](V v) { f.maxSkippedSteps = v.integer(0, kMaxStepsFlag); }, loop},
      {"--memory-limit", kValue, "=BYTES", numerics,
       "refuse, before the first step, a model whose planned peak exceeds "
       "BYTES (K, M, G suffixes; 0: no check). Default: the device's free "
       "memory (cpu: MemAvailable, cuda: cudaMemGetInfo)",
       [&f](V v) {
         f.memoryLimit = v.byteSize();
         f.memoryLimitGiven = true;
       },
       trains},
      {"--cuda-resident", kValue, "=on|off", cuda,
       "keep the whole step on the GPU, one arena, one synchronisation per "
       "step (default on); off: copy every node's inputs and outputs "
       "(debugging)",
       [&f](V v) {
         f.cudaResident = v.oneOf({"on", "off"}) == "on";
       },
       trains},
      {"--cuda-graphs", kValue, "=on|off", cuda,
       "resident: capture the step as a CUDA graph on its second run and "
       "replay it (default on; MPC_CUDA_GRAPHS=0 also turns it off; "
       "MPC_CUDA_PROFILE=1 turns it off and prints each op's device time per "
       "step to stderr at exit)",
       [&f](V v) {
         f.cudaGraphs = v.oneOf({"on", "off"}) == "on";
       },
       trains},
      {"--cudnn-deterministic", kValue, "=true|false", cuda,
       "cuda convolutions: deterministic cuDNN algorithms only, so two runs "
       "give the same bits (default true); false lets cuDNN's heuristics "
       "pick the fastest, the nondeterministic data and weight gradients "
       "(atomic adds in a varying order) too: speed over repeatability",
       [&f](V v) {
         f.cudnnDeterministic = v.oneOf({"true", "false"}) == "true";
       },
       trains},
      {"--nproc-per-node", kValue, "=N", parallel,
       "start N ranks on this machine (a model compiled with --data-parallel; "
       "each its local rank's GPU with cuda), as torchrun --standalone would",
       [&f](V v) { f.nprocPerNode = v.integer(1, kMaxLocalRanks); }, trains},
      {"--collective-timeout", kValue, "=S", parallel,
       "a collective that hears nothing from a rank for S seconds (default "
       "300) ends every rank with a line naming it (a stopped, hung or "
       "unreachable rank); give it to every rank",
       [&f](V v) {
         f.collectiveTimeout = parseDecimal(v.text).value_or(NAN);
         // At most 10^6 s: a bound, and one the clocks' milliseconds hold.
         if (!(f.collectiveTimeout > 0) || !(f.collectiveTimeout <= 1e6))
           throw Error("--collective-timeout: expected seconds, a number > 0 "
                       "and at most 1000000, got '" +
                       v.text + "'");
       },
       trains},
      {"--infer", kSwitch, "", infer, "run the forward instead of training",
       [&f](V) { f.infer = true; }},
      {"--input", FlagArg::ValueOrNext, " NAME=FILE", infer,
       "a graph input from FILE: .npy, or a serialized ONNX TensorProto "
       "(.pb); also --input=NAME=FILE. Repeatable. --input FILE: the next "
       "graph input in graph order not given by name (a path holding '=' is "
       "written --input =PATH)",
       [&f](V v) { f.inputs.push_back(v.text); }},
      {"--output-dir", FlagArg::ValueOrNext, "=DIR", infer,
       "writes each graph output as DIR/NAME.npy (DIR is created if "
       "missing). Characters of NAME other than letters, digits, '.', '-' "
       "and '_' become '_'; a name taken twice gets _2, _3, ... appended.",
       [&f](V v) { f.outputDir = v.text; }},
  };
  std::vector<Flag> helpRows = helpFlags(f.help, f.helpMarkdown);
  flags.insert(flags.end(), helpRows.begin(), helpRows.end());
  return flags;
}

const FlagDocs &runDocs() {
  static const FlagDocs docs{
      "mpc-run",
      R"(usage: mpc-run MODEL [options]
       mpc-run MODEL --infer --input NAME=FILE... --output-dir=DIR)",
      "Trains MODEL, a training step compiled by mpc-opt.",
      {{"device"},
       {"data and steps"},
       {"evaluation"},
       {"checkpoints and exports", "",
        R"(With no --data/--synthetic and no --steps or --epochs, mpc-run only
loads MODEL (and --resume) and writes the exports.)"},
       {"numerics and memory"},
       {"cuda"},
       {"data parallel", "",
        R"(`mpc-run --nproc-per-node=N MODEL ...` (or `mpirun -np N mpc-run
MODEL ...`) trains a model compiled with mpc-opt --data-parallel on N ranks:
on the cpu, or on cuda with one GPU per rank (the local rank's; NCCL).
Without MPI, one process per rank started with torchrun's variables (RANK,
WORLD_SIZE, MASTER_ADDR, MASTER_PORT; `torchrun --nproc-per-node=N
--no-python mpc-run MODEL ...`, or any script) meets over Gloo at MASTER_ADDR
(MPC_RENDEZVOUS_TIMEOUT=S, default 300 s; MPC_MASTER_PORT chooses rank 0's
port). Step i's global batch is samples [i*N*B, (i+1)*N*B) of the data (in
the shuffled order with --shuffle); rank r takes the r-th B of them. Rank 0
prints, logs and writes --save and --export-inference; the logged loss is
the mean over the ranks.)"},
       {"inference",
        R"(Inference (--infer) runs MODEL's main graph forward, on any supported
model (for a compiled model: the inference graph on its current parameters).)"},
       {"help"}},
      R"(Integer flags are decimal and bounded: step counts (--steps, --save-every,
--eval-every, --early-stop, --max-skipped-steps) at most 10^12, --epochs at
most 10^6, --batch at most 2^31-1, --nproc-per-node at most 1024.)"};
  return docs;
}

} // namespace

std::string runUsage() {
  RunFlags scratch;
  return flagHelpText(runFlags(scratch), runDocs());
}

std::string runHelpMarkdown() {
  RunFlags scratch;
  return flagMarkdown(runFlags(scratch), runDocs());
}

RunFlags parseRunFlags(int argc, const char *const *argv) {
  RunFlags f;
  CommandLine line;
  line.tool = "mpc-run";
  line.flags = runFlags(f);
  line.emptyIsMissing = true;
  line.positional = [&f](const std::string &arg) {
    if (!f.model.empty())
      throw Error("unexpected argument '" + arg + "'");
    f.model = arg;
  };
  std::vector<GivenFlag> given = parseCommandLine(line, argc, argv);
  if (f.help || f.helpMarkdown)
    return f;
  for (const GivenFlag &g : given)
    if (g.flag->hasMark(kTrains))
      f.trainingFlags.push_back(g.name);
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
  std::vector<const std::string *> ins = {&f.model, &f.resume, &f.data,
                                          &f.evalData};
  for (const std::vector<std::string> *more : {&f.moreData, &f.moreEvalData})
    for (const std::string &in : *more)
      ins.push_back(&in);
  for (const std::string *out : {&f.exportInference, &f.exportSafetensors})
    for (const std::string *in : ins)
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
    for (const GivenFlag &g : given)
      if (g.flag->hasMark(kNeedsData))
        throw Error(g.name + ": trains, but with no --data or --synthetic "
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
  if (f.evalData.empty() && !f.evalMetrics.empty())
    throw Error("--eval-metrics needs --eval-data=FILE.npz");
  if (f.evalMetrics.empty() && !f.evalOutput.empty())
    throw Error("--eval-output: chooses the output --eval-metrics ranks, "
                "which is not given");
  return f;
}

} // namespace mpc
