// autocast: runs every node in fp16/bf16 or fp32 by policy, with shared Casts.
//
// Runs after infer-shapes (it needs every value's dtype) and, when training,
// after autodiff: it rewrites workingGraph(model), so forward and backward
// are cast together. loss-scale and master-weights come after it. The policy
// (passes/autocast_policy.h) gives each node a class; the pass then
//
//  1. decides each node's dtype in graph (topological) order: Lower -> the
//     target T, Fp32 -> fp32, Follow -> the promotion of its float inputs'
//     decided dtypes (PyTorch's rule: compile-time constants do not count,
//     rank-0 values count only when no tensor input does; when they differ
//     the widest wins), so a Reshape or Transpose between two fp16 MatMuls
//     stays fp16 and adds no cast pair. Keep/AnyType nodes are untouched.
//  2. converts constants (Constant outputs, non-state initializers) to the
//     dtype their users want at compile time: in place when every user
//     agrees, else one converted copy per dtype.
//  3. inserts runtime Casts where a node reads a value in another dtype:
//     one Cast per (value, dtype), shared by all users and placed before the
//     first; an existing Cast of the value is reused; a value that is itself
//     an exact Cast of a value of the wanted dtype is read at its source
//     (no ping-pong). Parameters (state) always get a runtime Cast: the
//     master-weights pass relies on "fp32 state, one Cast to fp16".
//  4. keeps graph inputs and outputs (update_binding and users read them by
//     name) in their dtypes, and the loss (mpc.loss) in fp32: the value
//     keeps its name and becomes a Cast of the low-precision result. A
//     gradient output (mpc.grads) that became wider than it was stays wide.
//
// Integer and bool values are never cast; nodes touching fp64 are left as
// they are. --precision=fp32 changes nothing. Every decision, and every Cast
// inserted, is recorded with its rule in the model's precision map
// (passes/precision_map.h) for mpc-opt --explain and --dot.
#include "ir/step_metadata.h"
#include "passes/autocast_node_index.h"
#include "passes/autocast_policy.h"
#include "passes/loss_islands.h"
#include "passes/pass.h"
#include "passes/precision_map.h"
#include "passes/shape_inference.h"
#include "support/diagnostics.h"
#include "support/joined.h"

#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

namespace mpc {
namespace {

constexpr const char *kPass = "autocast";

bool isConstantNode(const Node *n) { return n && n->isOp("", "Constant"); }

/// "<name>_<dtype>" ("h_fp16"), built in one buffer: the name hint of a
/// value's Cast (a Cast per value crossing a precision boundary).
std::string dtypeSuffixed(const std::string &name, DType t) {
  return joined(name, "_", dtypeName(t));
}

/// The dtype a set of float dtypes promotes to: the common one, else fp32
/// (fp16 and bf16 meet in fp32), or fp64 if any is fp64.
DType promote(const std::vector<DType> &types) {
  if (types.empty())
    return DType::Undefined;
  bool allSame = true, anyF64 = false;
  for (DType t : types) {
    allSame = allSame && t == types[0];
    anyF64 = anyF64 || t == DType::F64;
  }
  if (allSame)
    return types[0];
  return anyF64 ? DType::F64 : DType::F32;
}

class Autocast {
public:
  /// What the pass did, for the statistics.
  struct Stats {
    int64_t castsInserted = 0, nodesLowered = 0, constantsConverted = 0;
  };

  Autocast(Model &model, const CompileOptions &options, DType target)
      : model_(model), g_(workingGraph(model)), target_(target),
        policy_(AutocastPolicy::fromOptions(options)) {
    if (const std::string *seed = readMeta(model, meta::kGradSeed))
      gradSeed_ = g_.findValue(*seed);
    if (const std::string *loss = readMeta(model, meta::kLoss))
      loss_ = g_.findValue(*loss);
    for (const std::string &name : readMeta(model, meta::kGrads))
      if (Value *v = g_.findValue(name))
        grads_.insert(v);
    if (options.recordPrecision)
      map_ = &startPrecisionMap(model, g_);
    else
      model.precisionMap.reset(); // would describe a graph autocast changed
  }

