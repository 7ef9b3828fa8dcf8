// Type and shape inference: the driver and the one table of rules.
//
// Every rule reads the node's inputs (dtype, dims, constant data) and sets its
// outputs. Rules are written against ONNX's operator specs for opsets 13-23
// (where an op changed inside that range, e.g. axes becoming an input, both
// forms are handled by opset) and against ir/mpc_ops.h for domain
// "mpc". Unknown facts stay unknown: a rule never invents a dim it cannot
// prove, so verify can run inference on any graph without false errors.
//
// The rules live in passes/shape_rules/, one file per op category, each
// returning its rows; this file gathers the rows into the table inferNode
// looks ops up in, checks a node's input and output counts against its row
// and runs the rule.
#include "passes/shape_inference.h"

#include "passes/onnx/import_lowering.h"
#include "passes/shape_rules/rule_support.h"
#include "support/diagnostics.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <stdexcept>
#include <string_view>

namespace mpc {
namespace {

using shape_rules::Ctx;
using shape_rules::fail;
using shape_rules::kAny;
using shape_rules::OpRule;
using shape_rules::RuleRows;

/// Every category's rows (passes/shape_rules/), gathered once into the
/// table and listed by supportedOpNames.
std::array<RuleRows, 14> ruleCategories() {
  using namespace shape_rules;
  return {elementwiseRules(), activationRules(),    reductionRules(),
          matmulRules(),      convPoolRules(),      normalizationRules(),
          shapeOpsRules(),    gatherScatterRules(), selectionRules(),
          lossRules(),        optimizerRules(),     randomRules(),
          fusedRules(),       shardRules()};
}

/// A hash of an op name for findRule's table: the length and three of its
/// characters. No two op names of the table share all four (a new one that
/// did would only share a bucket: keys are still compared), and it costs a
/// few instructions where std::hash ran a library call per node inferred.
struct OpNameHash {
  size_t operator()(std::string_view s) const {
    if (s.empty())
      return 0;
    auto c = [&](size_t i) { return size_t(static_cast<unsigned char>(s[i])); };
    return s.size() << 24 ^ c(0) << 16 ^ c(s.size() / 2) << 8 ^ c(s.size() - 1);
  }
};

/// The rules by (domain, op), open addressing with linear probing in a
/// power-of-two table a few times larger than the rows: verify infers every
/// node a pass changed, and a lookup here is one hash, usually one slot and
/// one name comparison (a std::unordered_map cost a division, a bucket list
/// and a memcmp more per node).
class RuleTable {
public:
  RuleTable() {
    size_t rows = 0;
    for (const RuleRows &category : ruleCategories())
      for (const OpRule &r : category) {
        // A bug, not bad input: two rows for one op (in two category files,
        // say) would leave one of them dead, and a crowded table slow.
        if (++rows * 2 >= kSize)
          throw std::logic_error("shape rules: more rows than the table "
                                 "holds sparsely (raise kBits)");
        Slot s{r.op, r.domain, &r};
        size_t i = slotOf(s.op);
        while (slots_[i].rule &&
               !(slots_[i].op == s.op && slots_[i].domain == s.domain))
          i = (i + 1) & kMask;
        if (slots_[i].rule)
          throw std::logic_error(std::string("shape rules: two rows for ") +
                                 (*r.domain ? r.domain : "ai.onnx") + "." +
                                 r.op);
        slots_[i] = s;
      }
  }
  [[gnu::always_inline]] const OpRule *find(std::string_view domain,
                                            std::string_view op) const {
    // "ai.onnx" is the default domain spelled out.
    if (!domain.empty() && domain == std::string_view("ai.onnx"))
      domain = std::string_view();
    for (size_t i = slotOf(op); slots_[i].rule; i = (i + 1) & kMask)
      if (sameText(slots_[i].op, op) && sameText(slots_[i].domain, domain))
        return slots_[i].rule;
    return nullptr;
  }

private:
  static constexpr int kBits = 10;
  static constexpr size_t kSize = size_t(1) << kBits, kMask = kSize - 1;
  /// OpNameHash's top bits spread over the table (Fibonacci hashing).
  /// a == b, inline: op names are short, and memcmp was a library call
  /// per lookup.
  static bool sameText(std::string_view a, std::string_view b) {
    size_t n = a.size();
    if (n != b.size())
      return false;
    auto word = [](const char *p) {
      uint64_t w;
      std::memcpy(&w, p, sizeof w);
      return w;
    };
    auto half = [](const char *p) {
      uint32_t w;
      std::memcpy(&w, p, sizeof w);
      return w;
    };
    const char *x = a.data(), *y = b.data();
    if (n >= 8) {
      // Whole words, the last one overlapping the one before.
      for (size_t i = 0; i + 8 < n; i += 8)
        if (word(x + i) != word(y + i))
          return false;
      return word(x + n - 8) == word(y + n - 8);
    }
    if (n >= 4) // two overlapping 4-byte halves
      return half(x) == half(y) && half(x + n - 4) == half(y + n - 4);
    // 0 to 3 characters: the first, middle and last cover them all.
    return n == 0 ||
           (x[0] == y[0] && x[n / 2] == y[n / 2] && x[n - 1] == y[n - 1]);
  }
  static size_t slotOf(std::string_view op) {
    return size_t((uint64_t(OpNameHash()(op)) * 0x9E3779B97F4A7C15ull) >>
                  (64 - kBits));
  }
  struct Slot {
    std::string_view op, domain;
    const OpRule *rule = nullptr;
  };
  Slot slots_[kSize];
};

[[gnu::always_inline]] inline const OpRule *findRule(const std::string &domain,
                                                     const std::string &op) {
  // Built on first use: another translation unit's static initializer may
  // ask isSupportedOp before this one's would have run.
  static const RuleTable table;
  return table.find(domain, op);
}

std::string joinNames(const std::vector<std::string> &names) {
  std::string s;
  for (size_t i = 0; i < names.size(); ++i)
    s += (i ? ", " : "") + names[i];
  return s;
}

std::string countText(int lo, int hi) {
  if (hi == kAny)
    return "at least " + std::to_string(lo);
  if (lo == hi)
    return std::to_string(lo);
  return std::to_string(lo) + " to " + std::to_string(hi);
}

} // namespace

bool isSupportedOp(const std::string &domain, const std::string &op) {
  return findRule(domain, op) != nullptr;
}

std::vector<std::string> supportedOpNames() {
  std::vector<std::string> names;
  for (const RuleRows &category : ruleCategories())
    for (const OpRule &r : category)
      names.push_back(std::string(r.domain).empty()
                          ? std::string(r.op)
                          : std::string(r.domain) + "." + r.op);
  std::sort(names.begin(), names.end());
  return names;
}

TensorPtr constantNodeTensor(const Node &n) {
  const Attribute *found = nullptr;
  std::string foundName;
  for (const auto &kv : n.attributes()) {
    if (kv.first.rfind("value", 0) != 0 && kv.first != "sparse_value")
      continue;
    if (found)
      fail([&] {
        errorAt(n) << "has both '" << foundName << "' and '" << kv.first
                   << "' (exactly one value attribute is allowed)";
      });
    found = &kv.second;
    foundName = kv.first;
  }
  if (!found)
    fail([&] { errorAt(n) << "has no 'value' attribute"; });
  using K = Attribute::Kind;
  auto expect = [&](K kind, const char *what) {
    if (found->kind != kind)
      fail([&] {
        errorAt(n) << "attribute '" << foundName << "' must be " << what;
      });
  };
  if (foundName == "value") {
    expect(K::Tensor, "a tensor");
    return found->t;
  }
  if (foundName == "value_float") {
    expect(K::Float, "a float");
    return std::make_shared<Tensor>(Tensor::scalar(DType::F32, found->f));
  }
  if (foundName == "value_floats") {
    expect(K::Floats, "a list of floats");
    return std::make_shared<Tensor>(
        Tensor::fromFloats({int64_t(found->floats.size())}, found->floats));
  }
  if (foundName == "value_int") {
    expect(K::Int, "an int");
    return std::make_shared<Tensor>(
        Tensor::fromInt64s({}, std::vector<int64_t>{found->i}));
  }
  if (foundName == "value_ints") {
    expect(K::Ints, "a list of ints");
    return std::make_shared<Tensor>(
        Tensor::fromInt64s({int64_t(found->ints.size())}, found->ints));
  }
  fail([&] {
    errorAt(n) << "attribute '" << foundName
               << "' is not supported (mpc has no string or sparse tensors)";
  });
  return nullptr;
}

TensorPtr constantValue(const Value &v) {
  if (v.isInitializer())
    return v.initializer();
  const Node *p = v.producer();
  if (p && p->domain().empty() && p->opType() == "Constant")
    return constantNodeTensor(*p);
  return nullptr;
}

void inferNode(Node &n, int64_t opset) {
  const OpRule *rule = findRule(n.domain(), n.opType());
  if (!rule) {
    std::string op =
        n.domain().empty() ? n.opType() : n.domain() + "." + n.opType();
    fail([&] {
      error() << "unsupported op '" << op << "' (node '" << n.name()
              << "'); supported: " << joinNames(supportedOpNames())
              << "; lowered at import: " << joinNames(opsLoweredAtImport());
    });
  }
  int ins = int(n.numInputs()), outs = int(n.numOutputs());
  if (ins < rule->minInputs ||
      (rule->maxInputs != kAny && ins > rule->maxInputs))
    fail([&] {
      errorAt(n) << "has " << ins << " inputs, expected "
                 << countText(rule->minInputs, rule->maxInputs);
    });
  if (outs < rule->minOutputs ||
      (rule->maxOutputs != kAny && outs > rule->maxOutputs))
    fail([&] {
      errorAt(n) << "has " << outs << " outputs, expected "
                 << countText(rule->minOutputs, rule->maxOutputs);
    });
  Ctx c(n, opset);
  rule->infer(c);
}

void forgetIntermediateShapes(Graph &g) {
  for (Node *n : g.nodeList())
    for (Value *o : n->outputs())
      if (o) {
        o->hasShape = false;
        o->dims.clear();
      }
}

void inferGraph(Graph &g, int64_t opset) {
  for (Node *n : g.nodeList())
    inferNode(*n, opset);
}

} // namespace mpc
