// Executor: slots, the planned arena, node-by-node dispatch, measured peak.
#include "runtime/executor.h"

#include "passes/shape_inference.h"
#include "passes/support/diagnostics.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace mpc {

std::string formatByteSize(size_t bytes) {
  char buf[64];
  double b = double(bytes);
  if (bytes >= (size_t(1) << 30))
    std::snprintf(buf, sizeof buf, "%.1f GiB", b / double(1 << 30));
  else if (bytes >= (size_t(1) << 20))
    std::snprintf(buf, sizeof buf, "%.1f MiB", b / double(1 << 20));
  else
    std::snprintf(buf, sizeof buf, "%.1f KiB", b / 1024);
  return buf;
}

MemoryLimitError::MemoryLimitError(size_t planned, size_t persistent,
                                   const MemoryLimit &limit)
    : Error("planned peak " + formatByteSize(planned) + " (" +
            formatByteSize(persistent) +
            " of state and batch, the rest per step) exceeds the memory "
            "limit " +
            formatByteSize(limit.bytes) + " (" + limit.source + ")"),
      planned(planned), persistent(persistent), limit(limit.bytes) {}

/// The arena's bytes (aligned; zeroed once so no kernel ever sees garbage
/// it did not write).
struct Executor::Arena {
  uint8_t *data = nullptr;
  size_t size = 0;
  Arena(size_t bytes, size_t alignment) : size(bytes) {
    if (bytes == 0)
      return;
    size_t rounded = (bytes + alignment - 1) / alignment * alignment;
    data = static_cast<uint8_t *>(std::aligned_alloc(alignment, rounded));
    if (!data)
      throw Error("cannot allocate the step's memory arena of " +
                  std::to_string(bytes) + " bytes");
    std::memset(data, 0, rounded);
  }
  ~Arena() { std::free(data); }
  Arena(const Arena &) = delete;
  Arena &operator=(const Arena &) = delete;
};

Executor::Executor(const Graph &graph, Backend &backend,
                   ExecutorOptions options)
    : graph_(graph), backend_(backend), options_(std::move(options)) {
  auto slotFor = [&](const Value *v) {
    auto it = slotOf_.find(v);
    if (it != slotOf_.end())
      return it->second;
    size_t s = slots_.size();
    slots_.emplace_back();
    persistent_.push_back(false);
    valueOf_.push_back(v);
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
  for (const auto &n : graph.nodes()) {
    std::string why;
    if (!backend.supports(*n, why))
      throw Error(describeNode(*n) + ": the " + backend.name() +
                  " backend cannot run it: " + why);
    for (const Value *o : n->outputs())
      if (o)
        slotFor(o);
    nodes_.push_back(n.get());
  }
  std::vector<bool> keep = persistent_; // never released during a run
  for (const Value *out : graph.outputs()) {
    size_t s = slotFor(out);
    keep.resize(slots_.size(), false);
    keep[s] = true;
    outputSlots_.push_back(s);
  }
  persistent_.resize(slots_.size(), false);
  keep.resize(slots_.size(), false);
  // Last use of each transient slot: released right after that node runs.
  std::vector<int64_t> lastUse(slots_.size(), -1);
  for (size_t i = 0; i < nodes_.size(); ++i) {
    for (const Value *in : nodes_[i]->inputs())
      if (in)
        lastUse[slotOf_.at(in)] = int64_t(i);
    for (const Value *o : nodes_[i]->outputs())
      if (o && lastUse[slotOf_.at(o)] < int64_t(i))
        lastUse[slotOf_.at(o)] = int64_t(i); // unused outputs die at once
  }
  freeAfter_.assign(nodes_.size(), {});
  for (size_t s = 0; s < slots_.size(); ++s)
    if (!keep[s] && lastUse[s] >= 0)
      freeAfter_[size_t(lastUse[s])].push_back(s);
}

Executor::~Executor() = default;

void Executor::setInput(const std::string &name, Tensor value) {
  const Value *v = graph_.findValue(name);
  if (!v || !v->isGraphInput())
    throw Error("'" + name + "' is not an input of graph '" + graph_.name() +
                "'");
  if (v->dtype != DType::Undefined && v->dtype != value.dtype)
    throw Error("input '" + name + "': expected " + dtypeName(v->dtype) +
                ", got " + dtypeName(value.dtype));
  slots_[slotOf_.at(v)] = std::move(value); // moved into the arena by run()
}

void Executor::setInitializer(const std::string &name, Tensor value) {
  const Value *v = graph_.findValue(name);
  if (!v || !v->isInitializer())
    throw Error("'" + name + "' is not an initializer of graph '" +
                graph_.name() + "'");
  slots_[slotOf_.at(v)] = std::move(value); // moved into the arena by run()
}

const Tensor &Executor::initializer(const std::string &name) const {
  const Value *v = graph_.findValue(name);
  if (!v || !v->isInitializer())
    throw Error("'" + name + "' is not an initializer of graph '" +
                graph_.name() + "'");
  return slots_[slotOf_.at(v)];
}

bool Executor::planIsCurrent() const {
  if (!plan_)
    return false;
  for (size_t i = 0; i < graph_.inputs().size(); ++i) {
    const Tensor &t = slots_[slotOf_.at(graph_.inputs()[i])];
    if (t.dims != plannedInputDims_[i])
      return false;
  }
  for (size_t s = 0; s < slots_.size(); ++s)
    if (persistent_[s] && slotPlan_[s].planned &&
        slots_[s].byteSize() != slotPlan_[s].bytes)
      return false;
  return true;
}

void Executor::moveIntoArena(size_t s) {
  const SlotPlan &p = slotPlan_[s];
  Tensor &t = slots_[s];
  uint8_t *at = arena_->data + p.offset;
  if (t.bytes.isView() && t.bytes.data() == at)
    return;
  if (p.bytes)
    std::memcpy(at, t.bytes.data(), p.bytes);
  t.bytes = ByteBuffer::view(at, p.bytes);
}

std::unique_ptr<MemoryPlan> Executor::planFor(
    const std::vector<std::pair<DType, std::vector<int64_t>>> &inputs,
    std::unique_ptr<Graph> &g) const {
  g = graph_.clone();
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i].first != DType::Undefined)
      g->inputs()[i]->setType(inputs[i].first, toDims(inputs[i].second));
  try {
    inferGraph(*g, options_.opset);
  } catch (const Error &) {
    // The kernels will say what is wrong, with the node's actual data.
    return nullptr;
  }
  PlanInputs in;
  in.graph = g.get();
  in.updateBinding = options_.updateBinding;
  in.alignment = options_.alignment;
  auto plan = std::make_unique<MemoryPlan>(planMemory(in));
  if (options_.memoryLimit.bytes &&
      plan->arenaBytes > options_.memoryLimit.bytes)
    throw MemoryLimitError(plan->arenaBytes, plan->persistentBytes,
                           options_.memoryLimit);
  return plan;
}

