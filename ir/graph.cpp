// Graph IR implementation: value/node ownership, use lists, mutation, cloning.
#include "ir/graph.h"

#include <algorithm>
#include <atomic>
#include <cassert>
#include <charconv>
#include <mutex>
#include <unordered_set>

namespace mpc {

DimSymbol::DimSymbol(const std::string &name) {
  if (name.empty())
    return;
  // Node-based: an element never moves, so its address is the symbol. The
  // names are few (a model's dim_params) and live until the process ends.
  static std::mutex mutex;
  static auto *names = new std::unordered_set<std::string>;
  std::lock_guard<std::mutex> lock(mutex);
  name_ = &*names->insert(name).first;
}

const std::string &DimSymbol::str() const {
  static const std::string none;
  return name_ ? *name_ : none;
}

std::string dimsToString(const Dims &dims) {
  if (dims.empty())
    return "scalar";
  std::string s;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i)
      s += "x";
    if (dims[i].isKnown())
      s += std::to_string(dims[i].value);
    else if (!dims[i].symbol.empty())
      s += dims[i].symbol;
    else
      s += "?";
  }
  return s;
}

std::optional<std::vector<int64_t>> concreteDims(const Dims &dims) {
  std::vector<int64_t> out;
  out.reserve(dims.size());
  for (const Dim &d : dims) {
    if (!d.isKnown())
      return std::nullopt;
    out.push_back(d.value);
  }
  return out;
}

Dims toDims(const std::vector<int64_t> &dims) {
  return Dims(dims.begin(), dims.end());
}

// --- Value -----------------------------------------------------------------

void Value::setInitializer(TensorPtr t) { initializer_ = std::move(t); }

std::string Value::typeString() const {
  std::string s = dtypeName(dtype);
  if (hasShape)
    s += "[" + dimsToString(dims) + "]";
  return s;
}

// --- Attribute ---------------------------------------------------------------

Attribute Attribute::ofInt(int64_t v) {
  Attribute a;
  a.kind = Kind::Int;
  a.i = v;
  return a;
}
Attribute Attribute::ofFloat(float v) {
  Attribute a;
  a.kind = Kind::Float;
  a.f = v;
  return a;
}
Attribute Attribute::ofString(std::string v) {
  Attribute a;
  a.kind = Kind::String;
  a.s = std::move(v);
  return a;
}
Attribute Attribute::ofInts(std::vector<int64_t> v) {
  Attribute a;
  a.kind = Kind::Ints;
  a.ints = std::move(v);
  return a;
}
Attribute Attribute::ofFloats(std::vector<float> v) {
  Attribute a;
  a.kind = Kind::Floats;
  a.floats = std::move(v);
  return a;
}
Attribute Attribute::ofStrings(std::vector<std::string> v) {
  Attribute a;
  a.kind = Kind::Strings;
  a.strings = std::move(v);
  return a;
}
Attribute Attribute::ofTensor(Tensor v) {
  Attribute a;
  a.kind = Kind::Tensor;
  a.t = std::make_shared<Tensor>(std::move(v));
  return a;
}

// --- Node ------------------------------------------------------------------

uint64_t Node::newRevision() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

std::string Node::describe() const {
  std::string op = domain_.empty() ? opType_ : domain_ + "." + opType_;
  return op + " '" + name_ + "'";
}

void Node::setOp(std::string opType, std::string domain) {
  opType_ = std::move(opType);
  domain_ = std::move(domain);
  attrs_.clear();
  touch();
}

void Node::setInput(size_t i, Value *v) {
  if (i >= inputs_.size())
    inputs_.resize(i + 1, nullptr);
  if (inputs_[i])
    owner_->removeUse(inputs_[i], this, int(i));
  inputs_[i] = v;
  if (v)
    v->uses_.push_back({this, int(i)});
  touch();
}

void Node::addInput(Value *v) { setInput(inputs_.size(), v); }

void Node::truncateInputs(size_t n) {
  while (inputs_.size() > n) {
    setInput(inputs_.size() - 1, nullptr);
    inputs_.pop_back();
  }
}

Value *Node::addOutput(const std::string &nameHint) {
  Value *v = owner_->createValue(nameHint);
  v->producer_ = this;
  v->producerIndex_ = int(outputs_.size());
  outputs_.push_back(v);
  touch();
  return v;
}

void Node::addOmittedOutput() {
  outputs_.push_back(nullptr);
  touch();
}