  void run() {
    // The node list and each node's class, computed once: the steps up to
    // insertCasts neither add nor move nodes, and each asks for the class
    // of every node. What is decided per node lives in vectors parallel to
    // the list (nodeIndex_ finds a node's position).
    nodes_ = g_.nodeList();
    nodeIndex_.emplace(g_, nodes_);
    const std::vector<Node *> &nodes = nodes_;
    classes_.reserve(nodes.size());
    decisions_.resize(nodes.size());
    uint32_t numWants = 0; // each node's slice of wants_, in node order
    for (size_t k = 0; k < nodes.size(); ++k) {
      classes_.push_back(policy_.explain(*nodes[k]));
      decisions_[k].firstWant = numWants;
      decisions_[k].numWants = uint32_t(nodes[k]->numInputs());
      numWants += decisions_[k].numWants;
    }
    wants_.assign(numWants, DType::Undefined);
    markLossIslands();
    const std::vector<Classification> &classes = classes_;
    recordOriginalTypes(nodes, classes);
    for (size_t i = 0; i < nodes.size(); ++i)
      decide(*nodes[i], classes[i], decisions_[i]);
    sinkCasts(nodes, classes);
    convertConstants();
    insertCasts();
    keepLossFp32();
    keepOutputTypes();
    reinfer();
    recordInsertedCasts();
  }

  const Stats &stats() const { return stats_; }

private:
  /// What node n reads: the dtype wanted for each input (Undefined: any),
  /// wants_[firstWant, firstWant + numWants) (one array for all nodes, not
  /// a vector per node).
  struct Decision {
    DType dtype = DType::Undefined; ///< what the node runs in; Undefined: as is
    uint32_t firstWant = 0, numWants = 0;
  };
  DType *wantsOf(const Decision &d) { return wants_.data() + d.firstWant; }
  const DType *wantsOf(const Decision &d) const {
    return wants_.data() + d.firstWant;
  }

  /// The nodes of a decomposed loss (passes/loss_islands.h) run in fp32,
  /// as PyTorch autocast runs the loss op: their Follow class becomes Fp32.
  /// A user's override (--fp16-ops, --fp32-nodes) wins over the island.
  void markLossIslands() {
    auto islands = findLossIslands(g_, loss_);
    if (islands.empty())
      return;
    for (size_t k = 0; k < nodes_.size(); ++k) {
      Classification &c = classes_[k];
      auto it = islands.find(nodes_[k]);
      if (it == islands.end() || c.source != ClassSource::Table ||
          c.cls != PrecisionClass::Follow)
        continue;
      c.cls = PrecisionClass::Fp32;
      c.source = ClassSource::LossIsland;
      c.island = it->second;
    }
  }

  /// `classes[i]` is policy_.explain(*nodes[i]).
  void recordOriginalTypes(const std::vector<Node *> &nodes,
                           const std::vector<Classification> &classes) {
    for (Value *v : g_.inputs())
      original_.set(v, v->dtype);
    for (Value *v : g_.initializers())
      original_.set(v, v->dtype);
    for (size_t k = 0; k < nodes.size(); ++k) {
      Node *n = nodes[k];
      // Only the nodes autocast decides need types; untouched ones (ops of
      // other domains, Shape) may stay untyped.
      PrecisionClass cls = classes[k].cls;
      bool decided = cls == PrecisionClass::Lower ||
                     cls == PrecisionClass::Fp32 ||
                     cls == PrecisionClass::Follow;
      for (size_t i = 0; decided && i < n->numInputs(); ++i)
        if (Value *v = n->input(i); v && v->dtype == DType::Undefined)
          errorAt(*n) << "input '" << v->name()
                      << "' has no type; autocast needs typed values (run "
                         "infer-shapes first)";
      for (Value *o : n->outputs()) {
        if (!o)
          continue;
        if (decided && o->dtype == DType::Undefined)
          errorAt(*n) << "output '" << o->name()
                      << "' has no type; autocast needs typed values (run "
                         "infer-shapes first)";
        original_.set(o, o->dtype);
      }
    }
  }

  /// A value whose data is known at compile time and that is no model state:
  /// converting it costs nothing at run time. The grad seed is excluded: the
  /// loss-scale pass replaces it at run time and must find all its uses.
  bool isCompileTimeConstant(const Value *v) const {
    if (!isFloating(v->dtype) || v == gradSeed_)
      return false;
    if (v->isInitializer())
      return !v->isState;
    return isConstantNode(v->producer());
  }

