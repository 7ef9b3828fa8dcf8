// verify: structural and type checks of the main graph and the training step.
//
// Checks what every pass must preserve: each graph has an output; every value
// is defined once, by a graph input, an initializer or one node; nodes are in
// topological order (and a violation that is a cycle is reported as one);
// every op is supported with the right number of inputs; types are
// consistent, by running shape inference on a scratch copy (the model itself
// is never changed) and comparing with what values already declare; the
// update bindings pair state with algorithm values of the same type; and the
// mpc.* metadata names existing values. Runs first, and after every pass
// (--verify-each), so it needs nothing before it.
#include "passes/pass.h"
#include "passes/shape_inference.h"
#include "passes/support/diagnostics.h"

#include <unordered_map>
#include <unordered_set>

namespace mpc {
namespace {

std::string where(const Graph &g) { return "graph '" + g.name() + "': "; }

/// What a value's type says (dtype, rank, dims), detached from the value.
struct TypeFacts {
  DType dtype = DType::Undefined;
  bool hasShape = false;
  Dims dims;

  static TypeFacts of(const Value &v) { return {v.dtype, v.hasShape, v.dims}; }
  std::string text() const {
    std::string s = dtypeName(dtype);
    if (hasShape)
      s += "[" + dimsToString(dims) + "]";
    return s;
  }
};

/// Two type facts about one value disagree (both known and different).
bool typesConflict(const TypeFacts &a, const TypeFacts &b) {
  if (a.dtype != DType::Undefined && b.dtype != DType::Undefined &&
      a.dtype != b.dtype)
    return true;
  if (!a.hasShape || !b.hasShape)
    return false;
  if (a.dims.size() != b.dims.size())
    return true;
  for (size_t i = 0; i < a.dims.size(); ++i)
    if (a.dims[i].isKnown() && b.dims[i].isKnown() &&
        a.dims[i].value != b.dims[i].value)
      return true;
  return false;
}

std::vector<std::string> splitNames(const std::string &s) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : s + ",") {
    if (c != ',') {
      cur += c;
      continue;
    }
    if (!cur.empty())
      out.push_back(cur);
    cur.clear();
  }
  return out;
}

/// A node on a cycle of `g`, or nullptr when the nodes can be ordered.
const Node *nodeOnCycle(const Graph &g) {
  // Kahn's algorithm; nodes it cannot reach are on or behind a cycle.
  std::unordered_map<const Node *, int> pending;
  std::vector<const Node *> ready;
  for (const auto &n : g.nodes()) {
    int count = 0;
    for (const Value *in : n->inputs())
      if (in && in->producer() && in->producer()->owner() == &g)
        ++count;
    pending[n.get()] = count;
    if (count == 0)
      ready.push_back(n.get());
  }
  while (!ready.empty()) {
    const Node *n = ready.back();
    ready.pop_back();
    for (const Value *o : n->outputs())
      if (o)
        for (const Use &u : o->uses())
          if (--pending[u.user] == 0)
            ready.push_back(u.user);
  }
  const Node *start = nullptr;
  for (const auto &n : g.nodes())
    if (pending[n.get()] > 0) {
      start = n.get();
      break;
    }
  // Walk back through unordered producers until a node repeats: it is on
  // the cycle (not merely downstream of it).
  std::unordered_set<const Node *> seen;
  const Node *n = start;
  while (n && seen.insert(n).second) {
    const Node *next = nullptr;
    for (const Value *in : n->inputs())
      if (in && in->producer() && pending[in->producer()] > 0) {
        next = in->producer();
        break;
      }
    n = next;
  }
  return n ? n : start;
}

