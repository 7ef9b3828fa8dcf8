// What every pass sees: the model, the compile options and its statistics.
//
// A pass is one function `void runX(Model &, PassContext &)` declared here and
// listed once in passes/registry.cpp (name, summary, options, entry point);
// mpc-opt builds pipelines from that table only.
//
// Passes hand facts to later passes (and to mpc-run) through the model's
// metadata, which is written into the ONNX file:
//   mpc.loss        the loss value of the training algorithm
//   mpc.params      trainable parameters (state names), comma separated
//   mpc.grads       their gradient values in the algorithm, same order
//   mpc.grad_seed   the initializer autodiff seeds the backward with (1.0)
//   mpc.found_inf   the bool value "this step's gradients overflowed"
//   mpc.loss_scale  state holding the loss scale (fp32 [])
//   mpc.growth_tracker, mpc.step   state of the scaler and the optimizer
//   mpc.precision   fp16 | bf16 | fp32
//   mpc.grad_accum  K of --grad-accum (absent for 1): micro-batches per
//                   optimizer step; mpc.grad_accum_counter, _buffers its state
#pragma once

#include "ir/graph.h"

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace mpc {

/// Options of the whole compilation (mpc-opt's flags).
struct CompileOptions {
  DType precision = DType::F16; ///< --precision=fp16|bf16|fp32

  // --optimizer=sgd|adam|adamw and its hyper-parameters.
  std::string optimizer = "sgd";
  double lr = 1e-3; ///< PyTorch 2.x default for SGD, Adam and AdamW
  double momentum = 0.0;
  double dampening = 0.0;
  double weightDecay = 0.0;
  bool weightDecaySet = false; ///< AdamW defaults to 1e-2 unless given
  /// --no-weight-decay=REGEX: parameters whose names match get no weight
  /// decay (the second parameter group of transformers' Trainer and timm).
  std::string noWeightDecay;
  bool nesterov = false;
  double beta1 = 0.9, beta2 = 0.999, epsilon = 1e-8;
  bool lrSet = false, epsilonSet = false; ///< given on the command line
  /// --optimizer=adafactor (passes/optimizer/adafactor.h):
  /// torch.optim.Adafactor's beta2_decay, eps[1] and d.
  double beta2Decay = -0.8, eps2 = 1e-3, clipThreshold = 1.0;
  double maxGradNorm = 0.0; ///< --max-grad-norm (0: no clipping)
  /// --optimizer-state-dtype=fp32|bf16: the storage type of Adam's and
  /// AdamW's moments and SGD's momentum buffer (the update computes in fp32
  /// either way; bf16 halves the optimizer state).
  DType optimizerStateDtype = DType::F32;
  /// --lr-schedule=constant|linear|cosine|step|exponential and its flags
  /// (mpc.LearningRate's attributes, kernels/lr_schedule_attrs.h); unset
  /// ones take the op's defaults, and one that does not apply is refused.
  std::string lrSchedule = "constant";
  std::optional<int64_t> warmupSteps; ///< --warmup-steps
  std::optional<int64_t> totalSteps;  ///< --total-steps
  std::optional<double> minLrRatio;   ///< --min-lr-ratio (cosine)
  std::optional<int64_t> lrStepSize;  ///< --lr-step-size (step)
  std::optional<double> lrGamma;      ///< --lr-gamma (step, exponential)
  std::optional<int64_t> lrCycles;    ///< --lr-cycles (cosine_with_restarts)
  std::optional<double> lrEnd;        ///< --lr-end (polynomial)
  std::optional<double> lrPower;      ///< --lr-power (polynomial)
  std::optional<int64_t> lrTimescale; ///< --lr-timescale (inverse_sqrt)
  /// warmup_stable_decay: --lr-stable-steps, --lr-decay-steps,
  /// --lr-warmup-type, --lr-decay-type.
  std::optional<int64_t> lrStableSteps, lrDecaySteps;
  std::optional<std::string> lrWarmupType, lrDecayType;
  /// reduce_lr_on_plateau (ir/lr_plateau.h): --lr-factor,
  /// --lr-patience, --lr-threshold, --lr-cooldown, --min-lr.
  std::optional<double> lrFactor, lrThreshold, minLr;
  std::optional<int64_t> lrPatience, lrCooldown;
  /// --ema-decay=D: an exponential moving average of the parameters
  /// (passes/optimizer/ema.h).
  std::optional<double> emaDecay;
  /// --grad-accum=K: micro-batches per optimizer step (1: no accumulation).
  int64_t gradAccum = 1;
  /// --data-parallel: gradients averaged and the overflow flag OR-ed across
  /// the ranks of an mpirun launch (passes/data_parallel.h).
  bool dataParallel = false;
  /// --sync-batchnorm (with --data-parallel): training-mode batch norms use
  /// the statistics of the ranks' global batch (passes/sync_batch_norm.cpp).
  bool syncBatchNorm = false;
  /// --grad-comm-dtype=fp32|bf16|fp16 (with --data-parallel): the type the
  /// gradients cross ranks in (mpc.AllReduce's wire_dtype; fp32: as they
  /// are), as DDP's bf16/fp16 compression hooks.
  std::string gradCommDtype = "fp32";
  /// --shard-optimizer (with --data-parallel): each rank keeps and updates
  /// 1/N of every parameter's optimizer state (ZeRO stage 1 and 2,
  /// passes/optimizer/shard_optimizer.h) for a world of --world-size ranks.
  bool shardOptimizer = false;
  int64_t worldSize = 0; ///< --world-size=N (0: not given)

  // --loss-scale=dynamic|static:F|none (empty: dynamic for fp16, else none)
  std::string lossScale;
  double initScale = 65536.0;
  double growthFactor = 2.0;
  double backoffFactor = 0.5;
  int64_t growthInterval = 2000;

  // Precision policy overrides.
  std::vector<std::string> fp32Ops; ///< --fp32-ops=Op,Op
  std::vector<std::string> fp16Ops; ///< --fp16-ops=Op,Op
  std::string fp32Nodes;            ///< --fp32-nodes=REGEX (node names)

  /// --loss=NAME: the value to train (empty: the graph's single output, or
  /// its single scalar floating output).
  std::string loss;

  // Which initializers train (regex on names; empty: all floating ones).
  std::string trainable; ///< --trainable=REGEX
  std::string frozen;    ///< --frozen=REGEX

  /// --input-shape=x:64x10 (repeatable) and --batch=B for symbolic batch.
  std::vector<std::pair<std::string, std::vector<int64_t>>> inputShapes;
  int64_t batch = 0;

  /// --recompute=none|auto|NODE,NODE: activation checkpointing; with auto,
  /// --memory-budget=BYTES stops once the planned peak fits (0: recompute
  /// every cheap candidate). The default is auto within a few percent of
  /// the step's FLOPs, and nothing for a model without a training step;
  /// recomputeGiven says the flag (or a budget) asked for it.
  std::string recompute = "auto";
  bool recomputeGiven = false;
  int64_t memoryBudget = 0;

  /// Whether autocast records why each node got its precision (the model's
  /// precision map). Only --explain and --dot read it and it is never
  /// exported, so mpc-opt turns it off without them: describing every node
  /// was a tenth of autocast's time.
  bool recordPrecision = true;

  /// Whether plan-memory plans the step. The plan gives statistics only
  /// (--stats; the runtime plans again for the batch it is given) and the
  /// model does not change, so mpc-opt turns it off without --stats:
  /// planning a 64-layer step was an eighth of the compile (25M
  /// instructions, about 450 freshly touched pages).
  bool planMemory = true;

  /// The loss-scale mode after defaults: "dynamic", "static" or "none".
  std::string effectiveLossScaleMode() const;
  /// The static scale when mode is "static".
  double staticScale() const;
};

/// Per-pass counters, printed by mpc-opt --stats.
using Statistics = std::map<std::string, int64_t>;

struct PassContext {
  const CompileOptions &options;
  /// Options given to this pass in --passes=name{key=value,...}.
  std::map<std::string, std::string> passOptions;
  Statistics stats;
  /// Set by the pipeline when the model is, as the pass starts, as the last
  /// verify left it (verify passed, and only analyses ran since): what that
  /// verify recorded still holds (passes/verify.h).
  bool unchangedSinceVerify = false;
  /// Set by a pass when it provably changed nothing in the model (it found
  /// nothing to do). The pipeline then does not verify the model again when
  /// it had passed before the pass, as MLIR skips the verifier after a pass
  /// that preserves everything. Opt-in and only where certain: unset, the
  /// pass is taken to have changed the model.
  bool changedNothing = false;
  /// Notes for the user (one line each, no prefix): a choice the pass made
  /// that the user did not spell out, e.g. which output is the loss. The
  /// pipeline hands them to PipelineConfig::note.
  std::vector<std::string> notes;
};

// The passes, in pipeline order. Each is documented in its own file.
void runVerify(Model &model, PassContext &ctx);
void runInferShapes(Model &model, PassContext &ctx);
void runFoldConstants(Model &model, PassContext &ctx);
void runFuseGelu(Model &model, PassContext &ctx);
void runFuseRmsNorm(Model &model, PassContext &ctx);
void runFuseLogSigmoid(Model &model, PassContext &ctx);
void runGathersToSplit(Model &model, PassContext &ctx);
void runAutodiff(Model &model, PassContext &ctx);
void runSyncBatchNorm(Model &model, PassContext &ctx);
void runAutocast(Model &model, PassContext &ctx);
void runLossScale(Model &model, PassContext &ctx);
void runMasterWeights(Model &model, PassContext &ctx);
void runOptimizer(Model &model, PassContext &ctx);
void runFoldWideningCasts(Model &model, PassContext &ctx);
void runFoldTranspose(Model &model, PassContext &ctx);
void runFoldBiasAdd(Model &model, PassContext &ctx);
void runCleanup(Model &model, PassContext &ctx);
void runRecompute(Model &model, PassContext &ctx);
void runPlanMemory(Model &model, PassContext &ctx); // memory_report.cpp

/// The graph a pass works on: the training algorithm when there is one,
/// else the main graph.
Graph &workingGraph(Model &model);

/// Splits "a,b,c" (empty items dropped).
std::vector<std::string> splitList(const std::string &s, char sep = ',');
std::string joinList(const std::vector<std::string> &items, char sep = ',');

} // namespace mpc
