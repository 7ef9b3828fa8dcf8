// The compile flags: every flag that sets a field of CompileOptions, in one
// table (passes/compile_flags.h). mpc-opt's command line and the options of
// --passes=name{key=value} both apply a row of it, so
// `autocast{precision=bf16}` means what `--precision=bf16` means, checked the
// same way; the rows' marks are the passes that read each flag.
#include "passes/compile_flags.h"

#include "passes/optimizer/optimizer_flags.h"
#include "support/diagnostics.h"
#include "support/name_pattern.h"

#include "support/int_parse.h"
#include <algorithm>

namespace mpc {
namespace {

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

// The passes that read a group of flags (a row's marks).
const std::vector<std::string> kShapes = {"infer-shapes"};
const std::vector<std::string> kAutodiff = {"autodiff"};
const std::vector<std::string> kAutocast = {"autocast"};
const std::vector<std::string> kLossScale = {"loss-scale"};
const std::vector<std::string> kOptimizers = {"optimizer", "user-optimizer"};
const std::vector<std::string> kRecompute = {"recompute"};

constexpr FlagArg kValue = FlagArg::Value;
constexpr FlagArg kSwitch = FlagArg::Bool;

} // namespace

std::vector<Flag> compileFlags(CompileOptions &o) {
  using V = const FlagValue &;
  const char *memory = "memory", *precision = "precision",
             *scaling = "loss scaling", *optimizer = "optimizer",
             *schedule = "learning-rate schedule", *parallel = "data parallel",
             *loss = "the loss", *params = "parameters and shapes";
  return {
      // memory
      {"--recompute", kValue, "=none|auto|NODE,NODE", memory,
       "recompute saved activations in the backward instead of keeping them "
       "(default auto within a few percent of the step's FLOPs; auto: cheap "
       "elementwise ones and softmax islands; NODE: those nodes' outputs)",
       [&o](V v) {
         o.recompute = v.text;
         o.recomputeGiven = true;
         if (o.recompute.empty())
           throw Error("--recompute: expected none, auto or node names");
       },
       kRecompute},
      {"--memory-budget",
       kValue,
       "=SIZE",
       memory,
       "recompute (matrix products and whole blocks too) until the planned "
       "peak fits SIZE, at the fewest extra FLOPs found; implies "
       "--recompute=auto, keeps no 16-bit weight copies between steps, needs "
       "concrete shapes (e.g. 150MiB, 2GiB, 1.5GB, bytes)",
       [&o](V v) {
         o.memoryBudget = int64_t(v.byteSize());
         if (o.memoryBudget <= 0)
           throw Error("--memory-budget: must be a positive byte count, got '" +
                       v.text + "'");
       },
       {"recompute", "weight-copies"}},
      // precision
      {"--precision",
       kValue,
       "=fp16|bf16|fp32",
       precision,
       "the low precision of the step (default fp16; fp32: no casts)",
       [&o](V v) {
         auto t = parseDType(v.text);
         if (!t || (*t != DType::F16 && *t != DType::BF16 && *t != DType::F32))
           throw Error("--precision: expected fp16, bf16 or fp32, got '" +
                       v.text + "'");
         o.precision = *t;
       },
       {"autocast", "master-weights"}},
      {"--fp32-ops", kValue, "=Op,Op", precision,
       "op types kept in fp32, whatever autocast's table says",
       [&o](V v) { o.fp32Ops = splitList(v.text); }, kAutocast},
      {"--fp16-ops", kValue, "=Op,Op", precision,
       "op types run in the low precision although the table keeps them wide",
       [&o](V v) { o.fp16Ops = splitList(v.text); }, kAutocast},
      {"--fp32-nodes", kValue, "=REGEX", precision,
       "the nodes whose names match are kept in fp32",
       [&o](V v) { o.fp32Nodes = v.text; }, kAutocast},
      // loss scaling
      {"--loss-scale", kValue, "=dynamic|static:F|none", scaling,
       "dynamic (PyTorch GradScaler's), a static scale F, or none (default: "
       "dynamic for fp16, else none)",
       [&o](V v) { o.lossScale = v.text; }, kLossScale},
      {"--init-scale", kValue, "=F", scaling,
       "dynamic: the initial scale (default 65536)",
       [&o](V v) { o.initScale = v.number(); }, kLossScale},
      {"--growth-factor", kValue, "=F", scaling,
       "dynamic: the scale's factor after --growth-interval clean steps "
       "(default 2)",
       [&o](V v) { o.growthFactor = v.number(); }, kLossScale},
      {"--backoff-factor", kValue, "=F", scaling,
       "dynamic: the scale's factor on an overflow (default 0.5)",
       [&o](V v) { o.backoffFactor = v.number(); }, kLossScale},
      {"--growth-interval", kValue, "=N", scaling,
       "dynamic: the clean steps before the scale grows (default 2000)",
       [&o](V v) { o.growthInterval = v.integer(1, kMaxStepsFlag); },
       kLossScale},
      // optimizer
      {"--optimizer", kValue, "=sgd|adam|adamw|adafactor", optimizer,
       "the optimizer, with PyTorch's formulas (default sgd)",
       [&o](V v) { o.optimizer = v.text; }, kOptimizers},
      {"--lr", kValue, "=F", optimizer,
       "the learning rate (default 1e-3; adafactor: 1e-2)",
       [&o](V v) {
         o.lr = v.number();
         o.lrSet = true;
       },
       kOptimizers},
      {"--momentum", kValue, "=F", optimizer, "sgd: momentum (default 0)",
       [&o](V v) { o.momentum = v.number(); }, kOptimizers},
      {"--dampening", kValue, "=F", optimizer, "sgd: dampening (default 0)",
       [&o](V v) { o.dampening = v.number(); }, kOptimizers},
      {"--nesterov", kSwitch, "", optimizer, "sgd: Nesterov momentum",
       [&o](V v) { o.nesterov = v.on; }, kOptimizers},
      {"--weight-decay", kValue, "=F", optimizer,
       "weight decay (default 0; adamw: 1e-2)",
       [&o](V v) {
         o.weightDecay = v.number();
         o.weightDecaySet = true;
       },
       kOptimizers},
      {"--no-weight-decay", kValue, "=REGEX", optimizer,
       "parameters whose names match get no weight decay (e.g. 'bias|norm': "
       "the Trainer's second group)",
       [&o](V v) { o.noWeightDecay = v.text; }, kOptimizers},
      {"--beta1", kValue, "=F", optimizer,
       "adam, adamw: the first moment's decay (default 0.9)",
       [&o](V v) { o.beta1 = v.number(); }, kOptimizers},
      {"--beta2", kValue, "=F", optimizer,
       "adam, adamw: the second moment's decay (default 0.999)",
       [&o](V v) { o.beta2 = v.number(); }, kOptimizers},
      {"--eps", kValue, "=F", optimizer,
       "adam, adamw: the denominator's epsilon (default 1e-8); adafactor: "
       "its eps[0] (default fp32's epsilon)",
       [&o](V v) {
         o.epsilon = v.number();
         o.epsilonSet = true;
       },
       kOptimizers},
      {"--beta2-decay", kValue, "=F", optimizer,
       "adafactor: torch's beta2_decay (default -0.8). Adafactor keeps row "
       "and column factors of the second moment: a fraction of Adam's memory",
       [&o](V v) { o.beta2Decay = v.number(); }, kOptimizers},
      {"--eps2", kValue, "=F", optimizer,
       "adafactor: torch's eps[1] (default 1e-3)",
       [&o](V v) { o.eps2 = v.number(); }, kOptimizers},
      {"--clip-threshold", kValue, "=F", optimizer,
       "adafactor: torch's d (default 1)",
       [&o](V v) { o.clipThreshold = v.number(); }, kOptimizers},
      {"--optimizer-state-dtype", kValue, "=fp32|bf16", optimizer,
       "adam, adamw, sgd with momentum: store the moments in bf16 (default "
       "fp32; the update computes in fp32 and the master weights stay fp32): "
       "half the optimizer state's memory",
       [&o](V v) {
         o.optimizerStateDtype =
             v.oneOf({"fp32", "bf16"}) == "bf16" ? DType::BF16 : DType::F32;
       },
       kOptimizers},
      {"--max-grad-norm", kValue, "=F", optimizer,
       "clip the unscaled gradients to this global norm (default 0: no "
       "clipping)",
       [&o](V v) { o.maxGradNorm = v.number(); }, kOptimizers},
      {"--ema-decay", kValue, "=D", optimizer,
       "keep an exponential moving average of the parameters (torch's "
       "AveragedModel with get_ema_multi_avg_fn(D)); mpc-run --eval-ema and "
       "--export-ema use it",
       [&o](V v) { o.emaDecay = v.number(); }, kOptimizers},
      {"--grad-accum",
       kValue,
       "=K",
       optimizer,
       "K micro-batches per optimizer step (default 1): mpc-run runs the "
       "step K times, the update applies on the K-th",
       [&o](V v) { o.gradAccum = v.integer(1, 65536); },
       {"optimizer", "user-optimizer", "loss-scale"}},
      // learning-rate schedule
      {"--lr-schedule", kValue, "=S", schedule,
       "the learning rate of each update: constant (default), linear, cosine, "
       "cosine_with_restarts, polynomial, inverse_sqrt, warmup_stable_decay "
       "(transformers' lr_scheduler_type, get_wsd_schedule), step or "
       "exponential (torch's StepLR, ExponentialLR), or reduce_lr_on_plateau "
       "(torch's ReduceLROnPlateau, stepped by mpc-run with each --eval-data "
       "loss)",
       [&o](V v) { o.lrSchedule = v.text; }, kOptimizers},
      {"--warmup-steps", kValue, "=W", schedule,
       "the first W updates ramp the rate up from 0",
       [&o](V v) { o.warmupSteps = v.integer(0, kMaxStepsFlag); }, kOptimizers},
      {"--total-steps", kValue, "=T", schedule,
       "the updates the decay spans (linear, cosine, cosine_with_restarts, "
       "polynomial, warmup_stable_decay)",
       [&o](V v) { o.totalSteps = v.integer(1, kMaxStepsFlag); }, kOptimizers},
      {"--min-lr-ratio", kValue, "=R", schedule,
       "cosine, warmup_stable_decay: decay to R*lr instead of 0",
       [&o](V v) { o.minLrRatio = v.number(); }, kOptimizers},
      {"--lr-step-size", kValue, "=N", schedule, "step: lr*G every N updates",
       [&o](V v) { o.lrStepSize = v.integer(1, kMaxStepsFlag); }, kOptimizers},
      {"--lr-gamma", kValue, "=G", schedule,
       "step: lr*G every --lr-step-size updates; exponential: lr*G every "
       "update (default 0.1)",
       [&o](V v) { o.lrGamma = v.number(); }, kOptimizers},
      {"--lr-cycles", kValue, "=N", schedule,
       "cosine_with_restarts: N hard restarts (default 1)",
       [&o](V v) { o.lrCycles = v.integer(1, kMaxStepsFlag); }, kOptimizers},
      {"--lr-end", kValue, "=F", schedule,
       "polynomial: decay to F (default 1e-7)",
       [&o](V v) { o.lrEnd = v.number(); }, kOptimizers},
      {"--lr-power", kValue, "=P", schedule,
       "polynomial: decay as the P-th power (default 1)",
       [&o](V v) { o.lrPower = v.number(); }, kOptimizers},
      {"--lr-timescale", kValue, "=N", schedule,
       "inverse_sqrt: the timescale (default --warmup-steps, else 10000)",
       [&o](V v) { o.lrTimescale = v.integer(1, kMaxStepsFlag); }, kOptimizers},
      {"--lr-stable-steps", kValue, "=S", schedule,
       "warmup_stable_decay: the updates at the full rate (or give "
       "--total-steps)",
       [&o](V v) { o.lrStableSteps = v.integer(0, kMaxStepsFlag); },
       kOptimizers},
      {"--lr-decay-steps", kValue, "=D", schedule,
       "warmup_stable_decay: the updates of the decay",
       [&o](V v) { o.lrDecaySteps = v.integer(1, kMaxStepsFlag); },
       kOptimizers},
      {"--lr-warmup-type", kValue, "=T", schedule,
       "warmup_stable_decay: the warmup's shape, linear (default), cosine or "
       "1-sqrt",
       [&o](V v) { o.lrWarmupType = v.text; }, kOptimizers},
      {"--lr-decay-type", kValue, "=T", schedule,
       "warmup_stable_decay: the decay's shape, linear, cosine (default) or "
       "1-sqrt",
       [&o](V v) { o.lrDecayType = v.text; }, kOptimizers},
      {"--lr-factor", kValue, "=F", schedule,
       "reduce_lr_on_plateau: the rate's factor on a plateau (default 0.1)",
       [&o](V v) { o.lrFactor = v.number(); }, kOptimizers},
      {"--lr-patience", kValue, "=N", schedule,
       "reduce_lr_on_plateau: evaluations without a lower loss before the "
       "rate drops (default 10)",
       [&o](V v) { o.lrPatience = v.integer(0, kMaxStepsFlag); }, kOptimizers},
      {"--lr-threshold", kValue, "=F", schedule,
       "reduce_lr_on_plateau: the relative improvement that counts (default "
       "1e-4)",
       [&o](V v) { o.lrThreshold = v.number(); }, kOptimizers},
      {"--lr-cooldown", kValue, "=N", schedule,
       "reduce_lr_on_plateau: evaluations to wait after a drop (default 0)",
       [&o](V v) { o.lrCooldown = v.integer(0, kMaxStepsFlag); }, kOptimizers},
      {"--min-lr", kValue, "=F", schedule,
       "reduce_lr_on_plateau: the rate's floor (default 0)",
       [&o](V v) { o.minLr = v.number(); }, kOptimizers},
      // data parallel
      {"--data-parallel",
       kSwitch,
       "",
       parallel,
       "average the gradients and OR the overflow flag across the ranks of "
       "`mpc-run --nproc-per-node=N`, `mpirun -np N mpc-run` or torchrun "
       "(each rank runs --batch samples of a global batch of N*B)",
       [&o](V v) { o.dataParallel = v.on; },
       {"optimizer", "user-optimizer", "sync-batchnorm"}},
      {"--grad-comm-dtype", kValue, "=fp32|bf16|fp16", parallel,
       "with --data-parallel: the type the gradients cross ranks in (default "
       "fp32; bf16 and fp16 halve the bytes, as DDP's compression hooks)",
       [&o](V v) {
         o.gradCommDtype = v.oneOf({"fp32", "bf16", "fp16"});
       },
       kOptimizers},
      {"--shard-optimizer",
       kSwitch,
       "",
       parallel,
       "with --data-parallel and --world-size: each rank keeps and updates "
       "1/N of the optimizer state (ZeRO stages 1 and 2: the gradients "
       "reduce-scattered, the updated parameters all-gathered), with the "
       "unsharded step's bits",
       [&o](V v) { o.shardOptimizer = v.on; },
       {"optimizer"}},
      {"--world-size",
       kValue,
       "=N",
       parallel,
       "with --shard-optimizer: the number of ranks the step runs on "
       "(mpc-run refuses another)",
       [&o](V v) { o.worldSize = v.integer(1, 65536); },
       {"optimizer"}},
      {"--sync-batchnorm",
       kSwitch,
       "",
       parallel,
       "with --data-parallel: training-mode batch norms normalise with the "
       "global batch's statistics (torch.nn.SyncBatchNorm)",
       [&o](V v) { o.syncBatchNorm = v.on; },
       {"sync-batchnorm"}},
      // the loss
      {"--loss", kValue, "=NAME", loss,
       "the output to train (default: the only output, or the only scalar "
       "floating one of several, e.g. a model returning (loss, logits)); the "
       "other outputs are the inference model's",
       [&o](V v) {
         o.loss = v.text;
         if (o.loss.empty())
           throw Error(
               "--loss: expects the name of the loss output (--loss=NAME)");
       },
       kAutodiff},
      // parameters and shapes
      {"--trainable", kValue, "=REGEX", params,
       "the initializers that train, by name (default: every floating one)",
       [&o](V v) { o.trainable = v.text; }, kAutodiff},
      {"--frozen", kValue, "=REGEX", params,
       "initializers that do not train, by name",
       [&o](V v) { o.frozen = v.text; }, kAutodiff},
      {"--input-shape", kValue, "=NAME:AxBxC", params,
       "an input's dims (repeatable)",
       [&o](V v) { o.inputShapes.push_back(parseInputShape(v.text)); },
       kShapes},
      {"--batch", kValue, "=B", params,
       "the size of a symbolic batch dimension",
       [&o](V v) { o.batch = v.integer(1, kMaxDimFlag); }, kShapes},
  };
}

const std::vector<Flag> &compileFlagTable() {
  static CompileOptions unused;
  static const std::vector<Flag> table = compileFlags(unused);
  return table;
}

bool applyCompileFlag(CompileOptions &o, const std::string &key,
                      const std::string *value) {
  std::vector<Flag> flags = compileFlags(o);
  const Flag *flag = findFlag(flags, key);
  if (!flag)
    return false;
  applyFlag(*flag, key, value);
  return true;
}

void checkCompileFlags(const CompileOptions &o,
                       const std::vector<std::string> &given) {
  auto wasGiven = [&given](const char *flag) {
    return std::find(given.begin(), given.end(), flag) != given.end();
  };
  // A hyper-parameter the chosen optimizer does not read would be ignored.
  checkOptimizerFlags(o.optimizer, wasGiven("--optimizer"), given);
  // The name patterns compile now, so that a bad one is refused before the
  // model is read (the passes compile them again where they match).
  compileNamePattern(o.fp32Nodes, "fp32-nodes");
  compileNamePattern(o.trainable, "trainable");
  compileNamePattern(o.frozen, "frozen");
  compileNamePattern(o.noWeightDecay, "no-weight-decay");
  // A budget chooses what to recompute (it implies --recompute=auto); an
  // explicit none or list of nodes says otherwise.
  if (o.memoryBudget > 0 && o.recompute != "auto" && wasGiven("--recompute"))
    throw Error("--memory-budget: chooses what to recompute itself; not "
                "with --recompute=" +
                o.recompute);
}

} // namespace mpc