  /// `how` is policy_.explain(n); fills `d`, n's entry of decisions_ (its
  /// slice of wants_ is set and all Undefined).
  void decide(Node &n, const Classification &how, Decision &d) {
    PrecisionClass cls = how.cls;
    std::vector<size_t> &floatInputs = floatInputsScratch_;
    floatInputs.clear();
    bool touchesF64 = false;
    // policy_.isUncastInput(n, i), from the table row explain() found
    // already (rather than a lookup by op name per input).
    auto uncast = [&](size_t i) {
      return how.entry && how.entry->isUncastInput(i);
    };
    for (size_t i = 0; i < n.numInputs(); ++i) {
      Value *v = n.input(i);
      if (!v || !isFloating(v->dtype) || uncast(i))
        continue;
      floatInputs.push_back(i);
      touchesF64 = touchesF64 || v->dtype == DType::F64;
    }
    for (Value *o : n.outputs())
      touchesF64 = touchesF64 || (o && o->dtype == DType::F64);

    // Nodes without float inputs (Shape arithmetic, ConstantOfShape, int
    // ops) make their output dtype from attributes: nothing to decide.
    if (floatInputs.empty() || cls == PrecisionClass::AnyType) {
      if (map_)
        map_->record(n, untouchedRecord(n, how,
                                        cls == PrecisionClass::AnyType
                                            ? Untouched::AnyType
                                            : Untouched::NoFloatInputs));
      return;
    }
    if (touchesF64)
      cls = PrecisionClass::Keep;
    std::vector<DType> &promoted = promotedScratch_;
    promoted.clear();
    bool paramsAdapted = false;

    switch (cls) {
    case PrecisionClass::Lower:
      d.dtype = target_;
      break;
    case PrecisionClass::Fp32:
      d.dtype = DType::F32;
      break;
    case PrecisionClass::Follow:
      d.dtype = followDType(n, floatInputs, &promoted, &paramsAdapted);
      break;
    case PrecisionClass::Keep:
    case PrecisionClass::AnyType:
      break;
    }

    DType *wants = wantsOf(d);
    if (d.dtype == DType::Undefined) {
      // Untouched: read every float input as it was before autocast.
      for (size_t i : floatInputs)
        wants[i] = original_.at(n.input(i));
    } else {
      for (size_t i : floatInputs)
        wants[i] = d.dtype;
      for (Value *o : n.outputs())
        if (o && isFloating(o->dtype))
          o->dtype = d.dtype;
      if (d.dtype == target_)
        ++stats_.nodesLowered;
    }
    if (map_)
      map_->record(n, cls == PrecisionClass::Keep
                          ? untouchedRecord(n, how,
                                            touchesF64 ? Untouched::Fp64
                                                       : Untouched::Keep)
                          : decidedRecord(n, how, d.dtype, target_,
                                          policy_.fp32NodesPattern(), promoted,
                                          paramsAdapted));
  }

  /// Follow: the promotion of the inputs' decided dtypes, where tensors
  /// outrank rank-0 values and constants do not count (they adapt at
  /// compile time), as in PyTorch's type promotion. Parameters (fp32 state)
  /// adapt too when the node also reads a computed tensor: in PyTorch a
  /// Linear's bias joins its fp16 matrix product, and the exporter's
  /// MatMul + Add(bias) must not widen the activation back to fp32 (the
  /// parameter gets its one runtime Cast, shared with its other users).
  /// Undefined when only constants are read: the node then runs as it did.
  /// `promoted` (optional) receives the dtypes that were promoted;
  /// `paramsAdapted` (optional) whether parameters were left out.
  DType followDType(const Node &n, const std::vector<size_t> &floatInputs,
                    std::vector<DType> *promoted = nullptr,
                    bool *paramsAdapted = nullptr) {
    // Scratch vectors kept by the pass: this runs for most nodes.
    std::vector<DType> &computed = followScratch_[0],
                       &computedScalars = followScratch_[1],
                       &params = followScratch_[2],
                       &paramScalars = followScratch_[3];
    for (std::vector<DType> *v :
         {&computed, &computedScalars, &params, &paramScalars})
      v->clear();
    for (size_t i : floatInputs) {
      const Value *v = n.input(i);
      if (isCompileTimeConstant(v))
        continue;
      bool rank0 = v->hasShape && v->dims.empty();
      bool param = v->isState && v->isInitializer();
      if (param)
        (rank0 ? paramScalars : params).push_back(v->dtype);
      else
        (rank0 ? computedScalars : computed).push_back(v->dtype);
    }
    bool anyComputed = !computed.empty() || !computedScalars.empty();
    if (paramsAdapted)
      *paramsAdapted =
          anyComputed && (!params.empty() || !paramScalars.empty());
    const std::vector<DType> &tensors = anyComputed ? computed : params;
    const std::vector<DType> &scalars =
        anyComputed ? computedScalars : paramScalars;
    const std::vector<DType> &counted = tensors.empty() ? scalars : tensors;
    if (promoted)
      *promoted = counted;
    return promote(counted);
  }

