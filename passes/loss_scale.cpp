// loss-scale: scales the backward seed, unscales the gradients in fp32, flags
// overflow, and (dynamic mode) updates the scale like PyTorch's GradScaler.
//
// Runs after autodiff (it needs mpc.grads, mpc.params and mpc.grad_seed) and
// autocast (so that it sees the gradients' final dtypes), before
// master-weights and optimizer. The mode is --loss-scale (default: dynamic
// for fp16, none for bf16/fp32):
//
//   dynamic   state `loss_scale` fp32 [] = --init-scale and
//             `loss_scale_growth_tracker` int64 [] = 0; every use of the grad
//             seed reads the scale instead (a Cast to the seed's dtype in
//             between when it is not fp32), so the whole backward runs on
//             loss * scale without multiplying the forward loss, which stays
//             the unscaled fp32 loss the step reports. The gradients, cast to
//             fp32, go through one mpc.UnscaleGradients -> (found_inf, g'...);
//             mpc.UpdateLossScale computes the next scale and tracker, which
//             are bound back onto the state.
//   static:F  the same with a state `loss_scale` = F that is never updated
//             (found_inf still makes the optimizer skip overflowing steps).
//   none      fp16/bf16 gradients are cast to fp32; nothing else.
//
// Afterwards mpc.grads names the fp32 (unscaled) gradients, which are also the
// algorithm's gradient outputs; mpc.found_inf, mpc.loss_scale,
// mpc.growth_tracker name the new values; mpc.grad_seed names the value that
// now seeds the backward; mpc.loss_scale_mode records the mode.
//
// With --grad-accum=K the seed is loss_scale / K (mpc.grad_accum = K records
// it; passes/optimizer/grad_accum.h): the optimizer pass accumulates the K
// micro-batches.
#include "ir/mpc_ops.h"
#include "ir/step_metadata.h"
#include "passes/optimizer/grad_accum.h"
#include "passes/pass.h"
#include "passes/registry.h"
#include "passes/training_support.h"
#include "support/diagnostics.h"

#include <cmath>

