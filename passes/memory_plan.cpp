// Memory plan: classification, lifetimes, in-place writes, offsets.
#include "passes/memory_plan.h"

#include "ir/mpc_ops.h"
#include "ir/step_metadata.h"
#include "passes/lifetime_offsets.h"
#include "passes/pass.h"
#include "support/diagnostics.h"

#include <algorithm>
#include <iterator>
#include <string_view>

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

/// A comma-separated metadata list (empty when the key is absent), as views
/// of the metadata's string (splitList's items, without a copy of each).
std::vector<std::string_view> metaList(const Model &m, ValueListKey key) {
  std::vector<std::string_view> items;
  const std::string *s = m.meta(std::string(key.name));
  if (!s)
    return items;
  std::string_view list = *s;
  for (size_t start = 0; start <= list.size();) {
    size_t end = list.find(',', start);
    if (end == std::string_view::npos)
      end = list.size();
    if (end > start)
      items.push_back(list.substr(start, end - start));
    start = end + 1;
  }
  return items;
}

size_t alignUp(size_t n, size_t a) { return (n + a - 1) / a * a; }

/// The planner's error for a value of another graph (out of line: the
/// check runs on every value the planner reads).
[[noreturn]] void throwForeignValue(const Value &v, const Graph &g) {
  throw Error("plan-memory: value '" + v.name() +
              "' belongs to another graph than '" + g.name() + "'");
}

/// `s` is `literal` (compared as views: the size first, inline, where
/// comparing a std::string with a char pointer calls compare()).
bool is(const std::string &s, std::string_view literal) {
  return std::string_view(s) == literal;
}

/// `op` is one of `ops` (short lists: a few length checks and compares, no
/// hashing; the planner asks this of every node).
bool isOneOf(const std::string &op,
             std::initializer_list<std::string_view> ops) {
  for (std::string_view o : ops)
    if (op == o)
      return true;
  return false;
}

/// What the planner needs to know of a node's op, worked out once per node
/// (each node is asked several questions, and op names are strings).
enum class OpKind : uint8_t {
  Other,
  /// CPU and GPU kernels read element i of an input of the output's shape
  /// before writing element i of the output, so the output may take that
  /// input's bytes: elementwise ops; Softmax / LogSoftmax and their
  /// gradients, whose kernels read a whole row (max, sum) before writing any
  /// of it, then write element i after reading it, rows never overlapping
  /// (the fp32 island's Cast up dies into its Softmax, the gradient's into
  /// SoftmaxGrad; SoftmaxGradAs over its Y and SoftmaxGradDiv over its dY,
  /// the dtype checked below);
  /// ReluGrad and AddTo, whose kernels read each block before writing it.
  InPlaceElementwise,
  /// The output is the input's bytes under other dims: it shares the
  /// input's buffer even while the input stays live (neither is written
  /// again), so a Reshape costs no copy.
  Alias,
  Cast,
  Sgd,  ///< mpc.SGD: writes over its state operands
  Adam, ///< mpc.Adam: writes over its state operands
  UnscaleGradients,
  ClipGradNorm,
};