  /// A use that does not care about the value's dtype: it reads the shape.
  bool readsOnlyShape(const Use &u) const {
    const Node *user = u.user;
    if (user->isOp("", "Shape") || user->isOp("", "Size"))
      return true;
    // policy_.isUncastInput(*user, i), from the row explain() found.
    size_t k = nodeIndex_->find(user);
    if (k == AutocastNodeIndex::npos)
      return policy_.isUncastInput(*user, size_t(u.index));
    const PolicyEntry *e = classes_[k].entry;
    return e && e->isUncastInput(size_t(u.index));
  }

  /// Moves a Cast to T from after a cast-commuting Follow node (Transpose,
  /// Reshape, Relu, ...) to before it when every user wants T: the result is
  /// the same bits, and the input's Cast is usually shared (a weight's one
  /// fp16 copy feeds both the forward MatMul and the backward's Transpose).
  /// Reverse order lets a whole chain of such nodes flip, last first.
  /// `nodes` is the node list decide() saw, `classes[i]` the class of
  /// nodes[i].
  void sinkCasts(const std::vector<Node *> &nodes,
                 const std::vector<Classification> &classes) {
    for (size_t k = nodes.size(); k-- > 0;) {
      Node &n = *nodes[k];
      Decision &d = decisions_[k];
      // policy_.castCommutes(n), from the table row explain() found.
      bool castCommutes = classes[k].entry && classes[k].entry->castCommutes;
      if (d.dtype == DType::Undefined || d.dtype == target_ || !castCommutes ||
          classes[k].cls != PrecisionClass::Follow)
        continue;
      DType *wants = wantsOf(d);
      size_t floatInputs = 0;
      for (size_t i = 0; i < d.numWants; ++i)
        floatInputs += wants[i] != DType::Undefined;
      bool allWantTarget = floatInputs == 1;
      for (Value *o : n.outputs()) {
        if (!allWantTarget || !o || !isFloating(o->dtype))
          continue;
        if (o->uses().empty() || o->isGraphOutput() || o == loss_)
          allWantTarget = false;
        for (const Use &u : o->uses())
          if (!readsOnlyShape(u) && wantAt(u) != target_)
            allWantTarget = false;
      }
      if (!allWantTarget)
        continue;
      d.dtype = target_;
      for (size_t i = 0; i < d.numWants; ++i)
        if (wants[i] != DType::Undefined)
          wants[i] = target_;
      for (Value *o : n.outputs())
        if (o && isFloating(o->dtype))
          o->dtype = target_;
      ++stats_.nodesLowered;
      if (map_)
        map_->record(n, followUsersRecord(target_));
    }
  }

  /// The wanted dtype at a use, or the value's own dtype when the user takes
  /// any dtype (so a Cast or Shape of a constant sees the same data).
  DType wantAt(const Use &u) const {
    size_t k = nodeIndex_->find(u.user);
    DType w = k == AutocastNodeIndex::npos ||
                      size_t(u.index) >= decisions_[k].numWants
                  ? DType::Undefined
                  : wantsOf(decisions_[k])[size_t(u.index)];
    return w == DType::Undefined ? u.user->input(size_t(u.index))->dtype : w;
  }

