// The in-memory graph IR every pass works on: Graph, Node, Value, Attribute.
//
// A Graph owns its Values and Nodes. Values know their producer and their uses
// (kept up to date by the mutation API below, never edited by hand), so passes
// can walk def-use chains and rewrite safely. Nodes are kept in a list that is
// a topological order; insertion points are explicit. Names are unique within
// a graph: createValue() makes a fresh name from a hint.
#pragma once

#include "ir/name_arena.h"
#include "ir/name_index.h"
#include "ir/tensor.h"
#include "ir/types.h"

#include <deque>
#include <list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace mpc {

class Graph;
class Node;
class PrecisionMap; // passes/precision_map.h
struct VerifyMemo;  // passes/verify.cpp

/// A dim's symbol ("N", "batch"), interned: one shared copy of each name for
/// the whole process. Dims are copied and compared after every pass (verify,
/// shape inference); with the name behind a pointer a Dim is 16 plain bytes
/// and two symbols compare by address. The empty symbol is a null pointer.
class DimSymbol {
public:
  DimSymbol() = default;
  /// The shared copy of `name` ("" gives the empty symbol).
  explicit DimSymbol(const std::string &name);
  bool empty() const { return name_ == nullptr; }
  const std::string &str() const;
  operator const std::string &() const { return str(); }
  friend bool operator==(DimSymbol a, DimSymbol b) {
    return a.name_ == b.name_;
  }
  friend bool operator!=(DimSymbol a, DimSymbol b) {
    return a.name_ != b.name_;
  }
  friend std::string operator+(const std::string &a, DimSymbol b) {
    return a + b.str();
  }
  friend std::string operator+(const char *a, DimSymbol b) {
    return a + b.str();
  }
  friend std::string operator+(DimSymbol a, const std::string &b) {
    return a.str() + b;
  }
  friend std::string operator+(DimSymbol a, const char *b) {
    return a.str() + b;
  }

private:
  const std::string *name_ = nullptr;
};

/// One dimension: a known size, or a symbol (e.g. "N"), or unknown (-1, "").
struct Dim {
  int64_t value = -1;
  DimSymbol symbol;

  Dim() = default;
  Dim(int64_t v) : value(v) {}
  static Dim symbolic(const std::string &s) {
    Dim d;
    d.symbol = DimSymbol(s);
    return d;
  }
  bool isKnown() const { return value >= 0; }
  bool operator==(const Dim &o) const {
    return value == o.value && symbol == o.symbol;
  }
  bool operator!=(const Dim &o) const { return !(*this == o); }
};

using Dims = std::vector<Dim>;

/// "64x10", "Nx10", "?x10".
std::string dimsToString(const Dims &dims);
/// Known dims as int64 (nullopt if any dim is unknown or symbolic).
std::optional<std::vector<int64_t>> concreteDims(const Dims &dims);
Dims toDims(const std::vector<int64_t> &dims);

/// A use of a value: `user->inputs()[index] == value`.
struct Use {
  Node *user;
  int index;
  bool operator==(const Use &o) const {
    return user == o.user && index == o.index;
  }
};

/// An SSA value: a graph input, an initializer or a node output.
class Value {
public:
  const std::string &name() const { return name_; }

  DType dtype = DType::Undefined;
  /// False when the rank is unknown.
  bool hasShape = false;
  Dims dims;

  Node *producer() const { return producer_; }
  int producerIndex() const { return producerIndex_; }
  const std::vector<Use> &uses() const { return uses_; }

  bool isInitializer() const { return initializer_ != nullptr; }
  const TensorPtr &initializer() const { return initializer_; }
  void setInitializer(TensorPtr t);
  bool isGraphInput() const { return isGraphInput_; }
  /// True when the value is among its own graph's outputs (O(1): the graph
  /// counts how often each of its values is listed).
  bool isGraphOutput() const { return outputCount_ > 0; }
  /// True while findValue(name()) on the owner returns this value: false once
  /// its node or initializer is removed or another value took its name.
  bool isLive() const { return live_; }
  /// Dense index within the owning graph (0 .. Graph::numValueIds()-1), for
  /// side tables indexed by value instead of hash maps. Never reused.
  size_t id() const { return id_; }

  /// True for model state (persistent initializers living in the main graph):
  /// parameters, optimizer moments, loss-scale state, batch-norm statistics.
  bool isState = false;