/// Every value is defined once and used only after its definition.
void checkStructure(const Graph &g) {
  std::unordered_set<const Value *> defined;
  auto define = [&](const Value *v, const std::string &what) {
    if (!v)
      error() << where(g) << what << " is missing";
    if (v->owner() != &g)
      error() << where(g) << what << " '" << v->name()
              << "' belongs to another graph";
    if (g.findValue(v->name()) != v)
      error() << where(g) << what << " '" << v->name()
              << "' is not a live value of the graph (removed, or its name "
                 "is taken by another value)";
    if (!defined.insert(v).second)
      error() << where(g) << "value '" << v->name()
              << "' is defined more than once";
  };
  for (const Value *in : g.inputs()) {
    define(in, "graph input");
    if (in->isInitializer() || in->producer())
      error() << where(g) << "graph input '" << in->name()
              << "' is also an initializer or a node output";
  }
  for (const Value *init : g.initializers()) {
    define(init, "initializer");
    const TensorPtr &t = init->initializer();
    if (!t)
      error() << where(g) << "initializer '" << init->name()
              << "' holds no data";
    if (init->producer())
      error() << where(g) << "initializer '" << init->name()
              << "' is also a node output";
    int64_t count = elementCount(t->dims);
    size_t need = count > 0 ? size_t(count) * dtypeSize(t->dtype) : 0;
    if (count < 0 || t->bytes.size() != need)
      error() << where(g) << "initializer '" << init->name() << "' holds "
              << t->bytes.size() << " bytes, its type " << dtypeName(t->dtype)
              << "[" << dimsToString(t->dims) << "] needs " << need;
    if (init->dtype != t->dtype || !init->hasShape ||
        init->dims != toDims(t->dims))
      error() << where(g) << "initializer '" << init->name() << "' is declared "
              << init->typeString() << " but holds " << dtypeName(t->dtype)
              << "[" << dimsToString(t->dims) << "]";
  }

  // Producers of values defined later in the list: a use of one is an
  // ordering bug, or a cycle.
  std::unordered_set<const Value *> producedLater;
  for (const auto &n : g.nodes())
    for (const Value *o : n->outputs())
      if (o)
        producedLater.insert(o);

  for (const auto &np : g.nodes()) {
    const Node &n = *np;
    if (n.owner() != &g)
      errorAt(n) << "belongs to another graph";
    for (size_t i = 0; i < n.numInputs(); ++i) {
      const Value *v = n.input(i);
      if (!v || defined.count(v))
        continue; // omitted optional inputs are the op rules' business
      if (v->owner() != &g)
        errorAt(n) << "input " << i << " '" << v->name()
                   << "' belongs to another graph (not '" << g.name() << "')";
      if (producedLater.count(v)) {
        if (const Node *c = nodeOnCycle(g))
          errorAt(*c) << "is part of a cycle (graph '" << g.name() << "')";
        errorAt(n) << "input " << i << " '" << v->name()
                   << "' is used before the node that defines it (nodes are "
                      "not in topological order)";
      }
      errorAt(n) << "input " << i << " '" << v->name()
                 << "' is not defined by any node, graph input or "
                    "initializer of graph '"
                 << g.name() << "'";
    }
    for (size_t i = 0; i < n.numOutputs(); ++i) {
      const Value *o = n.output(i);
      if (!o)
        continue;
      if (o->producer() != &n || o->producerIndex() != int(i))
        errorAt(n) << "output " << i << " '" << o->name()
                   << "' does not record this node as its producer";
      define(o, "output of " + describeNode(n));
    }
  }

  if (g.outputs().empty())
    error() << where(g) << "has no outputs";
  for (size_t i = 0; i < g.outputs().size(); ++i) {
    const Value *o = g.outputs()[i];
    if (!o)
      error() << where(g) << "output " << i << " is missing";
    if (!defined.count(o))
      error() << where(g) << "output '" << o->name()
              << "' is not defined by any node, graph input or initializer";
  }
}

