// Executor: slots, the planned arena, node-by-node dispatch, measured peak;
// and the device-resident variant of the same plan (the second half).
#include "runtime/executor.h"

#include "ir/mpc_ops.h"
#include "kernels/cpu/kernel_table.h"
#include "passes/shape_inference.h"
#include "support/available_memory.h"
#include "support/diagnostics.h"

#include <algorithm>
#include <atomic>
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
    // The heap (mimalloc) maps with MAP_NORESERVE: an arena past the memory
    // left would be granted and the process OOM-killed by the memset below
    // (--memory-limit=0 switches the plan's check off, not this one).
    AvailableMemory memory = availableMemory();
    if (memory.bytes && rounded > memory.bytes)
      throw Error("cannot allocate the step's memory arena of " +
                  std::to_string(bytes) + " bytes (" + formatMemorySize(bytes) +
                  "): " + memory.source + " is " +
                  formatMemorySize(memory.bytes));
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

namespace {

/// Makes t an empty Tensor() again, keeping the capacity of its dims: the
/// kernel that next writes it (the same node, next step) then copies its
/// dims in without allocating.
void clearKeepingDims(Tensor &t, ByteBuffer bytes = ByteBuffer()) {
  t.dtype = DType::Undefined;
  t.dims.clear();
  t.bytes = std::move(bytes);
}

} // namespace

Executor::Executor(const Graph &graph, Backend &backend,
                   ExecutorOptions options)
    : graph_(graph), backend_(backend), options_(std::move(options)) {
  slotById_.assign(graph.numValueIds(), kNoSlot);
  auto slotFor = [&](const Value *v) {
    if (hasSlot(v))
      return slotById_[v->id()];
    if (v->owner() != &graph_ || v->id() >= slotById_.size())
      throw Error("internal error: value '" + v->name() +
                  "' is not of the executed graph");
    size_t s = slots_.size();
    slots_.emplace_back();
    persistent_.push_back(false);
    valueOf_.push_back(v);
    slotById_[v->id()] = s;
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
        lastUse[slotOf(in)] = int64_t(i);
    for (const Value *o : nodes_[i]->outputs())
      if (o && lastUse[slotOf(o)] < int64_t(i))
        lastUse[slotOf(o)] = int64_t(i); // unused outputs die at once
  }
  freeAfter_.assign(nodes_.size(), {});
  for (size_t s = 0; s < slots_.size(); ++s)
    if (!keep[s] && lastUse[s] >= 0)
      freeAfter_[size_t(lastUse[s])].push_back(s);
  // slots_ is complete: the contexts may point into it.
  nodeOutputSlots_.resize(nodes_.size());
  contexts_.reserve(nodes_.size());
  for (size_t i = 0; i < nodes_.size(); ++i) {
    const Node &n = *nodes_[i];
    KernelContext ctx{n};
    ctx.collective = options_.collective;
    for (const Value *in : n.inputs())
      ctx.inputs.push_back(in ? &slots_[slotOf(in)] : nullptr);
    for (const Value *o : n.outputs()) {
      nodeOutputSlots_[i].push_back(o ? slotOf(o) : kNoSlot);
      ctx.outputs.push_back(o ? &slots_[slotOf(o)] : nullptr);
    }
    contexts_.push_back(std::move(ctx));
  }

  resident_ = backend.deviceResident() && options_.useArena;
  if (resident_) {
    host_.assign(slots_.size(), Tensor());
    hostValid_.assign(slots_.size(), false);
    dirty_.assign(slots_.size(), false);
    updated_.assign(slots_.size(), false);
    for (size_t s = 0; s < slots_.size(); ++s)
      if (persistent_[s] && valueOf_[s]->isInitializer()) {
        host_[s] = slots_[s];
        hostValid_[s] = dirty_[s] = true;
      }
    for (const auto &b : options_.updateBinding) {
      const Value *v = graph_.findValue(b.first);
      if (v && hasSlot(v))
        updated_[slotOf(v)] = true;
    }
    for (const std::string &name : options_.fetchAfterRun) {
      const Value *v = graph_.findValue(name);
      if (!v || !hasSlot(v))
        throw Error("'" + name + "' is not a value of graph '" + graph_.name() +
                    "' (fetchAfterRun)");
      fetchSlots_.push_back(slotOf(v));
    }
    fetched_.assign(slots_.size(), false);
    for (size_t s : fetchSlots_)
      fetched_[s] = true;
  }
}