  void convertConstants() {
    std::vector<Value *> constants;
    for (Value *v : g_.initializers())
      if (isCompileTimeConstant(v))
        constants.push_back(v);
    for (Node *n : g_.nodeList())
      if (isConstantNode(n) && n->output(0) &&
          isCompileTimeConstant(n->output(0)))
        constants.push_back(n->output(0));

    for (Value *c : constants) {
      std::set<DType> wanted;
      for (const Use &u : c->uses())
        wanted.insert(wantAt(u));
      if (c->isGraphOutput())
        wanted.insert(c->dtype);
      wanted.erase(DType::Undefined);
      if (wanted.size() == 1 && *wanted.begin() == c->dtype)
        continue;
      TensorPtr data = constantValue(*c);
      if (wanted.size() == 1) {
        convertInPlace(c, *data, *wanted.begin());
        continue;
      }
      std::map<DType, Value *> copies;
      std::vector<Use> uses = c->uses();
      for (const Use &u : uses) {
        DType w = wantAt(u);
        if (w == c->dtype)
          continue;
        Value *&copy = copies[w];
        if (!copy) {
          copy = g_.addInitializer(c->name() + "_" + dtypeName(w),
                                   data->castTo(w));
          copy->isState = false;
          ++stats_.constantsConverted;
        }
        u.user->setInput(size_t(u.index), copy);
      }
    }
  }

  void convertInPlace(Value *c, const Tensor &data, DType to) {
    auto converted = std::make_shared<Tensor>(data.castTo(to));
    if (c->isInitializer()) {
      c->setInitializer(converted);
    } else {
      Node *k = c->producer();
      k->removeAttr("value_float");
      k->removeAttr("value_floats");
      Attribute a;
      a.kind = Attribute::Kind::Tensor;
      a.t = converted;
      k->setAttr("value", a);
      if (map_)
        map_->record(*k, constantConvertedRecord(to));
    }
    c->dtype = to;
    ++stats_.constantsConverted;
  }

  /// The graph's nodes are still nodes_ here, in that order.
  void insertCasts() {
    placed_.assign(nodes_.size(), false);
    for (size_t k = 0; k < nodes_.size(); ++k) {
      Node *n = nodes_[k];
      const Decision &d = decisions_[k];
      for (size_t i = 0; i < d.numWants && i < n->numInputs(); ++i) {
        Value *v = n->input(i);
        DType want = wantsOf(d)[i];
        if (v && want != DType::Undefined && v->dtype != want)
          n->setInput(i, castOf(v, want, n));
      }
      placed_[k] = true;
    }
  }

  /// Whether n is one of the Casts this pass made: the only nodes added
  /// since nodes_ was listed.
  bool created(const Node *n) const {
    return n && nodeIndex_->find(n) == AutocastNodeIndex::npos;
  }

  /// Whether node c is already at its final place, before the node
  /// insertCasts is at (the Casts made here are placed where made).
  bool placed(const Node *c) const {
    size_t k = nodeIndex_->find(c);
    return k == AutocastNodeIndex::npos || placed_[k];
  }

  /// v in dtype `to`, readable just before `user`.
  Value *castOf(Value *v, DType to, Node *user) {
    auto key = std::make_pair(v, to);
    if (auto it = casts_.find(key); it != casts_.end())
      return it->second;
    Value *result = nullptr;
    // No ping-pong: read the source of an exact (or our own) Cast instead of
    // casting its result back. A user's narrowing Cast is respected: its
    // rounding is part of what the model computes.
    Node *p = v->producer();
    if (p && p->isOp("", "Cast") && p->input(0) && p->input(0)->dtype == to &&
        (created(p) || widensExactly(to, v->dtype)))
      result = p->input(0);
    for (const Use &u : v->uses()) {
      if (result)
        break;
      Node *c = u.user;
      if (c->isOp("", "Cast") && c->output(0) &&
          c->attrInt("to", 0) == toOnnxDataType(to)) {
        // A Cast placed after `user` must move up to be readable by it; its
        // input v is defined before `user`, so that keeps the order valid.
        if (!placed(c)) {
          g_.moveBefore(c, user);
          placed_[nodeIndex_->find(c)] = true;
        }
        result = c->output(0);
      }
    }
    if (!result) {
      Node *c = makeCast(v, to, dtypeSuffixed(v->name(), to), user);
      result = c->output(0);
    }
    casts_[key] = result;
    return result;
  }

