// mpc-opt's command line (tools/mpc-opt/opt_flags.h).
#include "tools/mpc-opt/opt_flags.h"

#include "passes/optimizer_flags.h"
#include "passes/support/diagnostics.h"
#include "passes/support/int_parse.h"
#include "passes/support/name_pattern.h"
#include "runtime/memory_limit.h"

#include <algorithm>
#include <cstdlib>

namespace mpc {
namespace {

const char *const kUsage =
    R"(usage: mpc-opt MODEL [-o OUT] [options]

Compiles MODEL (binary ONNX or ONNX text, a forward graph with a scalar loss)
into one mixed-precision training step and writes it as ONNX.

output:
  -o FILE                 output file ("-": stdout; default stdout for text)
  --emit=onnx|text|step   binary ONNX (default), text of every graph, or the
                          step as a plain functional model
  --external-data         keep the tensors' bytes in FILE.data beside -o FILE
                          (ONNX external data, as onnx.save_model's
                          save_as_external_data); a model that would pass
                          2 GiB is always written so
  --passes=a,b{k=v},c     run exactly these passes (default: all, in order)
  --list-passes           print the pass table
  --print-after-all       print the model (text) after every pass, on stderr
  --print-after=PASS      print the model after PASS, on stderr
  --print-types           append "// type: NAME : TYPE" lines to text output
  --no-verify-each        do not verify the graph after every pass
  --split-input-file      process chunks separated by "// -----" separately
  --stats                 print pass statistics on stderr
  --time-passes           print the CPU and wall time of every pass, the
                          verifier, import and export on stderr (a table)
  --explain               print each node's precision and the rule that chose
                          it (stdout; stderr when -o - writes the model)
  --dot=FILE              write the step graph as Graphviz, coloured by
                          precision, Casts marked (dot -Tsvg FILE)
  --report=memory         print the step's memory plan by class, next to the
                          fp32 baseline (stdout; stderr when -o - is the model)
  --report-json=FILE      write the same plan as JSON
memory:
  --recompute=none|auto|NODE,NODE   recompute saved activations in the
                          backward instead of keeping them (auto: cheap
                          elementwise ones; NODE: those nodes' outputs)
  --memory-budget=BYTES   with --recompute=auto: stop once the planned peak
                          fits (needs concrete shapes)
precision:
  --precision=fp16|bf16|fp32   (default fp16)
  --fp32-ops=Op,Op  --fp16-ops=Op,Op  --fp32-nodes=REGEX
  --loss-scale=dynamic|static:F|none   (default: dynamic for fp16, else none)
  --init-scale=F --growth-factor=F --backoff-factor=F --growth-interval=N
optimizer:
  --optimizer=sgd|adam|adamw|adafactor  --lr=F  --momentum=F  --dampening=F
  --nesterov
  --weight-decay=F  --beta1=F  --beta2=F  --eps=F  --max-grad-norm=F
  --beta2-decay=F --eps2=F --clip-threshold=F   adafactor: torch's
                          beta2_decay (-0.8), eps[1] (1e-3) and d (1); its
                          eps[0] is --eps (default fp32's epsilon) and its
                          --lr defaults to 1e-2. Row and column factors of
                          the second moment: a fraction of Adam's memory
  --no-weight-decay=REGEX parameters whose names match get no weight decay
                          (e.g. 'bias|norm': the Trainer's second group)
  --lr-schedule=S         constant (default), linear, cosine,
                          cosine_with_restarts, polynomial, inverse_sqrt,
                          warmup_stable_decay (transformers'
                          lr_scheduler_type), step or
                          exponential (torch's StepLR, ExponentialLR): the
                          learning rate of each update
  --warmup-steps=W        the first W updates ramp the rate up from 0
  --total-steps=T         the updates the decay spans (linear, cosine,
                          cosine_with_restarts, polynomial)
  --min-lr-ratio=R        cosine: decay to R*lr instead of 0
  --lr-cycles=N           cosine_with_restarts: N hard restarts (default 1)
  --lr-end=F --lr-power=P polynomial: decay to F (default 1e-7) as the P-th
                          power (default 1)
  --lr-timescale=N        inverse_sqrt: default W, else 10000
  --lr-schedule=warmup_stable_decay   transformers' get_wsd_schedule:
                          --lr-decay-steps=D, --total-steps=T or
                          --lr-stable-steps=S, --lr-warmup-type and
                          --lr-decay-type (linear, cosine, 1-sqrt; default
                          linear, cosine), --min-lr-ratio (0)
  --lr-schedule=reduce_lr_on_plateau   torch's ReduceLROnPlateau, stepped
                          by mpc-run with each --eval-data loss:
                          --lr-factor (0.1) --lr-patience (10)
                          --lr-threshold (1e-4, relative) --lr-cooldown (0)
                          --min-lr (0)
  --lr-step-size=N --lr-gamma=G   step: lr*G every N updates;
                          exponential: lr*G every update (G default 0.1)
  --ema-decay=D           keep an exponential moving average of the
                          parameters (torch's AveragedModel with
                          get_ema_multi_avg_fn(D)); mpc-run --eval-ema and
                          --export-ema use it
  --grad-accum=K          K micro-batches per optimizer step (default 1): mpc-run
                          runs the step K times, the update applies on the K-th
  --data-parallel         average the gradients and OR the overflow flag
                          across the ranks of `mpc-run --nproc-per-node=N`,
                          `mpirun -np N mpc-run` or torchrun (each rank runs
                          --batch samples of a global batch of N*B)
  --grad-comm-dtype=T     with --data-parallel: fp32 (default), bf16 or
                          fp16, the type the gradients cross ranks in
                          (bf16/fp16 halve the bytes, as DDP's compression
                          hooks)
  --sync-batchnorm        with --data-parallel: training-mode batch norms
                          normalise with the global batch's statistics
                          (torch.nn.SyncBatchNorm)
the loss:
  --loss=NAME             the output to train (default: the only output, or
                          the only scalar floating one of several, e.g. a
                          model returning (loss, logits)); the other outputs
                          are the inference model's
parameters and shapes:
  --trainable=REGEX  --frozen=REGEX  --input-shape=NAME:AxBxC  --batch=B

Integer flags are decimal and bounded: step counts (--growth-interval,
--warmup-steps, --total-steps, --lr-*-steps, --lr-step-size, --lr-cycles,
--lr-timescale, --lr-patience, --lr-cooldown) at most 10^12, --grad-accum at
most 65536, --batch and each --input-shape dimension at most 2^31-1.
--memory-budget takes K, M, G suffixes as mpc-run --memory-limit.
)";

double parseDouble(const std::string &flag, const std::string &v) {
  return parseNumberFlag(flag, v);
}

std::pair<std::string, std::vector<int64_t>>
parseInputShape(const std::string &v) {
  size_t colon = v.rfind(':');
  if (colon == std::string::npos || colon == 0)
    throw Error("--input-shape: expected NAME:AxBxC, got '" + v + "'");
  std::vector<int64_t> dims;
  std::string flag = "--input-shape=" + v.substr(0, colon);
  // Every 'x'-separated field is a dim: "4x" and "4xx3" are refused, not
  // read as 4 and 4x3.
  std::string text = v.substr(colon + 1);
  for (size_t at = 0;;) {
    // As many dims as a value may have (the importer refuses rank > 64).
    if (dims.size() == 64)
      throw Error(flag + ": more than 64 dimensions");
    size_t x = text.find('x', at);
    dims.push_back(parseIntFlag(flag + " dimension", text.substr(at, x - at), 0,
                                kMaxDimFlag));
    if (x == std::string::npos)
      break;
    at = x + 1;
  }
  return {v.substr(0, colon), dims};
}

} // namespace

const char *optUsage() { return kUsage; }

OptFlags parseOptFlags(int argc, const char *const *argv) {
  OptFlags f;
  CompileOptions &o = f.options;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    std::string key = arg, val;
    bool hasVal = false;
    size_t eq = arg.find('=');
    if (arg.rfind("--", 0) == 0 && eq != std::string::npos) {
      key = arg.substr(0, eq);
      val = arg.substr(eq + 1);
      hasVal = true;
    }
    auto need = [&]() -> const std::string & {
      if (!hasVal)
        throw Error(key + ": expects a value (" + key + "=...)");
      return val;
    };
    // --precision=fp32 asks for no casts, which a list without autocast
    // gives as well.
    if (key.rfind("--", 0) == 0 && arg != "--precision=fp32")
      f.given.push_back(key);
    if (arg == "-h" || arg == "--help") {
      f.help = true;
      return f;
    } else if (arg == "--list-passes") {
      f.listPasses = true;
      return f;
    } else if (arg == "-o") {
      if (i + 1 >= argc)
        throw Error("-o: expects a file name");
      f.output = argv[++i];
      f.outputGiven = true;
    } else if (key == "--emit") {
      f.emit = need();
      if (f.emit != "onnx" && f.emit != "text" && f.emit != "step")
        throw Error("--emit: expected onnx, text or step, got '" + f.emit +
                    "'");
    } else if (key == "--passes") {
      f.passes = need();
      f.passesGiven = true;
    } else if (arg == "--print-after-all") {
      f.printAfterAll = true;
    } else if (key == "--print-after") {
      f.printAfter = need();
    } else if (arg == "--print-types") {
      f.printTypes = true;
    } else if (arg == "--no-verify-each") {
      f.verifyEach = false;
    } else if (arg == "--split-input-file") {
      f.splitInputFile = true;
    } else if (arg == "--stats") {
      f.stats = true;
    } else if (arg == "--time-passes") {
      f.timePasses = true;
    } else if (arg == "--explain") {
      f.explain = true;
    } else if (key == "--report") {
      if (val != "memory")
        throw Error("--report: expected 'memory', got '" + val + "'");
      f.reportMemory = true;
    } else if (key == "--report-json") {
      if (val.empty())
        throw Error("--report-json: expects a file name (--report-json=FILE)");
      f.reportJson = val;
    } else if (arg == "--external-data") {
      f.externalData = true;
    } else if (key == "--dot") {
      if (val.empty())
        throw Error("--dot: expects a file name (--dot=FILE)");
      f.dotFile = val;
    } else if (key == "--precision") {
      auto t = parseDType(need());
      if (!t || (*t != DType::F16 && *t != DType::BF16 && *t != DType::F32))
        throw Error("--precision: expected fp16, bf16 or fp32, got '" + val +
                    "'");
      o.precision = *t;
    } else if (key == "--fp32-ops") {
      o.fp32Ops = splitList(need());
    } else if (key == "--fp16-ops") {
      o.fp16Ops = splitList(need());
    } else if (key == "--fp32-nodes") {
      o.fp32Nodes = need();
    } else if (key == "--loss-scale") {
      o.lossScale = need();
    } else if (key == "--init-scale") {
      o.initScale = parseDouble(key, need());
    } else if (key == "--growth-factor") {
      o.growthFactor = parseDouble(key, need());
    } else if (key == "--backoff-factor") {
      o.backoffFactor = parseDouble(key, need());
    } else if (key == "--growth-interval") {
      o.growthInterval = parseIntFlag(key, need(), 1, kMaxStepsFlag);
    } else if (key == "--optimizer") {
      o.optimizer = need();
    } else if (key == "--lr") {
      o.lr = parseDouble(key, need());
      o.lrSet = true;
    } else if (key == "--momentum") {
      o.momentum = parseDouble(key, need());
    } else if (key == "--dampening") {
      o.dampening = parseDouble(key, need());
    } else if (arg == "--nesterov") {
      o.nesterov = true;
    } else if (key == "--weight-decay") {
      o.weightDecay = parseDouble(key, need());
      o.weightDecaySet = true;
    } else if (key == "--no-weight-decay") {
      o.noWeightDecay = need();
    } else if (key == "--beta1") {
      o.beta1 = parseDouble(key, need());
    } else if (key == "--beta2") {
      o.beta2 = parseDouble(key, need());
    } else if (key == "--eps") {
      o.epsilon = parseDouble(key, need());
      o.epsilonSet = true;
    } else if (key == "--beta2-decay") {
      o.beta2Decay = parseDouble(key, need());
    } else if (key == "--eps2") {
      o.eps2 = parseDouble(key, need());
    } else if (key == "--clip-threshold") {
      o.clipThreshold = parseDouble(key, need());
    } else if (key == "--grad-accum") {
      o.gradAccum = parseIntFlag(key, need(), 1, 65536);
    } else if (arg == "--data-parallel") {
      o.dataParallel = true;
    } else if (arg == "--sync-batchnorm") {
      o.syncBatchNorm = true;
    } else if (key == "--grad-comm-dtype") {
      o.gradCommDtype = need();
      if (o.gradCommDtype != "fp32" && o.gradCommDtype != "bf16" &&
          o.gradCommDtype != "fp16")
        throw Error("--grad-comm-dtype: expected fp32, bf16 or fp16, got '" +
                    val + "'");
    } else if (key == "--max-grad-norm") {
      o.maxGradNorm = parseDouble(key, need());
    } else if (key == "--lr-schedule") {
      o.lrSchedule = need();
    } else if (key == "--warmup-steps") {
      o.warmupSteps = parseIntFlag(key, need(), 0, kMaxStepsFlag);
    } else if (key == "--total-steps") {
      o.totalSteps = parseIntFlag(key, need(), 1, kMaxStepsFlag);
    } else if (key == "--min-lr-ratio") {
      o.minLrRatio = parseDouble(key, need());
    } else if (key == "--lr-step-size") {
      o.lrStepSize = parseIntFlag(key, need(), 1, kMaxStepsFlag);
    } else if (key == "--lr-gamma") {
      o.lrGamma = parseDouble(key, need());
    } else if (key == "--lr-cycles") {
      o.lrCycles = parseIntFlag(key, need(), 1, kMaxStepsFlag);
    } else if (key == "--lr-end") {
      o.lrEnd = parseDouble(key, need());
    } else if (key == "--lr-power") {
      o.lrPower = parseDouble(key, need());
    } else if (key == "--lr-timescale") {
      o.lrTimescale = parseIntFlag(key, need(), 1, kMaxStepsFlag);
    } else if (key == "--lr-stable-steps") {
      o.lrStableSteps = parseIntFlag(key, need(), 0, kMaxStepsFlag);
    } else if (key == "--lr-decay-steps") {
      o.lrDecaySteps = parseIntFlag(key, need(), 1, kMaxStepsFlag);
    } else if (key == "--lr-warmup-type") {
      o.lrWarmupType = need();
    } else if (key == "--lr-decay-type") {
      o.lrDecayType = need();
    } else if (key == "--lr-factor") {
      o.lrFactor = parseDouble(key, need());
    } else if (key == "--lr-patience") {
      o.lrPatience = parseIntFlag(key, need(), 0, kMaxStepsFlag);
    } else if (key == "--lr-threshold") {
      o.lrThreshold = parseDouble(key, need());
    } else if (key == "--lr-cooldown") {
      o.lrCooldown = parseIntFlag(key, need(), 0, kMaxStepsFlag);
    } else if (key == "--min-lr") {
      o.minLr = parseDouble(key, need());
    } else if (key == "--ema-decay") {
      o.emaDecay = parseDouble(key, need());
    } else if (key == "--loss") {
      o.loss = need();
      if (o.loss.empty())
        throw Error(
            "--loss: expects the name of the loss output (--loss=NAME)");
    } else if (key == "--trainable") {
      o.trainable = need();
    } else if (key == "--frozen") {
      o.frozen = need();
    } else if (key == "--input-shape") {
      o.inputShapes.push_back(parseInputShape(need()));
    } else if (key == "--recompute") {
      o.recompute = need();
      if (o.recompute.empty())
        throw Error("--recompute: expected none, auto or node names");
    } else if (key == "--memory-budget") {
      o.memoryBudget = int64_t(parseByteSize(key, need()));
      if (o.memoryBudget <= 0)
        throw Error("--memory-budget: must be a positive byte count, got '" +
                    val + "'");
    } else if (key == "--batch") {
      o.batch = parseIntFlag(key, need(), 1, kMaxDimFlag);
    } else if (!arg.empty() && arg[0] == '-' && arg != "-") {
      throw Error("unknown flag '" + arg + "' (see mpc-opt --help)");
    } else if (f.input.empty()) {
      f.input = arg;
    } else {
      throw Error("unexpected argument '" + arg + "' (one model at a time)");
    }
  }
  if (f.input.empty())
    throw Error("no input model (usage: mpc-opt MODEL -o OUT)");
  // A hyper-parameter the chosen optimizer does not read would be ignored.
  checkOptimizerFlags(
      o.optimizer,
      std::find(f.given.begin(), f.given.end(), "--optimizer") != f.given.end(),
      f.given);
  // The name patterns compile now, so that a bad one is refused before the
  // model is read (the passes compile them again where they match).
  compileNamePattern(o.fp32Nodes, "fp32-nodes");
  compileNamePattern(o.trainable, "trainable");
  compileNamePattern(o.frozen, "frozen");
  compileNamePattern(o.noWeightDecay, "no-weight-decay");
  if (f.options.memoryBudget > 0 && f.options.recompute != "auto")
    throw Error("--memory-budget: only with --recompute=auto");
  if ((f.reportMemory || !f.reportJson.empty()) && f.splitInputFile)
    throw Error("--report: cannot be combined with --split-input-file");
  if (!f.dotFile.empty() && f.splitInputFile)
    throw Error("--dot: cannot be combined with --split-input-file (one "
                "graph per file)");
  if (!f.outputGiven) {
    if (f.emit != "text")
      throw Error("missing -o OUT (binary output is not written to a "
                  "terminal; use -o - to force stdout)");
    f.output = "-";
  }
  if (f.externalData && (f.emit == "text" || f.output == "-"))
    throw Error("--external-data: writes binary ONNX to a file (-o FILE, "
                "the data file beside it)");
  if (f.externalData && f.splitInputFile)
    throw Error("--external-data: cannot be combined with --split-input-file");
  // Only --explain and --dot read the precision map (never exported), and
  // only --stats the memory plan's numbers (the plan is not exported).
  f.options.recordPrecision = f.explain || !f.dotFile.empty();
  f.options.planMemory = f.stats;
  return f;
}

} // namespace mpc