  int64_t rank() const { return int64_t(dims.size()); }
  /// Sets dtype and concrete dims at once.
  void setType(DType t, const Dims &d) {
    dtype = t;
    dims = d;
    hasShape = true;
  }
  void copyTypeFrom(const Value &o) {
    dtype = o.dtype;
    hasShape = o.hasShape;
    dims = o.dims;
  }
  std::string typeString() const; ///< "fp32[64x10]"

  Graph *owner() const { return owner_; }

  /// The value the last Graph::replaceAllUsesWith(this, v) pointed every
  /// use at (nullptr: never replaced). Once this value is gone, what named
  /// it by name (model metadata: Model::updateValueReferences) names that
  /// one instead.
  Value *replacedBy() const { return replacedBy_; }

private:
  friend class Graph;
  friend class Node;
  Value *replacedBy_ = nullptr;
  std::string name_;
  Graph *owner_ = nullptr;
  Node *producer_ = nullptr;
  int producerIndex_ = -1;
  std::vector<Use> uses_;
  TensorPtr initializer_;
  bool isGraphInput_ = false;
  bool live_ = false;
  int outputCount_ = 0;
  size_t id_ = 0;
};

/// A node attribute (the ONNX attribute kinds the supported ops use).
struct Attribute {
  enum class Kind { Float, Int, String, Tensor, Floats, Ints, Strings };
  Kind kind = Kind::Int;
  float f = 0;
  int64_t i = 0;
  std::string s;
  TensorPtr t;
  std::vector<float> floats;
  std::vector<int64_t> ints;
  std::vector<std::string> strings;

  static Attribute ofInt(int64_t v);
  static Attribute ofFloat(float v);
  static Attribute ofString(std::string v);
  static Attribute ofInts(std::vector<int64_t> v);
  static Attribute ofFloats(std::vector<float> v);
  static Attribute ofStrings(std::vector<std::string> v);
  static Attribute ofTensor(Tensor v);
};

class Node {
public:
  const std::string &opType() const { return opType_; }
  const std::string &domain() const { return domain_; }
  const std::string &name() const { return name_; }
  void setName(std::string n) { name_ = std::move(n); }
  /// Makes the node an `opType` of `domain` ("" for ONNX) in place: its
  /// name, place, inputs and output values (their ids, names and readers)
  /// stay; its attributes, which belonged to the old op, are dropped. A
  /// rewrite that changes only what a node computes then needs no new node
  /// and no new output value (ids are never reused: every per-id table of a
  /// later pass would carry the replaced one).
  void setOp(std::string opType, std::string domain);
  /// "Gemm 'fc1'" (op and name, for diagnostics).
  std::string describe() const;
  /// Whether the node is `op` of `domain` ("" for ONNX, "mpc").
  /// (string_view: a literal's length is known at compile time, so a node of
  /// another op is told apart by its length, without strlen or memcmp.)
  bool isOp(std::string_view domain, std::string_view op) const {
    return opType_ == op && domain_ == domain;
  }

  const std::vector<Value *> &inputs() const { return inputs_; }
  const std::vector<Value *> &outputs() const { return outputs_; }
  /// Input i or nullptr when omitted / out of range.
  Value *input(size_t i) const {
    return i < inputs_.size() ? inputs_[i] : nullptr;
  }
  Value *output(size_t i) const {
    return i < outputs_.size() ? outputs_[i] : nullptr;
  }
  size_t numInputs() const { return inputs_.size(); }
  size_t numOutputs() const { return outputs_.size(); }

  /// Rewires input i (keeps use lists right). v may be nullptr.
  void setInput(size_t i, Value *v);
  void addInput(Value *v);
  /// Drops trailing inputs after the first n.
  void truncateInputs(size_t n);
  /// Adds a fresh output value named from the hint.
  Value *addOutput(const std::string &nameHint);
  /// Adds an omitted (optional) output, so that a later one has its index.
  void addOmittedOutput();
  /// Makes output i omitted: its value, which nothing may read (no uses, not
  /// a graph output), stops being a value of the graph. Later outputs keep
  /// their indices.
  void omitOutput(size_t i);