Executor::~Executor() {
  // Downloads in flight land in pending_'s tensors: let them land first.
  if (!pending_.empty()) {
    try {
      backend_.synchronize();
    } catch (...) { // the step's own error was reported, or never will be
    }
  }
  if (deviceArena_)
    backend_.freeArena(deviceArena_);
}

void Executor::setInput(const std::string &name, Tensor value) {
  const Value *v = graph_.findValue(name);
  if (!v || !v->isGraphInput())
    throw Error("'" + name + "' is not an input of graph '" + graph_.name() +
                "'");
  if (v->dtype != DType::Undefined && v->dtype != value.dtype)
    throw Error("input '" + name + "': expected " + dtypeName(v->dtype) +
                ", got " + dtypeName(value.dtype));
  size_t s = slotOf(v);
  if (resident_) { // uploaded by run(); the slot keeps its device binding
    host_[s] = std::move(value);
    hostValid_[s] = dirty_[s] = true;
    return;
  }
  slots_[s] = std::move(value); // moved into the arena by run()
}

void Executor::setInitializer(const std::string &name, Tensor value) {
  const Value *v = graph_.findValue(name);
  if (!v || !v->isInitializer())
    throw Error("'" + name + "' is not an initializer of graph '" +
                graph_.name() + "'");
  size_t s = slotOf(v);
  if (resident_) {
    host_[s] = std::move(value);
    hostValid_[s] = dirty_[s] = true;
    if (s < hasMirror_.size() && hasMirror_[s]) // a constant's new value
      mirror_[s] = host_[s];
    return;
  }
  slots_[s] = std::move(value); // moved into the arena by run()
}

const Tensor &Executor::initializer(const std::string &name) const {
  const Value *v = graph_.findValue(name);
  if (!v || !v->isInitializer())
    throw Error("'" + name + "' is not an initializer of graph '" +
                graph_.name() + "'");
  return resident_ ? hostCopy(slotOf(v)) : slots_[slotOf(v)];
}

size_t Executor::slotOf(const Value *v) const {
  if (!hasSlot(v))
    throw Error("internal error: value '" + (v ? v->name() : "?") +
                "' has no slot in the executor");
  return slotById_[v->id()];
}

bool Executor::planIsCurrent() const {
  if (!plan_)
    return false;
  for (size_t i = 0; i < graph_.inputs().size(); ++i) {
    const Tensor &t = slots_[slotOf(graph_.inputs()[i])];
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
  // Read where the bytes lie: an input held in place (a caller's array, a
  // mapped file) is copied once, into the arena, not first into a buffer of
  // its own.
  if (p.bytes)
    std::memcpy(at, t.bytes.unalignedData(), p.bytes);
  t.bytes = ByteBuffer::view(at, p.bytes);
}

std::unique_ptr<MemoryPlan> Executor::planFor(
    const std::vector<std::pair<DType, std::vector<int64_t>>> &inputs,
    std::unique_ptr<Graph> &g, std::string *whyNot) const {
  g = graph_.clone();
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i].first != DType::Undefined)
      g->inputs()[i]->setType(inputs[i].first, toDims(inputs[i].second));
  try {
    inferGraph(*g, options_.opset);
  } catch (const Error &e) {
    // The kernels will say what is wrong, with the node's actual data.
    if (whyNot)
      *whyNot = e.what();
    return nullptr;
  }
  PlanInputs in;
  in.graph = g.get();
  in.updateBinding = &options_.updateBinding;
  in.weightCopies = options_.weightCopies;
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

void Executor::recordInPlace(const MemoryPlan &plan) {
  inPlace_.assign(nodes_.size(), {});
  for (size_t i = 0; i < nodes_.size(); ++i)
    inPlace_[i].assign(nodes_[i]->numOutputs(), false);
  for (const InPlaceWrite &w : plan.inPlace)
    inPlace_[w.node][w.output] = true;
  for (size_t i = 0; i < nodes_.size(); ++i)
    contexts_[i].inPlace = inPlace_[i];
}