namespace mpc {
namespace {

constexpr const char *kPass = "loss-scale";

/// Rejects scaler hyper-parameters PyTorch's GradScaler rejects too.
void checkDynamicOptions(const CompileOptions &o) {
  if (!(o.initScale > 0) || !std::isfinite(o.initScale))
    throw Error("--init-scale: must be a positive finite number, got " +
                formatNumber(o.initScale));
  if (!(o.growthFactor > 1) || !std::isfinite(o.growthFactor))
    throw Error("--growth-factor: must be > 1, got " +
                formatNumber(o.growthFactor));
  if (!(o.backoffFactor > 0 && o.backoffFactor < 1))
    throw Error("--backoff-factor: must be in (0, 1), got " +
                formatNumber(o.backoffFactor));
  if (o.growthInterval < 1)
    throw Error("--growth-interval: must be >= 1, got " +
                std::to_string(o.growthInterval));
}

/// Points every use of the grad seed at the loss scale (divided by the
/// micro-batch count under --grad-accum); returns the value that now seeds
/// the backward.
Value *scaleSeed(Model &model, Graph &g, Value *scale, int64_t gradAccum,
                 int64_t &castsInserted) {
  const std::string *seedName = readMeta(model, meta::kGradSeed);
  if (!seedName)
    throw Error(std::string(kPass) +
                ": no grad seed (mpc.grad_seed; run autodiff first)");
  Value *seed = g.findValue(*seedName);
  if (!seed || !seed->isInitializer())
    throw Error(std::string(kPass) + ": grad seed '" + *seedName +
                "' (mpc.grad_seed) is not an initializer of the training "
                "algorithm");
  Node *user = firstUser(g, seed);
  if (!user)
    throw Error(std::string(kPass) + ": grad seed '" + *seedName +
                "' (mpc.grad_seed) is not used by the backward graph");
  Value *scaled = scale;
  if (gradAccum > 1) // in fp32, before any cast to the seed's dtype
    scaled = divideScaledSeed(model, g, scale, gradAccum, user);
  if (seed->dtype != DType::F32) {
    // The scale is runtime state, so the cast cannot be folded into a
    // constant. (An fp16 seed overflows at the default 65536; the dynamic
    // scaler then backs off on the first step, as GradScaler would.)
    scaled = castOrReuse(g, scaled, seed->dtype, user, castsInserted);
  }
  g.replaceAllUsesWith(seed, scaled);
  if (seed->uses().empty() && !seed->isGraphOutput() && !seed->isState)
    g.removeInitializer(seed);
  writeMeta(model, meta::kGradSeed, scaled->name());
  return scaled;
}

/// Casts every gradient that is not fp32 (16-bit only when `lowOnly`).
std::vector<Value *> gradientsInFp32(Graph &g, const TrainingValues &tv,
                                     bool lowOnly, int64_t &castsInserted) {
  std::vector<Value *> out;
  for (Value *grad : tv.grads) {
    bool cast = lowOnly
                    ? (grad->dtype == DType::F16 || grad->dtype == DType::BF16)
                    : grad->dtype != DType::F32;
    if (cast && !isFloating(grad->dtype))
      throw Error(std::string(kPass) + ": gradient '" + grad->name() +
                  "' has type " + dtypeName(grad->dtype) +
                  ", not a floating-point type");
    out.push_back(
        cast ? castOrReuse(g, grad, DType::F32, nullptr, castsInserted) : grad);
  }
  return out;
}

} // namespace

void runLossScale(Model &model, PassContext &ctx) {
  const CompileOptions &o = ctx.options;
  std::string mode = o.effectiveLossScaleMode();
  checkGradAccum(o);
  checkPassOrder(model, kPass);
  TrainingValues tv = requireGradients(model, kPass);
  Graph &g = *tv.algorithm;
  int64_t castsInserted = 0;

  if (mode == "none") {
    replaceGradients(model, tv, gradientsInFp32(g, tv, true, castsInserted));
    writeMeta(model, meta::kLossScaleMode, mode);
    ctx.stats["gradient-casts"] += castsInserted;
    return;
  }

  double initial = mode == "static" ? o.staticScale() : o.initScale;
  if (mode == "dynamic")
    checkDynamicOptions(o);
  Value *scale =
      addState(model, "loss_scale", Tensor::scalar(DType::F32, initial));
  scaleSeed(model, g, scale, o.gradAccum, castsInserted);

  std::vector<Value *> grads = gradientsInFp32(g, tv, false, castsInserted);
  std::vector<Value *> inputs = {scale};
  std::vector<std::string> outputHints = {"found_inf"};
  for (Value *grad : tv.grads)
    outputHints.push_back(grad->name() + "_unscaled");
  inputs.insert(inputs.end(), grads.begin(), grads.end());
  Node *unscale = createNamedNode(g, "UnscaleGradients", kMpcDomain, inputs,
                                  outputHints, "unscale_gradients");
  Value *foundInf = unscale->output(0);
  foundInf->setType(DType::Bool, {});
  std::vector<Value *> unscaled;
  for (size_t i = 0; i < grads.size(); ++i) {
    Value *u = unscale->output(i + 1);
    u->copyTypeFrom(*grads[i]);
    unscaled.push_back(u);
  }
  replaceGradients(model, tv, unscaled);
  writeMeta(model, meta::kFoundInf, foundInf->name());
  writeMeta(model, meta::kLossScale, scale->name());

  if (mode == "dynamic") {
    Value *tracker = addState(model, "loss_scale_growth_tracker",
                              Tensor::scalar(DType::I64, 0));
    Node *update = createNamedNode(
        g, "UpdateLossScale", kMpcDomain, {scale, tracker, foundInf},
        {scale->name() + "_new", tracker->name() + "_new"},
        "update_loss_scale");
    update->setAttr("growth_factor", Attribute::ofFloat(float(o.growthFactor)));
    update->setAttr("backoff_factor",
                    Attribute::ofFloat(float(o.backoffFactor)));
    update->setAttr("growth_interval", Attribute::ofInt(o.growthInterval));
    update->output(0)->copyTypeFrom(*scale);
    update->output(1)->copyTypeFrom(*tracker);
    bindState(model, scale, update->output(0));
    bindState(model, tracker, update->output(1));
    writeMeta(model, meta::kGrowthTracker, tracker->name());
  }
  writeMeta(model, meta::kLossScaleMode, mode);
  ensureMpcOpset(model);
  ctx.stats["gradients-unscaled"] += int64_t(grads.size());
  ctx.stats["gradient-casts"] += castsInserted;
}

} // namespace mpc
