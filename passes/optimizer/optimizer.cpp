// optimizer: appends the parameter update (SGD, Adam, AdamW or Adafactor
// with PyTorch's semantics, optional global-norm clipping) to the training
// step.
//
// Runs last among the training passes: after autodiff (mpc.params,
// mpc.grads), loss-scale (mpc.found_inf, when there is loss scaling) and
// master-weights (every parameter is fp32 state and its gradient has its
// dtype; the pass checks this and says which pass is missing).
//
// New state: `optimizer_step` int64 [] = 0 (mpc.step), and per parameter P of
// its shape and dtype, zero-initialised: `P_momentum` (SGD with momentum) or
// `P_exp_avg`, `P_exp_avg_sq` (Adam/AdamW); --optimizer-state-dtype=bf16
// makes those moments bf16 (the update widens them, computes in fp32 and
// rounds the new moments back, kernels/common/optimizer_math.h). With
// --max-grad-norm one
// mpc.ClipGradNorm rescales all (unscaled) gradients together (its norm
// output, the norm before clipping, is mpc.grad_norm); then one
// mpc.SGD / mpc.Adam per parameter and one mpc.IncrementStep. All of them take
// found_inf (omitted without loss scaling), so an overflowing step leaves
// every parameter, moment and the step counter as they were.
// --lr-schedule (passes/optimizer/lr_schedule.h) adds one mpc.LearningRate of
// the step counter (or, for reduce_lr_on_plateau, an fp64 state rate), read by
// every update as its `lr` input. --no-weight-decay gives the parameters it
// names weight_decay 0. --optimizer=adafactor writes its update in standard
// ops instead of one op per parameter (passes/optimizer/adafactor.h), and
// --ema-decay appends the parameters' moving average (passes/optimizer/ema.h).
//
// The algorithm's outputs become [loss, state bound earlier (loss scale, ...),
// new parameter and moment values, new step]: the gradients are no longer
// outputs. update_binding maps every new value onto its state.
//
// --grad-accum=K (passes/optimizer/grad_accum.h) first adds the accumulation
// buffers and micro-step counter; the updates then take skip = found_inf OR
// "not the K-th micro-batch" where they took found_inf. --data-parallel
// (passes/data_parallel.h) then averages the gradients the updates read and
// ORs found_inf across ranks.
#include "ir/mpc_ops.h"
#include "ir/step_metadata.h"
#include "passes/data_parallel.h"
#include "passes/optimizer/adafactor.h"
#include "passes/optimizer/ema.h"
#include "passes/optimizer/grad_accum.h"
#include "passes/optimizer/lr_schedule.h"
#include "passes/optimizer/shard_optimizer.h"
#include "passes/pass.h"
#include "passes/registry.h"
#include "passes/training_support.h"
#include "support/diagnostics.h"
#include "support/joined.h"
#include "support/name_pattern.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>
#include <string_view>
#include <unordered_set>