  Node *makeCast(Value *v, DType to, std::string outputName, Node *before) {
    std::string nodeHint = joined("autocast_", v->name());
    Node *c = g_.createNodeWithOutputHint("Cast", {v}, nodeHint,
                                          std::move(outputName), "", before);
    c->setAttr("to", Attribute::ofInt(toOnnxDataType(to)));
    c->output(0)->copyTypeFrom(*v);
    c->output(0)->dtype = to;
    ++stats_.castsInserted;
    return c;
  }

  /// Gives v's name to a Cast of v to `to`, so that whoever reads the value
  /// by name (graph outputs, update_binding, mpc.loss) sees `to`; users
  /// inside the graph keep reading v. The Cast already made for v's users in
  /// that dtype is the one renamed, so no duplicate appears.
  /// Where each value is listed among the graph outputs (its positions in
  /// g_.outputs()), kept by keepOutputTypes so that castKeepingName re-points
  /// a value's slots without scanning every output per value (a training
  /// step lists one gradient per parameter).
  using OutputSlots = std::unordered_map<const Value *, std::vector<size_t>>;

  /// With `slots` (nullptr: scan the outputs) kept up to date.
  Value *castKeepingName(Value *v, DType to, OutputSlots *slots = nullptr) {
    std::string name = v->name();
    auto it = casts_.find({v, to});
    Value *out = it != casts_.end() && created(it->second->producer())
                     ? it->second
                     : nullptr;
    g_.renameValue(v, g_.uniqueValueName(dtypeSuffixed(name, v->dtype)));
    if (out) {
      g_.renameValue(out, name);
    } else {
      out = makeCast(v, to, std::move(name), nullptr)->output(0);
      casts_[{v, to}] = out;
    }
    if (!slots) {
      for (size_t i = 0; i < g_.outputs().size(); ++i)
        if (g_.outputs()[i] == v)
          g_.setOutput(i, out);
      return out;
    }
    auto at = slots->find(v);
    if (at != slots->end()) {
      std::vector<size_t> positions = std::move(at->second);
      slots->erase(at);
      for (size_t i : positions)
        g_.setOutput(i, out);
      std::vector<size_t> &moved = (*slots)[out];
      moved.insert(moved.end(), positions.begin(), positions.end());
    }
    return out;
  }

  void keepLossFp32() {
    if (loss_ && isFloating(loss_->dtype) && loss_->dtype != DType::F32 &&
        loss_->dtype != DType::F64)
      castKeepingName(loss_, DType::F32);
  }

  void keepOutputTypes() {
    std::vector<Value *> outs = g_.outputs();
    OutputSlots slots;
    for (size_t i = 0; i < outs.size(); ++i)
      slots[outs[i]].push_back(i);
    for (Value *v : outs) {
      const DType *original = original_.find(v);
      // Values created by this pass (the fp32 loss) are already right.
      if (!original || !isFloating(*original) || v->dtype == *original)
        continue;
      // A gradient that became wider (an fp16 parameter's gradient summed
      // in fp32) stays wide: loss-scale and master-weights cast every
      // gradient to fp32, so narrowing it here would only round it.
      if (grads_.count(v) && widensExactly(*original, v->dtype))
        continue;
      castKeepingName(v, *original, &slots);
    }
  }

  /// Describes every Cast this pass made, now that its users are final.
  void recordInsertedCasts() {
    if (!map_)
      return;
    const std::string *loss = readMeta(model_, meta::kLoss);
    for (Node *n : g_.nodeList())
      if (created(n))
        map_->record(*n, insertedCastRecord(*n, loss ? *loss : ""));
  }

  /// Re-runs type inference on the nodes whose dtype changed, in order, so
  /// that every output is what the op really produces from its new inputs.
  /// (Only nodes of nodes_ have a decided dtype, and insertCasts moved
  /// none of them relative to the others: nodes_ is their order.)
  void reinfer() {
    int64_t opset = model_.opsetVersion("");
    policyRows_ = autocastPolicyTable().data();
    supportedByRow_.assign(autocastPolicyTable().size(), -1);
    for (size_t k = 0; k < nodes_.size(); ++k) {
      Node *n = nodes_[k];
      if (decisions_[k].dtype == DType::Undefined ||
          !hasInferenceRule(*n, classes_[k].entry))
        continue;
      inferNode(*n, opset);
    }
  }

