// Executor: slot assignment, liveness-based freeing, node-by-node dispatch.
#include "runtime/executor.h"

#include "passes/support/diagnostics.h"

#include <algorithm>

namespace mpc {

Executor::Executor(const Graph &graph, Backend &backend)
    : graph_(graph), backend_(backend) {
  auto slotFor = [&](const Value *v) {
    auto it = slotOf_.find(v);
    if (it != slotOf_.end())
      return it->second;
    size_t s = slots_.size();
    slots_.emplace_back();
    persistent_.push_back(false);
    slotOf_[v] = s;
    return s;
  };
  for (const Value *in : graph.inputs())
    persistent_[slotFor(in)] = true;
  for (const Value *init : graph.initializers()) {
    size_t s = slotFor(init);
    persistent_[s] = true;
    slots_[s] = *init->initializer();
  }
  std::vector<const Node *> nodes;
  for (const auto &n : graph.nodes()) {
    std::string why;
    if (!backend.supports(*n, why))
      throw Error(describeNode(*n) + ": the " + backend.name() +
                  " backend cannot run it: " + why);
    for (const Value *o : n->outputs())
      if (o)
        slotFor(o);
    nodes.push_back(n.get());
  }
  for (const Value *out : graph.outputs()) {
    size_t s = slotFor(out);
    persistent_[s] = true;
    outputSlots_.push_back(s);
  }
  // Last use of each transient slot: freed right after that node runs.
  std::vector<int64_t> lastUse(slots_.size(), -1);
  for (size_t i = 0; i < nodes.size(); ++i) {
    for (const Value *in : nodes[i]->inputs())
      if (in)
        lastUse[slotOf_.at(in)] = int64_t(i);
    for (const Value *o : nodes[i]->outputs())
      if (o && lastUse[slotOf_.at(o)] < int64_t(i))
        lastUse[slotOf_.at(o)] = int64_t(i); // unused outputs die at once
  }
  freeAfter_.assign(nodes.size(), {});
  for (size_t s = 0; s < slots_.size(); ++s)
    if (!persistent_[s] && lastUse[s] >= 0)
      freeAfter_[size_t(lastUse[s])].push_back(s);
}

void Executor::setInput(const std::string &name, Tensor value) {
  const Value *v = graph_.findValue(name);
  if (!v || !v->isGraphInput())
    throw Error("'" + name + "' is not an input of graph '" + graph_.name() +
                "'");
  if (v->dtype != DType::Undefined && v->dtype != value.dtype)
    throw Error("input '" + name + "': expected " + dtypeName(v->dtype) +
                ", got " + dtypeName(value.dtype));
  slots_[slotOf_.at(v)] = std::move(value);
}

void Executor::setInitializer(const std::string &name, Tensor value) {
  const Value *v = graph_.findValue(name);
  if (!v || !v->isInitializer())
    throw Error("'" + name + "' is not an initializer of graph '" +
                graph_.name() + "'");
  slots_[slotOf_.at(v)] = std::move(value);
}

const Tensor &Executor::initializer(const std::string &name) const {
  const Value *v = graph_.findValue(name);
  if (!v || !v->isInitializer())
    throw Error("'" + name + "' is not an initializer of graph '" +
                graph_.name() + "'");
  return slots_[slotOf_.at(v)];
}

void Executor::run(uint64_t seed) {
  size_t live = 0;
  for (size_t s = 0; s < slots_.size(); ++s)
    if (persistent_[s])
      live += slots_[s].byteSize();
  peakBytes_ = live;
  size_t index = 0;
  for (const auto &n : graph_.nodes()) {
    KernelContext ctx{*n, {}, {}, seed};
    for (const Value *in : n->inputs())
      ctx.inputs.push_back(in ? &slots_[slotOf_.at(in)] : nullptr);
    for (const Value *o : n->outputs()) {
      if (!o) {
        ctx.outputs.push_back(nullptr);
        continue;
      }
      Tensor &t = slots_[slotOf_.at(o)];
      live -= t.byteSize(); // outputs from the previous run are replaced
      t = Tensor();
      ctx.outputs.push_back(&t);
    }
    backend_.run(ctx);
    for (Tensor *t : ctx.outputs)
      if (t)
        live += t->byteSize();
    peakBytes_ = std::max(peakBytes_, live);
    if (hook_)
      hook_(hookUser_, *n, ctx);
    for (size_t s : freeAfter_[index]) {
      live -= slots_[s].byteSize();
      slots_[s] = Tensor();
    }
    ++index;
  }
}

const Tensor &Executor::output(size_t i) const {
  return slots_[outputSlots_.at(i)];
}

const Tensor &Executor::output(const std::string &name) const {
  for (size_t i = 0; i < graph_.outputs().size(); ++i)
    if (graph_.outputs()[i]->name() == name)
      return output(i);
  throw Error("'" + name + "' is not an output of graph '" + graph_.name() +
              "'");
}

} // namespace mpc
