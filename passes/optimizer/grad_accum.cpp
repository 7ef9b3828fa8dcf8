// Gradient accumulation rewrites of loss-scale and optimizer (grad_accum.h).
#include "passes/optimizer/grad_accum.h"

#include "ir/mpc_ops.h"
#include "ir/step_metadata.h"
#include "support/diagnostics.h"

#include <map>

namespace mpc {
namespace {

/// A constant of the training algorithm (not state), named after `hint`
/// unless that is taken in the algorithm or the main graph (the algorithm
/// may read main-graph names, so a clash would shadow one).
Value *addConstant(Model &model, Graph &g, const std::string &hint,
                   Tensor data) {
  std::string name = hint;
  for (int i = 1; g.findValue(name) || model.graph->findValue(name); ++i)
    name = hint + "_" + std::to_string(i);
  return g.addInitializer(name, std::move(data));
}

/// The optimizer's half of the seed division: an unscaled step seeds the
/// backward with a constant, which becomes constant / K.
void divideConstantSeed(Model &model, Graph &g, int64_t k) {
  const std::string *seedName = readMeta(model, meta::kGradSeed);
  if (!seedName)
    throw Error("optimizer: --grad-accum=" + std::to_string(k) +
                ": no grad seed (mpc.grad_seed; run autodiff first)");
  Value *seed = g.findValue(*seedName);
  if (!seed || !seed->isInitializer() || seed->isState ||
      seed->initializer()->numel() != 1)
    throw Error("optimizer: --grad-accum=" + std::to_string(k) +
                ": the grad seed '" + *seedName +
                "' (mpc.grad_seed) is not a constant scalar (a loss-scaled "
                "seed); run loss-scale with the same --grad-accum");
  Tensor divided = *seed->initializer();
  divided.setFromDouble(0, divided.getAsDouble(0) / double(k));
  seed->setInitializer(std::make_shared<Tensor>(std::move(divided)));
}

/// Where(cond, a, b) typed like `like`.
Value *select(Graph &g, Value *cond, Value *a, Value *b, const Value &like,
              const std::string &hint, Node *before) {
  Node *n = createNamedNode(g, "Where", "", {cond, a, b}, {hint}, hint, before);
  n->output(0)->copyTypeFrom(like);
  return n->output(0);
}

/// Makes `newValue` what state `oldValue` was bound to: in update_binding
/// and among the algorithm's outputs (same position).
void rebind(Model &model, const Value *oldValue, Value *newValue) {
  for (auto &kv : model.training->updateBinding)
    if (kv.second == oldValue->name())
      kv.second = newValue->name();
  Graph &g = *model.training->algorithm;
  for (size_t i = 0; i < g.outputs().size(); ++i)
    if (g.outputs()[i] == oldValue)
      g.setOutput(i, newValue);
}

bool isBound(const Model &model, const Value *v) {
  for (const auto &kv : model.training->updateBinding)
    if (kv.second == v->name())
      return true;
  return false;
}

/// The parameter whose gradient is `unscaled` (an output of the
/// UnscaleGradients), followed through master-weights' Cast; nullptr if none.
Value *paramOf(const TrainingValues &tv, const Value *unscaled) {
  for (size_t i = 0; i < tv.grads.size(); ++i) {
    const Value *g = tv.grads[i];
    if (g == unscaled)
      return tv.params[i];
    const Node *p = g->producer();
    if (p && p->opType() == "Cast" && p->domain().empty() &&
        p->input(0) == unscaled)
      return tv.params[i];
  }
  return nullptr;
}

} // namespace

void checkGradAccum(const CompileOptions &options) {
  if (options.gradAccum < 1 || options.gradAccum > kMaxGradAccum)
    throw Error("--grad-accum: must be an integer from 1 to " +
                std::to_string(kMaxGradAccum) + ", got " +
                std::to_string(options.gradAccum));
}

Value *divideScaledSeed(Model &model, Graph &g, Value *scale, int64_t k,
                        Node *before) {
  // Divide, not multiply by 1/K: scale / K is what PyTorch's DivBackward
  // hands the scaled loss's backward, correctly rounded for any K.
  Value *kF32 = addConstant(model, g, "grad_accum_k_float",
                            Tensor::scalar(DType::F32, double(k)));
  Node *div =
      createNamedNode(g, "Div", "", {scale, kF32}, {scale->name() + "_over_k"},
                      "grad_seed_over_k", before);
  div->output(0)->copyTypeFrom(*scale);
  writeMeta(model, meta::kGradAccum, std::to_string(k));
  return div->output(0);
}

Value *accumulateGradients(Model &model, TrainingValues &tv, Value *foundInf,
                           int64_t k, Statistics &stats, Value **boundaryOut) {
  Graph &g = *tv.algorithm;
  if (!hasMeta(model, meta::kGradAccum))
    divideConstantSeed(model, g, k);

  // Where the sums are taken: the loss scaler's inputs (scaled, fp32), or
  // the gradients themselves without loss scaling.
  Node *unscale = nullptr;
  if (foundInf) {
    unscale = foundInf->producer();
    if (!unscale || unscale->opType() != "UnscaleGradients" ||
        unscale->domain() != kMpcDomain)
      throw Error("optimizer: --grad-accum: found_inf '" + foundInf->name() +
                  "' (mpc.found_inf) is not made by mpc.UnscaleGradients");
  }
  Node *before = unscale; // nullptr: append

  Value *counter =
      addState(model, "grad_accum_step", Tensor::scalar(DType::I64, 0));
  Value *kI64 = addConstant(model, g, "grad_accum_k",
                            Tensor::scalar(DType::I64, double(k)));
  Value *zeroI64 = addConstant(model, g, "grad_accum_zero_step",
                               Tensor::scalar(DType::I64, 0));
  // mpc.IncrementStep, not an int64 Add: the CUDA backend's Add takes
  // floating types only, and IncrementStep runs on the device.
  Node *add = createNamedNode(g, "IncrementStep", kMpcDomain, {counter},
                              {counter->name() + "_plus_one"},
                              "grad_accum_count", before);
  add->output(0)->setType(DType::I64, {});
  Node *eq =
      createNamedNode(g, "Equal", "", {add->output(0), kI64},
                      {"grad_accum_boundary"}, "grad_accum_boundary", before);
  Value *boundary = eq->output(0);
  boundary->setType(DType::Bool, {});
  if (boundaryOut)
    *boundaryOut = boundary;
  Value *counterNew = select(g, boundary, zeroI64, add->output(0), *counter,
                             counter->name() + "_new", before);
  bindState(model, counter, counterNew);

  // One zero per buffer dtype, to reset the buffers at the boundary.
  std::map<DType, Value *> zeros;
  auto zeroOf = [&](DType t) {
    Value *&z = zeros[t];
    if (!z)
      z = addConstant(model, g, std::string("grad_accum_zero_") + dtypeName(t),
                      Tensor::scalar(t, 0));
    return z;
  };
  std::vector<std::string> bufferNames;
  auto accumulate = [&](Value *grad, const Value &param) {
    if (!isFloating(grad->dtype))
      throw Error("optimizer: --grad-accum: gradient '" + grad->name() +
                  "' of parameter '" + param.name() + "' is " +
                  dtypeName(grad->dtype) + ", not floating point");
    Value *buffer = addState(model, param.name() + "_grad_accum",
                             Tensor(grad->dtype, param.initializer()->dims));
    Node *sum = createNamedNode(g, "Add", "", {buffer, grad},
                                {param.name() + "_grad_sum"},
                                "accumulate_" + param.name(), before);
    sum->output(0)->copyTypeFrom(*buffer);
    bindState(model, buffer,
              select(g, boundary, zeroOf(grad->dtype), sum->output(0), *buffer,
                     buffer->name() + "_new", before));
    bufferNames.push_back(buffer->name());
    return sum->output(0);
  };

  if (unscale) {
    for (size_t i = 1; i < unscale->numInputs(); ++i) {
      Value *param = paramOf(tv, unscale->output(i));
      if (!param)
        throw Error("optimizer: --grad-accum: '" + unscale->output(i)->name() +
                    "' (an output of '" + unscale->name() +
                    "') is not the gradient of any parameter (mpc.grads)");
      unscale->setInput(i, accumulate(unscale->input(i), *param));
    }
  } else {
    std::vector<Value *> sums;
    for (size_t i = 0; i < tv.grads.size(); ++i)
      sums.push_back(accumulate(tv.grads[i], *tv.params[i]));
    replaceGradients(model, tv, sums);
  }

  // The scale and its growth tracker change only at the boundary: inside
  // the window every micro-batch sees the same scale.
  if (foundInf)
    for (const Use &u : std::vector<Use>(foundInf->uses())) {
      Node *update = u.user;
      if (update->opType() != "UpdateLossScale" ||
          update->domain() != kMpcDomain)
        continue;
      for (size_t i = 0; i < 2 && i < update->numOutputs(); ++i) {
        Value *out = update->output(i);
        if (out && isBound(model, out))
          rebind(model, out,
                 select(g, boundary, out, update->input(i), *out,
                        update->input(i)->name() + "_next", nullptr));
      }
    }

  // The updates skip inside the window and on overflow at the boundary.
  Value *skip = nullptr;
  if (foundInf) {
    Value *yes = addConstant(model, g, "grad_accum_inside_window",
                             Tensor::scalar(DType::Bool, 1));
    skip =
        select(g, boundary, foundInf, yes, *foundInf, "skip_update", nullptr);
  } else {
    Node *n = createNamedNode(g, "Not", "", {boundary}, {"skip_update"},
                              "skip_update");
    skip = n->output(0);
    skip->setType(DType::Bool, {});
  }

  writeMeta(model, meta::kGradAccum, std::to_string(k));
  writeMeta(model, meta::kGradAccumCounter, counter->name());
  writeMeta(model, meta::kGradAccumBuffers, bufferNames);
  stats["grad-accum-buffers"] += int64_t(bufferNames.size());
  return skip;
}

} // namespace mpc
