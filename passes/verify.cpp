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
// node was most of what verify cost. So what each verify saw is remembered
// (VerifyMemo, kept on the Model): one record per value, by Value::id(),
// saying when what consumers read of it (its type after inference upstream,
// its constant data) last changed, and on a node's first output the node's
// revision when its type check last passed. A node whose revision and opset
// are as recorded, whose outputs are declared as they were (or as what
// inference made of them then, as infer-shapes leaves them), and none of
// whose inputs changed since, would infer what it inferred then: it gets
// that result without running its rule. Anything else (a changed node, an
// input retyped by hand or by inference upstream, new data) runs the rule as
// before; a Constant rerun at the revision it passed at has the same data,
// so only its type tells its consumers whether to look again. Types are
// compared, not trusted to the mutation API, since passes set a value's
// type directly. The structural checks run in full every time; the name
// lookups of the update bindings and metadata are remembered while the
// value a name found is still that name's live value. The records also tell
// plan-memory whether inferring the step again would change a type
// (passes/verify.h).
#include "passes/verify.h"

#include "ir/step_metadata.h"
#include "passes/pass.h"
#include "passes/shape_inference.h"
#include "support/diagnostics.h"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <functional>
#include <iterator>
#include <limits>
#include <optional>
#include <string_view>
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
  RestoreTypes() : pool_(pool()), top_(top()), base_(top_) {}
  RestoreTypes(const RestoreTypes &) = delete;
  RestoreTypes &operator=(const RestoreTypes &) = delete;
  ~RestoreTypes() {
    for (size_t k = top_; k-- > base_;) {
      if (!pool_[k].first)
        continue; // inference left it as declared
      Value &v = *pool_[k].first;
      v.dtype = pool_[k].second.dtype;
      v.hasShape = pool_[k].second.hasShape;
      v.dims = pool_[k].second.dims;
    }
    top_ = base_;
  }
  /// Saves v's type; returns its index for declared().
  size_t save(Value *v) {
    size_t k = top_++;
    if (k == pool_.size())
      pool_.emplace_back();
    pool_[k].first = v;
    pool_[k].second.dtype = v->dtype;
    pool_[k].second.hasShape = v->hasShape;
    pool_[k].second.dims = v->dims;
    return k;
  }
  size_t size() const { return top_; }
  const TypeFacts &declared(size_t index) const { return pool_[index].second; }
  /// The value still holds its declared type: nothing to put back.
  void unchanged(size_t index) { pool_[index].first = nullptr; }
  bool isUnchanged(size_t index) const { return !pool_[index].first; }
  /// Gives `to` the declared type saved at `index`, which must be
  /// unchanged(): nothing will be put back from it. A swap, not a copy: the
  /// pool keeps `to`'s old dims, whose room a later save reuses.
  void moveUnchangedInto(size_t index, TypeFacts &to) {
    TypeFacts &saved = pool_[index].second;
    to.dtype = saved.dtype;
    to.hasShape = saved.hasShape;
    to.dims.swap(saved.dims);
  }

private:
  // One pool per thread, looked up once per walk, not per saved value.
  static std::vector<std::pair<Value *, TypeFacts>> &pool() {
    static thread_local std::vector<std::pair<Value *, TypeFacts>> p;
    return p;
  }
  static size_t &top() {
    static thread_local size_t t = 0;
    return t;
  }
  std::vector<std::pair<Value *, TypeFacts>> &pool_;
  size_t &top_;
  size_t base_;
};