  // Attributes, in insertion order (printing is deterministic).
  const std::vector<std::pair<std::string, Attribute>> &attributes() const {
    return attrs_;
  }
  // Lookups take a string_view: callers name attributes with literals, and
  // shape inference looks several up per node after every pass; a
  // std::string parameter built (and freed) a string per lookup.
  bool hasAttr(std::string_view name) const { return attr(name) != nullptr; }
  /// The attribute called `name`, or nullptr.
  const Attribute *attr(std::string_view name) const {
    for (const auto &kv : attrs_)
      if (std::string_view(kv.first) == name)
        return &kv.second;
    return nullptr;
  }
  void setAttr(const std::string &name, Attribute a);
  /// setAttr for each (name, attribute) in order, the attributes moved in;
  /// on a node without attributes the list becomes the node's own.
  void setAttrs(std::vector<std::pair<std::string, Attribute>> attrs);
  void removeAttr(const std::string &name);
  int64_t attrInt(std::string_view name, int64_t dflt) const;
  float attrFloat(std::string_view name, float dflt) const;
  std::string attrString(std::string_view name,
                         const std::string &dflt = "") const;
  std::vector<int64_t> attrInts(std::string_view name,
                                std::vector<int64_t> dflt = {}) const;
  std::vector<float> attrFloats(std::string_view name,
                                std::vector<float> dflt = {}) const;

  Graph *owner() const { return owner_; }

  /// A stamp renewed whenever the node's inputs, outputs or attributes
  /// change, unique among all nodes of the process: (node, revision) names
  /// one state of one node even after a removed node's memory is reused.
  /// It lets an analysis that ran before skip the nodes that did not change
  /// (verify's memo of inferred types, passes/verify.cpp).
  uint64_t revision() const { return revision_; }

private:
  friend class Graph;
  static uint64_t newRevision();
  void touch() { revision_ = newRevision(); }
  uint64_t revision_ = newRevision();
  std::string opType_, domain_, name_;
  std::vector<Value *> inputs_;
  std::vector<Value *> outputs_;
  std::vector<std::pair<std::string, Attribute>> attrs_;
  Graph *owner_ = nullptr;
  std::list<std::unique_ptr<Node>>::iterator self_;
};

/// A graph: inputs, initializers, nodes in topological order, outputs.
class Graph {
public:
  explicit Graph(std::string name = "graph") : name_(std::move(name)) {}
  Graph(const Graph &) = delete;
  Graph &operator=(const Graph &) = delete;

  const std::string &name() const { return name_; }
  void setName(std::string n) { name_ = std::move(n); }
  /// Unique among all graphs of the process, never reused (a freed graph's
  /// address may be): a side table that outlives a pass (verify's memo)
  /// tells by it that a graph is the one it recorded.
  uint64_t uid() const { return uid_; }

  // --- values -------------------------------------------------------------
  /// A new value with a unique name derived from the hint.
  Value *createValue(const std::string &nameHint);
  /// The value with exactly this name, or nullptr.
  Value *findValue(std::string_view name) const;
  /// A fresh unique name derived from the hint (not yet used by any value).
  std::string uniqueValueName(const std::string &hint) const;
  /// Renames a value (the new name must be unused).
  void renameValue(Value *v, const std::string &newName);
  /// One past the largest Value::id() of this graph (removed values included).
  size_t numValueIds() const { return values_.size(); }

  const std::vector<Value *> &inputs() const { return inputs_; }
  const std::vector<Value *> &outputs() const { return outputs_; }
  const std::vector<Value *> &initializers() const { return initializers_; }

  Value *addInput(const std::string &name, DType t, const Dims &dims);
  /// Adds an initializer holding `data` (name made unique if taken).
  Value *addInitializer(std::string name, Tensor data);
  Value *addInitializer(std::string name, TensorPtr data);
  void addOutput(Value *v);
  void setOutput(size_t i, Value *v);
  void removeOutput(size_t i);
  void clearOutputs();
  /// Removes an initializer with no uses (and not a graph output).
  void removeInitializer(Value *v);
  /// Turns an initializer into a graph input (for --emit=step) or back.
  void makeInitializerAnInput(Value *v);
  /// Removes a graph input with no uses (and not a graph output): an
  /// inference model does without the labels its loss read.
  void removeInput(Value *v);

