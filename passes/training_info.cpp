// A model's own training algorithm: import-time lowering of its Gradient
// node, its initialization graph, and the user-optimizer pass.
//
// See training_info.h for how the pieces fit the pipeline. The user's
// optimizer nodes are never rewritten: they only get their gradient inputs
// (fp32, unscaled, the values mpc's own optimizer would read) and a
// Where(found_inf, old, new) on each state value they produce.
#include "passes/training_info.h"

#include "ir/step_metadata.h"
#include "kernels/cpu/kernel_table.h"
#include "passes/data_parallel.h"
#include "passes/onnx/gradient_op.h"
#include "passes/optimizer/lr_schedule.h"
#include "passes/registry.h"
#include "passes/shape_inference.h"
#include "passes/training_support.h"
#include "support/diagnostics.h"

#include <algorithm>
#include <map>
#include <set>
#include <unordered_set>

namespace mpc {
namespace {

constexpr const char *kPass = "user-optimizer";

int64_t defaultOpset(const Model &model) {
  int64_t opset = model.opsetVersion("");
  return opset < 0 ? 17 : opset;
}

/// The nodes the loss depends on: the forward part of the step.
std::unordered_set<const Node *> ancestorsOf(const Value *v) {
  std::unordered_set<const Node *> seen;
  std::vector<const Node *> work;
  if (v && v->producer())
    work.push_back(v->producer());
  while (!work.empty()) {
    const Node *n = work.back();
    work.pop_back();
    if (!seen.insert(n).second)
      continue;
    for (const Value *in : n->inputs())
      if (in && in->producer())
        work.push_back(in->producer());
  }
  return seen;
}

void eraseMeta(Model &model, const std::string &key) {
  auto &m = model.metadata;
  m.erase(std::remove_if(m.begin(), m.end(),
                         [&](const auto &kv) { return kv.first == key; }),
          m.end());
}

} // namespace

void lowerTrainingAlgorithm(Model &model) {
  if (!model.training)
    return;
  Graph &alg = *model.training->algorithm;
  std::vector<Node *> ops = gradientOps(alg);
  if (ops.empty())
    return;
  if (ops.size() > 1)
    errorAt(*ops[1]) << "is the training algorithm's second Gradient node; "
                        "mpc trains one loss per model (one Gradient node)";
  Node *n = ops[0];
  GradientOpSpec spec = readGradientOp(*n);
  if (!alg.findValue(spec.y))
    errorAt(*n) << "y '" << spec.y
                << "' is not a value of the training algorithm";
  for (const std::string &x : spec.xs) {
    const Value *v = alg.findValue(x);
    if (!v || !v->isInitializer() || !v->isState)
      errorAt(*n) << "x '" << x
                  << "' is not an initializer of the main graph; mpc trains "
                     "the main graph's initializers (name inputs held "
                     "constant in zs)";
    if (!isFloating(v->dtype))
      errorAt(*n) << "x '" << x << "' is " << dtypeName(v->dtype)
                  << ", not a floating-point tensor";
  }

  // One placeholder per x, read where the Gradient's output was read. A
  // floating state initializer, so that fold-constants never folds the
  // user's update arithmetic over it.
  std::vector<std::pair<Value *, std::string>> renames;
  std::vector<std::string> placeholders;
  for (size_t i = 0; i < spec.xs.size(); ++i) {
    Value *x = alg.findValue(spec.xs[i]);
    Value *out = i < n->numOutputs() ? n->output(i) : nullptr;
    std::string name = out ? out->name() : x->name() + "_grad";
    Value *ph = alg.addInitializer(alg.uniqueValueName(name + "_placeholder"),
                                   Tensor(x->dtype, x->initializer()->dims));
    ph->isState = true;
    if (out) {
      alg.replaceAllUsesWith(out, ph);
      renames.emplace_back(ph, name);
    }
    placeholders.push_back(ph->name());
  }
  alg.removeNode(n);
  for (size_t i = 0, k = 0; i < spec.xs.size(); ++i) {
    if (k < renames.size() && renames[k].first->name() == placeholders[i]) {
      alg.renameValue(renames[k].first, renames[k].second);
      placeholders[i] = renames[k].second;
      ++k;
    }
  }

  std::vector<std::string> userState;
  for (const auto &kv : model.training->updateBinding)
    userState.push_back(kv.first);
  writeMeta(model, meta::kUserLoss, spec.y);
  writeMeta(model, meta::kUserParams, spec.xs);
  writeMeta(model, meta::kUserGrads, placeholders);
  writeMeta(model, meta::kUserState, userState);
}

void applyInitialization(
    Model &model, Graph &init,
    const std::vector<std::pair<std::string, std::string>> &binding) {
  if (binding.empty())
    return;
  if (!init.inputs().empty())
    throw Error("training_info initialization graph has inputs ('" +
                init.inputs()[0]->name() + "'); ONNX's has none");
  for (const auto &n : init.nodes())
    if (!isSupportedOp(n->domain(), n->opType()))
      errorAt(*n) << "in the training_info initialization: op '"
                  << (n->domain().empty() ? n->opType()
                                          : n->domain() + "." + n->opType())
                  << "' is not supported (mpc runs the initialization once, "
                     "at import)";
  int64_t opset = defaultOpset(model);
  inferGraph(init, opset);
  init.clearOutputs();
  std::set<std::string> asOutput;
  for (const auto &[state, value] : binding) {
    Value *target = model.graph->findValue(state);
    if (!target || !target->isInitializer())
      throw Error("training_info initialization_binding key '" + state +
                  "' is not an initializer of the main graph");
    Value *v = init.findValue(value);
    if (!v)
      throw Error("training_info initialization_binding value '" + value +
                  "' is not a value of the initialization graph");
    if (asOutput.insert(value).second)
      init.addOutput(v);
  }
  // The graph runs once, node by node in its (topological) order, on the CPU
  // kernel table: the same kernels, seed 0 for random ops, as a step.
  std::map<const Value *, Tensor> computed;
  auto tensorOf = [&](const Value *v) -> const Tensor * {
    if (v->isInitializer())
      return v->initializer().get();
    auto it = computed.find(v);
    return it == computed.end() ? nullptr : &it->second;
  };
  for (const auto &n : init.nodes()) {
    std::vector<const Tensor *> inputs;
    for (size_t i = 0; i < n->numInputs(); ++i) {
      const Value *v = n->input(i);
      inputs.push_back(v ? tensorOf(v) : nullptr);
      if (v && !inputs.back())
        errorAt(*n) << "in the training_info initialization: input '"
                    << v->name() << "' is computed by no earlier node";
    }
    std::vector<Tensor> outputs;
    runCpuNode(*n, inputs, outputs);
    for (size_t i = 0; i < n->numOutputs(); ++i)
      if (const Value *out = n->output(i))
        computed[out] = std::move(outputs[i]);
  }
  for (const auto &[state, value] : binding) {
    Value *target = model.graph->findValue(state);
    const Tensor &t = *tensorOf(init.findValue(value));
    const Tensor &old = *target->initializer();
    if (t.dtype != old.dtype || t.dims != old.dims)
      throw Error("training_info initialization_binding: '" + value + "' is " +
                  dtypeName(t.dtype) + "[" + dimsToString(toDims(t.dims)) +
                  "] but initializer '" + state + "' is " +
                  dtypeName(old.dtype) + "[" + dimsToString(toDims(old.dims)) +
                  "]");
    target->setInitializer(std::make_shared<Tensor>(t));
  }
}

std::vector<PipelineEntry> defaultPipelineFor(const Model &model) {
  std::vector<PipelineEntry> pipeline = defaultPipeline();
  if (hasUserOptimizer(model))
    pipeline.erase(std::remove_if(pipeline.begin(), pipeline.end(),
                                  [](const PipelineEntry &e) {
                                    return std::string(e.pass->name) ==
                                           "optimizer";
                                  }),
                   pipeline.end());
  return pipeline;
}

bool hasUserOptimizer(const Model &model) {
  return hasMeta(model, meta::kUserGrads);
}

void runUserOptimizer(Model &model, PassContext &ctx) {
  if (!hasUserOptimizer(model)) {
    ctx.changedNothing = true;
    return;
  }
  checkPassOrder(model, kPass);
  if (ctx.options.gradAccum > 1)
    throw Error("--grad-accum: not supported for a model that trains with "
                "its own training_info optimizer");
  if (ctx.options.maxGradNorm > 0)
    throw Error("--max-grad-norm: not supported for a model that trains "
                "with its own training_info optimizer");
  if (ctx.options.emaDecay)
    throw Error("--ema-decay: not supported for a model that trains with its "
                "own training_info optimizer");
  if (!ctx.options.noWeightDecay.empty())
    throw Error("--no-weight-decay: not supported for a model that trains "
                "with its own training_info optimizer");
  if (ctx.options.optimizerStateDtype != DType::F32)
    throw Error("--optimizer-state-dtype: not supported for a model that "
                "trains with its own training_info optimizer (its algorithm's "
                "state keeps its own types)");
  if (checkLrScheduleOptions(ctx.options))
    throw Error("--lr-schedule: not supported for a model that trains with "
                "its own training_info optimizer (its algorithm computes its "
                "own learning rate)");
  if (ctx.options.shardOptimizer || ctx.options.worldSize)
    throw Error("--shard-optimizer: not supported for a model that trains "
                "with its own training_info optimizer (its state is the "
                "algorithm's, whole on every rank)");
  checkDataParallelOptions(ctx.options, kPass);
  TrainingValues tv = requireGradients(model, kPass);
  Graph &g = *tv.algorithm;
  std::vector<std::string> userParams = readMeta(model, meta::kUserParams);
  std::vector<std::string> placeholders = readMeta(model, meta::kUserGrads);
  if (userParams.size() != placeholders.size())
    throw Error(std::string(kPass) + ": mpc.user_params lists " +
                std::to_string(userParams.size()) +
                " parameters but mpc.user_grads " +
                std::to_string(placeholders.size()) + " gradients");

  // The gradients stop being outputs: the user's optimizer consumes them.
  std::unordered_set<const Value *> gradSet(tv.grads.begin(), tv.grads.end());
  std::vector<Value *> kept;
  for (Value *out : g.outputs())
    if (!gradSet.count(out))
      kept.push_back(out);
  g.clearOutputs();
  for (Value *out : kept)
    g.addOutput(out);

  if (ctx.options.dataParallel) {
    Value *flag = nullptr;
    if (const std::string *name = readMeta(model, meta::kFoundInf))
      flag = g.findValue(*name);
    allReduceGradients(model, tv, flag, kPass, ctx.options.gradCommDtype);
  }

  for (size_t i = 0; i < placeholders.size(); ++i) {
    Value *ph = g.findValue(placeholders[i]);
    if (!ph || !ph->isInitializer())
      throw Error(std::string(kPass) + ": gradient placeholder '" +
                  placeholders[i] +
                  "' (mpc.user_grads) is not an initializer of the training "
                  "algorithm");
    Value *grad = nullptr, *param = nullptr;
    for (size_t j = 0; j < tv.params.size(); ++j)
      if (tv.params[j]->name() == userParams[i]) {
        param = tv.params[j];
        grad = tv.grads[j];
      }
    if (!grad) {
      // The loss does not depend on this x: its gradient is the zeros the
      // placeholder already holds, a constant from now on.
      ph->isState = false;
      continue;
    }
    if (grad->dtype != param->dtype || grad->dims != param->dims)
      throw Error(std::string(kPass) + ": gradient '" + grad->name() + "' is " +
                  grad->typeString() + " but parameter '" + param->name() +
                  "' is " + param->typeString() +
                  " (run loss-scale and master-weights first)");
    g.replaceAllUsesWith(ph, grad);
    g.removeInitializer(ph);
  }

  // Skip on overflow: every new value of the user's state that the update
  // (not the forward) computes keeps the old value when found_inf is set.
  Value *foundInf = nullptr;
  if (const std::string *name = readMeta(model, meta::kFoundInf))
    foundInf = g.findValue(*name);
  const std::string *lossName = readMeta(model, meta::kLoss);
  std::unordered_set<const Node *> forward =
      ancestorsOf(lossName ? g.findValue(*lossName) : nullptr);
  std::vector<std::string> userStateList = readMeta(model, meta::kUserState);
  std::set<std::string> userState(userStateList.begin(), userStateList.end());
  int64_t gated = 0;
  for (auto &[stateName, valueName] : model.training->updateBinding) {
    if (!userState.count(stateName))
      continue;
    Value *state = g.findValue(stateName);
    Value *value = g.findValue(valueName);
    if (!state || !value)
      throw Error(std::string(kPass) + ": update_binding '" + stateName +
                  "' -> '" + valueName +
                  "' names a value the training algorithm does not have");
    if (foundInf && value != state && value->producer() &&
        !forward.count(value->producer())) {
      Node *keep = createNamedNode(g, "Where", "", {foundInf, state, value},
                                   {valueName + "_unless_overflow"},
                                   "skip_on_overflow_" + stateName);
      keep->output(0)->copyTypeFrom(*value);
      value = keep->output(0);
      valueName = value->name();
      ++gated;
    }
    if (!value->isGraphOutput())
      g.addOutput(value);
  }
  if (!g.topologicalSort())
    throw Error(std::string(kPass) +
                ": the training algorithm's optimizer reads its own results "
                "(a cycle)");

  std::string ops;
  for (const auto &n : g.nodes())
    if (n->domain() == kOnnxPreviewTrainingDomain)
      ops += (ops.empty() ? "" : ",") + n->opType();
  writeMeta(model, meta::kOptimizer,
            "training_info " + (ops.empty() ? std::string("arithmetic") : ops));
  eraseMeta(model, std::string(meta::kUserGrads.name));
  ctx.stats["parameters-updated"] += int64_t(tv.params.size());
  ctx.stats["updates-skipped-on-overflow"] += gated;
}

} // namespace mpc
