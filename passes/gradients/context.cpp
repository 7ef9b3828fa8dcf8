// GradientContext: typed node emission and the helpers every rule shares.
//
// Rules never create raw nodes: they go through emit*() so that every
// backward value has a readable name, a dtype and a shape, and every backward
// node is named after the forward node it differentiates.
#include "passes/gradients/gradient_rules.h"

#include "ir/mpc_ops.h"
#include "passes/shape_inference.h"
#include "support/diagnostics.h"
#include "support/joined.h"

#include <algorithm>
#include <cassert>

namespace mpc {

GradientContext::GradientContext(Graph &graph, Node &node, int64_t opset,
                                 std::vector<Value *> outputGrads,
                                 std::vector<bool> wanted)
    : graph_(graph), node_(node), opset_(opset),
      outputGrads_(std::move(outputGrads)), wanted_(std::move(wanted)),
      inputGrads_(node.numInputs(), nullptr),
      nodeHint_(node.name().empty() ? node.opType() : node.name()) {}

const std::string &GradientContext::nodeGradHint() const {
  // Built on first use (a pass-through rule emits nothing), then shared by
  // every node the rule emits.
  if (nodeGradHint_.empty()) {
    nodeGradHint_.reserve(nodeHint_.size() + 5);
    nodeGradHint_ = nodeHint_;
    nodeGradHint_ += "_grad";
  }
  return nodeGradHint_;
}

void GradientContext::setInputGrad(size_t i, Value *grad) {
  assert(i < inputGrads_.size());
  assert(wants(i));
  inputGrads_[i] = grad;
}

std::string GradientContext::gradName(size_t i) const {
  const Value *v = in(i);
  return sanitizedWithSuffix(v ? v->name() : nodeHint_, "_grad");
}

std::string GradientContext::tempName(std::string_view what) const {
  // The sanitized prefix is built once per node, on first use.
  if (tempPrefix_.empty()) {
    tempPrefix_ = nodeHint_;
    sanitizeIdentifierInPlace(tempPrefix_);
    tempPrefix_ += "_grad_";
  }
  return joined(tempPrefix_, what);
}

Value *GradientContext::emitNode(const std::string &opType,
                                 const std::vector<Value *> &inputs,
                                 Attrs attrs, DType dtype, bool hasShape,
                                 Dims dims, std::string nameHint,
                                 const std::string &domain) {
  // The hint's buffer becomes the output's name, the attribute list the
  // node's: nothing a rule built is copied again.
  sanitizeIdentifierInPlace(nameHint);
  Node *n = graph_.createNodeWithOutputHint(opType, inputs, nodeGradHint(),
                                            std::move(nameHint), domain);
  n->setAttrs(std::move(attrs));
  Value *y = n->output(0);
  // The rule's own type is the fallback; shape inference refines it (and
  // rejects a malformed backward node at once, naming it).
  y->dtype = dtype;
  y->dims = std::move(dims);
  y->hasShape = hasShape;
  inferNode(*n, opset_);
  return y;
}

Value *GradientContext::emit(const std::string &opType,
                             const std::vector<Value *> &inputs, Attrs attrs,
                             DType dtype, Dims dims, std::string nameHint,
                             const std::string &domain) {
  return emitNode(opType, inputs, std::move(attrs), dtype, true,
                  std::move(dims), std::move(nameHint), domain);
}

Value *GradientContext::emitLike(const std::string &opType,
                                 const std::vector<Value *> &inputs,
                                 Attrs attrs, const Value &typeOf,
                                 std::string nameHint,
                                 const std::string &domain) {
  return emitShapedLike(opType, inputs, std::move(attrs), typeOf.dtype, typeOf,
                        std::move(nameHint), domain);
}

Value *GradientContext::emitShapedLike(const std::string &opType,
                                       const std::vector<Value *> &inputs,
                                       Attrs attrs, DType t,
                                       const Value &shapeOf,
                                       std::string nameHint,
                                       const std::string &domain) {
  return emitNode(opType, inputs, std::move(attrs), t, shapeOf.hasShape,
                  shapeOf.dims, std::move(nameHint), domain);
}

Value *GradientContext::emitMpc(const std::string &opType,
                                const std::vector<Value *> &inputs, Attrs attrs,
                                const Value &typeOf, std::string nameHint) {
  return emitLike(opType, inputs, std::move(attrs), typeOf, std::move(nameHint),
                  kMpcDomain);
}

Value *GradientContext::scalarConstant(DType t, double v,
                                       const std::string &what) {
  // addInitializer makes the name unique itself.
  return graph_.addInitializer(tempName(what), Tensor::scalar(t, v));
}

Value *GradientContext::int64Constant(const std::vector<int64_t> &v,
                                      const std::string &what) {
  // addInitializer makes the name unique itself.
  return graph_.addInitializer(tempName(what),
                               Tensor::fromInt64s({int64_t(v.size())}, v));
}

namespace {

/// g already has x's shape: sumToShape has nothing to reduce.
bool sameShape(const Value &g, const Value &x) {
  return g.hasShape && x.hasShape && g.dims == x.dims;
}

} // namespace

Value *GradientContext::sumToShape(Value *g, Value *x, std::string nameHint) {
  if (sameShape(*g, *x))
    return g;
  return emitShapedLike("SumToShape", {g, x}, {}, g->dtype, *x,
                        std::move(nameHint), kMpcDomain);
}

Value *GradientContext::sumToInputShape(Value *g, size_t i) {
  Value *x = in(i);
  // The name is built only for a reduction that is emitted.
  return sameShape(*g, *x) ? g : sumToShape(g, x, gradName(i));
}

Value *GradientContext::shapeOf(Value *x) {
  rankOf(*x);
  if (auto dims = concreteDims(x->dims))
    return int64Constant(*dims, "shape");
  return emit("Shape", {x}, {}, DType::I64, {Dim(x->rank())},
              tempName("shape"));
}

Value *GradientContext::reshapeLike(Value *g, Value *x, std::string nameHint) {
  if (g->hasShape && x->hasShape && g->dims == x->dims)
    return g;
  Attrs attrs;
  // A static target shape with a zero-sized dim means "size 0", not "copy".
  auto dims = concreteDims(x->dims);
  if (opset_ >= 14 && dims &&
      std::find(dims->begin(), dims->end(), 0) != dims->end())
    attrs.push_back({"allowzero", Attribute::ofInt(1)});
  return emitShapedLike("Reshape", {g, shapeOf(x)}, std::move(attrs), g->dtype,
                        *x, std::move(nameHint));
}

Value *GradientContext::transposeLastTwo(Value *v, std::string nameHint) {
  int64_t r = rankOf(*v);
  assert(r >= 2);
  std::vector<int64_t> perm(static_cast<size_t>(r));
  for (int64_t i = 0; i < r; ++i)
    perm[i] = i;
  std::swap(perm[r - 1], perm[r - 2]);
  Dims dims = v->dims;
  std::swap(dims[r - 1], dims[r - 2]);
  Attrs attrs;
  attrs.emplace_back("perm", Attribute::ofInts(std::move(perm)));
  return emit("Transpose", {v}, std::move(attrs), v->dtype, std::move(dims),
              std::move(nameHint));
}

Value *GradientContext::unsqueeze(Value *v, const std::vector<int64_t> &axes,
                                  std::string nameHint) {
  std::vector<int64_t> sorted = axes;
  std::sort(sorted.begin(), sorted.end());
  Dims dims = v->dims;
  for (int64_t a : sorted)
    dims.insert(dims.begin() + a, Dim(1));
  if (opset_ >= 13)
    return emit("Unsqueeze", {v, int64Constant(sorted, "axes")}, {}, v->dtype,
                std::move(dims), std::move(nameHint));
  Attrs attrs;
  attrs.emplace_back("axes", Attribute::ofInts(std::move(sorted)));
  return emit("Unsqueeze", {v}, std::move(attrs), v->dtype, std::move(dims),
              std::move(nameHint));
}

Value *GradientContext::mul(Value *a, Value *b, std::string nameHint) {
  return binary("Mul", a, b, std::move(nameHint));
}

Value *GradientContext::binary(const std::string &opType, Value *a, Value *b,
                               std::string nameHint) {
  return emit(opType, {a, b}, {}, a->dtype, broadcastDims(a->dims, b->dims),
              std::move(nameHint));
}

Value *GradientContext::unary(const std::string &opType, Value *a,
                              std::string nameHint) {
  return emitLike(opType, {a}, {}, *a, std::move(nameHint));
}

std::string GradientContext::preSumName(size_t i, const Dims &fullDims) const {
  const Value *x = in(i);
  if (x && x->hasShape && x->dims == fullDims)
    return gradName(i);
  return tempName(std::to_string(i) + "_full");
}

int64_t GradientContext::rankOf(const Value &v) const {
  if (!v.hasShape)
    errorAt(node_) << "the rank of '" << v.name()
                   << "' is unknown; run infer-shapes before autodiff";
  return v.rank();
}

// --- free helpers ----------------------------------------------------------

namespace {

// The "C" locale's isalnum/isdigit (mpc never sets a locale) as a table:
// the library calls cost more than the rest of the loop, and autodiff names
// every node it makes through sanitizeIdentifier.
struct IdentifierChars {
  bool keep[256] = {}; ///< [A-Za-z0-9_]
  constexpr IdentifierChars() {
    for (int c = 0; c < 256; ++c)
      keep[c] = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') ||
                (c >= 'A' && c <= 'Z') || c == '_';
  }
};
// constexpr: filled at compile time, so usable from any static initializer.
constexpr IdentifierChars identifierChars;

bool isAsciiDigit(char c) { return c >= '0' && c <= '9'; }

} // namespace

void sanitizeIdentifierInPlace(std::string &s) {
  for (char &c : s)
    if (!identifierChars.keep[static_cast<unsigned char>(c)])
      c = '_';
  if (s.empty() || isAsciiDigit(s[0]))
    s.insert(s.begin(), '_');
}

std::string sanitizedWithSuffix(std::string_view name,
                                std::string_view suffix) {
  // The suffix is a valid identifier tail, so sanitizing the whole only
  // differs where name is empty: its '_' then goes in front of the suffix.
  std::string s = joined(name, suffix);
  if (name.empty())
    s.insert(s.begin(), '_');
  else
    sanitizeIdentifierInPlace(s);
  return s;
}

std::string sanitizeIdentifier(const std::string &name) {
  // In place on one copy: autodiff names every node it makes through this.
  std::string s = name;
  sanitizeIdentifierInPlace(s);
  return s;
}

Dim broadcastDim(const Dim &da, const Dim &db) {
  if (da == db)
    return da;
  if (da.value == 1)
    return db;
  if (db.value == 1)
    return da;
  if (da.isKnown())
    return da; // the symbol on the other side must equal it
  if (db.isKnown())
    return db;
  return Dim();
}

Dims broadcastDims(const Dims &a, const Dims &b) {
  size_t r = std::max(a.size(), b.size());
  Dims out(r);
  for (size_t i = 0; i < r; ++i) {
    // Align trailing axes; a missing axis acts as size 1.
    Dim da = i + a.size() >= r ? a[i + a.size() - r] : Dim(1);
    Dim db = i + b.size() >= r ? b[i + b.size() - r] : Dim(1);
    out[i] = broadcastDim(da, db);
  }
  return out;
}

namespace {

const Tensor *constantTensor(const Value *v) {
  if (!v)
    return nullptr;
  if (v->isInitializer())
    return v->initializer().get();
  const Node *p = v->producer();
  if (p && p->opType() == "Constant" && p->domain().empty()) {
    const Attribute *a = p->attr("value");
    if (a && a->kind == Attribute::Kind::Tensor)
      return a->t.get();
  }
  return nullptr;
}

} // namespace

std::optional<std::vector<int64_t>> constantInt64s(const Value *v) {
  if (const Tensor *t = constantTensor(v))
    return t->toInt64s();
  const Node *p = v ? v->producer() : nullptr;
  if (p && p->opType() == "Constant" && p->domain().empty()) {
    if (const Attribute *a = p->attr("value_ints"))
      return a->ints;
    if (const Attribute *a = p->attr("value_int"))
      return std::vector<int64_t>{a->i};
  }
  return std::nullopt;
}

std::optional<std::vector<double>> constantDoubles(const Value *v) {
  if (const Tensor *t = constantTensor(v)) {
    std::vector<double> out;
    for (int64_t i = 0; i < t->numel(); ++i)
      out.push_back(t->getAsDouble(i));
    return out;
  }
  const Node *p = v ? v->producer() : nullptr;
  if (p && p->opType() == "Constant" && p->domain().empty()) {
    if (const Attribute *a = p->attr("value_float"))
      return std::vector<double>{a->f};
    if (const Attribute *a = p->attr("value_int"))
      return std::vector<double>{double(a->i)};
  }
  return std::nullopt;
}

} // namespace mpc