/// What verify last saw of one value of a graph (by Value::id()). Verify
/// runs after every pass and most passes change a few nodes of a big graph:
/// one record per value, in a vector, is what lets it tell in a few loads
/// per node what changed, without a hash lookup or a copy of a node's inputs.
///
/// 64 bytes: one record per value id ever made (24,179 on a 64-layer
/// compile), all touched by the first verify. What few records need (an
/// initializer's data, an inferred type other than the declared one) lives in
/// pools of GraphRecords, the opset in GraphRecords itself, and the verify
/// counts are 32-bit (VerifyMemo::epoch wraps by forgetting every record).
struct ValueRecord {
  static constexpr uint32_t kNoSlot = uint32_t(-1);
  /// On the first output of a node: the node's revision when its type check
  /// last passed, at GraphRecords::opset (0: no valid record).
  uint64_t producerRevision = 0;
  /// The declared type.
  TypeFacts declared;
  /// The verify (VerifyMemo::epoch) whose walk last defined the value: the
  /// structural check's "defined so far", without a table cleared per walk.
  uint32_t definedAt = 0;
  /// The verify in which what a consumer's inference reads of the value
  /// (its type after inference upstream, its constant data) last changed;
  /// 0 while nothing is recorded. A consumer last checked in that verify or
  /// later saw what the value holds now.
  uint32_t changedAt = 0;
  /// On the first output of a node: the verify its type check last ran in.
  uint32_t checkedAt = 0;
  /// An initializer's data is GraphRecords::data[dataSlot].data (kNoSlot:
  /// none).
  uint32_t dataSlot = kNoSlot;
  /// Where inference made of the value a type other than the declared one,
  /// that type is GraphRecords::inferred[inferredSlot] (a slot, once given,
  /// stays the record's). Apart from the record: almost every output is
  /// declared as inferred (infer-shapes runs first).
  uint32_t inferredSlot = kNoSlot;
  bool inferredDiffers = false;
};
// (Where Dims is three pointers, as in release builds of libstdc++/libc++.)
static_assert(sizeof(Dims) != 3 * sizeof(void *) || sizeof(ValueRecord) == 64,
              "a ValueRecord is meant to fill 64 bytes");

/// An initializer's data that a record holds (ValueRecord::dataSlot). Held,
/// not only pointed at, so that no new tensor can take its address while the
/// record compares with it.
struct HeldData {
  uint32_t id = 0; // the record's Value::id()
  TensorPtr data;  // null once the record let go of it
};

/// The records of one graph's values.
struct GraphRecords {
  uint64_t graphUid = 0;
  /// The verify that last used them (the records of a graph no longer in
  /// the model are dropped).
  uint32_t usedAt = 0;
  /// The opset every valid producerRevision was checked at: a verify at
  /// another opset clears them all (checkGraph). The opset is the model's,
  /// the same for every node, and rarely changes: one field, not one per
  /// record.
  int64_t opset = 0;
  std::vector<ValueRecord> values;
  /// The data the records hold, by ValueRecord::dataSlot; a walk compacts
  /// it, letting go of the data of values no longer defined as initializers.
  std::vector<HeldData> data;
  /// The inferred types of the records whose inferredDiffers is or was set
  /// (ValueRecord::inferredSlot).
  std::vector<TypeFacts> inferred;

  /// The data r holds (nullptr: none).
  const Tensor *dataOf(const ValueRecord &r) const {
    return r.dataSlot == ValueRecord::kNoSlot ? nullptr
                                              : data[r.dataSlot].data.get();
  }
  /// r (the record of value `id`) holds t from now on.
  void holdData(ValueRecord &r, uint32_t id, const TensorPtr &t) {
    if (!t)
      return dropData(r);
    if (r.dataSlot == ValueRecord::kNoSlot) {
      r.dataSlot = uint32_t(data.size());
      data.push_back({id, t});
    } else {
      data[r.dataSlot].data = t;
    }
  }
  /// r holds no data from now on (its slot is dropped by the next
  /// compaction).
  void dropData(ValueRecord &r) {
    if (r.dataSlot == ValueRecord::kNoSlot)
      return;
    data[r.dataSlot].data.reset();
    r.dataSlot = ValueRecord::kNoSlot;
  }
  /// The inferred type of r (inferredDiffers).
  const TypeFacts &inferredOf(const ValueRecord &r) const {
    return inferred[r.inferredSlot];
  }
  /// r's slot for an inferred type, given on first use.
  TypeFacts &inferredSlotOf(ValueRecord &r) {
    if (r.inferredSlot == ValueRecord::kNoSlot) {
      r.inferredSlot = uint32_t(inferred.size());
      inferred.emplace_back();
    }
    return inferred[r.inferredSlot];
  }
  /// The type a consumer's inference sees.
  const TypeFacts &seen(const ValueRecord &r) const {
    return r.inferredDiffers ? inferredOf(r) : r.declared;
  }
};