OpKind opKind(const Node &n) {
  const std::string &op = n.opType();
  if (n.domain().empty()) {
    if (is(op, "Cast"))
      return OpKind::Cast;
    if (isOneOf(op, {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity"}))
      return OpKind::Alias;
    if (isOneOf(op, {"Add", "Sub", "Mul", "Div", "Neg", "Abs", "Relu", "Exp",
                     "Sqrt", "Tanh", "Erf", "Log", "Sigmoid", "Softmax",
                     "LogSoftmax"}))
      return OpKind::InPlaceElementwise;
    return OpKind::Other;
  }
  if (!is(n.domain(), "mpc"))
    return OpKind::Other;
  if (is(op, "SGD"))
    return OpKind::Sgd;
  if (is(op, "Adam"))
    return OpKind::Adam;
  if (is(op, "UnscaleGradients"))
    return OpKind::UnscaleGradients;
  if (is(op, "ClipGradNorm"))
    return OpKind::ClipGradNorm;
  if (isOneOf(op, {"SoftmaxGrad", "LogSoftmaxGrad", "SoftmaxGradAs",
                   "SoftmaxGradDiv", "ReluGrad", "AddTo"}))
    return OpKind::InPlaceElementwise;
  return OpKind::Other;
}

/// (output, input) pairs an optimizer update writes over its state operand.
struct StateUpdatePairs {
  const std::pair<size_t, size_t> *begin = nullptr, *end = nullptr;
};
StateUpdatePairs stateUpdatePairs(OpKind kind) {
  static constexpr std::pair<size_t, size_t> sgd[] = {{0, 2}, {1, 4}};
  static constexpr std::pair<size_t, size_t> adam[] = {{0, 2}, {1, 4}, {2, 5}};
  if (kind == OpKind::Sgd)
    return {std::begin(sgd), std::end(sgd)};
  if (kind == OpKind::Adam)
    return {std::begin(adam), std::end(adam)};
  return {};
}

/// Transient values written in place over one another. Its members are the
/// placed values whose `buffer` is its index (in node order).
struct Buffer {
  size_t bytes = 0;
  int64_t first = 0, last = 0;
  size_t offset = 0;
};

} // namespace

bool valueByteSize(const Value &v, size_t &bytes) {
  if (v.dtype == DType::Undefined || !v.hasShape)
    return false;
  // elementCount(*concreteDims(v.dims)) without building the vector: the
  // planner sizes every value of the step.
  int64_t n = 1;
  for (const Dim &d : v.dims) {
    if (!d.isKnown())
      return false;
    // Overflow past int64 (both factors are >= 0): the multiply's own
    // check, not a division per dim.
    if (__builtin_mul_overflow(n, d.value, &n))
      return false;
  }
  // Bytes past int64 are no size either: every caller may hold them in an
  // int64.
  int64_t b;
  if (__builtin_mul_overflow(n, int64_t(dtypeSize(v.dtype)), &b))
    return false;
  bytes = size_t(b);
  return true;
}

PlanInputs planInputsFor(const Model &model, const Graph &graph) {
  PlanInputs in;
  in.graph = &graph;
  if (const std::string *s = readMeta(model, meta::kLoss))
    in.loss = *s;
  in.params = metaList(model, meta::kParams);
  in.grads = metaList(model, meta::kGrads);
  in.optimizerState = metaList(model, meta::kOptimizerState);
  in.gradBuffers = metaList(model, meta::kGradAccumBuffers);
  for (ValueKey key : {meta::kLossScale, meta::kGrowthTracker, meta::kStep})
    if (const std::string *s = readMeta(model, key))
      in.scalerState.push_back(*s);
  for (auto &[master, copy] : readMetaPairs(model, meta::kWeightCopies))
    in.weightCopies.push_back(std::move(copy));
  // The step (the algorithm or its runnable copy), not the main graph.
  if (model.training && &graph != model.graph.get())
    in.updateBinding = &model.training->updateBinding;
  return in;
}

MemoryPlan planMemory(const PlanInputs &in) {
  const Graph &g = *in.graph;
  MemoryPlan plan;
  plan.alignment = std::max<size_t>(in.alignment, 1);
  std::vector<const Node *> nodes;
  nodes.reserve(g.nodes().size());
  for (const auto &n : g.nodes())
    nodes.push_back(n.get());
  const int64_t numNodes = int64_t(nodes.size());
  std::vector<OpKind> kinds(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i)
    kinds[i] = opKind(*nodes[i]);
  const int64_t end = std::max<int64_t>(numNodes - 1, 0);

  // Side tables are indexed by Value::id(): every value the nodes read or
  // write is one of g's own in a graph that verify accepts (so its names are
  // unique, and a name the inputs give is looked up once, not per value).
  const size_t numIds = g.numValueIds();
  auto id = [&](const Value *v) {
    if (v->owner() != &g)
      throwForeignValue(*v, g);
    return v->id();
  };
  enum : uint8_t {
    kParam = 1,
    kOptState = 2,
    kGradBuffer = 4,
    kScaler = 8,
    kWeightCopy = 16
  };
  // Names are looked up through one string (findValue takes a std::string;
  // the names are views).
  std::string nameScratch;
  auto findNamed = [&](std::string_view name) {
    nameScratch.assign(name.data(), name.size());
    return g.findValue(nameScratch);
  };
  std::vector<uint8_t> named(numIds, 0);
  auto markNamed = [&](const std::vector<std::string_view> &names,
                       uint8_t bit) {
    for (std::string_view name : names)
      if (const Value *v = findNamed(name); v && v->owner() == &g)
        named[v->id()] |= bit;
  };
  markNamed(in.params, kParam);
  markNamed(in.optimizerState, kOptState);
  markNamed(in.gradBuffers, kGradBuffer);
  markNamed(in.scalerState, kScaler);
  for (const std::string &name : in.weightCopies)
    if (const Value *v = g.findValue(name); v && v->owner() == &g)
      named[v->id()] |= kWeightCopy;

  // Placements in the order they are made (the map is filled from them at
  // the end, only when the caller wants it), and where each value's is.
  // The tables indexed by value id hold 32-bit indices and node positions:
  // there is one entry per id ever made (removed values included, about
  // twice the live ones on a 64-layer step), and half-width entries touch
  // half the fresh pages. A step has far fewer than 2^31 nodes or values.
  constexpr uint32_t kNone = uint32_t(-1);
  std::vector<std::pair<const Value *, ValuePlacement>> placed;
  std::vector<uint32_t> placementOf(numIds, kNone);
  auto record = [&](const Value *v, const ValuePlacement &p) {
    uint32_t &at = placementOf[id(v)];
    if (at == kNone) {
      at = uint32_t(placed.size());
      placed.push_back({v, p});
    } else {
      placed[at].second = p;
    }
  };
  auto findPlaced = [&](const Value *v) -> const ValuePlacement * {
    uint32_t at = placementOf[id(v)];
    return at == kNone ? nullptr : &placed[at].second;
  };

  // --- liveness --------------------------------------------------------------
  // -1: not made by a node of the graph (state, inputs, constants).
  std::vector<int32_t> firstOf(numIds, -1), lastOf(numIds, -1);
  std::vector<int32_t> lastRead(numIds, -1); // any value, state too
  auto madeHere = [&](const Value *v) { return firstOf[id(v)] >= 0; };
  int64_t lossIndex = -1;
  size_t outputsMade = 0;
  for (int64_t i = 0; i < numNodes; ++i) {
    for (const Value *o : nodes[i]->outputs())
      if (o) {
        ++outputsMade;
        firstOf[id(o)] = int32_t(i);
        lastOf[id(o)] = int32_t(i); // unused outputs die where they are made
        if (o->name() == in.loss)
          lossIndex = i;
      }
    for (const Value *v : nodes[i]->inputs())
      if (v) {
        lastRead[id(v)] = int32_t(i);
        if (madeHere(v))
          lastOf[id(v)] = std::max(lastOf[id(v)], int32_t(i));
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
      lastOf[id(o)] = int32_t(end);
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
  for (std::string_view name : in.grads)
    if (const Value *v = findNamed(name))
      addGradient(v);
  for (size_t ni = 0; ni < nodes.size(); ++ni) {
    const Node *n = nodes[ni];
    bool unscale = kinds[ni] == OpKind::UnscaleGradients;
    bool clip = kinds[ni] == OpKind::ClipGradNorm;
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
  // Walk up through Casts (the list grows as it is walked). A value's
  // producer is the node that made it here, whose kind is known by index.
  auto madeByCast = [&](const Value *v) {
    const Node *p = v->producer();
    if (!p)
      return false;
    int64_t at = firstOf[id(v)];
    OpKind kind =
        at >= 0 && nodes[size_t(at)] == p ? kinds[size_t(at)] : opKind(*p);
    return kind == OpKind::Cast && p->input(0);
  };
  for (size_t k = 0; k < gradients.size(); ++k)
    if (madeByCast(gradients[k])) {
      const Value *x = gradients[k]->producer()->input(0);
      if (madeHere(x))
        addGradient(x);
    }

  // A sharded master gathered whole for the step (--shard-optimizer's
  // mpc.AllGather of parameter chunks): a working copy, as its casts are.
  auto gatheredMaster = [&](const Value *v) {
    const Node *p = v->producer();
    if (!p || !isMpcDomain(p->domain()) || p->opType() != "AllGather")
      return false;
    for (size_t k = 0; k < p->numOutputs() && k < p->numInputs(); ++k)
      if (p->output(k) == v) {
        const Value *x = p->input(k);
        // The master's chunk, or its 16-bit cast (gathered in that type).
        if (x && x->producer() && x->producer()->opType() == "Cast" &&
            x->producer()->domain().empty())
          x = x->producer()->input(0);
        return x && x->owner() == &g && (named[x->id()] & kParam);
      }
    return false;
  };
  auto classify = [&](const Value *v) {
    if (v->isGraphInput())
      return MemoryClass::Inputs;
    if (v->isInitializer()) {
      uint8_t bits = named[id(v)];
      if (bits & kParam)
        return MemoryClass::Parameters;
      if (bits & (kOptState | kScaler))
        return MemoryClass::OptimizerState;
      if (bits & kGradBuffer)
        return MemoryClass::Gradients;
      if (bits & kWeightCopy)
        return MemoryClass::WorkingCopies;
      return MemoryClass::OtherState;
    }
    if (isGradient[id(v)])
      return MemoryClass::Gradients;
    if (gatheredMaster(v))
      return MemoryClass::WorkingCopies;
    if (madeByCast(v)) {
      const Value *x = v->producer()->input(0);
      if ((x->owner() == &g && (named[x->id()] & kParam)) || gatheredMaster(x))
        return MemoryClass::WorkingCopies;
    }
    if (lossIndex >= 0 && firstOf[id(v)] <= lossIndex &&
        lastOf[id(v)] > lossIndex)
      return MemoryClass::Activations;
    return MemoryClass::Temporaries;
  };

  // --- persistent values: the arena's front ----------------------------------
  // Every value placed is a graph input, an initializer or a node output:
  // room for all of them at once, not grown by doubling (a 64-layer step
  // places 15,701, 56 bytes each).
  placed.reserve(g.inputs().size() + g.initializers().size() + outputsMade);
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
    record(v, p);
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
  buffers.reserve(outputsMade); // at most one a node output
  std::vector<uint32_t> bufferOf(numIds, kNone);
  // New value -> the state it is bound to (the last binding of a name wins).
  std::vector<const Value *> boundState(numIds, nullptr);
  if (in.updateBinding)
    for (const auto &kv : *in.updateBinding)
      if (const Value *v = g.findValue(kv.second); v && v->owner() == &g)
        boundState[v->id()] = g.findValue(kv.first);
  std::vector<const Value *> taken; // inputs given away at the current node
  for (int64_t i = 0; i < numNodes; ++i) {
    const Node &n = *nodes[i];
    taken.clear();
    auto isTaken = [&](const Value *v) {
      return std::find(taken.begin(), taken.end(), v) != taken.end();
    };
    const StateUpdatePairs updates =
        in.inPlace ? stateUpdatePairs(kinds[i]) : StateUpdatePairs{};
    const bool alias = kinds[i] == OpKind::Alias;
    const bool overInput =
        in.inPlace && (alias || kinds[i] == OpKind::InPlaceElementwise);
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
      for (auto u = updates.begin; u != updates.end; ++u) {
        auto [out, inIdx] = *u;
        const Value *s = n.input(inIdx);
        const ValuePlacement *state = s ? findPlaced(s) : nullptr;
        if (out != oi || !s || isTaken(s) || boundState[id(o)] != s || !state ||
            !state->persistent || state->bytes != bytes)
          continue;
        // Every other reader of the state must have run already.
        if (lastRead[id(s)] != i || isOutput[id(s)])
          continue;
        p.offset = state->offset;
        p.persistent = true;
        record(o, p);
        plan.inPlace.push_back({size_t(i), oi, inIdx});
        taken.push_back(s);
        placed = true;
        break;
      }
      // A weight copy's new value (the update's own output or a Cast of the
      // new master), over the copy once every reader of it has run. Only
      // copies: a step the scaler skips leaves them as they were (so a
      // re-run of it, mpc-run --debug-overflow, reads the same state), which
      // a gradient-accumulation buffer's Where would not.
      if (!placed && in.inPlace)
        if (const Value *s = boundState[id(o)];
            s && s->owner() == &g && (named[s->id()] & kWeightCopy)) {
          const ValuePlacement *state = findPlaced(s);
          bool reads = false;
          for (const Value *x : n.inputs())
            reads |= x == s;
          if (state && state->persistent && state->bytes == bytes && !reads &&
              !isTaken(s) && !isOutput[id(s)] && (lastRead[id(s)] < i)) {
            p.offset = state->offset;
            p.persistent = true;
            record(o, p);
            taken.push_back(s);
            placed = true;
          }
        }
      if (placed)
        continue;
      // An elementwise output over an input that dies here (with every
      // other value in its bytes), or a reshape sharing its input's bytes.
      if (overInput && oi == 0)
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
          bufferOf[id(o)] = bufferOf[id(x)];
          p.buffer = bufferOf[id(x)];
          record(o, p);
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
      bufferOf[id(o)] = uint32_t(buffers.size());
      p.buffer = buffers.size();
      buffers.push_back(b);
      record(o, p);
    }
  }

  // --- offsets: greedy by size, lowest gap among overlapping lifetimes
  // --------
  // Largest first, in node order among equal sizes: a stable sort by size,
  // done as a plain sort of (size, index) pairs, which are all distinct.
  struct BySize {
    size_t bytes, index;
  };
  std::vector<BySize> order(buffers.size());
  for (size_t bi = 0; bi < buffers.size(); ++bi)
    order[bi] = {buffers[bi].bytes, bi};
  std::sort(order.begin(), order.end(), [](const BySize &a, const BySize &b) {
    return a.bytes != b.bytes ? a.bytes > b.bytes : a.index < b.index;
  });
  LifetimeOffsets offsets(numNodes);
  size_t transientEnd = 0;
  for (const BySize &entry : order) {
    Buffer &b = buffers[entry.index];
    b.offset = offsets.lowestFit(b.first, b.last, b.bytes, plan.alignment);
    // Recorded up to the next aligned offset: every offset is aligned, so
    // that blocks exactly what the buffer's own bytes block, and buffers
    // side by side merge into one span instead of leaving gaps a query
    // walks one by one (100,000 small buffers live at once: quadratic).
    offsets.place(b.first, b.last, b.offset, alignUp(b.bytes, plan.alignment));
    transientEnd = std::max(transientEnd, b.offset + b.bytes);
  }
  plan.numBuffers = buffers.size();
  for (auto &[v, p] : placed)
    if (p.buffer != ValuePlacement::kNoBuffer)
      p.offset = plan.persistentBytes + buffers[p.buffer].offset;
  plan.arenaBytes =
      plan.persistentBytes + alignUp(transientEnd, plan.alignment);

  // --- live bytes over the step, and by class at the peak
  // ---------------------
  size_t persistentLive = 0;
  ClassBytes persistentByClass{};
  for (const auto &[v, p] : placed) {
    plan.noReuseBytes += p.bytes;
    plan.total[size_t(p.cls)] += p.bytes;
    bool aliasOfState = p.persistent && madeHere(v);
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
  // Saved for the backward: forward-made buffers read after the loss node.
  if (lossIndex >= 0) {
    std::vector<char> saved(buffers.size(), 0);
    for (const auto &[v, p] : placed)
      if (p.buffer != ValuePlacement::kNoBuffer && !saved[p.buffer] &&
          firstOf[id(v)] <= lossIndex && lastRead[id(v)] > lossIndex) {
        saved[p.buffer] = 1;
        plan.savedForBackward[size_t(p.cls)] += buffers[p.buffer].bytes;
      }
  }
  // The residents at the peak: each buffer live there, by the member that
  // occupies it (the latest one made by then), and the state. Only the ten
  // largest are named, so the names are copied for those alone.
  struct Candidate {
    const Value *value;
    MemoryClass cls;
    size_t bytes;
  };
  std::vector<Candidate> residents;
  if (plan.livePeakNode >= 0) {
    std::vector<const Value *> occupant(buffers.size(), nullptr);
    for (const auto &[v, p] : placed)
      if (p.buffer != ValuePlacement::kNoBuffer &&
          (!occupant[p.buffer] || firstOf[id(v)] <= plan.livePeakNode))
        occupant[p.buffer] = v;
    for (size_t bi = 0; bi < buffers.size(); ++bi) {
      const Buffer &b = buffers[bi];
      if (b.first > plan.livePeakNode || b.last < plan.livePeakNode)
        continue;
      MemoryClass cls = findPlaced(occupant[bi])->cls;
      plan.atPeak[size_t(cls)] += b.bytes;
      residents.push_back({occupant[bi], cls, b.bytes});
    }
  }
  for (const auto &[v, p] : placed)
    if (p.persistent && !madeHere(v))
      residents.push_back({v, p.cls, p.bytes});
  // Sizes then names: value names are unique, so the order is total and the
  // ten are the same whichever way they are picked.
  size_t named10 = std::min<size_t>(residents.size(), 10);
  std::partial_sort(residents.begin(), residents.begin() + named10,
                    residents.end(),
                    [](const Candidate &a, const Candidate &b) {
                      return a.bytes != b.bytes
                                 ? a.bytes > b.bytes
                                 : a.value->name() < b.value->name();
                    });
  for (size_t k = 0; k < named10; ++k)
    plan.largestAtPeak.push_back(
        {residents[k].value->name(), residents[k].cls, residents[k].bytes});

  if (in.keepPlacements) {
    plan.placement.reserve(placed.size());
    for (const auto &[v, p] : placed)
      plan.placement[v] = p;
  }
  return plan;
}

} // namespace mpc
