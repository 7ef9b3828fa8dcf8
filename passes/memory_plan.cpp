// Memory plan: classification, lifetimes, in-place writes, offsets.
#include "passes/memory_plan.h"

#include "passes/lifetime_offsets.h"
#include "passes/pass.h"
#include "passes/support/diagnostics.h"

#include <algorithm>
#include <numeric>
#include <sstream>
#include <unordered_set>

namespace mpc {

const char *memoryClassName(MemoryClass c) {
  switch (c) {
  case MemoryClass::Parameters:
    return "parameters";
  case MemoryClass::WorkingCopies:
    return "working_copies";
  case MemoryClass::Gradients:
    return "gradients";
  case MemoryClass::OptimizerState:
    return "optimizer_state";
  case MemoryClass::OtherState:
    return "other_state";
  case MemoryClass::Inputs:
    return "inputs";
  case MemoryClass::Activations:
    return "activations";
  case MemoryClass::Temporaries:
  case MemoryClass::Count:
    break;
  }
  return "temporaries";
}

namespace {

/// A comma-separated metadata list (empty when the key is absent).
std::vector<std::string> metaList(const Model &m, const char *key) {
  const std::string *s = m.meta(key);
  return s && !s->empty() ? splitList(*s, ',') : std::vector<std::string>{};
}

size_t alignUp(size_t n, size_t a) { return (n + a - 1) / a * a; }

/// Ops whose CPU and GPU kernels read element i of an input of the output's
/// shape before writing element i of the output, so the output may take that
/// input's bytes: elementwise ops; Softmax / LogSoftmax and their gradients,
/// whose kernels read a whole row (max, sum) before writing any of it, then
/// write element i after reading it, rows never overlapping (the fp32
/// island's Cast up dies into its Softmax, the gradient's into SoftmaxGrad);
/// ReluGrad, whose kernels read each block before writing it.
bool isInPlaceElementwise(const Node &n) {
  static const std::unordered_set<std::string> ops = {
      "Add",  "Sub",  "Mul", "Div", "Neg",     "Abs",     "Relu",       "Exp",
      "Sqrt", "Tanh", "Erf", "Log", "Sigmoid", "Softmax", "LogSoftmax",
  };
  static const std::unordered_set<std::string> mpcOps = {
      "SoftmaxGrad", "LogSoftmaxGrad", "ReluGrad"};
  if (n.domain() == "mpc")
    return mpcOps.count(n.opType()) > 0;
  return n.domain().empty() && ops.count(n.opType());
}

/// Ops whose output is the input's bytes under other dims: the output shares
/// the input's buffer even while the input stays live (neither is written
/// again), so a Reshape costs no copy.
bool isAlias(const Node &n) {
  static const std::unordered_set<std::string> ops = {
      "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity"};
  return n.domain().empty() && ops.count(n.opType());
}

/// (output, input) pairs an optimizer update writes over its state operand.
std::vector<std::pair<size_t, size_t>> stateUpdatePairs(const Node &n) {
  if (n.domain() != "mpc")
    return {};
  if (n.opType() == "SGD")
    return {{0, 2}, {1, 4}};
  if (n.opType() == "Adam")
    return {{0, 2}, {1, 4}, {2, 5}};
  return {};
}

struct Buffer {
  size_t bytes = 0;
  int64_t first = 0, last = 0;
  std::vector<const Value *> members; ///< in lifetime order
  size_t offset = 0;
};

} // namespace

bool valueByteSize(const Value &v, size_t &bytes) {
  if (v.dtype == DType::Undefined || !v.hasShape)
    return false;
  auto dims = concreteDims(v.dims);
  if (!dims)
    return false;
  int64_t n = elementCount(*dims);
  if (n < 0)
    return false;
  bytes = size_t(n) * dtypeSize(v.dtype);
  return true;
}

PlanInputs planInputsFor(const Model &model, const Graph &graph) {
  PlanInputs in;
  in.graph = &graph;
  if (const std::string *s = model.meta("mpc.loss"))
    in.loss = *s;
  in.params = metaList(model, "mpc.params");
  in.grads = metaList(model, "mpc.grads");
  in.optimizerState = metaList(model, "mpc.optimizer_state");
  in.gradBuffers = metaList(model, "mpc.grad_accum_buffers");
  for (const char *key : {"mpc.loss_scale", "mpc.growth_tracker", "mpc.step"})
    if (const std::string *s = model.meta(key))
      in.scalerState.push_back(*s);
  // The step (the algorithm or its runnable copy), not the main graph.
  if (model.training && &graph != model.graph.get())
    in.updateBinding = model.training->updateBinding;
  return in;
}

MemoryPlan planMemory(const PlanInputs &in) {
  const Graph &g = *in.graph;
  MemoryPlan plan;
  plan.alignment = std::max<size_t>(in.alignment, 1);
  std::vector<const Node *> nodes;
  for (const auto &n : g.nodes())
    nodes.push_back(n.get());
  const int64_t numNodes = int64_t(nodes.size());
  const int64_t end = std::max<int64_t>(numNodes - 1, 0);

  auto nameSet = [](const std::vector<std::string> &v) {
    return std::unordered_set<std::string>(v.begin(), v.end());
  };
  const auto params = nameSet(in.params), optState = nameSet(in.optimizerState),
             gradBuffers = nameSet(in.gradBuffers),
             scaler = nameSet(in.scalerState);

  // Side tables are indexed by Value::id(): every value the nodes read or
  // write is one of g's own in a graph that verify accepts.
  const size_t numIds = g.numValueIds();
  auto id = [&](const Value *v) {
    if (v->owner() != &g)
      throw Error("plan-memory: value '" + v->name() +
                  "' belongs to another graph than '" + g.name() + "'");
    return v->id();
  };

  plan.placement.reserve(numIds);

  // --- liveness --------------------------------------------------------------
  // -1: not made by a node of the graph (state, inputs, constants).
  std::vector<int64_t> firstOf(numIds, -1), lastOf(numIds, -1);
  std::vector<int64_t> lastRead(numIds, -1); // any value, state too
  auto madeHere = [&](const Value *v) { return firstOf[id(v)] >= 0; };
  int64_t lossIndex = -1;
  for (int64_t i = 0; i < numNodes; ++i) {
    for (const Value *o : nodes[i]->outputs())
      if (o) {
        firstOf[id(o)] = i;
        lastOf[id(o)] = i; // unused outputs die where they are made
        if (o->name() == in.loss)
          lossIndex = i;
      }
    for (const Value *v : nodes[i]->inputs())
      if (v) {
        lastRead[id(v)] = i;
        if (madeHere(v))
          lastOf[id(v)] = std::max(lastOf[id(v)], i);
      }
  }
  // Graph outputs and the extra ones live to the end and are never written
  // over.
  std::vector<char> isOutput(numIds, 0);
  auto markOutput = [&](const Value *o) {
    if (!o)
      return;
    isOutput[id(o)] = 1;
    if (madeHere(o))
      lastOf[id(o)] = end;
  };
  for (const Value *o : g.outputs())
    markOutput(o);
  for (const Value *o : in.extraOutputs)
    markOutput(o);

  // --- gradients: the named ones, what the scaler and clip read and write,
  // and the Casts that feed them -----------------------------------------
  std::vector<char> isGradient(numIds, 0);
  std::vector<const Value *> gradients; // each once
  auto addGradient = [&](const Value *v) {
    if (isGradient[id(v)])
      return false;
    isGradient[id(v)] = 1;
    gradients.push_back(v);
    return true;
  };
  for (const std::string &name : in.grads)
    if (const Value *v = g.findValue(name))
      addGradient(v);
  for (const Node *n : nodes) {
    bool unscale = n->domain() == "mpc" && n->opType() == "UnscaleGradients";
    bool clip = n->domain() == "mpc" && n->opType() == "ClipGradNorm";
    if (!unscale && !clip)
      continue;
    for (size_t i = unscale ? 1 : 0; i < n->numInputs(); ++i)
      if (n->input(i) && madeHere(n->input(i)))
        addGradient(n->input(i));
    size_t outBegin = unscale ? 1 : 0;
    size_t outEnd = clip ? n->numOutputs() - 1 : n->numOutputs();
    for (size_t i = outBegin; i < outEnd; ++i)
      if (n->output(i))
        addGradient(n->output(i));
  }
  // Walk up through Casts (the list grows as it is walked).
  for (size_t k = 0; k < gradients.size(); ++k) {
    const Node *p = gradients[k]->producer();
    if (p && p->opType() == "Cast" && p->domain().empty() && p->input(0) &&
        madeHere(p->input(0)))
      addGradient(p->input(0));
  }

  auto classify = [&](const Value *v) {
    if (v->isGraphInput())
      return MemoryClass::Inputs;
    if (v->isInitializer()) {
      if (params.count(v->name()))
        return MemoryClass::Parameters;
      if (optState.count(v->name()) || scaler.count(v->name()))
        return MemoryClass::OptimizerState;
      if (gradBuffers.count(v->name()))
        return MemoryClass::Gradients;
      return MemoryClass::OtherState;
    }
    if (isGradient[id(v)])
      return MemoryClass::Gradients;
    const Node *p = v->producer();
    if (p && p->opType() == "Cast" && p->domain().empty() && p->input(0) &&
        params.count(p->input(0)->name()))
      return MemoryClass::WorkingCopies;
    if (lossIndex >= 0 && firstOf[id(v)] <= lossIndex &&
        lastOf[id(v)] > lossIndex)
      return MemoryClass::Activations;
    return MemoryClass::Temporaries;
  };

  // --- persistent values: the arena's front ----------------------------------
  size_t offset = 0;
  auto placePersistent = [&](const Value *v) {
    size_t bytes = 0;
    if (!valueByteSize(*v, bytes)) {
      plan.unplanned.push_back(v);
      return;
    }
    ValuePlacement p;
    p.offset = offset;
    p.bytes = bytes;
    p.cls = classify(v);
    p.persistent = true;
    p.first = 0;
    p.last = end;
    plan.placement[v] = p;
    offset = alignUp(offset + bytes, plan.alignment);
  };
  for (const Value *v : g.inputs())
    placePersistent(v);
  for (const Value *v : g.initializers())
    if (!v->isGraphInput())
      placePersistent(v);
  plan.persistentBytes = offset;

  // --- transient values, grouped into buffers by in-place writes -------------
  std::vector<Buffer> buffers;
  constexpr size_t kNone = size_t(-1);
  std::vector<size_t> bufferOf(numIds, kNone);
  std::unordered_map<std::string, std::string> boundState; // new value -> state
  for (const auto &kv : in.updateBinding)
    boundState[kv.second] = kv.first;
  for (int64_t i = 0; i < numNodes; ++i) {
    const Node &n = *nodes[i];
    std::vector<const Value *> taken; // inputs given away at this node
    auto isTaken = [&](const Value *v) {
      return std::find(taken.begin(), taken.end(), v) != taken.end();
    };
    for (size_t oi = 0; oi < n.numOutputs(); ++oi) {
      const Value *o = n.output(oi);
      if (!o)
        continue;
      size_t bytes = 0;
      if (!valueByteSize(*o, bytes)) {
        plan.unplanned.push_back(o);
        continue;
      }
      ValuePlacement p;
      p.bytes = bytes;
      p.cls = classify(o);
      p.first = i;
      p.last = lastOf[id(o)];
      // An optimizer update written over the state it is bound to.
      bool placed = false;
      if (in.inPlace)
        for (auto [out, inIdx] : stateUpdatePairs(n)) {
          const Value *s = n.input(inIdx);
          auto bound = boundState.find(o->name());
          if (out != oi || !s || isTaken(s) || bound == boundState.end() ||
              bound->second != s->name() || !plan.find(s) ||
              !plan.find(s)->persistent || plan.find(s)->bytes != bytes)
            continue;
          // Every other reader of the state must have run already.
          if (lastRead[id(s)] != i || isOutput[id(s)])
            continue;
          p.offset = plan.find(s)->offset;
          p.persistent = true;
          plan.placement[o] = p;
          plan.inPlace.push_back({size_t(i), oi, inIdx});
          taken.push_back(s);
          placed = true;
          break;
        }
      if (placed)
        continue;
      // An elementwise output over an input that dies here (with every
      // other value in its bytes), or a reshape sharing its input's bytes.
      bool alias = isAlias(n);
      if (in.inPlace && (isInPlaceElementwise(n) || alias) && oi == 0)
        for (size_t ii = 0; ii < (alias ? 1 : n.numInputs()) && !placed; ++ii) {
          const Value *x = n.input(ii);
          if (!x || isTaken(x) || bufferOf[id(x)] == kNone ||
              x->dtype != o->dtype || isOutput[id(x)])
            continue;
          Buffer &b = buffers[bufferOf[id(x)]];
          if (b.bytes != bytes)
            continue;
          if (!alias && (x->dims != o->dims || b.last != i))
            continue;
          b.last = std::max(b.last, p.last);
          b.members.push_back(o);
          bufferOf[id(o)] = bufferOf[id(x)];
          plan.placement[o] = p;
          plan.inPlace.push_back({size_t(i), oi, ii});
          taken.push_back(x);
          placed = true;
        }
      if (placed)
        continue;
      Buffer b;
      b.bytes = bytes;
      b.first = p.first;
      b.last = p.last;
      b.members.push_back(o);
      bufferOf[id(o)] = buffers.size();
      buffers.push_back(b);
      plan.placement[o] = p;
    }
  }

  // --- offsets: greedy by size, lowest gap among overlapping lifetimes
  // --------
  std::vector<size_t> order(buffers.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return buffers[a].bytes > buffers[b].bytes;
  });
  LifetimeOffsets placed(numNodes);
  size_t transientEnd = 0;
  for (size_t bi : order) {
    Buffer &b = buffers[bi];
    b.offset = placed.lowestFit(b.first, b.last, b.bytes, plan.alignment);
    placed.place(b.first, b.last, b.offset, b.bytes);
    transientEnd = std::max(transientEnd, b.offset + b.bytes);
  }
  plan.numBuffers = buffers.size();
  for (size_t bi = 0; bi < buffers.size(); ++bi)
    for (const Value *v : buffers[bi].members) {
      plan.placement[v].offset = plan.persistentBytes + buffers[bi].offset;
      plan.placement[v].buffer = bi;
    }
  plan.arenaBytes =
      plan.persistentBytes + alignUp(transientEnd, plan.alignment);