  // --- nodes --------------------------------------------------------------
  /// Appends a node at the end of the node list (or before `before`).
  Node *createNode(const std::string &opType,
                   const std::vector<Value *> &inputs, size_t numOutputs,
                   const std::string &nameHint = "",
                   const std::string &domain = "", Node *before = nullptr);
  /// Like createNode but the outputs use the given exact (unique) names.
  Node *createNodeWithOutputs(const std::string &opType,
                              const std::vector<Value *> &inputs,
                              const std::vector<std::string> &outputNames,
                              const std::string &nodeName,
                              const std::string &domain = "",
                              Node *before = nullptr);
  /// The same, taking the names over instead of copying each.
  Node *createNodeWithOutputs(const std::string &opType,
                              const std::vector<Value *> &inputs,
                              std::vector<std::string> &&outputNames,
                              std::string &&nodeName,
                              const std::string &domain = "",
                              Node *before = nullptr);
  /// A node named uniqueNodeName(nodeHint) with one output, named as
  /// createValue(outputHint) names a value (the hint's buffer becomes the
  /// name): the names createNodeWithOutputs(..., {uniqueValueName(
  /// outputHint)}, uniqueNodeName(nodeHint), ...) gives, each found once.
  Node *createNodeWithOutputHint(const std::string &opType,
                                 const std::vector<Value *> &inputs,
                                 const std::string &nodeHint,
                                 std::string outputHint,
                                 const std::string &domain = "",
                                 Node *before = nullptr);
  /// Removes a node whose outputs have no uses and are not graph outputs.
  void removeNode(Node *n);
  /// Points every use of `from` (and graph outputs) at `to`.
  void replaceAllUsesWith(Value *from, Value *to);
  /// Moves node n to just before `before` (nullptr: the end).
  void moveBefore(Node *n, Node *before);

  /// Iteration over nodes in order. Safe against removal of the current node
  /// when using nodeList() copies.
  const std::list<std::unique_ptr<Node>> &nodes() const { return nodes_; }
  std::vector<Node *> nodeList() const;
  size_t numNodes() const { return nodes_.size(); }
  /// A unique node name derived from the hint.
  std::string uniqueNodeName(const std::string &hint);

  /// Re-sorts nodes topologically (stable: keeps the current order where it
  /// is already valid). Returns false if there is a cycle.
  bool topologicalSort();

  /// Deep copy of this graph (initializer data shared, not copied).
  std::unique_ptr<Graph> clone() const;

private:
  friend class Node;
  Value *newValueNamed(std::string name);
  /// A new value named `name`, owned by this graph, not yet in the name table.
  Value *allocateValue(std::string name);
  /// createValue for a hint the caller gives away (its buffer is reused).
  Value *createValueFrom(std::string nameHint);
  /// A node named `name` (already claimed) before `before` (nullptr: at the
  /// end), reading `inputs`, with room for `numOutputs` outputs and none yet.
  Node *insertNode(const std::string &opType, const std::string &domain,
                   std::string name, const std::vector<Value *> &inputs,
                   size_t numOutputs, Node *before);
  /// Makes v (nullptr: an omitted output) n's next output.
  static void appendOutput(Node *n, Value *v);
  template <class Names>
  Node *createNodeWithNames(const std::string &opType,
                            const std::vector<Value *> &inputs,
                            Names &&outputNames, std::string nodeName,
                            const std::string &domain, Node *before);
  /// Makes v the live holder of its name (an earlier holder stops being live).
  void claimName(Value *v);
  void removeUse(Value *v, Node *user, int index);
  /// Drops `name` from the name table (its holder stops being live).
  void forgetName(std::string_view name);
  /// Keeps valueSuffixFloor_ true when `name` becomes free.
  void lowerSuffixFloor(std::string_view name);

  /// A node name taken (its text in nodeNameText_), and how many names
  /// uniqueNodeName gave with it as the base.
  struct NodeNameCount {
    NodeNameCount(std::string_view name, int count)
        : text(name), count(count) {}
    std::string_view text;
    int count = 0;
    std::string_view name() const { return text; } // NameIndex's key
  };
  /// The entry for `name`, added with `count` when absent ({entry, added}).
  std::pair<NodeNameCount *, bool> claimNodeName(std::string_view name,
                                                 int count);
  /// Keeps Value::outputCount_ in step with outputs_ (own values only).
  void countOutput(Value *v, int delta) {
    if (v && v->owner_ == this)
      v->outputCount_ += delta;
  }