/// A remembered name lookup: the value is reused while it is still the live
/// value of that name in that graph (then findValue would return it), else
/// the name is looked up again. Only valid while the graphs are the ones it
/// was filled for (LookupCache::graphUids), since it holds their values.
struct NameSlot {
  const Value *value = nullptr;
};

/// The metadata lists of value names, in the order checkMetadata checks
/// them: the first five name values of the working graph, the rest state.
/// (Every key that names values follows them through rewrites:
/// ir/metadata_value_refs.cpp.)
constexpr const char *kMetadataLists[] = {
    meta::kLoss.name.data(),
    meta::kGrads.name.data(),
    meta::kGradSeed.name.data(),
    meta::kFoundInf.name.data(),
    meta::kGradNorm.name.data(),
    meta::kParams.name.data(),
    meta::kLossScale.name.data(),
    meta::kGrowthTracker.name.data(),
    meta::kStep.name.data(),
    meta::kMasterParams.name.data(),
    meta::kOptimizerState.name.data(),
    meta::kLrState.name.data(),
    meta::kGradAccumCounter.name.data(),
    meta::kGradAccumBuffers.name.data(),
};
constexpr size_t kValueLists = 5;
/// kMetadataLists' mpc.params and mpc.grads, whose counts must agree.
constexpr size_t kParamsList = 5, kGradsList = 1;
static_assert(kMetadataLists[kParamsList] == meta::kParams.name.data() &&
              kMetadataLists[kGradsList] == meta::kGrads.name.data());

/// The name lookups of the update bindings and metadata lists, by position.
struct LookupCache {
  uint64_t graphUids[2] = {0, 0}; // main graph, training algorithm
  /// Per binding: the key in the algorithm, the key in the main graph, the
  /// value in the algorithm.
  std::vector<std::array<NameSlot, 3>> bindings;
  /// Per metadata list (kMetadataLists), per name: the algorithm or working
  /// graph, the main graph.
  std::vector<std::array<NameSlot, 2>> metadata[std::size(kMetadataLists)];
  /// The state each binding found last time, in binding order, and whether
  /// they were distinct then: the same states are distinct now.
  std::vector<const Value *> states;
  bool statesDistinct = false;
  std::vector<const Value *> sorted; // scratch
};

} // namespace

/// What the last verifies saw (Model::verifyMemo).
struct VerifyMemo {
  /// Counts verifies; 0 is "never". 32-bit like the records' copies of it:
  /// runVerify forgets every record before it would wrap.
  uint32_t epoch = 0;
  std::vector<GraphRecords> graphs;
  LookupCache lookups;
};

