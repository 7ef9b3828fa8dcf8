// verify: structural and type checks of the main graph and the training step.
//
// Checks what every pass must preserve: each graph has an output; every value
// is defined once, by a graph input, an initializer or one node; nodes are in
// topological order (and a violation that is a cycle is reported as one);
// every op is supported with the right number of inputs; types are
// consistent, by running shape inference over the graph in order and
// comparing with what values already declare (the declared types are put
// back afterwards, so the model is left as it was); the update bindings pair
// state with algorithm values of the same type; and the mpc.* metadata names
// existing values. Runs first, and after every pass (--verify-each), so it
// needs nothing before it, and it costs O(nodes + edges) without copying the
// graph: side tables are indexed by Value::id().
//
// Most passes change a few nodes of a big graph, and shape inference of every
// node was most of what verify cost. So the type check is memoised
// (VerifyMemo, kept on the Model): a node whose revision, input values, their
// types and constant data, and declared output types are all what they were
// when it last passed would infer what it inferred then; it gets that result
// without running its rule. Anything else (a changed node, an input retyped
// by hand or by inference upstream) runs the rule as before. The structural
// checks run in full every time.
#include "passes/pass.h"
#include "passes/shape_inference.h"
#include "passes/support/diagnostics.h"

#include <optional>
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
/// Templated so that Values compare without copying their dims.
template <typename A, typename B> bool typesConflict(const A &a, const B &b) {
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

/// dims == toDims(concrete), without building the Dims.
bool sameDims(const Dims &dims, const std::vector<int64_t> &concrete) {
  if (dims.size() != concrete.size())
    return false;
  for (size_t i = 0; i < dims.size(); ++i)
    if (dims[i].value != concrete[i] || !dims[i].symbol.empty())
      return false;
  return true;
}

std::vector<std::string> splitNames(const std::string &s) {
  std::vector<std::string> out;
  for (size_t begin = 0; begin <= s.size();) {
    size_t end = s.find(',', begin);
    if (end == std::string::npos)
      end = s.size();
    if (end > begin)
      out.emplace_back(s, begin, end - begin);
    begin = end + 1;
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

/// Puts back the declared types of the values checkGraph inferred over, in
/// reverse (a value listed twice gets its first, declared, type back), also
/// when a check throws. The saved types live in one pool kept between runs:
/// copying dims into vectors that already have the room allocates nothing,
/// and verify runs after every pass.
class RestoreTypes {
public:
  RestoreTypes() : base_(top()) {}
  RestoreTypes(const RestoreTypes &) = delete;
  RestoreTypes &operator=(const RestoreTypes &) = delete;
  ~RestoreTypes() {
    auto &p = pool();
    for (size_t k = top(); k-- > base_;) {
      if (!p[k].first)
        continue; // inference left it as declared
      Value &v = *p[k].first;
      v.dtype = p[k].second.dtype;
      v.hasShape = p[k].second.hasShape;
      v.dims = p[k].second.dims;
    }
    top() = base_;
  }
  /// Saves v's type; returns its index for declared().
  size_t save(Value *v) {
    auto &p = pool();
    size_t k = top()++;
    if (k == p.size())
      p.emplace_back();
    p[k].first = v;
    p[k].second.dtype = v->dtype;
    p[k].second.hasShape = v->hasShape;
    p[k].second.dims = v->dims;
    return k;
  }
  size_t size() const { return top(); }
  const TypeFacts &declared(size_t index) const { return pool()[index].second; }
  /// The value still holds its declared type: nothing to put back.
  void unchanged(size_t index) { pool()[index].first = nullptr; }

private:
  static std::vector<std::pair<Value *, TypeFacts>> &pool() {
    static thread_local std::vector<std::pair<Value *, TypeFacts>> p;
    return p;
  }
  static size_t &top() {
    static thread_local size_t t = 0;
    return t;
  }
  size_t base_;
};

/// What one node's last passing type check saw and inferred.
struct NodeTypeMemo {
  uint64_t revision = 0;
  int64_t opset = 0;
  /// The verify that last looked at the node (stale entries are dropped).
  uint64_t epoch = 0;
  /// Per input: the value, its type as inference saw it, and what its
  /// constant data came from (initializer tensor, or the Constant node's
  /// revision), since rules read shape and axes tensors.
  struct Input {
    const Value *value = nullptr;
    TypeFacts type;
    const Tensor *data = nullptr;
    uint64_t constantRevision = 0;
  };
  struct Output {
    TypeFacts declared, inferred;
  };
  std::vector<Input> inputs;
  std::vector<Output> outputs;
};

} // namespace

/// Every node's last passing type check, by node (Model::verifyMemo).
struct VerifyMemo {
  std::unordered_map<const Node *, NodeTypeMemo> nodes;
  /// Counts verifies, to tell the records of nodes no longer in the model.
  uint64_t epoch = 0;
};

namespace {

/// Assigns without reallocating when `to` already has the room.
void copyType(TypeFacts &to, const Value &from) {
  to.dtype = from.dtype;
  to.hasShape = from.hasShape;
  to.dims = from.dims;
}

bool sameType(const TypeFacts &a, const Value &b) {
  return a.dtype == b.dtype && a.hasShape == b.hasShape && a.dims == b.dims;
}

/// The data source constantValue() would read for input v.
void constantSource(const Value *v, const Tensor *&data, uint64_t &revision) {
  data = v && v->isInitializer() ? v->initializer().get() : nullptr;
  const Node *p = v ? v->producer() : nullptr;
  revision =
      p && p->domain().empty() && p->opType() == "Constant" ? p->revision() : 0;
}

/// True when `n` is as it was when `m` was recorded: inference would give
/// the same outputs and the same verdict.
bool memoMatches(const NodeTypeMemo &m, const Node &n, int64_t opset) {
  if (m.revision != n.revision() || m.opset != opset ||
      m.inputs.size() != n.numInputs() || m.outputs.size() != n.numOutputs())
    return false;
  for (size_t i = 0; i < m.inputs.size(); ++i) {
    const NodeTypeMemo::Input &in = m.inputs[i];
    const Value *v = n.input(i);
    if (in.value != v)
      return false;
    if (!v)
      continue;
    if (!sameType(in.type, *v))
      return false;
    const Tensor *data = v->isInitializer() ? v->initializer().get() : nullptr;
    if (in.data != data)
      return false;
    // A value's producer is set when the value is made (and only cleared
    // when its node goes), so an input that was no Constant's output then
    // is none now: only a Constant's revision needs comparing.
    if (in.constantRevision != 0 &&
        (!v->producer() || v->producer()->revision() != in.constantRevision))
      return false;
  }
  for (size_t i = 0; i < m.outputs.size(); ++i) {
    const Value *o = n.output(i);
    if (o && !sameType(m.outputs[i].declared, *o))
      return false;
  }
  return true;
}

/// Supported op and consistent types of one node (inferNode reports
/// unsupported ops with the list of supported ones). Inference runs on the
/// graph itself, in order, so that later nodes see the inferred types of
/// earlier ones as they would on a copy of the graph; every output's
/// declared type is put back by `restore` (the checks compare with the type
/// saved before inference).
void checkNodeTypes(Node &n, int64_t opset, RestoreTypes &restore,
                    VerifyMemo &memo) {
  NodeTypeMemo &m = memo.nodes[&n];
  m.epoch = memo.epoch;
  if (memoMatches(m, n, opset)) {
    // Passed before with these inputs: give the outputs what inference gave
    // them then (later nodes see inferred types, as on a full run).
    for (size_t i = 0; i < n.numOutputs(); ++i) {
      Value *o = n.output(i);
      const TypeFacts &inferred = m.outputs[i].inferred;
      if (!o || sameType(inferred, *o))
        continue;
      restore.save(o);
      o->dtype = inferred.dtype;
      o->hasShape = inferred.hasShape;
      o->dims = inferred.dims;
    }
    return;
  }
  m.revision = 0;            // not a valid record until the check below passes
  size_t k = restore.size(); // this node's outputs are saved from here on
  for (Value *o : n.outputs())
    if (o)
      restore.save(o);
  inferNode(n, opset);
  m.outputs.resize(n.numOutputs());
  for (size_t i = 0; i < n.numOutputs(); ++i) {
    const Value *o = n.output(i);
    if (!o)
      continue;
    const TypeFacts &declared = restore.declared(k);
    if (typesConflict(declared, *o))
      errorAt(n) << "output '" << o->name() << "' is declared "
                 << declared.text() << " but the op produces "
                 << o->typeString();
    if (declared.dtype == o->dtype && declared.hasShape == o->hasShape &&
        declared.dims == o->dims)
      restore.unchanged(k);
    m.outputs[i].declared = declared;
    copyType(m.outputs[i].inferred, *o);
    ++k;
  }
  m.inputs.resize(n.numInputs());
  for (size_t i = 0; i < n.numInputs(); ++i) {
    NodeTypeMemo::Input &in = m.inputs[i];
    const Value *v = n.input(i);
    in.value = v;
    if (v)
      copyType(in.type, *v);
    constantSource(v, in.data, in.constantRevision);
  }
  m.opset = opset;
  m.revision = n.revision();
}

/// Every value is defined once and used only after its definition, and the
/// types are consistent (checkNodeTypes). One walk over the nodes does both:
/// each node's types are checked once its structure is, and the first type
/// error is kept until the whole graph's structure has passed, so a
/// structural error anywhere is still the one reported (as when the two were
/// separate walks), and the graph is read once per verify, not twice.
void checkGraph(Graph &g, int64_t opset, VerifyMemo &memo) {
  // defined[v->id()] for the values of g defined so far.
  std::vector<char> defined(g.numValueIds(), 0);
  auto isDefined = [&](const Value *v) {
    return v && v->owner() == &g && defined[v->id()];
  };
  // `what` names the definition in errors; for a node output it is built
  // only when one is reported (it is needed for every output of every node).
  auto define = [&](const Value *v, const char *kind,
                    const Node *producer = nullptr) {
    auto what = [&] {
      return producer ? "output of " + describeNode(*producer)
                      : std::string(kind);
    };
    if (!v)
      error() << where(g) << what() << " is missing";
    if (v->owner() != &g)
      error() << where(g) << what() << " '" << v->name()
              << "' belongs to another graph";
    // isLive() is findValue(v->name()) == v, kept by the graph as it changes.
    if (!v->isLive())
      error() << where(g) << what() << " '" << v->name()
              << "' is not a live value of the graph (removed, or its name "
                 "is taken by another value)";
    if (defined[v->id()])
      error() << where(g) << "value '" << v->name()
              << "' is defined more than once";
    defined[v->id()] = 1;
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
        !sameDims(init->dims, t->dims))
      error() << where(g) << "initializer '" << init->name() << "' is declared "
              << init->typeString() << " but holds " << dtypeName(t->dtype)
              << "[" << dimsToString(t->dims) << "]";
  }

  // Outputs of the graph's nodes, for the error path only: a use of one
  // that is not defined yet is an ordering bug, or a cycle.
  auto producedLater = [&](const Value *v) {
    for (const auto &n : g.nodes())
      for (const Value *o : n->outputs())
        if (o == v)
          return true;
    return false;
  };

  RestoreTypes restore;
  std::optional<Error> typeError;
  for (const auto &np : g.nodes()) {
    Node &n = *np;
    if (n.owner() != &g)
      errorAt(n) << "belongs to another graph";
    for (size_t i = 0; i < n.numInputs(); ++i) {
      const Value *v = n.input(i);
      if (!v || isDefined(v))
        continue; // omitted optional inputs are the op rules' business
      if (v->owner() != &g)
        errorAt(n) << "input " << i << " '" << v->name()
                   << "' belongs to another graph (not '" << g.name() << "')";
      if (producedLater(v)) {
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
      define(o, nullptr, &n);
    }
    if (!typeError) {
      try {
        checkNodeTypes(n, opset, restore, memo);
      } catch (const Error &e) {
        typeError = e;
      }
    }
  }

  if (g.outputs().empty())
    error() << where(g) << "has no outputs";
  for (size_t i = 0; i < g.outputs().size(); ++i) {
    const Value *o = g.outputs()[i];
    if (!o)
      error() << where(g) << "output " << i << " is missing";
    if (!isDefined(o))
      error() << where(g) << "output '" << o->name()
              << "' is not defined by any node, graph input or initializer";
  }
  if (typeError)
    throw *typeError;
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
  // A key bound twice finds the same state both times (the first time it
  // was found, or the check below had failed then): sets of state values,
  // not of names, tell the second binding apart without copying a name.
  std::unordered_set<const Value *> bound;
  bound.reserve(model.training->updateBinding.size());
  for (const auto &[key, value] : model.training->updateBinding) {
    const Value *state = findState(model, key);
    if (state && !bound.insert(state).second)
      error() << "update_binding: state '" << key << "' is bound twice";
    if (!state)
      error() << "update_binding: key '" << key
              << "' is not a state initializer";
    const Value *v = alg.findValue(value);
    if (!v)
      error() << "update_binding: value '" << value << "' (for state '" << key
              << "') is not a value of the training algorithm";
    if (typesConflict(*state, *v))
      error() << "update_binding: state '" << key << "' is "
              << state->typeString() << " but its new value '" << value
              << "' is " << v->typeString();
  }
}

void checkMetadata(const Model &model) {
  const Graph &working =
      model.training ? *model.training->algorithm : *model.graph;
  // Each returns how many names its key lists (0 when absent).
  auto valueList = [&](const char *key) -> size_t {
    const std::string *m = model.meta(key);
    if (!m)
      return 0;
    std::vector<std::string> names = splitNames(*m);
    for (const std::string &name : names)
      if (!working.findValue(name))
        error() << "metadata " << key << ": '" << name
                << "' is not a value of graph '" << working.name() << "'";
    return names.size();
  };
  auto stateList = [&](const char *key) -> size_t {
    const std::string *m = model.meta(key);
    if (!m)
      return 0;
    std::vector<std::string> names = splitNames(*m);
    for (const std::string &name : names)
      if (!findState(model, name))
        error() << "metadata " << key << ": '" << name
                << "' is not a state initializer";
    return names.size();
  };
  valueList("mpc.loss");
  size_t numGrads = valueList("mpc.grads");
  valueList("mpc.grad_seed");
  valueList("mpc.found_inf");
  size_t numParams = stateList("mpc.params");
  stateList("mpc.loss_scale");
  stateList("mpc.growth_tracker");
  stateList("mpc.step");
  if (model.meta("mpc.params") && model.meta("mpc.grads") &&
      numParams != numGrads)
    error() << "metadata mpc.params lists " << numParams
            << " parameters but mpc.grads lists " << numGrads << " gradients";
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
  if (!model.verifyMemo)
    model.verifyMemo = std::make_shared<VerifyMemo>();
  VerifyMemo &memo = *model.verifyMemo;
  ++memo.epoch;
  int64_t nodes = 0;
  for (Graph *g :
       {model.graph.get(),
        model.training ? model.training->algorithm.get() : nullptr}) {
    if (!g)
      continue;
    checkGraph(*g, opset, memo);
    nodes += int64_t(g->numNodes());
  }
  // Drop the records of nodes this verify did not reach (removed ones, whose
  // memory a new node may reuse: its revision differs, so a record would
  // never match, but it would take room) once they outnumber the live ones.
  if (memo.nodes.size() > 2 * size_t(nodes) + 64)
    for (auto it = memo.nodes.begin(); it != memo.nodes.end();)
      it =
          it->second.epoch == memo.epoch ? std::next(it) : memo.nodes.erase(it);
  checkBindings(model);
  checkMetadata(model);
  ctx.stats["verified-nodes"] = nodes;
}

} // namespace mpc