namespace mpc {
namespace {

constexpr const char *kPass = "optimizer";

enum class Kind { Sgd, Adam, AdamW, Adafactor };

/// The optimizer's hyper-parameters after defaults and validation.
struct OptimizerConfig {
  Kind kind = Kind::Sgd;
  std::string name;
  double lr = 0, momentum = 0, dampening = 0, weightDecay = 0;
  bool nesterov = false;
  double beta1 = 0, beta2 = 0, epsilon = 0;
  double maxGradNorm = 0;
  AdafactorConfig adafactor; ///< Kind::Adafactor's
  bool scheduled = false;    ///< --lr-schedule: lr is mpc.LearningRate's output
  DType stateDtype = DType::F32; ///< --optimizer-state-dtype: the moments'
  std::string schedule;          ///< lrScheduleSummary, for mpc.optimizer
  /// --no-weight-decay: the parameters it names update with weight_decay 0.
  std::string noDecayText;
  std::optional<NamePattern> noDecay;
};

void requireAtLeast(const char *flag, double v, double lo) {
  if (!(v >= lo) || !std::isfinite(v))
    throw Error(std::string(flag) + ": must be a finite number >= " +
                formatNumber(lo) + ", got " + formatNumber(v));
}

void requireBeta(const char *flag, double v) {
  if (!(v >= 0 && v < 1))
    throw Error(std::string(flag) + ": must be in [0, 1), got " +
                formatNumber(v));
}

/// Validates the flags the way torch.optim's constructors do, plus flags that
/// do not apply to the chosen optimizer (silently ignoring them would train
/// something else than the user asked for).
OptimizerConfig configure(const CompileOptions &o) {
  OptimizerConfig c;
  c.name = o.optimizer;
  if (o.optimizer == "sgd")
    c.kind = Kind::Sgd;
  else if (o.optimizer == "adam")
    c.kind = Kind::Adam;
  else if (o.optimizer == "adamw")
    c.kind = Kind::AdamW;
  else if (o.optimizer == "adafactor")
    c.kind = Kind::Adafactor;
  else
    throw Error("--optimizer: unknown '" + o.optimizer +
                "' (expected sgd, adam, adamw, adafactor)");
  // torch.optim.Adafactor's default rate is 1e-2; the others' 1e-3.
  c.lr = c.kind == Kind::Adafactor && !o.lrSet ? 1e-2 : o.lr;
  c.momentum = o.momentum;
  c.dampening = o.dampening;
  c.nesterov = o.nesterov;
  c.beta1 = o.beta1;
  c.beta2 = o.beta2;
  c.epsilon = o.epsilon;
  c.maxGradNorm = o.maxGradNorm;
  // torch.optim.AdamW's default weight decay is 1e-2; SGD's and Adam's is 0.
  c.weightDecay =
      c.kind == Kind::AdamW && !o.weightDecaySet ? 1e-2 : o.weightDecay;

  requireAtLeast("--lr", c.lr, 0);
  requireAtLeast("--weight-decay", c.weightDecay, 0);
  requireAtLeast("--max-grad-norm", c.maxGradNorm, 0);
  if (c.kind == Kind::Sgd) {
    requireAtLeast("--momentum", c.momentum, 0);
    requireAtLeast("--dampening", c.dampening, 0);
    if (c.nesterov && c.momentum <= 0)
      throw Error("--nesterov: Nesterov momentum requires --momentum > 0");
    if (c.nesterov && c.dampening != 0)
      throw Error("--nesterov: Nesterov momentum requires zero dampening, "
                  "got --dampening=" +
                  formatNumber(c.dampening));
  } else if (c.kind == Kind::Adafactor) {
    if (c.nesterov || c.momentum != 0 || c.dampening != 0)
      throw Error(std::string(c.nesterov ? "--nesterov" : "--momentum") +
                  ": only applies to --optimizer=sgd, not 'adafactor'");
    c.adafactor.lr = c.lr;
    c.adafactor.beta2Decay = o.beta2Decay;
    c.adafactor.eps1 = o.epsilonSet ? o.epsilon : -1;
    c.adafactor.eps2 = o.eps2;
    c.adafactor.d = o.clipThreshold;
    c.adafactor.weightDecay = c.weightDecay;
    if (!(o.beta2Decay <= 0) || !std::isfinite(o.beta2Decay))
      throw Error("--beta2-decay: must be a finite number <= 0, got " +
                  formatNumber(o.beta2Decay));
    if (o.epsilonSet)
      requireAtLeast("--eps", o.epsilon, 0);
    requireAtLeast("--eps2", o.eps2, 0);
    if (!(o.clipThreshold >= 1) || !std::isfinite(o.clipThreshold))
      throw Error("--clip-threshold: must be a finite number >= 1, got " +
                  formatNumber(o.clipThreshold));
  } else {
    if (c.nesterov)
      throw Error("--nesterov: only applies to --optimizer=sgd, not '" +
                  c.name + "'");
    if (c.momentum != 0 || c.dampening != 0)
      throw Error(std::string(c.momentum != 0 ? "--momentum" : "--dampening") +
                  ": only applies to --optimizer=sgd ('" + c.name +
                  "' uses --beta1 and --beta2)");
    requireBeta("--beta1", c.beta1);
    requireBeta("--beta2", c.beta2);
    requireAtLeast("--eps", c.epsilon, 0);
  }
  c.stateDtype = o.optimizerStateDtype;
  if (c.stateDtype != DType::F32) {
    // A flag that changes nothing would train otherwise than asked for.
    if (c.kind == Kind::Adafactor)
      throw Error("--optimizer-state-dtype=bf16: --optimizer=adafactor keeps "
                  "its factored statistics in fp32 (bf16 state is for adam, "
                  "adamw and sgd with --momentum)");
    if (c.kind == Kind::Sgd && c.momentum == 0)
      throw Error("--optimizer-state-dtype=bf16: --optimizer=sgd without "
                  "--momentum keeps no optimizer state");
  }
  c.scheduled = checkLrScheduleOptions(o);
  c.schedule = lrScheduleSummary(o);
  if (o.emaDecay)
    checkEmaDecay(*o.emaDecay);
  c.noDecayText = o.noWeightDecay;
  c.noDecay = compileNamePattern(o.noWeightDecay, "no-weight-decay");
  if (c.noDecay && c.weightDecay == 0)
    throw Error("--no-weight-decay: there is no weight decay to exclude "
                "parameters from (--weight-decay is 0)");
  return c;
}

/// "adam lr=0.001 beta1=0.9 ...": mpc.optimizer, for people and mpc-run.
std::string summary(const OptimizerConfig &c) {
  std::string s = c.name + " lr=" + formatNumber(c.lr);
  if (c.kind == Kind::Adafactor)
    s += " beta2_decay=" + formatNumber(c.adafactor.beta2Decay) + " eps1=" +
         (c.adafactor.eps1 >= 0 ? formatNumber(c.adafactor.eps1)
                                : std::string("fp32_eps")) +
         " eps2=" + formatNumber(c.adafactor.eps2) +
         " d=" + formatNumber(c.adafactor.d) +
         " weight_decay=" + formatNumber(c.weightDecay);
  else if (c.kind == Kind::Sgd)
    s += " momentum=" + formatNumber(c.momentum) +
         " dampening=" + formatNumber(c.dampening) +
         " weight_decay=" + formatNumber(c.weightDecay) +
         " nesterov=" + (c.nesterov ? "1" : "0");
  else
    s += " beta1=" + formatNumber(c.beta1) + " beta2=" + formatNumber(c.beta2) +
         " eps=" + formatNumber(c.epsilon) +
         " weight_decay=" + formatNumber(c.weightDecay);
  if (c.maxGradNorm > 0)
    s += " max_grad_norm=" + formatNumber(c.maxGradNorm);
  if (c.noDecay)
    s += " no_weight_decay=" + c.noDecayText;
  if (c.stateDtype != DType::F32)
    s += std::string(" state_dtype=") + dtypeName(c.stateDtype);
  return s + c.schedule;
}

/// The update works on master weights: fp32 (or fp64) state, gradients of
/// the same dtype and shape.
void checkParameter(const Value &p, const Value &grad) {
  if (p.dtype != DType::F32 && p.dtype != DType::F64)
    throw Error(std::string(kPass) + ": parameter '" + p.name() + "' is " +
                dtypeName(p.dtype) +
                "; the optimizer updates fp32 master weights (run "
                "master-weights first)");
  if (grad.dtype != p.dtype)
    throw Error(
        std::string(kPass) + ": gradient '" + grad.name() + "' of parameter '" +
        p.name() + "' is " + dtypeName(grad.dtype) + " but the parameter is " +
        dtypeName(p.dtype) + " (run loss-scale and master-weights first)");
  if (grad.hasShape && grad.dims != p.dims)
    throw Error(std::string(kPass) + ": gradient '" + grad.name() +
                "' has shape " + dimsToString(grad.dims) + " but parameter '" +
                p.name() + "' has shape " + dimsToString(p.dims));
}

/// Zeros of p's shape: a fresh moment buffer (untouched zero pages until
/// something writes it: the export leaves holes for them), of p's dtype or
/// --optimizer-state-dtype's narrower one.
Tensor zerosLike(const Value &p, DType stateDtype) {
  return Tensor::zeros(stateDtype == DType::F32 ? p.dtype : stateDtype,
                       p.initializer()->dims);
}

Attribute floatAttr(double v) { return Attribute::ofFloat(float(v)); }

} // namespace

void runOptimizer(Model &model, PassContext &ctx) {
  OptimizerConfig c = configure(ctx.options);
  checkPassOrder(model, kPass);
  // A model with its own training_info algorithm brings its optimizer
  // (passes/training_info.h): ours on top would update twice.
  refuseIfMeta(model, kPass, meta::kUserGrads.name,
               "the model's training_info has its own optimizer; run "
               "user-optimizer instead");
  checkGradAccum(ctx.options);
  checkDataParallelOptions(ctx.options, kPass);
  checkShardOptions(ctx.options, kPass);
  const int64_t k = ctx.options.gradAccum;
  if (const std::string *divided = readMeta(model, meta::kGradAccum))
    if (*divided != std::to_string(k))
      throw Error(std::string(kPass) + ": --grad-accum=" + std::to_string(k) +
                  " but loss-scale divided the loss for --grad-accum=" +
                  *divided + " (mpc.grad_accum is set)");
  TrainingValues tv = requireGradients(model, kPass);
  Graph &g = *tv.algorithm;
  for (size_t i = 0; i < tv.params.size(); ++i) {
    checkParameter(*tv.params[i], *tv.grads[i]);
    // bf16 moments are the narrow copy of fp32 ones; fp64 parameters
    // (gradient checks) keep moments of their own precision.
    if (c.stateDtype != DType::F32 && tv.params[i]->dtype != DType::F32)
      throw Error("--optimizer-state-dtype=bf16: parameter '" +
                  tv.params[i]->name() + "' is " +
                  dtypeName(tv.params[i]->dtype) +
                  "; bf16 moments are kept for fp32 master weights only");
  }
  // --no-weight-decay's group, known before the graph changes: a pattern
  // that names no parameter is a mistake (a misspelt name trains otherwise).
  std::vector<bool> noDecay(tv.params.size(), false);
  if (c.noDecay) {
    bool any = false;
    for (size_t i = 0; i < tv.params.size(); ++i)
      any |= noDecay[i] = c.noDecay->search(tv.params[i]->name());
    if (!any) {
      std::string names;
      for (size_t i = 0; i < tv.params.size() && i < 8; ++i)
        names += (i ? ", " : "") + tv.params[i]->name();
      if (tv.params.size() > 8)
        names += ", ...";
      throw Error("--no-weight-decay: '" + c.noDecayText +
                  "' matches no trainable parameter (they are: " + names + ")");
    }
  }

  Value *foundInf = nullptr;
  if (const std::string *name = readMeta(model, meta::kFoundInf)) {
    foundInf = g.findValue(*name);
    if (!foundInf)
      throw Error(std::string(kPass) + ": found_inf '" + *name +
                  "' (mpc.found_inf) is not a value of the training algorithm");
  }

  // The gradients stop being outputs; everything else already produced
  // (the loss, state bound by earlier passes) stays, in its order.
  std::unordered_set<const Value *> gradSet(tv.grads.begin(), tv.grads.end());
  std::vector<Value *> kept;
  for (Value *out : g.outputs())
    if (!gradSet.count(out))
      kept.push_back(out);
  g.clearOutputs();
  for (Value *out : kept)
    g.addOutput(out);

  Value *skip = foundInf; // omitted: never skip
  Value *boundary = nullptr;
  if (k > 1)
    skip = accumulateGradients(model, tv, foundInf, k, ctx.stats, &boundary);
  if (ctx.options.dataParallel) {
    // The skip flag reads found_inf, which the reduction's flag replaces.
    bool skipIsFlag = skip == foundInf;
    allReduceGradients(model, tv, foundInf, kPass, ctx.options.gradCommDtype,
                       boundary);
    if (foundInf) {
      foundInf = g.findValue(*readMeta(model, meta::kFoundInf));
      if (skipIsFlag)
        skip = foundInf;
    }
    ctx.stats["all-reduced-gradients"] += int64_t(tv.grads.size());
  }

  Value *step =
      addState(model, "optimizer_step", Tensor::scalar(DType::I64, 0));
  // The updates read the scheduled rate in place of their `lr` attribute.
  Value *lr = !c.scheduled ? nullptr
              : isLrPlateau(ctx.options)
                  ? addPlateauRate(model, ctx.options, c.lr)
                  : addLearningRate(g, step, ctx.options, c.lr);
  std::vector<Value *> grads = tv.grads;
  if (c.maxGradNorm > 0) {
    std::vector<std::string> hints;
    for (Value *grad : grads)
      hints.push_back(grad->name() + "_clipped");
    hints.push_back("grad_total_norm");
    Node *clip = createNamedNode(g, "ClipGradNorm", kMpcDomain, grads, hints,
                                 "clip_grad_norm");
    clip->setAttr("max_norm", floatAttr(c.maxGradNorm));
    for (size_t i = 0; i < grads.size(); ++i) {
      clip->output(i)->copyTypeFrom(*grads[i]);
      grads[i] = clip->output(i);
    }
    clip->output(grads.size())->setType(DType::F32, {});
    // The norm is what the run reports (mpc-run's grad_norm column): named
    // by the metadata, it follows later rewrites and the step keeps it.
    writeMeta(model, meta::kGradNorm, clip->output(grads.size())->name());
  }

  // Every update node carries the same attributes: built once, copied to
  // each (one allocation per node instead of a growing list per setAttr).
  std::vector<std::pair<std::string, Attribute>> updateAttrs;
  if (c.kind == Kind::Sgd) {
    updateAttrs.reserve(5);
    if (!lr)
      updateAttrs.emplace_back("lr", floatAttr(c.lr));
    updateAttrs.emplace_back("momentum", floatAttr(c.momentum));
    updateAttrs.emplace_back("dampening", floatAttr(c.dampening));
    updateAttrs.emplace_back("weight_decay", floatAttr(c.weightDecay));
    updateAttrs.emplace_back("nesterov", Attribute::ofInt(c.nesterov ? 1 : 0));
  } else {
    updateAttrs.reserve(6);
    if (!lr)
      updateAttrs.emplace_back("lr", floatAttr(c.lr));
    updateAttrs.emplace_back("beta1", floatAttr(c.beta1));
    updateAttrs.emplace_back("beta2", floatAttr(c.beta2));
    updateAttrs.emplace_back("epsilon", floatAttr(c.epsilon));
    updateAttrs.emplace_back("weight_decay", floatAttr(c.weightDecay));
    updateAttrs.emplace_back("decoupled",
                             Attribute::ofInt(c.kind == Kind::AdamW ? 1 : 0));
  }

  // The second parameter group: the same with weight_decay 0.
  std::vector<std::pair<std::string, Attribute>> noDecayAttrs = updateAttrs;
  for (auto &[name, value] : noDecayAttrs)
    if (name == "weight_decay")
      value = floatAttr(0);

  std::vector<std::string> moments;
  std::vector<Value *> updated; // the parameters after this step
  // Adafactor: standard ops, its step's scalars built once
  // (passes/optimizer/adafactor.h); the parameters in --no-weight-decay's group
  // get their own scalars without the decay.
  std::optional<AdafactorStep> factored, factoredNoDecay;
  if (c.kind == Kind::Adafactor) {
    factored = adafactorStep(model, g, step, lr, skip, c.adafactor);
    factoredNoDecay = *factored;
    factoredNoDecay->decayFactor = nullptr;
  }
  for (size_t i = 0; i < tv.params.size(); ++i) {
    Value *p = tv.params[i];
    if (c.kind == Kind::Adafactor) {
      Value *pNew = addAdafactorUpdate(
          model, g, p, grads[i], noDecay[i] ? *factoredNoDecay : *factored,
          c.adafactor, moments);
      bindState(model, p, pNew);
      updated.push_back(pNew);
      continue;
    }
    std::vector<Value *> stateIn; // moments, in the op's input order
    stateIn.reserve(2);
    Node *update = nullptr;
    if (c.kind == Kind::Sgd) {
      if (c.momentum != 0)
        stateIn.push_back(addState(model, joined("", p->name(), "_momentum"),
                                   zerosLike(*p, c.stateDtype)));
    } else {
      stateIn.push_back(addState(model, joined("", p->name(), "_exp_avg"),
                                 zerosLike(*p, c.stateDtype)));
      stateIn.push_back(addState(model, joined("", p->name(), "_exp_avg_sq"),
                                 zerosLike(*p, c.stateDtype)));
    }
    std::vector<Value *> inputs;
    inputs.reserve(6 + stateIn.size());
    inputs.insert(inputs.end(), {skip, step, p, grads[i]});
    inputs.insert(inputs.end(), stateIn.begin(), stateIn.end());
    if (lr) { // after the optional momentum buffer: SGD's input 5
      if (c.kind == Kind::Sgd && stateIn.empty())
        inputs.push_back(nullptr);
      inputs.push_back(lr);
    }
    std::vector<std::string> hints;
    hints.reserve(1 + stateIn.size());
    hints.push_back(joined("", p->name(), "_new"));
    for (Value *m : stateIn)
      hints.push_back(joined("", m->name(), "_new"));
    if (c.kind == Kind::Sgd)
      update = createNamedNode(g, "SGD", kMpcDomain, inputs, hints,
                               joined("sgd_", p->name(), ""));
    else
      update = createNamedNode(g, "Adam", kMpcDomain, inputs, hints,
                               joined("adam_", p->name(), ""));
    update->setAttrs(noDecay[i] ? noDecayAttrs : updateAttrs);
    update->output(0)->copyTypeFrom(*p);
    bindState(model, p, update->output(0));
    updated.push_back(update->output(0));
    for (size_t k = 0; k < stateIn.size(); ++k) {
      update->output(k + 1)->copyTypeFrom(*stateIn[k]);
      bindState(model, stateIn[k], update->output(k + 1));
      moments.push_back(stateIn[k]->name());
    }
  }

  std::vector<Value *> incInputs = {step};
  if (skip)
    incInputs.push_back(skip);
  Node *inc = createNamedNode(g, "IncrementStep", kMpcDomain, incInputs,
                              {step->name() + "_new"}, "increment_step");
  inc->output(0)->copyTypeFrom(*step);
  bindState(model, step, inc->output(0));

  if (ctx.options.emaDecay)
    addParameterEma(model, tv.params, updated, boundary, *ctx.options.emaDecay,
                    ctx.stats);

  if (ctx.options.shardOptimizer)
    shardOptimizerState(model, ctx.options, ctx.stats);

  writeMeta(model, meta::kStep, step->name());
  writeMeta(model, meta::kOptimizer, summary(c));
  if (!moments.empty())
    writeMeta(model, meta::kOptimizerState, moments);
  if (!lr) {
    // The constant rate the updates use (an fp32 attribute or constant),
    // for mpc-run's reports.
    char rate[32];
    std::snprintf(rate, sizeof rate, "%.17g", double(float(c.lr)));
    writeMeta(model, meta::kLr, rate);
  }

  ensureMpcOpset(model);
  ctx.stats["parameters-updated"] += int64_t(tv.params.size());
  ctx.stats["moment-buffers"] += int64_t(moments.size());
  ctx.stats["clip-grad-norm"] += c.maxGradNorm > 0 ? 1 : 0;
  ctx.stats["lr-schedule"] += lr ? 1 : 0;
  ctx.stats["no-weight-decay-parameters"] +=
      int64_t(std::count(noDecay.begin(), noDecay.end(), true));
}

} // namespace mpc