namespace {

/// Assigns without reallocating when `to` already has the room.
void copyType(TypeFacts &to, const Value &from) {
  to.dtype = from.dtype;
  to.hasShape = from.hasShape;
  to.dims = from.dims;
}

/// Inline everywhere: verify compares a record with a value for most
/// outputs of every verify, and GCC otherwise splits this into an inlined
/// dtype test and a call for the dims (30k calls on a 64-layer compile).
[[gnu::always_inline]] inline bool sameType(const TypeFacts &a,
                                            const Value &b) {
  return a.dtype == b.dtype && a.hasShape == b.hasShape && a.dims == b.dims;
}

bool sameType(const TypeFacts &a, const TypeFacts &b) {
  return a.dtype == b.dtype && a.hasShape == b.hasShape && a.dims == b.dims;
}

/// Records a change of a graph input or initializer (recordSource).
[[gnu::noinline]] void recordSourceChange(GraphRecords &records, const Value &v,
                                          uint32_t epoch) {
  ValueRecord &r = records.values[v.id()];
  r.changedAt = epoch;
  records.holdData(r, v.id(), v.initializer());
  r.inferredDiffers = false;
  r.producerRevision = 0;
  copyType(r.declared, v);
}

/// Records a graph input or initializer as the walk defines it: what its
/// consumers read is its declared type and its data. Inline: for most, that
/// is what the record holds already.
inline void recordSource(GraphRecords &records, const Value &v,
                         uint32_t epoch) {
  const ValueRecord &r = records.values[v.id()];
  // (An input's initializer() is null.)
  if (r.changedAt == 0 || records.dataOf(r) != v.initializer().get() ||
      r.inferredDiffers || !sameType(r.declared, v))
    recordSourceChange(records, v, epoch);
}

/// Whether a node's record matches (recordHolds, matchOutput), and if so
/// whether an output's inferred type differs from its declared one
/// (replayInferred).
enum class RecordMatch { No, Yes, YesReplay };

/// A node's record matches when inference of `n` would give what it gave
/// when it last passed: same node (revision: inputs, outputs, attributes),
/// same opset (GraphRecords::opset), inputs that read as they did then (none
/// changed since: `inputsChangedAt` is the latest change among them), each
/// output declared as it was or as what inference made of it then. The
/// record sits on the node's first output (a node without outputs has none).
/// checkGraph tells it in its walk over a node's outputs (one walk, not two):
/// recordHolds on the first output's record, then matchOutput on each
/// output's. YesReplay when an output's record holds an inferred type other
/// than the declared one.
///
/// An output since declared as its inferred type (infer-shapes declares
/// every output so, and verify runs right after it) infers that type again:
/// what a rule passes to Ctx::set depends on what the record vouches for
/// (the node's attributes and outputs present, the opset, its inputs), not
/// on the outputs' types, and the merges Ctx::set makes into the declared
/// type (known beats symbolic beats unknown, a rank change replaces the
/// dims) give the same result when applied again to their own result. So
/// the check passes as before and consumers see the same type.
/// The node part: `first` is the record of n's first output.
inline RecordMatch recordHolds(const Node &n, const ValueRecord &first,
                               uint32_t inputsChangedAt) {
  return first.producerRevision == n.revision() &&
                 inputsChangedAt <= first.checkedAt
             ? RecordMatch::Yes
             : RecordMatch::No;
}

/// `match` (not No) with output o, whose record is `out`.
inline RecordMatch matchOutput(RecordMatch match, const ValueRecord &out,
                               const Value &o, const GraphRecords &graph) {
  if (!sameType(out.declared, o) &&
      !(out.inferredDiffers && sameType(graph.inferredOf(out), o)))
    return RecordMatch::No;
  return out.inferredDiffers ? RecordMatch::YesReplay : match;
}

/// Gives n's outputs what inference made of them last time (the record
/// matches): later nodes see inferred types, as on a full run. Out of line:
/// most outputs are declared as inferred, and checkNodeTypes only calls
/// this for one that is not.
[[gnu::noinline]] void replayInferred(Node &n, RestoreTypes &restore,
                                      GraphRecords &graph) {
  std::vector<ValueRecord> &records = graph.values;
  for (Value *o : n.outputs()) {
    if (!o)
      continue;
    ValueRecord &r = records[o->id()];
    if (!r.inferredDiffers)
      continue;
    if (!sameType(r.declared, *o)) {
      // Declared as inferred since (matchOutput): it holds what the
      // consumers read, as it is; the record now says so.
      std::swap(r.declared, graph.inferred[r.inferredSlot]);
      r.inferredDiffers = false;
      continue;
    }
    restore.save(o);
    const TypeFacts &inferred = graph.inferredOf(r);
    o->dtype = inferred.dtype;
    o->hasShape = inferred.hasShape;
    o->dims = inferred.dims;
  }
}

/// Runs n's rule and records what it gave (checkNodeTypes, no matching
/// record). Out of line: most nodes of most verifies do not get here, and
/// the walk that calls checkNodeTypes for every node stays small.
[[gnu::noinline]] void inferAndRecord(Node &n, const Value *first,
                                      int64_t opset, uint32_t epoch,
                                      RestoreTypes &restore,
                                      GraphRecords &graph) {
  std::vector<ValueRecord> &records = graph.values;
  // A Constant checked last at this revision holds the data it held then
  // (its attributes are unchanged): its consumers need not see new data.
  bool newData =
      n.isOp("", "Constant") &&
      (!first || records[first->id()].producerRevision != n.revision());
  if (first) // not a valid record until the check below passes
    records[first->id()].producerRevision = 0;
  size_t base = restore.size(); // this node's outputs are saved from here on
  for (Value *o : n.outputs())
    if (o)
      restore.save(o);
  inferNode(n, opset);
  size_t k = base;
  for (const Value *o : n.outputs()) {
    if (!o)
      continue;
    const TypeFacts &declared = restore.declared(k);
    // (Equal types never conflict: one comparison for most outputs.)
    if (sameType(declared, *o))
      restore.unchanged(k);
    else if (typesConflict(declared, *o))
      errorAt(n) << "output '" << o->name() << "' is declared "
                 << declared.text() << " but the op produces "
                 << o->typeString();
    ++k;
  }
  // Passed: record what the consumers will read. A Constant's data may have
  // changed with its attributes even where its type did not (newData).
  k = base;
  for (const Value *o : n.outputs()) {
    if (!o)
      continue;
    ValueRecord &r = records[o->id()];
    size_t saved = k++;
    bool asDeclared = restore.isUnchanged(saved); // compared above
    bool seenChanged;
    if (asDeclared && !r.inferredDiffers) {
      // Most outputs: consumers saw the record's declared type, and *o is
      // as declared. One comparison tells both whether they see a change
      // and whether the record takes the new declared type.
      seenChanged = !sameType(r.declared, *o);
      if (seenChanged)
        restore.moveUnchangedInto(saved, r.declared);
    } else {
      seenChanged = !sameType(graph.seen(r), *o);
      r.inferredDiffers = !asDeclared;
      if (r.inferredDiffers) {
        if (!sameType(r.declared, restore.declared(saved)))
          r.declared = restore.declared(saved);
        copyType(graph.inferredSlotOf(r), *o);
      } else if (!sameType(r.declared, *o)) { // *o is as declared
        restore.moveUnchangedInto(saved, r.declared);
      }
    }
    if (r.changedAt == 0 || newData || seenChanged)
      r.changedAt = epoch;
    graph.dropData(r);
  }
  if (first) {
    ValueRecord &r = records[first->id()];
    r.producerRevision = n.revision();
    r.checkedAt = epoch;
  }
}

/// Supported op and consistent types of one node (inferNode reports
/// unsupported ops with the list of supported ones). Inference runs on the
/// graph itself, in order, so that later nodes see the inferred types of
/// earlier ones as they would on a copy of the graph; every output's
/// declared type is put back by `restore` (the checks compare with the type
/// saved before inference). A node whose record matches (`match`) gets what
/// inference gave it last time without running its rule.
inline void checkNodeTypes(Node &n, const Value *first, RecordMatch match,
                           int64_t opset, uint32_t epoch, RestoreTypes &restore,
                           GraphRecords &graph) {
  switch (match) {
  case RecordMatch::No:
    return inferAndRecord(n, first, opset, epoch, restore, graph);
  case RecordMatch::YesReplay:
    return replayInferred(n, restore, graph);
  case RecordMatch::Yes:
    return;
  }
}

/// Reports input i of n, which is not a value defined so far in g.
[[noreturn]] void undefinedInput(const Graph &g, const Node &n, size_t i) {
  const Value *v = n.input(i);
  if (v->owner() != &g)
    errorAt(n) << "input " << i << " '" << v->name()
               << "' belongs to another graph (not '" << g.name() << "')";
  // A use of an output of the graph's nodes that is not defined yet is an
  // ordering bug, or a cycle.
  for (const auto &other : g.nodes())
    for (const Value *o : other->outputs())
      if (o == v) {
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
  std::abort(); // errorAt throws
}

/// Reports why v, a graph input, initializer or output of `producer`,
/// cannot be defined in g now. `kind` names the definition in errors; for a
/// node output it is built only when one is reported.
[[noreturn]] void badDefinition(const Graph &g, const Value *v,
                                const char *kind, const Node *producer,
                                const std::vector<ValueRecord> &records,
                                uint32_t epoch) {
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
  if (records[v->id()].definedAt == epoch)
    error() << where(g) << "value '" << v->name()
            << "' is defined more than once";
  std::abort(); // unreachable: define() calls this only on an error
}

/// Every value is defined once and used only after its definition, and the
/// types are consistent (checkNodeTypes). One walk over the nodes does both:
/// each node's types are checked once its structure is, and the first type
/// error is kept until the whole graph's structure has passed, so a
/// structural error anywhere is still the one reported (as when the two were
/// separate walks), and the graph is read once per verify, not twice. The
/// structural checks run on every node and value every time; `records` (the
/// graph's, indexed by Value::id()) spare only the inference of nodes whose
/// inputs read as before.
void checkGraph(Graph &g, int64_t opset, uint32_t epoch,
                GraphRecords &graphRecords) {
  std::vector<ValueRecord> &records = graphRecords.values;
  // The records' node checks passed at graphRecords.opset: none is valid at
  // another one.
  if (graphRecords.opset != opset) {
    for (ValueRecord &r : records)
      r.producerRevision = 0;
    graphRecords.opset = opset;
  }
  records.resize(g.numValueIds()); // the values made since the last verify
  auto isDefined = [&](const Value *v) {
    return v && v->owner() == &g && records[v->id()].definedAt == epoch;
  };
  // The checks inline, their report out of line: this runs for every value
  // of the graph after every pass.
  auto define = [&](const Value *v, const char *kind,
                    const Node *producer = nullptr) {
    if (v && v->owner() == &g && v->isLive()) {
      uint32_t &definedAt = records[v->id()].definedAt;
      if (definedAt != epoch) {
        definedAt = epoch;
        return;
      }
    }
    badDefinition(g, v, kind, producer, records, epoch);
  };
  for (const Value *in : g.inputs()) {
    define(in, "graph input");
    if (in->isInitializer() || in->producer())
      error() << where(g) << "graph input '" << in->name()
              << "' is also an initializer or a node output";
    recordSource(graphRecords, *in, epoch);
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
    recordSource(graphRecords, *init, epoch);
  }

  RestoreTypes restore;
  std::optional<Error> typeError;
  for (const auto &np : g.nodes()) {
    Node &n = *np;
    if (n.owner() != &g)
      errorAt(n) << "belongs to another graph";
    // Each input's record tells both that it is defined and when what it
    // reads last changed. (The loops keep the vectors' bounds in locals:
    // with numInputs() and input(i) per step the compiler reloaded them, a
    // few instructions per edge of every node of every verify.)
    uint32_t inputsChangedAt = 0;
    const ValueRecord *recordData = records.data();
    const std::vector<Value *> &ins = n.inputs();
    for (auto it = ins.begin(), end = ins.end(); it != end; ++it) {
      const Value *v = *it;
      if (!v)
        continue; // omitted optional inputs are the op rules' business
      if (v->owner() == &g) {
        const ValueRecord &r = recordData[v->id()];
        if (r.definedAt == epoch) {
          inputsChangedAt = std::max(inputsChangedAt, r.changedAt);
          continue;
        }
      }
      undefinedInput(g, n, size_t(it - ins.begin()));
    }
    // The same walk tells whether the node's record matches.
    const Value *first = nullptr;
    RecordMatch match = RecordMatch::No;
    const std::vector<Value *> &outs = n.outputs();
    for (size_t i = 0, count = outs.size(); i < count; ++i) {
      const Value *o = outs[i];
      if (!o)
        continue;
      if (o->producer() != &n || o->producerIndex() != int(i))
        errorAt(n) << "output " << i << " '" << o->name()
                   << "' does not record this node as its producer";
      define(o, nullptr, &n);
      const ValueRecord &r = recordData[o->id()];
      if (!first) {
        first = o;
        match = recordHolds(n, r, inputsChangedAt);
      }
      if (match != RecordMatch::No)
        match = matchOutput(match, r, *o, graphRecords);
    }
    if (!typeError) {
      try {
        checkNodeTypes(n, first, match, opset, epoch, restore, graphRecords);
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
  // Let go of the data of values that are no longer initializers (removed,
  // or turned into inputs): the records would keep it alive. The slots
  // still held move down, and their records with them.
  std::vector<HeldData> &held = graphRecords.data;
  size_t kept = 0;
  for (size_t k = 0; k < held.size(); ++k) {
    HeldData &h = held[k];
    ValueRecord &r = records[h.id];
    if (!h.data) // let go of already (dropData)
      continue;
    if (r.definedAt != epoch) {
      h.data.reset();
      r.dataSlot = ValueRecord::kNoSlot;
      continue;
    }
    r.dataSlot = uint32_t(kept);
    if (kept != k)
      held[kept] = std::move(h);
    ++kept;
  }
  held.resize(kept);
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

/// The checks of the metadata that follow the names' (checkMetadata).
void checkMetadataCounts(const Model &model, size_t numParams,
                         size_t numGrads) {
  if (hasMeta(model, meta::kParams) && hasMeta(model, meta::kGrads) &&
      numParams != numGrads)
    error() << "metadata mpc.params lists " << numParams
            << " parameters but mpc.grads lists " << numGrads << " gradients";
  if (const std::string *p = readMeta(model, meta::kPrecision))
    if (*p != "fp16" && *p != "bf16" && *p != "fp32")
      error() << "metadata mpc.precision is '" << *p
              << "' (expected fp16, bf16 or fp32)";
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
  size_t counts[std::size(kMetadataLists)];
  for (size_t i = 0; i < std::size(kMetadataLists); ++i)
    counts[i] = i < kValueLists ? valueList(kMetadataLists[i])
                                : stateList(kMetadataLists[i]);
  checkMetadataCounts(model, counts[kParamsList], counts[kGradsList]);
}

// The update bindings and the metadata name values by name: about three
// hash lookups per parameter, after every pass. The names rarely change,
// so each lookup is remembered (NameSlot) and reused while the value it
// found is still the live value of that name. A check that fails through
// the cache is run again by checkBindings / checkMetadata, which report
// the first error, as they always have.

/// g.findValue(name), through `slot`.
const Value *lookup(const Graph &g, std::string_view name, NameSlot &slot) {
  const Value *v = slot.value;
  // Live: findValue(v->name()) is v.
  if (v && v->isLive() && v->owner() == &g && v->name() == name)
    return v;
  v = g.findValue(name);
  slot.value = v;
  return v;
}

/// findState(model, name), through slots[0] (the algorithm) and slots[1]
/// (the main graph).
const Value *findState(const Model &model, std::string_view name,
                       NameSlot *slots) {
  if (const Graph *alg =
          model.training ? model.training->algorithm.get() : nullptr) {
    const Value *v = lookup(*alg, name, slots[0]);
    if (v && v->isInitializer() && v->isState)
      return v;
  }
  const Value *v = lookup(*model.graph, name, slots[1]);
  return v && v->isInitializer() ? v : nullptr;
}

/// True when checkBindings would pass.
bool bindingsPass(const Model &model, LookupCache &cache) {
  if (!model.training)
    return true;
  const Graph &alg = *model.training->algorithm;
  const auto &bindings = model.training->updateBinding;
  cache.bindings.resize(bindings.size());
  // Whether the states are those of last time, which were distinct. (Equal
  // pointers are enough, whatever values they point at now: distinctness
  // is about the pointers.)
  bool same = cache.statesDistinct && cache.states.size() == bindings.size();
  cache.statesDistinct = false; // until shown below
  cache.states.resize(bindings.size());
  for (size_t i = 0; i < bindings.size(); ++i) {
    std::array<NameSlot, 3> &slots = cache.bindings[i];
    const Value *state = findState(model, bindings[i].first, slots.data());
    const Value *v = lookup(alg, bindings[i].second, slots[2]);
    if (!state || !v || typesConflict(*state, *v))
      return false;
    if (cache.states[i] != state) {
      cache.states[i] = state;
      same = false;
    }
  }
  // No state bound twice: sorted, when they are not last time's.
  if (!same) {
    std::vector<const Value *> &sorted = cache.sorted;
    sorted.assign(cache.states.begin(), cache.states.end());
    std::sort(sorted.begin(), sorted.end(), std::less<const Value *>());
    if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end())
      return false;
  }
  cache.statesDistinct = true;
  return true;
}

/// checkMetadata, through the cache.
void checkMetadataCached(const Model &model, LookupCache &cache) {
  const Graph &working =
      model.training ? *model.training->algorithm : *model.graph;
  size_t counts[std::size(kMetadataLists)] = {};
  for (size_t i = 0; i < std::size(kMetadataLists); ++i) {
    const std::string *m = model.meta(kMetadataLists[i]);
    if (!m)
      continue;
    std::vector<std::array<NameSlot, 2>> &slots = cache.metadata[i];
    // The names as splitNames gives them, without copying them.
    std::string_view list = *m;
    for (size_t begin = 0; begin <= list.size();) {
      size_t end = list.find(',', begin);
      if (end == std::string_view::npos)
        end = list.size();
      if (end > begin) {
        std::string_view name = list.substr(begin, end - begin);
        if (counts[i] == slots.size())
          slots.emplace_back();
        std::array<NameSlot, 2> &slot = slots[counts[i]++];
        bool found = i < kValueLists
                         ? lookup(working, name, slot[0]) != nullptr
                         : findState(model, name, slot.data()) != nullptr;
        if (!found)
          return checkMetadata(model); // reports it
      }
      begin = end + 1;
    }
  }
  checkMetadataCounts(model, counts[kParamsList], counts[kGradsList]);
}

/// The records of g's values, made on its first verify.
GraphRecords &recordsOf(VerifyMemo &memo, const Graph &g) {
  for (GraphRecords &r : memo.graphs)
    if (r.graphUid == g.uid()) {
      r.usedAt = memo.epoch;
      return r;
    }
  memo.graphs.emplace_back();
  memo.graphs.back().graphUid = g.uid();
  memo.graphs.back().usedAt = memo.epoch;
  return memo.graphs.back();
}

} // namespace

void runVerify(Model &model, PassContext &ctx) {
  int64_t opset = model.opsetVersion("");
  if (opset < 0)
    opset = 17;
  if (!model.verifyMemo)
    model.verifyMemo = std::make_shared<VerifyMemo>();
  VerifyMemo &memo = *model.verifyMemo;
  // The records hold 32-bit verify counts. Before the count would wrap (to
  // 0, "never", and then below the counts recorded), every record is
  // forgotten: the next verify infers every node again, as the first did.
  if (memo.epoch == std::numeric_limits<uint32_t>::max()) {
    memo.graphs.clear();
    memo.epoch = 0;
  }
  uint32_t epoch = ++memo.epoch;
  Graph *alg = model.training ? model.training->algorithm.get() : nullptr;
  int64_t nodes = 0;
  for (Graph *g : {model.graph.get(), alg}) {
    if (!g)
      continue;
    checkGraph(*g, opset, epoch, recordsOf(memo, *g));
    nodes += int64_t(g->numNodes());
  }
  // Drop the records of graphs no longer in the model.
  memo.graphs.erase(
      std::remove_if(memo.graphs.begin(), memo.graphs.end(),
                     [&](const GraphRecords &r) { return r.usedAt != epoch; }),
      memo.graphs.end());
  // The name slots hold values of these two graphs: forget them when either
  // graph is another one now.
  LookupCache &cache = memo.lookups;
  uint64_t uids[2] = {model.graph->uid(), alg ? alg->uid() : 0};
  if (uids[0] != cache.graphUids[0] || uids[1] != cache.graphUids[1]) {
    cache = LookupCache();
    cache.graphUids[0] = uids[0];
    cache.graphUids[1] = uids[1];
  }
  if (!bindingsPass(model, cache))
    checkBindings(model); // reports the first error
  checkMetadataCached(model, cache);
  ctx.stats["verified-nodes"] = nodes;
}

bool lastVerifyFoundTypesAsInferred(const Model &model, const Graph &g,
                                    int64_t opset) {
  if (!model.verifyMemo)
    return false;
  const VerifyMemo &memo = *model.verifyMemo;
  for (const GraphRecords &graph : memo.graphs) {
    if (graph.graphUid != g.uid())
      continue;
    // Checked by the last verify, with a record for every value.
    if (graph.usedAt != memo.epoch || graph.opset != opset ||
        graph.values.size() != g.numValueIds())
      return false;
    const ValueRecord *records = graph.values.data();
    for (const auto &n : g.nodes()) {
      bool first = true;
      for (const Value *o : n->outputs()) {
        if (!o)
          continue;
        if (o->owner() != &g)
          return false;
        const ValueRecord &r = records[o->id()];
        // The node's check passed at this revision and opset (the record
        // sits on its first output), and inference kept the declared type.
        if (first && r.producerRevision != n->revision())
          return false;
        first = false;
        if (r.definedAt != memo.epoch || r.inferredDiffers)
          return false;
      }
    }
    return true;
  }
  return false;
}

void setVerifyCountForTesting(Model &model, uint32_t count) {
  if (!model.verifyMemo)
    model.verifyMemo = std::make_shared<VerifyMemo>();
  model.verifyMemo->epoch = count;
}

} // namespace mpc