size_t Executor::checkMemory(
    const std::vector<std::vector<int64_t>> &inputDims) const {
  if (inputDims.size() != graph_.inputs().size())
    throw Error("checkMemory: " + std::to_string(inputDims.size()) +
                " input shapes for " + std::to_string(graph_.inputs().size()) +
                " inputs");
  std::vector<std::pair<DType, std::vector<int64_t>>> inputs;
  for (size_t i = 0; i < inputDims.size(); ++i) {
    const Value *v = graph_.inputs()[i];
    int64_t n = elementCount(inputDims[i]);
    size_t es = v->dtype == DType::Undefined ? 1 : dtypeSize(v->dtype);
    // The planner leaves a value it cannot size out of the arena; an input
    // no memory can hold is refused here instead.
    if (n < 0 || uint64_t(n) > (uint64_t(1) << 63) / es)
      throw Error("input '" + v->name() + "' of " + dtypeName(v->dtype) + "[" +
                  dimsToString(inputDims[i]) +
                  "] is larger than any memory (over 2^63 bytes)");
    inputs.emplace_back(v->dtype, inputDims[i]);
  }
  std::unique_ptr<Graph> g;
  std::unique_ptr<MemoryPlan> plan = planFor(inputs, g);
  return plan ? plan->arenaBytes : 0;
}

void Executor::makePlan() {
  // Shapes as this run's inputs make them.
  std::vector<std::pair<DType, std::vector<int64_t>>> inputs;
  plannedInputDims_.clear();
  for (size_t i = 0; i < graph_.inputs().size(); ++i) {
    const Tensor &t = slots_[slotOf_.at(graph_.inputs()[i])];
    plannedInputDims_.push_back(t.dims);
    inputs.emplace_back(t.dtype, t.dims);
  }
  std::unique_ptr<Graph> g;
  // Above the limit it throws before allocating: the last plan is intact.
  std::unique_ptr<MemoryPlan> plan = planFor(inputs, g);
  if (!plan) {
    plan_.reset();
    return;
  }

  std::vector<SlotPlan> slotPlan(slots_.size());
  for (size_t s = 0; s < slots_.size(); ++s) {
    const Value *mine = g->findValue(valueOf_[s]->name());
    const ValuePlacement *p = mine ? plan->find(mine) : nullptr;
    if (!p)
      continue;
    slotPlan[s].planned = true;
    slotPlan[s].offset = p->offset;
    slotPlan[s].bytes = p->bytes;
    slotPlan[s].buffer = p->buffer;
    slotPlan[s].counted = !(p->persistent && !persistent_[s]);
    if (persistent_[s] && slots_[s].byteSize() != p->bytes)
      slotPlan[s].planned = false; // the bound tensor disagrees: own bytes
  }
  inPlace_.assign(nodes_.size(), {});
  for (size_t i = 0; i < nodes_.size(); ++i)
    inPlace_[i].assign(nodes_[i]->numOutputs(), false);
  for (const InPlaceWrite &w : plan->inPlace)
    inPlace_[w.node][w.output] = true;

  // Release last run's intermediates (they may be views of the old arena),
  // then move the persistent tensors into the new one.
  for (size_t s = 0; s < slots_.size(); ++s)
    if (!persistent_[s])
      slots_[s] = Tensor();
  auto arena = std::make_unique<Arena>(plan->arenaBytes, options_.alignment);
  std::swap(arena_, arena);
  slotPlan_ = std::move(slotPlan);
  for (size_t s = 0; s < slots_.size(); ++s)
    if (persistent_[s] && slotPlan_[s].planned)
      moveIntoArena(s);
  arena.reset(); // the old arena, now that nothing points into it
  plan_ = std::move(plan);
  planned_ = std::move(g);
}