  // --- live bytes over the step, and by class at the peak
  // ---------------------
  size_t persistentLive = 0;
  ClassBytes persistentByClass{};
  for (const auto &kv : plan.placement) {
    const ValuePlacement &p = kv.second;
    plan.noReuseBytes += p.bytes;
    plan.total[size_t(p.cls)] += p.bytes;
    bool aliasOfState = p.persistent && madeHere(kv.first);
    if (p.persistent && !aliasOfState) {
      persistentLive += p.bytes;
      persistentByClass[size_t(p.cls)] += p.bytes;
    }
  }
  std::vector<int64_t> delta(size_t(numNodes) + 1, 0);
  for (const Buffer &b : buffers) {
    delta[size_t(b.first)] += int64_t(b.bytes);
    delta[size_t(b.last) + 1] -= int64_t(b.bytes);
  }
  int64_t live = 0;
  plan.livePeakBytes = persistentLive;
  for (int64_t i = 0; i < numNodes; ++i) {
    live += delta[size_t(i)];
    if (persistentLive + size_t(live) > plan.livePeakBytes ||
        plan.livePeakNode < 0) {
      plan.livePeakBytes = persistentLive + size_t(live);
      plan.livePeakNode = i;
    }
  }
  plan.atPeak = persistentByClass;
  if (plan.livePeakNode >= 0)
    for (const Buffer &b : buffers) {
      if (b.first > plan.livePeakNode || b.last < plan.livePeakNode)
        continue;
      // The member occupying the buffer at the peak (the latest one made).
      const Value *occupant = b.members.front();
      for (const Value *v : b.members)
        if (firstOf[id(v)] <= plan.livePeakNode)
          occupant = v;
      plan.atPeak[size_t(plan.placement.at(occupant).cls)] += b.bytes;
      plan.largestAtPeak.push_back(
          {occupant->name(), plan.placement.at(occupant).cls, b.bytes});
    }
  for (const auto &kv : plan.placement)
    if (kv.second.persistent && !madeHere(kv.first))
      plan.largestAtPeak.push_back(
          {kv.first->name(), kv.second.cls, kv.second.bytes});
  std::stable_sort(
      plan.largestAtPeak.begin(), plan.largestAtPeak.end(),
      [](const MemoryPlan::Resident &a, const MemoryPlan::Resident &b) {
        return a.bytes != b.bytes ? a.bytes > b.bytes : a.name < b.name;
      });
  if (plan.largestAtPeak.size() > 10)
    plan.largestAtPeak.resize(10);
  return plan;
}

} // namespace mpc