  static uint64_t newUid();
  const uint64_t uid_ = newUid();
  std::string name_;
  std::vector<std::unique_ptr<Value>> values_;
  /// Each live value by its name (the key is the value's own name_: Values
  /// never move, and a holder's name changes only in renameValue, which
  /// takes the entry out first).
  NameIndex<Value> valuesByName_;
  /// For a base whose generated names base_<i> were asked for: every
  /// base_<j> with 1 <= j < the floor is taken, so the search for a free
  /// one starts there (a value that frees base_<j> lowers it). Without it,
  /// N values made from one hint (fan-out gradients) probe N^2/2 names.
  mutable std::unordered_map<std::string, int> valueSuffixFloor_;
  /// The node names taken; a deque, so entries never move.
  std::deque<NodeNameCount> nodeNameCounts_;
  NameArena nodeNameText_; ///< the text of each name taken
  NameIndex<NodeNameCount> nodeNames_;
  std::list<std::unique_ptr<Node>> nodes_;
  std::vector<Value *> inputs_, outputs_, initializers_;
};

/// A training step attached to a model (ONNX TrainingInfoProto).
struct TrainingInfo {
  std::unique_ptr<Graph> algorithm;
  /// (state name, algorithm output name): after a step, state := output.
  std::vector<std::pair<std::string, std::string>> updateBinding;
};

/// A model: the main (inference) graph, optional training step, opsets.
class Model {
public:
  int64_t irVersion = 8;
  std::vector<std::pair<std::string, int64_t>> opsets = {{"", 17}};
  std::string producerName = "mpc";
  std::string producerVersion = "0.1";
  std::unique_ptr<Graph> graph = std::make_unique<Graph>("main");
  std::optional<TrainingInfo> training;
  /// Key/value metadata (ONNX metadata_props), e.g. "mpc.loss".
  std::vector<std::pair<std::string, std::string>> metadata;
  /// Where the model came from, for diagnostics ("model.onnx").
  std::string sourcePath = "<input>";
  /// Floating-point initializers that the torch exporter's signature calls
  /// buffers or constants (onnx import): they never train, and autodiff
  /// says so in a note. Not exported.
  std::vector<std::string> frozenByExporter;
  /// Why autocast gave each node its precision (mpc-opt --explain, --dot).
  /// A side table, never exported: the written model does not depend on it.
  /// Shared so that recording stays possible through a const Model (the
  /// pipeline's afterPass hook); it is no part of the model's content.
  std::shared_ptr<PrecisionMap> precisionMap;
  /// What the last verify inferred for each node (passes/verify.cpp), so the
  /// next one re-infers only the nodes a pass changed. A side table like
  /// precisionMap: never exported, made by the first verify.
  std::shared_ptr<VerifyMemo> verifyMemo;

  /// Version of an imported opset domain ("" for the default), or -1.
  int64_t opsetVersion(const std::string &domain) const;
  void setOpsetVersion(const std::string &domain, int64_t version);
  const std::string *meta(const std::string &key) const;
  /// Sets a key; one that names values (mpc.grads, mpc.loss, ...) also
  /// records which values it names, for updateValueReferences.
  void setMeta(const std::string &key, const std::string &value);

  /// Mends the metadata that names values (metadata_value_refs.cpp's
  /// kValueNamingMetadata: mpc.loss, mpc.grads, mpc.params, ...) where a
  /// name is no value's any more: the value it named when it was written
  /// is named as it is now (renamed: its new name; replaced by
  /// Graph::replaceAllUsesWith and then removed: its replacement's). A name
  /// some value holds stands. The pipeline calls it before the first pass
  /// and after every pass, so no pass keeps these names in step by hand.
  /// An entry written directly into `metadata` is taken as it reads.
  void updateValueReferences();

private:
  /// A name in a value-naming entry and the value it named (nullptr: none
  /// found); the graph's uid tells that the pointer is still the graph's.
  struct ValueRef {
    uint64_t graphUid = 0;
    Value *value = nullptr;
  };
  /// One value-naming entry: its text when last written or updated, and
  /// the value of each name in it, in order.
  struct MetadataValueRefs {
    std::string key, text;
    std::vector<ValueRef> refs;
  };
  /// The value of `name` in the working graph (the training step, else the
  /// main graph), else in the main graph.
  ValueRef findValueRef(const std::string &name) const;
  void recordValueRefs(MetadataValueRefs &r, const std::string &text);
  std::vector<MetadataValueRefs> valueRefs_;
};

} // namespace mpc