void Executor::run(uint64_t seed) {
  if (options_.useArena) {
    if (!planIsCurrent())
      makePlan();
    else
      for (size_t s = 0; s < slots_.size(); ++s)
        if (persistent_[s] && slotPlan_[s].planned)
          moveIntoArena(s);
  }
  const bool arena = plan_ != nullptr && options_.useArena;
  for (size_t s = 0; s < slots_.size(); ++s)
    if (!persistent_[s])
      slots_[s] = Tensor(); // last run's outputs
  // Live bytes: in the arena counted per buffer (an in-place output shares
  // its input's bytes), outside it per tensor.
  size_t live = 0, fallbackLive = 0;
  for (size_t s = 0; s < slots_.size(); ++s)
    if (persistent_[s])
      live += slots_[s].byteSize();
  std::vector<int> bufferUsers(arena ? plan_->numBuffers : 0, 0);
  std::vector<bool> inArena(slots_.size(), false);
  peakBytes_ = live;
  fallbackPeak_ = 0;
  outside_.clear();
  // The context's vectors go from node to node: no allocation per node.
  std::vector<const Tensor *> inputs;
  std::vector<Tensor *> outputs;
  std::vector<bool> inPlace;
  for (size_t index = 0; index < nodes_.size(); ++index) {
    const Node &n = *nodes_[index];
    inputs.clear();
    outputs.clear();
    inPlace.clear();
    KernelContext ctx{n, std::move(inputs), std::move(outputs), seed,
                      std::move(inPlace)};
    if (arena)
      ctx.inPlace = inPlace_[index];
    for (const Value *in : n.inputs())
      ctx.inputs.push_back(in ? &slots_[slotOf_.at(in)] : nullptr);
    for (const Value *o : n.outputs()) {
      if (!o) {
        ctx.outputs.push_back(nullptr);
        continue;
      }
      size_t s = slotOf_.at(o);
      Tensor &t = slots_[s];
      t = Tensor();
      if (arena && slotPlan_[s].planned)
        t.bytes = ByteBuffer::view(arena_->data + slotPlan_[s].offset,
                                   slotPlan_[s].bytes);
      ctx.outputs.push_back(&t);
    }
    backend_.run(ctx);
    for (const Value *o : n.outputs()) {
      if (!o)
        continue;
      size_t s = slotOf_.at(o);
      const Tensor &t = slots_[s];
      const SlotPlan *p = arena ? &slotPlan_[s] : nullptr;
      inArena[s] = p && p->planned && t.bytes.isView() &&
                   t.bytes.data() == arena_->data + p->offset &&
                   t.byteSize() == p->bytes;
      if (inArena[s]) {
        if (p->counted && p->buffer != ValuePlacement::kNoBuffer &&
            bufferUsers.at(p->buffer)++ == 0)
          live += p->bytes;
      } else {
        live += t.byteSize();
        fallbackLive += t.byteSize();
        if (arena)
          outside_.push_back(o->name());
      }
    }
    peakBytes_ = std::max(peakBytes_, live);
    fallbackPeak_ = std::max(fallbackPeak_, fallbackLive);
    if (hook_)
      hook_(hookUser_, n, ctx);
    inputs = std::move(ctx.inputs);
    outputs = std::move(ctx.outputs);
    inPlace = std::move(ctx.inPlace);
    for (size_t s : freeAfter_[index]) {
      if (inArena[s]) {
        const SlotPlan &p = slotPlan_[s];
        if (p.counted && p.buffer != ValuePlacement::kNoBuffer &&
            --bufferUsers.at(p.buffer) == 0)
          live -= p.bytes;
      } else {
        live -= slots_[s].byteSize();
        fallbackLive -= slots_[s].byteSize();
      }
      slots_[s] = Tensor();
    }
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