void Node::omitOutput(size_t i) {
  Value *v = output(i);
  if (!v)
    return;
  assert(v->uses_.empty() && !v->isGraphOutput());
  v->producer_ = nullptr;
  v->producerIndex_ = -1;
  owner_->forgetName(v->name_);
  // The value stays owned (pointers remain valid), as removeNode's outputs.
  outputs_[i] = nullptr;
  touch();
}

void Node::setAttr(const std::string &name, Attribute a) {
  for (auto &kv : attrs_)
    if (kv.first == name) {
      kv.second = std::move(a);
      touch();
      return;
    }
  attrs_.emplace_back(name, std::move(a));
  touch();
}

void Node::setAttrs(std::vector<std::pair<std::string, Attribute>> attrs) {
  if (attrs.empty())
    return;
  // A new node's attributes (the common case) arrive as one list: it becomes
  // the node's own unless a name repeats (setAttr keeps the first place and
  // the last value).
  bool distinct = attrs_.empty();
  for (size_t i = 1; distinct && i < attrs.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (attrs[i].first == attrs[j].first) {
        distinct = false;
        break;
      }
  if (distinct) {
    attrs_ = std::move(attrs);
    touch();
    return;
  }
  for (auto &kv : attrs)
    setAttr(kv.first, std::move(kv.second));
}

void Node::removeAttr(const std::string &name) {
  attrs_.erase(std::remove_if(attrs_.begin(), attrs_.end(),
                              [&](const auto &kv) { return kv.first == name; }),
               attrs_.end());
  touch();
}

int64_t Node::attrInt(std::string_view name, int64_t dflt) const {
  const Attribute *a = attr(name);
  return a && a->kind == Attribute::Kind::Int ? a->i : dflt;
}

float Node::attrFloat(std::string_view name, float dflt) const {
  const Attribute *a = attr(name);
  if (!a)
    return dflt;
  if (a->kind == Attribute::Kind::Float)
    return a->f;
  if (a->kind == Attribute::Kind::Int)
    return float(a->i);
  return dflt;
}

std::string Node::attrString(std::string_view name,
                             const std::string &dflt) const {
  const Attribute *a = attr(name);
  return a && a->kind == Attribute::Kind::String ? a->s : dflt;
}

std::vector<int64_t> Node::attrInts(std::string_view name,
                                    std::vector<int64_t> dflt) const {
  const Attribute *a = attr(name);
  return a && a->kind == Attribute::Kind::Ints ? a->ints : dflt;
}

std::vector<float> Node::attrFloats(std::string_view name,
                                    std::vector<float> dflt) const {
  const Attribute *a = attr(name);
  return a && a->kind == Attribute::Kind::Floats ? a->floats : dflt;
}

// --- Graph -----------------------------------------------------------------

uint64_t Graph::newUid() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

/// Rewrites the suffix of `name` after its first `stem` chars to the decimal
/// `i`: one buffer for every candidate name instead of a new base + "_" +
/// to_string(i) string per try.
static void setSuffix(std::string &name, size_t stem, int i) {
  char digits[16];
  auto end = std::to_chars(digits, digits + sizeof digits, i).ptr;
  // One call (resize then append were two, each out of line).
  name.replace(stem, std::string::npos, digits, size_t(end - digits));
}

std::string Graph::uniqueValueName(const std::string &hint) const {
  static const std::string kDefault = "v";
  const std::string &base = hint.empty() ? kDefault : hint;
  if (!valuesByName_.find(base))
    return base;
  std::string candidate;
  candidate.reserve(base.size() + 12);
  candidate = base;
  candidate += '_';
  const size_t stem = candidate.size();
  int &floor = valueSuffixFloor_.try_emplace(base, 1).first->second;
  for (int i = floor;; ++i) {
    setSuffix(candidate, stem, i);
    if (!valuesByName_.find(candidate)) {
      floor = i; // not claimed here: the next search tries it again first
      return candidate;
    }
  }
}

/// When `name` is base_<i> (a name uniqueValueName could have made) and
/// base's floor is above i, lowers it to i: the name is free again.
void Graph::lowerSuffixFloor(std::string_view name) {
  if (valueSuffixFloor_.empty())
    return;
  size_t underscore = name.rfind('_');
  if (underscore == std::string_view::npos || underscore + 1 == name.size() ||
      name.size() - underscore > 10 || name[underscore + 1] == '0')
    return;
  int i = 0;
  for (char c : name.substr(underscore + 1)) {
    if (c < '0' || c > '9')
      return;
    i = i * 10 + (c - '0');
  }
  auto it = valueSuffixFloor_.find(std::string(name.substr(0, underscore)));
  if (it != valueSuffixFloor_.end() && i < it->second)
    it->second = i;
}

Value *Graph::allocateValue(std::string name) {
  // Default-initialized (every member has an initializer): make_unique's
  // value-initialization would zero the whole object first.
  std::unique_ptr<Value> v(new Value);
  v->name_ = std::move(name);
  v->owner_ = this;
  v->id_ = values_.size();
  Value *raw = v.get();
  values_.push_back(std::move(v));
  return raw;
}

void Graph::claimName(Value *v) {
  // A previous holder only when a pass broke the unique-name rule (verify
  // reports it): v takes the name over.
  if (Value *previous = valuesByName_.assign(v))
    previous->live_ = false;
  v->live_ = true;
}

Value *Graph::newValueNamed(std::string name) {
  assert(!valuesByName_.find(name));
  Value *v = allocateValue(std::move(name));
  claimName(v);
  return v;
}

Value *Graph::createValue(const std::string &nameHint) {
  return createValueFrom(nameHint);
}

Value *Graph::createValueFrom(std::string nameHint) {
  // The value first, so that the index can key it by its own name. The name
  // is uniqueValueName(nameHint)'s: the hint when free (usually), else the
  // first free hint_<i>; each try is one probe that also claims the name.
  if (nameHint.empty())
    nameHint = "v";
  Value *v = allocateValue(std::move(nameHint));
  if (!valuesByName_.insert(v).second) {
    std::string &name = v->name_;
    int &floor = valueSuffixFloor_.try_emplace(name, 1).first->second;
    name.reserve(name.size() + 12);
    name += '_';
    const size_t stem = name.size();
    for (int i = floor;; ++i) {
      setSuffix(name, stem, i);
      if (valuesByName_.insert(v).second) {
        floor = i + 1;
        break;
      }
    }
  }
  v->live_ = true;
  return v;
}

Value *Graph::findValue(std::string_view name) const {
  return valuesByName_.find(name);
}

void Graph::renameValue(Value *v, const std::string &newName) {
  if (v->name_ == newName)
    return;
  assert(!valuesByName_.find(newName));
  forgetName(v->name_); // before the name changes: the index reads it
  v->name_ = newName;
  claimName(v);
}

void Graph::forgetName(std::string_view name) {
  if (Value *holder = valuesByName_.erase(name)) {
    holder->live_ = false;
    lowerSuffixFloor(name);
  }
}

Value *Graph::addInput(const std::string &name, DType t, const Dims &dims) {
  Value *v = createValue(name);
  v->setType(t, dims);
  v->isGraphInput_ = true;
  inputs_.push_back(v);
  return v;
}

Value *Graph::addInitializer(std::string name, Tensor data) {
  return addInitializer(std::move(name),
                        std::make_shared<Tensor>(std::move(data)));
}

Value *Graph::addInitializer(std::string name, TensorPtr data) {
  Value *v = createValueFrom(std::move(name));
  v->dtype = data->dtype;
  v->dims = toDims(data->dims); // moved in, not copied as setType would
  v->hasShape = true;
  v->initializer_ = std::move(data);
  initializers_.push_back(v);
  return v;
}

void Graph::addOutput(Value *v) {
  outputs_.push_back(v);
  countOutput(v, +1);
}

void Graph::setOutput(size_t i, Value *v) {
  Value *&slot = outputs_.at(i);
  countOutput(slot, -1);
  slot = v;
  countOutput(v, +1);
}

void Graph::removeOutput(size_t i) {
  countOutput(outputs_.at(i), -1);
  outputs_.erase(outputs_.begin() + i);
}

void Graph::clearOutputs() {
  for (Value *v : outputs_)
    countOutput(v, -1);
  outputs_.clear();
}

void Graph::removeInitializer(Value *v) {
  auto it = std::find(initializers_.begin(), initializers_.end(), v);
  if (it == initializers_.end())
    return; // already removed: its name may belong to a newer value now
  initializers_.erase(it);
  v->initializer_.reset();
  // Like a removed node's outputs: the value stays owned (pointers remain
  // valid) but its name is free again and findValue no longer returns it.
  if (valuesByName_.find(v->name_) == v) {
    v->live_ = false;
    valuesByName_.erase(v->name_);
    lowerSuffixFloor(v->name_);
  }
}

void Graph::removeInput(Value *v) {
  auto it = std::find(inputs_.begin(), inputs_.end(), v);
  if (it == inputs_.end())
    return;
  assert(v->uses_.empty() && !v->isGraphOutput());
  inputs_.erase(it);
  v->isGraphInput_ = false;
  if (valuesByName_.find(v->name_) == v) {
    v->live_ = false;
    valuesByName_.erase(v->name_);
    lowerSuffixFloor(v->name_);
  }
}

void Graph::makeInitializerAnInput(Value *v) {
  auto it = std::find(initializers_.begin(), initializers_.end(), v);
  if (it != initializers_.end()) {
    initializers_.erase(it);
    v->initializer_.reset();
    v->isGraphInput_ = true;
    inputs_.push_back(v);
  }
}

std::pair<Graph::NodeNameCount *, bool>
Graph::claimNodeName(std::string_view name, int count) {
  const uint64_t hash = hashName(name);
  if (NodeNameCount *taken = nodeNames_.find(name, hash))
    return {taken, false};
  NodeNameCount &entry =
      nodeNameCounts_.emplace_back(nodeNameText_.keep(name), count);
  nodeNames_.insert(&entry, hash);
  return {&entry, true};
}

std::string Graph::uniqueNodeName(const std::string &hint) {
  static const std::string kDefault = "node";
  const std::string &base = hint.empty() ? kDefault : hint;
  // The count of names handed out for base: base itself first, then
  // base_<count>. (Entries live in a deque: the reference stays valid while
  // names are added below.)
  int &count = claimNodeName(base, 0).first->count;
  if (count++ == 0)
    return base; // taken already (claimNodeName above)
  std::string name;
  name.reserve(base.size() + 12);
  name = base;
  name += '_';
  const size_t stem = name.size();
  // A generated name could collide with an imported "x_1"; keep going.
  for (;; ++count) {
    setSuffix(name, stem, count - 1);
    if (claimNodeName(name, 1).second)
      return name;
  }
}

Node *Graph::insertNode(const std::string &opType, const std::string &domain,
                        std::string name, const std::vector<Value *> &inputs,
                        size_t numOutputs, Node *before) {
  std::unique_ptr<Node> n(new Node); // as in allocateValue: not zeroed first
  n->opType_ = opType;
  if (!domain.empty()) // most nodes are of the default domain
    n->domain_ = domain;
  n->name_ = std::move(name);
  n->owner_ = this;
  Node *raw = n.get();
  auto pos = before ? before->self_ : nodes_.end();
  raw->self_ = nodes_.insert(pos, std::move(n));
  // The node is new (a fresh revision, no uses yet): wire inputs and outputs
  // directly rather than through setInput/addOutput, which resize and
  // re-stamp the node once per input and output. The inputs are copied in
  // one go (one allocation, no capacity check per input).
  raw->inputs_.assign(inputs.begin(), inputs.end());
  for (size_t i = 0; i < inputs.size(); ++i)
    if (Value *v = inputs[i])
      v->uses_.push_back({raw, int(i)});
  raw->outputs_.reserve(numOutputs);
  return raw;
}

void Graph::appendOutput(Node *n, Value *v) {
  if (v) {
    v->producer_ = n;
    v->producerIndex_ = int(n->outputs_.size());
  }
  n->outputs_.push_back(v);
}

Node *Graph::createNode(const std::string &opType,
                        const std::vector<Value *> &inputs, size_t numOutputs,
                        const std::string &nameHint, const std::string &domain,
                        Node *before) {
  std::string nodeName = uniqueNodeName(nameHint.empty() ? opType : nameHint);
  // "<node>_out", or "<node>_out<i>", built before the node takes its name.
  std::string hint;
  hint.reserve(nodeName.size() + 16);
  hint = nodeName;
  hint += "_out";
  Node *raw = insertNode(opType, domain, std::move(nodeName), inputs,
                         numOutputs, before);
  // Each output takes its unique name when createValue makes it below, one
  // at a time (a name is taken only once its value exists).
  if (numOutputs == 1) {
    appendOutput(raw, createValueFrom(std::move(hint)));
    return raw;
  }
  const size_t stem = hint.size();
  for (size_t i = 0; i < numOutputs; ++i) {
    setSuffix(hint, stem, int(i));
    appendOutput(raw, createValue(hint));
  }
  return raw;
}

template <class Names>
Node *Graph::createNodeWithNames(const std::string &opType,
                                 const std::vector<Value *> &inputs,
                                 Names &&outputNames, std::string nodeName,
                                 const std::string &domain, Node *before) {
  // Usually uniqueNodeName claimed the name already: this only finds it.
  claimNodeName(nodeName, 1);
  Node *raw = insertNode(opType, domain, std::move(nodeName), inputs,
                         outputNames.size(), before);
  for (auto &outName : outputNames) {
    if (outName.empty()) {
      appendOutput(raw, nullptr); // omitted optional output
      continue;
    }
    // Moved out of a list given away, copied from a const one.
    appendOutput(raw, newValueNamed(std::move(outName)));
  }
  return raw;
}

Node *Graph::createNodeWithOutputs(const std::string &opType,
                                   const std::vector<Value *> &inputs,
                                   const std::vector<std::string> &outputNames,
                                   const std::string &nodeName,
                                   const std::string &domain, Node *before) {
  return createNodeWithNames(opType, inputs, outputNames, nodeName, domain,
                             before);
}

Node *Graph::createNodeWithOutputs(const std::string &opType,
                                   const std::vector<Value *> &inputs,
                                   std::vector<std::string> &&outputNames,
                                   std::string &&nodeName,
                                   const std::string &domain, Node *before) {
  return createNodeWithNames(opType, inputs, outputNames, std::move(nodeName),
                             domain, before);
}

Node *Graph::createNodeWithOutputHint(const std::string &opType,
                                      const std::vector<Value *> &inputs,
                                      const std::string &nodeHint,
                                      std::string outputHint,
                                      const std::string &domain, Node *before) {
  Node *raw =
      insertNode(opType, domain, uniqueNodeName(nodeHint), inputs, 1, before);
  appendOutput(raw, createValueFrom(std::move(outputHint)));
  return raw;
}

void Graph::removeUse(Value *v, Node *user, int index) {
  auto &uses = v->uses_;
  auto it = std::find(uses.begin(), uses.end(), Use{user, index});
  if (it != uses.end())
    uses.erase(it);
}

void Graph::removeNode(Node *n) {
  for (size_t i = 0; i < n->inputs_.size(); ++i)
    if (n->inputs_[i])
      removeUse(n->inputs_[i], n, int(i));
  for (Value *out : n->outputs_) {
    if (!out)
      continue;
    assert(out->uses_.empty());
    out->producer_ = nullptr;
    out->producerIndex_ = -1;
    forgetName(out->name_);
    // Values stay owned (pointers remain valid) but are no longer findable.
  }
  nodes_.erase(n->self_);
}

void Graph::replaceAllUsesWith(Value *from, Value *to) {
  if (from == to)
    return;
  if (to)
    from->replacedBy_ = to;
  // Every use of `from` goes, so its list is taken whole rather than copied
  // and then emptied one use at a time (setInput finds nothing to remove).
  std::vector<Use> uses = std::move(from->uses_);
  from->uses_.clear();
  for (const Use &u : uses)
    u.user->setInput(size_t(u.index), to);
  // A training step lists every state update among its outputs: scan them
  // only for a value that is one (replacing values is what passes do most).
  if (from->owner_ == this && !from->isGraphOutput())
    return;
  for (Value *&o : outputs_)
    if (o == from) {
      countOutput(from, -1);
      o = to;
      countOutput(to, +1);
    }
}

void Graph::moveBefore(Node *n, Node *before) {
  auto pos = before ? before->self_ : nodes_.end();
  nodes_.splice(pos, nodes_, n->self_);
}

std::vector<Node *> Graph::nodeList() const {
  std::vector<Node *> out;
  out.reserve(nodes_.size());
  for (const auto &n : nodes_)
    out.push_back(n.get());
  return out;
}

bool Graph::topologicalSort() {
  // Kahn's algorithm, picking ready nodes in their current order.
  std::vector<Node *> order = nodeList();
  std::unordered_map<Node *, size_t> position;
  for (size_t i = 0; i < order.size(); ++i)
    position[order[i]] = i;
  std::vector<int> pending(order.size(), 0);
  for (size_t i = 0; i < order.size(); ++i)
    for (Value *in : order[i]->inputs_)
      if (in && in->producer_)
        ++pending[i];
  std::vector<size_t> ready;
  for (size_t i = 0; i < order.size(); ++i)
    if (pending[i] == 0)
      ready.push_back(i);
  std::vector<Node *> sorted;
  // A min-heap by position keeps the original order where possible.
  auto cmp = [](size_t a, size_t b) { return a > b; };
  std::make_heap(ready.begin(), ready.end(), cmp);
  while (!ready.empty()) {
    std::pop_heap(ready.begin(), ready.end(), cmp);
    size_t i = ready.back();
    ready.pop_back();
    sorted.push_back(order[i]);
    for (Value *out : order[i]->outputs_) {
      if (!out)
        continue;
      for (const Use &u : out->uses_) {
        size_t j = position[u.user];
        // A node may use the same value twice: count each use.
        if (--pending[j] == 0) {
          ready.push_back(j);
          std::push_heap(ready.begin(), ready.end(), cmp);
        }
      }
    }
  }
  if (sorted.size() != order.size())
    return false;
  for (Node *n : sorted)
    nodes_.splice(nodes_.end(), nodes_, n->self_);
  return true;
}

std::unique_ptr<Graph> Graph::clone() const {
  auto g = std::make_unique<Graph>(name_);
  g->values_.reserve(valuesByName_.size());
  g->valuesByName_.reserve(valuesByName_.size());
  g->nodeNames_.reserve(nodes_.size());
  // The copy of each value, by Value::id() (nullptr: not copied).
  std::vector<Value *> map(values_.size(), nullptr);
  auto mapped = [&](const Value *v) -> Value * {
    return v && v->owner_ == this ? map[v->id_] : nullptr;
  };
  // The copy of `from`, with room for the uses the copied nodes will give it
  // (the original's: each list is allocated once, never grown).
  auto copyOf = [&](const Value *from, Value *to) {
    to->uses_.reserve(from->uses_.size());
    map[from->id_] = to;
  };
  for (const Value *in : inputs_) {
    Value *v = g->addInput(in->name(), in->dtype, in->dims);
    v->hasShape = in->hasShape;
    copyOf(in, v);
  }
  for (const Value *init : initializers_) {
    Value *v = g->addInitializer(init->name(), init->initializer());
    v->copyTypeFrom(*init);
    v->isState = init->isState;
    copyOf(init, v);
  }
  // Outputs first, inputs second: a node may use a value that a later node
  // defines (a graph that is not sorted yet) and must keep that edge.
  for (const auto &n : nodes_) {
    std::unique_ptr<Node> c(new Node);
    c->opType_ = n->opType_;
    c->domain_ = n->domain_;
    c->name_ = n->name_;
    c->owner_ = g.get();
    c->attrs_ = n->attrs_;
    g->claimNodeName(n->name_, 1);
    Node *raw = c.get();
    raw->self_ = g->nodes_.insert(g->nodes_.end(), std::move(c));
    raw->outputs_.reserve(n->outputs_.size());
    for (const Value *out : n->outputs_) {
      if (!out || out->name().empty()) {
        raw->outputs_.push_back(nullptr); // omitted optional output
        continue;
      }
      Value *v = g->newValueNamed(out->name());
      v->producer_ = raw;
      v->producerIndex_ = int(raw->outputs_.size());
      v->copyTypeFrom(*out);
      raw->outputs_.push_back(v);
      copyOf(out, v);
    }
  }
  auto copy = g->nodes_.begin();
  for (const auto &n : nodes_) {
    Node &c = **copy++;
    // A new node (fresh revision, no inputs yet): wire the inputs directly
    // rather than through setInput, which re-stamps the node per input.
    c.inputs_.reserve(n->inputs_.size());
    for (const Value *in : n->inputs_) {
      Value *m = mapped(in);
      if (m)
        m->uses_.push_back({&c, int(c.inputs_.size())});
      c.inputs_.push_back(m);
    }
  }
  for (const Value *out : outputs_)
    g->addOutput(mapped(out));
  return g;
}

// --- Model -----------------------------------------------------------------

int64_t Model::opsetVersion(const std::string &domain) const {
  for (const auto &kv : opsets)
    if (kv.first == domain)
      return kv.second;
  return -1;
}

void Model::setOpsetVersion(const std::string &domain, int64_t version) {
  for (auto &kv : opsets)
    if (kv.first == domain) {
      kv.second = version;
      return;
    }
  opsets.emplace_back(domain, version);
}

const std::string *Model::meta(const std::string &key) const {
  for (const auto &kv : metadata)
    if (kv.first == key)
      return &kv.second;
  return nullptr;
}

// Model::setMeta: ir/metadata_value_refs.cpp (it records the values
// a value-naming key names).

} // namespace mpc
