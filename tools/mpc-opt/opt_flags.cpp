// mpc-opt's command line (tools/mpc-opt/opt_flags.h).
#include "tools/mpc-opt/opt_flags.h"

#include "passes/compile_flags.h"
#include "passes/optimizer_flags.h"
#include "support/diagnostics.h"
#include "support/int_parse.h"
#include "support/name_pattern.h"

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
    } else if (key.rfind("--", 0) == 0 &&
               applyCompileFlag(o, key, hasVal ? &val : nullptr)) {
      // a compile flag (passes/compile_flags.h)
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