/// Supported ops and consistent types, inferred on a copy of the graph
/// (inferNode reports unsupported ops with the list of supported ones).
void checkTypes(const Graph &g, int64_t opset) {
  std::unique_ptr<Graph> scratch = g.clone();
  for (Node *n : scratch->nodeList()) {
    std::vector<TypeFacts> declared;
    for (const Value *o : n->outputs())
      declared.push_back(o ? TypeFacts::of(*o) : TypeFacts());
    inferNode(*n, opset);
    for (size_t i = 0; i < n->numOutputs(); ++i) {
      const Value *o = n->output(i);
      if (o && typesConflict(declared[i], TypeFacts::of(*o)))
        errorAt(*n) << "output '" << o->name() << "' is declared "
                    << declared[i].text() << " but the op produces "
                    << o->typeString();
    }
  }
}

/// The state initializer named `name` (the algorithm's copy, else the main
/// graph's), or nullptr.
const Value *findState(const Model &model, const std::string &name) {
  for (const Graph *g :
       {model.training ? model.training->algorithm.get() : nullptr,
        model.graph.get()}) {
    if (!g)
      continue;
    const Value *v = g->findValue(name);
    if (v && v->isInitializer() && (v->isState || g == model.graph.get()))
      return v;
  }
  return nullptr;
}

void checkBindings(const Model &model) {
  if (!model.training)
    return;
  const Graph &alg = *model.training->algorithm;
  std::unordered_set<std::string> keys;
  for (const auto &[key, value] : model.training->updateBinding) {
    if (!keys.insert(key).second)
      error() << "update_binding: state '" << key << "' is bound twice";
    const Value *state = findState(model, key);
    if (!state)
      error() << "update_binding: key '" << key
              << "' is not a state initializer";
    const Value *v = alg.findValue(value);
    if (!v)
      error() << "update_binding: value '" << value << "' (for state '" << key
              << "') is not a value of the training algorithm";
    if (typesConflict(TypeFacts::of(*state), TypeFacts::of(*v)))
      error() << "update_binding: state '" << key << "' is "
              << state->typeString() << " but its new value '" << value
              << "' is " << v->typeString();
  }
}

void checkMetadata(const Model &model) {
  const Graph &working =
      model.training ? *model.training->algorithm : *model.graph;
  auto valueList = [&](const char *key) {
    const std::string *m = model.meta(key);
    if (!m)
      return;
    for (const std::string &name : splitNames(*m))
      if (!working.findValue(name))
        error() << "metadata " << key << ": '" << name
                << "' is not a value of graph '" << working.name() << "'";
  };
  auto stateList = [&](const char *key) {
    const std::string *m = model.meta(key);
    if (!m)
      return;
    for (const std::string &name : splitNames(*m))
      if (!findState(model, name))
        error() << "metadata " << key << ": '" << name
                << "' is not a state initializer";
  };
  valueList("mpc.loss");
  valueList("mpc.grads");
  valueList("mpc.grad_seed");
  valueList("mpc.found_inf");
  stateList("mpc.params");
  stateList("mpc.loss_scale");
  stateList("mpc.growth_tracker");
  stateList("mpc.step");
  const std::string *params = model.meta("mpc.params");
  const std::string *grads = model.meta("mpc.grads");
  if (params && grads &&
      splitNames(*params).size() != splitNames(*grads).size())
    error() << "metadata mpc.params lists " << splitNames(*params).size()
            << " parameters but mpc.grads lists " << splitNames(*grads).size()
            << " gradients";
  if (const std::string *p = model.meta("mpc.precision"))
    if (*p != "fp16" && *p != "bf16" && *p != "fp32")
      error() << "metadata mpc.precision is '" << *p
              << "' (expected fp16, bf16 or fp32)";
}

} // namespace

void runVerify(Model &model, PassContext &ctx) {
  int64_t opset = model.opsetVersion("");
  if (opset < 0)
    opset = 17;
  int64_t nodes = 0;
  for (const Graph *g :
       {model.graph.get(),
        model.training ? model.training->algorithm.get() : nullptr}) {
    if (!g)
      continue;
    checkStructure(*g);
    checkTypes(*g, opset);
    nodes += int64_t(g->numNodes());
  }
  checkBindings(model);
  checkMetadata(model);
  ctx.stats["verified-nodes"] = nodes;
}

} // namespace mpc
