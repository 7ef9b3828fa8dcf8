// The state_dict of a compiled model: the rule of state_dict.h.
#include "runtime/state_dict.h"

#include "ir/step_metadata.h"
#include "passes/optimizer/ema.h"
#include "passes/pass.h"
#include "support/diagnostics.h"

#include <map>
#include <set>
#include <string_view>

namespace mpc {

namespace {

constexpr std::string_view kRunningMean = ".running_mean";
constexpr std::string_view kRunningVar = ".running_var";
constexpr std::string_view kBatchesTracked = ".num_batches_tracked";

bool endsWith(const std::string &s, std::string_view suffix) {
  return s.size() > suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

/// Whether the training step reads `name` as state, not as a constant of its
/// own: the state's value lives in the main graph, a constant's in the step.
bool isStepState(const Model &model, const std::string &name) {
  const Value *v = model.training && model.training->algorithm
                       ? model.training->algorithm->findValue(name)
                       : nullptr;
  return !v || !v->isInitializer() || v->isState;
}

/// Whether a forward node reads `v` as a batch norm's running mean or var.
bool isRunningStatistic(const Value &v) {
  for (const Use &u : v.uses())
    if (u.user->isOp("", "BatchNormalization") &&
        (u.index == 3 || u.index == 4))
      return true;
  return false;
}

bool isBound(const Model &model, const std::string &name) {
  if (!model.training)
    return false;
  for (const auto &b : model.training->updateBinding)
    if (b.first == name)
      return true;
  return false;
}

/// The current value of state `name`: the training step's (EMA averages
/// live there), else the main graph's.
const Tensor *stateValue(const Model &model, const std::string &name) {
  for (const Graph *g :
       {model.training ? model.training->algorithm.get() : nullptr,
        model.graph.get()})
    if (const Value *v = g ? g->findValue(name) : nullptr)
      if (v->isInitializer())
        return v->initializer().get();
  return nullptr;
}

} // namespace

std::vector<StateDictEntry> stateDictOf(const Model &model,
                                        int64_t trainedBatches, bool ema) {
  std::map<std::string, std::string> averageOf;
  if (ema)
    for (const auto &[param, average] : emaPairs(model))
      averageOf[param] = average;
  std::vector<StateDictEntry> out;
  std::set<std::string> names;
  // The persistent buffers torch's dynamo exporter named (mpc.buffers, set
  // by the importer): constants to the step, state to the module.
  std::set<std::string> buffers;
  for (const std::string &b : readMeta(model, meta::kBuffers))
    buffers.insert(b);
  for (const std::string &b : buffers) {
    const Value *v = model.graph->findValue(b);
    if (!v || !v->isInitializer())
      throw Error("the module's persistent buffer '" + b +
                  "' is not a tensor of the compiled model's forward any "
                  "more (folded into a constant), so a state_dict would "
                  "lack it");
  }
  for (const Value *init : model.graph->initializers()) {
    const std::string &name = init->name();
    const Tensor &t = *init->initializer();
    bool keep;
    if (buffers.count(name))
      keep = true;
    else if (isFloating(t.dtype))
      keep = !init->uses().empty() &&
             (isStepState(model, name) || isRunningStatistic(*init));
    else
      keep = endsWith(name, kBatchesTracked);
    if (!keep || !names.insert(name).second)
      continue;
    StateDictEntry e{name, t};
    if (auto it = averageOf.find(name); it != averageOf.end()) {
      const Tensor *average = stateValue(model, it->second);
      if (!average || average->dtype != t.dtype || average->dims != t.dims)
        throw Error("mpc.ema: the moving average '" + it->second +
                    "' of parameter '" + name +
                    "' is not a state of its type and shape");
      e.value = *average;
    }
    out.push_back(std::move(e));
  }

  // num_batches_tracked for each batch norm, after its running_var (torch's
  // order) unless the model carried one.
  std::map<std::string, Tensor> counts;
  std::map<std::string, std::string> counterAfter;
  for (const StateDictEntry &e : out) {
    if (!endsWith(e.name, kRunningVar))
      continue;
    std::string prefix = e.name.substr(0, e.name.size() - kRunningVar.size());
    std::string mean = prefix + std::string(kRunningMean);
    if (!names.count(mean))
      continue;
    std::string counter = prefix + std::string(kBatchesTracked);
    int64_t initial = 0;
    if (const Value *carried = model.graph->findValue(counter)) {
      if (!carried->isInitializer() || carried->initializer()->numel() != 1 ||
          isFloating(carried->initializer()->dtype))
        throw Error("'" + counter +
                    "' is not an integer scalar initializer, as a batch "
                    "norm's num_batches_tracked is");
      initial = int64_t(carried->initializer()->getAsDouble(0));
    }
    // A batch norm trains when the step updates its statistics.
    int64_t trained = isBound(model, mean) ? trainedBatches : 0;
    counts[counter] = Tensor::scalar(DType::I64, double(initial + trained));
    if (!names.count(counter))
      counterAfter[e.name] = counter;
  }
  std::vector<StateDictEntry> result;
  for (StateDictEntry &e : out) {
    if (auto c = counts.find(e.name); c != counts.end())
      e.value = c->second; // carried: counted on from its initial value
    std::string name = e.name;
    result.push_back(std::move(e));
    if (auto a = counterAfter.find(name); a != counterAfter.end())
      result.push_back({a->second, counts[a->second]});
  }
  return result;
}

} // namespace mpc