  /// isSupportedOp(n.domain(), n.opType()), asked once per policy table
  /// row (`entry`, n's row or nullptr) rather than by op name per node.
  bool hasInferenceRule(const Node &n, const PolicyEntry *entry) {
    // A row stands for the node's exact (domain, op) unless the node spells
    // the ONNX domain "ai.onnx": then ask by name.
    if (!entry || std::string_view(n.domain()) != entry->domain)
      return isSupportedOp(n.domain(), n.opType());
    size_t row = size_t(entry - policyRows_);
    if (supportedByRow_[row] < 0)
      supportedByRow_[row] = isSupportedOp(n.domain(), n.opType()) ? 1 : 0;
    return supportedByRow_[row] == 1;
  }

  Model &model_;
  Graph &g_;
  DType target_;
  AutocastPolicy policy_;
  Value *gradSeed_ = nullptr, *loss_ = nullptr;
  std::unordered_set<const Value *> grads_;

  /// Each value's dtype before autocast, by Value::id() (every node's
  /// inputs and outputs are looked up): a hash map only for a value of
  /// another graph. Values created later have none.
  class OriginalTypes {
  public:
    explicit OriginalTypes(const Graph &g) : g_(&g) {}
    void set(const Value *v, DType t) {
      if (v->owner() != g_) {
        others_[v] = t;
        return;
      }
      if (v->id() >= byId_.size())
        byId_.resize(g_->numValueIds(), {false, DType::Undefined});
      byId_[v->id()] = {true, t};
    }
    const DType *find(const Value *v) const {
      if (v->owner() != g_) {
        auto it = others_.find(v);
        return it == others_.end() ? nullptr : &it->second;
      }
      if (v->id() >= byId_.size() || !byId_[v->id()].first)
        return nullptr;
      return &byId_[v->id()].second;
    }
    /// Like unordered_map::at: throws std::out_of_range when v has none.
    DType at(const Value *v) const {
      if (const DType *t = find(v))
        return *t;
      throw std::out_of_range("autocast: value without an original type");
    }

  private:
    const Graph *g_;
    std::vector<std::pair<bool, DType>> byId_;
    std::unordered_map<const Value *, DType> others_;
  };
  OriginalTypes original_{g_};
  /// The graph's nodes when the pass began, and per node (same position):
  /// its class, its decision, whether insertCasts has passed it.
  std::vector<Node *> nodes_;
  std::optional<AutocastNodeIndex> nodeIndex_;
  std::vector<Classification> classes_;
  std::vector<Decision> decisions_;
  std::vector<DType> wants_; ///< Decision::firstWant indexes it
  std::vector<bool> placed_;
  /// Reused by decide() and followDType(), which run per node.
  std::vector<size_t> floatInputsScratch_;
  std::vector<DType> promotedScratch_;
  std::vector<DType> followScratch_[4];
  /// hasInferenceRule's answers by policy table row (-1: not asked yet),
  /// the rows counted from policyRows_ (the table's first).
  const PolicyEntry *policyRows_ = nullptr;
  std::vector<int8_t> supportedByRow_;
  std::map<std::pair<Value *, DType>, Value *> casts_;
  Stats stats_;
  /// Null unless CompileOptions::recordPrecision.
  PrecisionMap *map_ = nullptr;
};

} // namespace

void runAutocast(Model &model, PassContext &ctx) {
  DType target = ctx.options.precision;
  if (target != DType::F16 && target != DType::BF16 && target != DType::F32)
    throw Error(std::string(kPass) +
                ": --precision must be fp16, bf16 or "
                "fp32, got " +
                dtypeName(target));
  writeMeta(model, meta::kPrecision, dtypeName(target));
  if (target == DType::F32) {
    // Full precision: validate the overrides anyway, so a typo in a flag is
    // reported whatever the precision.
    AutocastPolicy::fromOptions(ctx.options);
    if (ctx.options.recordPrecision)
      recordFullPrecision(model, workingGraph(model));
    else
      model.precisionMap.reset();
    ctx.stats["casts-inserted"] += 0;
    ctx.stats["nodes-lowered"] += 0;
    return;
  }
  Autocast pass(model, ctx.options, target);
  pass.run();
  ctx.stats["casts-inserted"] += pass.stats().castsInserted;
  ctx.stats["nodes-lowered"] += pass.stats().nodesLowered;
  ctx.stats["constants-converted"] += pass.stats().constantsConverted;
}

} // namespace mpc