void Executor::makePlan() {
  // Shapes as this run's inputs make them.
  std::vector<std::pair<DType, std::vector<int64_t>>> inputs;
  plannedInputDims_.clear();
  for (size_t i = 0; i < graph_.inputs().size(); ++i) {
    const Tensor &t = slots_[slotOf(graph_.inputs()[i])];
    plannedInputDims_.push_back(t.dims);
    inputs.emplace_back(t.dtype, t.dims);
  }
  std::unique_ptr<Graph> g;
  // Above the limit it throws before allocating: the last plan is intact.
  std::unique_ptr<MemoryPlan> plan = planFor(inputs, g);
  if (!plan) {
    plan_.reset();
    for (KernelContext &ctx : contexts_)
      ctx.inPlace.clear(); // no arena: every output owns its bytes
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
  recordInPlace(*plan);

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

void Executor::launch(uint64_t seed) {
  if (resident_)
    runResident(seed);
  else
    run(seed);
}

void Executor::collect() {
  if (pending_.empty())
    return;
  PendingRun &run = pending_.front();
  try {
    backend_.waitStep(run.ticket);
  } catch (...) {
    pending_.pop_front(); // its values never arrive
    throw;
  }
  for (size_t k = 0; k < fetchSlots_.size(); ++k) {
    size_t s = fetchSlots_[k];
    // State the host has set since (a resume) stays the host's.
    if (persistent_[s] && dirty_[s])
      continue;
    host_[s] = std::move(run.values[k]);
    hostValid_[s] = true;
  }
  pending_.pop_front();
}

void Executor::run(uint64_t seed) {
  if (resident_) {
    runResident(seed);
    while (!pending_.empty())
      collect();
    return;
  }
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
      clearKeepingDims(slots_[s]); // last run's outputs
  // Live bytes: in the arena counted per buffer (an in-place output shares
  // its input's bytes), outside it per tensor.
  size_t live = 0, fallbackLive = 0;
  for (size_t s = 0; s < slots_.size(); ++s)
    if (persistent_[s])
      live += slots_[s].byteSize();
  bufferUsers_.assign(arena ? plan_->numBuffers : 0, 0);
  inArena_.assign(slots_.size(), false);
  peakBytes_ = live;
  fallbackPeak_ = 0;
  outside_.clear();
  for (size_t index = 0; index < nodes_.size(); ++index) {
    const Node &n = *nodes_[index];
    KernelContext &ctx = contexts_[index];
    ctx.seed = seed;
    const std::vector<size_t> &outs = nodeOutputSlots_[index];
    for (size_t s : outs) {
      if (s == kNoSlot)
        continue;
      const SlotPlan *p = arena ? &slotPlan_[s] : nullptr;
      clearKeepingDims(
          slots_[s], p && p->planned
                         ? ByteBuffer::view(arena_->data + p->offset, p->bytes)
                         : ByteBuffer());
    }
    backend_.run(ctx);
    for (size_t s : outs) {
      if (s == kNoSlot)
        continue;
      const Tensor &t = slots_[s];
      const SlotPlan *p = arena ? &slotPlan_[s] : nullptr;
      inArena_[s] = p && p->planned && t.bytes.isView() &&
                    t.bytes.data() == arena_->data + p->offset &&
                    t.byteSize() == p->bytes;
      if (inArena_[s]) {
        if (p->counted && p->buffer != ValuePlacement::kNoBuffer &&
            bufferUsers_.at(p->buffer)++ == 0)
          live += p->bytes;
      } else {
        live += t.byteSize();
        fallbackLive += t.byteSize();
        if (arena)
          outside_.push_back(valueOf_[s]->name());
      }
    }
    peakBytes_ = std::max(peakBytes_, live);
    fallbackPeak_ = std::max(fallbackPeak_, fallbackLive);
    if (hook_)
      hook_(hookUser_, n, ctx);
    for (size_t s : freeAfter_[index]) {
      if (inArena_[s]) {
        const SlotPlan &p = slotPlan_[s];
        if (p.counted && p.buffer != ValuePlacement::kNoBuffer &&
            --bufferUsers_.at(p.buffer) == 0)
          live -= p.bytes;
      } else {
        live -= slots_[s].byteSize();
        fallbackLive -= slots_[s].byteSize();
      }
      clearKeepingDims(slots_[s]);
    }
  }
}

const Tensor &Executor::output(size_t i) const {
  return resident_ ? hostCopy(outputSlots_.at(i)) : slots_[outputSlots_.at(i)];
}

const Tensor &Executor::output(const std::string &name) const {
  for (size_t i = 0; i < graph_.outputs().size(); ++i)
    if (graph_.outputs()[i]->name() == name)
      return output(i);
  throw Error("'" + name + "' is not an output of graph '" + graph_.name() +
              "'");
}

// --- device-resident ---------------------------------------------------------
//
// The plan's shapes are static for the bound input shapes, so every value
// gets its dtype, dims and address once per plan; a run only uploads what
// the host changed, runs the nodes (or lets the backend replay them) and
// downloads what it was asked for.

namespace {

/// The most bytes of one value the executor mirrors on the host: shapes,
/// axes, exponents and ratios are tiny; anything larger is data.
constexpr size_t kMirrorLimit = 64 * 1024;

/// Ops whose output is not a function of their inputs alone: random draws,
/// and the collectives (mpc.AllReduce, the sharded optimizer's ops), whose
/// output depends on the other ranks or this rank's place among them (and
/// which every rank must run the same number of times).
bool notAFunctionOfInputs(const Node &n) {
  const std::string &op = n.opType();
  return op == "Dropout" || op.rfind("Random", 0) == 0 || op == "Multinomial" ||
         op == "Bernoulli" ||
         (isMpcDomain(n.domain()) &&
          (op == "AllReduce" || op == "ReduceScatter" || op == "RankShard" ||
           op == "AllGather" || op == "ShardedClipGradNorm"));
}

} // namespace

std::string Executor::whereIs(size_t s) const {
  const Value *v = valueOf_[s];
  if (const Node *p = v->producer())
    return describeNode(*p) + ": output '" + v->name() + "'";
  if (v->isGraphInput())
    return "graph input '" + v->name() + "'";
  return "initializer '" + v->name() + "'";
}

const std::vector<int64_t> &
Executor::plannedDims(const std::string &name) const {
  const Value *v = graph_.findValue(name);
  if (!v || !hasSlot(v))
    throw Error("'" + name + "' is not a value of graph '" + graph_.name() +
                "'");
  return slots_[slotOf(v)].dims;
}

bool Executor::residentPlanIsCurrent() const {
  if (!plan_)
    return false;
  for (size_t i = 0; i < graph_.inputs().size(); ++i) {
    size_t s = slotOf(graph_.inputs()[i]);
    if (host_[s].dims != plannedInputDims_[i] ||
        host_[s].dtype != slots_[s].dtype)
      return false;
  }
  for (size_t s = 0; s < slots_.size(); ++s)
    if (persistent_[s] && dirty_[s] &&
        (host_[s].dtype != slots_[s].dtype || host_[s].dims != slots_[s].dims))
      return false;
  return true;
}

void Executor::computeMirrors() {
  mirror_.assign(slots_.size(), Tensor());
  hasMirror_.assign(slots_.size(), false);
  for (size_t s = 0; s < slots_.size(); ++s) {
    const Value *v = valueOf_[s];
    // Initializers the step never rewrites (no update binding) are
    // constants for the step; isState is no guide (an import marks every
    // main-graph initializer).
    if (v->isInitializer() && !updated_[s] &&
        host_[s].byteSize() <= kMirrorLimit) {
      mirror_[s] = host_[s];
      hasMirror_[s] = true;
    }
  }
  // Evaluate on the host every node whose inputs are all known (or which
  // only reads its input's dims: Shape), so shape arithmetic the compiler
  // did not fold is still known before the step.
  for (const Node *n : nodes_) {
    if (notAFunctionOfInputs(*n))
      continue;
    bool known = true,
         shapeOnly = n->domain().empty() && n->opType() == "Shape";
    for (const Value *in : n->inputs())
      if (in && !shapeOnly && !hasMirror_[slotOf(in)])
        known = false;
    size_t bytes = 0;
    for (const Value *o : n->outputs())
      if (o) {
        const Tensor &t = slots_[slotOf(o)];
        bytes += size_t(std::max<int64_t>(t.numel(), 0)) *
                 (t.dtype == DType::Undefined ? 1 : dtypeSize(t.dtype));
      }
    const CpuKernel *k = findCpuKernel(n->domain(), n->opType());
    if (!known || !k || bytes > kMirrorLimit)
      continue;
    std::vector<Tensor> outs(n->numOutputs());
    KernelContext ctx{*n, {}, {}, 0, {}};
    for (const Value *in : n->inputs())
      ctx.inputs.push_back(
          in ? (shapeOnly ? &slots_[slotOf(in)] : &mirror_[slotOf(in)])
             : nullptr);
    for (size_t i = 0; i < outs.size(); ++i)
      ctx.outputs.push_back(n->output(i) ? &outs[i] : nullptr);
    try {
      (*k)(ctx);
    } catch (const Error &) {
      continue; // the device kernel will report it with the step's data
    }
    for (size_t i = 0; i < outs.size(); ++i) {
      const Value *o = n->output(i);
      if (!o)
        continue;
      size_t s = slotOf(o);
      // A mirror the plan disagrees with would be a wrong shape: no mirror.
      if (outs[i].dtype != slots_[s].dtype || outs[i].dims != slots_[s].dims)
        continue;
      mirror_[s] = std::move(outs[i]);
      hasMirror_[s] = true;
    }
  }
}

void Executor::makeResidentPlan() {
  std::vector<std::pair<DType, std::vector<int64_t>>> inputs;
  std::vector<std::vector<int64_t>> inputDims;
  for (size_t i = 0; i < graph_.inputs().size(); ++i) {
    const Value *v = graph_.inputs()[i];
    const Tensor &t = host_[slotOf(v)];
    if (t.dtype == DType::Undefined)
      throw Error("input '" + v->name() + "' of graph '" + graph_.name() +
                  "' is not set");
    inputDims.push_back(t.dims);
    inputs.emplace_back(t.dtype, t.dims);
  }
  std::unique_ptr<Graph> g;
  std::string why;
  std::unique_ptr<MemoryPlan> plan = planFor(inputs, g, &why);
  if (!plan)
    throw Error("the device-resident step needs every shape known before "
                "it runs, and shape inference failed: " +
                why);

  // Every value gets static dims and a place; anything else is refused
  // here, naming where it comes from.
  std::vector<SlotPlan> slotPlan(slots_.size());
  std::vector<Tensor> bound(slots_.size());
  for (size_t s = 0; s < slots_.size(); ++s) {
    const Value *mine = g->findValue(valueOf_[s]->name());
    bool used = !valueOf_[s]->uses().empty() || valueOf_[s]->producer() ||
                valueOf_[s]->isGraphOutput();
    if (!used && !persistent_[s])
      continue;
    const ValuePlacement *p = mine ? plan->find(mine) : nullptr;
    std::optional<std::vector<int64_t>> dims =
        mine ? concreteDims(mine->dims) : std::nullopt;
    if (persistent_[s] && !p && valueOf_[s]->uses().empty() &&
        !valueOf_[s]->isGraphOutput())
      continue; // an unused initializer or input: nothing reads it
    if (!p || !dims || mine->dtype == DType::Undefined)
      throw Error(whereIs(s) +
                  ": its shape is not known before the step (it depends on "
                  "data), so it has no place in the device-resident arena "
                  "(mpc-run --cuda-resident=off runs the step node by node)");
    size_t bytes = size_t(std::max<int64_t>(elementCount(*dims), 0)) *
                   dtypeSize(mine->dtype);
    if (bytes != p->bytes ||
        (persistent_[s] && host_[s].byteSize() != p->bytes))
      throw Error(whereIs(s) + ": " + dtypeName(mine->dtype) + "[" +
                  dimsToString(*dims) + "] does not match its planned " +
                  std::to_string(p->bytes) + " bytes");
    slotPlan[s] = {true, p->offset, p->bytes, p->buffer, true};
    bound[s].dtype = mine->dtype;
    bound[s].dims = *dims;
  }
  for (size_t s = 0; s < slots_.size(); ++s)
    if (persistent_[s] && slotPlan[s].planned)
      bound[s].dims = host_[s].dims; // equal in count; keep the host's form

  // The update binding, applied on the device after the last node: copies
  // from each new value's place to its state's, unless planned in place.
  std::vector<DeviceCopy> copies;
  for (const auto &b : options_.updateBinding) {
    const Value *st = graph_.findValue(b.first),
                *nv = graph_.findValue(b.second);
    if (!st || !nv || !hasSlot(st) || !hasSlot(nv))
      throw Error("update binding '" + b.first + "' := '" + b.second +
                  "' names a value graph '" + graph_.name() + "' lacks");
    const SlotPlan &d = slotPlan[slotOf(st)], &sp = slotPlan[slotOf(nv)];
    if (!d.planned || !sp.planned || d.bytes != sp.bytes)
      throw Error("update binding '" + b.first + "' := '" + b.second +
                  "': the new value does not fit the state's planned place");
    if (d.offset != sp.offset && d.bytes)
      copies.push_back({d.offset, sp.offset, d.bytes});
  }
  for (const DeviceCopy &c : copies)
    for (const DeviceCopy &o : copies)
      if (&c != &o && c.src < o.dst + o.bytes && o.dst < c.src + c.bytes)
        throw Error("the update binding reads a state that it also rewrites "
                    "(arena bytes " +
                    std::to_string(c.src) +
                    "); the device-resident step applies updates in place "
                    "and cannot order them");

  // Mirrors need the bound dims (Shape reads them), then the backend says
  // whether each node can run on device data with these mirrors.
  for (size_t s = 0; s < slots_.size(); ++s)
    if (slotPlan[s].planned) {
      slots_[s] = Tensor();
      slots_[s].dtype = bound[s].dtype;
      slots_[s].dims = bound[s].dims;
    }
  computeMirrors();
  for (const Node *n : nodes_) {
    std::vector<bool> known;
    for (const Value *in : n->inputs())
      known.push_back(in && hasMirror_[slotOf(in)]);
    std::string no;
    if (!backend_.supportsResident(*n, known, no))
      throw Error(describeNode(*n) + ": the " + backend_.name() +
                  " backend cannot run it in the device-resident step: " + no +
                  " (mpc-run --cuda-resident=off runs the step node by node)");
  }

  // The arena, once per plan; every persistent value is uploaded into it
  // by the next run.
  if (deviceArena_) {
    backend_.freeArena(deviceArena_);
    deviceArena_ = nullptr;
  }
  deviceArena_ = backend_.allocateArena(plan->arenaBytes);
  if (!deviceArena_ && plan->arenaBytes)
    throw Error("the " + backend_.name() +
                " backend could not allocate the "
                "step's arena of " +
                formatByteSize(plan->arenaBytes));
  ++arenaAllocations_;
  for (size_t s = 0; s < slots_.size(); ++s) {
    if (!slotPlan[s].planned)
      continue;
    slots_[s].bytes =
        ByteBuffer::view(deviceArena_ + slotPlan[s].offset, slotPlan[s].bytes);
    if (persistent_[s]) {
      if (!hostValid_[s] && !dirty_[s])
        throw Error("internal error: " + whereIs(s) +
                    " has no host copy to upload into the new arena");
      dirty_[s] = true;
    } else {
      hostValid_[s] = false;
    }
  }
  recordInPlace(*plan);
  updateCopies_ = std::move(copies);
  slotPlan_ = std::move(slotPlan);
  plannedInputDims_ = std::move(inputDims);
  plan_ = std::move(plan);
  planned_ = std::move(g);
  // Unique across executors: a backend serving two of them must never
  // replay one's recording for the other.
  static std::atomic<uint64_t> nextPlanId{1};
  planId_ = nextPlanId++;
}

void Executor::runResident(uint64_t seed) {
  if (hook_)
    throw Error("node hooks read every output on the host; the " +
                backend_.name() + " backend keeps the step on the device");
  // State the last run rewrote on the device: a download before any
  // re-plan, so that the new arena starts from it.
  if (!residentPlanIsCurrent()) {
    if (plan_)
      for (size_t s = 0; s < slots_.size(); ++s)
        if (persistent_[s] && slotPlan_[s].planned && !dirty_[s]) {
          // A fetched state's host copy is the last collected run's: the
          // runs in flight have changed it since.
          if (fetched_[s] && !pending_.empty())
            hostValid_[s] = false;
          hostCopy(s);
        }
    makeResidentPlan();
  }
  for (size_t s = 0; s < slots_.size(); ++s)
    if (persistent_[s] && dirty_[s] && slotPlan_[s].planned) {
      if (host_[s].byteSize() != slotPlan_[s].bytes)
        throw Error(whereIs(s) + ": " + std::to_string(host_[s].byteSize()) +
                    " bytes do not fit its planned " +
                    std::to_string(slotPlan_[s].bytes));
      if (slotPlan_[s].bytes)
        backend_.copyToDevice(deviceArena_ + slotPlan_[s].offset,
                              host_[s].bytes.data(), slotPlan_[s].bytes);
      dirty_[s] = false;
    }
  // The values the run rewrites are the device's from now on, but for the
  // fetched ones: their host copies stay the last collected run's until
  // collect() installs this run's.
  for (size_t s = 0; s < slots_.size(); ++s)
    if ((!persistent_[s] || updated_[s]) && !fetched_[s])
      hostValid_[s] = false;

  Backend::StepInfo info;
  info.seed = seed;
  info.planId = planId_;
  if (!backend_.beginStep(info)) {
    try {
      std::vector<Tensor> expected(1);
      for (size_t index = 0; index < nodes_.size(); ++index) {
        const Node &n = *nodes_[index];
        KernelContext ctx{n, {}, {}, seed, inPlace_[index]};
        ctx.resident = true;
        ctx.collective = options_.collective;
        for (const Value *in : n.inputs()) {
          if (!in) {
            ctx.inputs.push_back(nullptr);
            ctx.deviceInputs.push_back(nullptr);
            ctx.hostKnown.push_back(false);
            continue;
          }
          size_t s = slotOf(in);
          ctx.inputs.push_back(hasMirror_[s] ? &mirror_[s] : &slots_[s]);
          ctx.deviceInputs.push_back(slots_[s].bytes.data());
          ctx.hostKnown.push_back(hasMirror_[s]);
        }
        for (const Value *o : n.outputs())
          ctx.outputs.push_back(o ? &slots_[slotOf(o)] : nullptr);
        backend_.run(ctx);
        // A kernel must leave its outputs where and as the plan put them.
        for (const Value *o : n.outputs()) {
          if (!o)
            continue;
          size_t s = slotOf(o);
          const Tensor &t = slots_[s];
          const SlotPlan &p = slotPlan_[s];
          if (!t.bytes.isView() || t.bytes.data() != deviceArena_ + p.offset ||
              t.byteSize() != p.bytes)
            throw Error(describeNode(n) + ": output '" + o->name() +
                        "' left its planned place in the device arena");
        }
      }
      for (const DeviceCopy &c : updateCopies_)
        backend_.copyOnDevice(deviceArena_ + c.dst, deviceArena_ + c.src,
                              c.bytes);
    } catch (...) {
      backend_.abortStep(); // drops a recording the failure interrupted
      throw;
    }
  }
  backend_.endStep();
  submitFetches();
  peakBytes_ = plan_->livePeakBytes;
  fallbackPeak_ = 0;
  outside_.clear();
}

void Executor::submitFetches() {
  // Each run downloads into tensors of its own, so a run in flight and the
  // one launched after it never share a destination.
  PendingRun &run = pending_.emplace_back();
  run.values.resize(fetchSlots_.size());
  for (size_t k = 0; k < fetchSlots_.size(); ++k) {
    size_t s = fetchSlots_[k];
    Tensor &h = run.values[k];
    h.allocate(slots_[s].dtype, slots_[s].dims, /*zero=*/false);
    if (h.byteSize())
      backend_.copyToHost(h.bytes.data(), slots_[s].bytes.data(), h.byteSize());
  }
  try {
    run.ticket = backend_.submitStep();
  } catch (...) {
    pending_.pop_back(); // the step failed: nothing of it to collect
    throw;
  }
}

const Tensor &Executor::hostCopy(size_t s) const {
  if (!plan_ || hostValid_[s] || (persistent_[s] && dirty_[s]) ||
      !slotPlan_[s].planned)
    return host_[s];
  Tensor &h = host_[s];
  h = Tensor();
  h.allocate(slots_[s].dtype, slots_[s].dims, /*zero=*/false);
  if (h.byteSize())
    backend_.copyToHost(h.bytes.data(), slots_[s].bytes.data(), h.byteSize());
  backend_.synchronize();
  hostValid_[s] = true;
  return h;
}

} // namespace mpc
