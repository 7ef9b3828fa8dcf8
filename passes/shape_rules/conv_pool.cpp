// Shape rules of the convolutions and pools: Conv, ConvTranspose, MaxPool,
// AveragePool, GlobalAveragePool, and the mpc backward ops their gradients
// emit (ConvGradInput, ConvGradWeight, MaxPoolGrad, AveragePoolGrad;
// ir/mpc_ops.h). Spatial sizes come from ir/window_geometry.h, the code the
// CPU kernels resolve their windows with, so an inferred shape is the shape
// the kernel produces. Unknown or symbolic dims stay unknown (the batch
// symbol is carried through); channel counts, kernel sizes and the backward
// ops' window arithmetic are checked wherever both sides are known.
#include "passes/shape_rules/rule_support.h"

#include "ir/mpc_ops.h"
#include "ir/window_geometry.h"

namespace mpc::shape_rules {

namespace {

/// A [N, C, D1...] input: rank >= 3 when known.
void requireWindowRank(Ctx &c, size_t i) {
  const Value *v = c.n.input(i);
  if (v && v->hasShape && v->rank() < 3)
    fail([&] {
      errorAt(c.n) << c.inputText(i)
                   << " must have rank >= 3 ([N, C, D1, ...]), got "
                   << typeText(v);
    });
}

int64_t sizeOf(const Dim &d) { return d.isKnown() ? d.value : -1; }

/// Spatial sizes (dims 2...) of v, -1 where unknown; `rank` entries.
std::vector<int64_t> spatialOf(const Value *v, size_t rank) {
  std::vector<int64_t> s(rank, -1);
  if (v && v->hasShape)
    for (size_t d = 0; d < rank && d + 2 < v->dims.size(); ++d)
      s[d] = sizeOf(v->dims[d + 2]);
  return s;
}

Dims windowDims(Dim batch, Dim channels, const std::vector<int64_t> &spatial) {
  Dims d = {std::move(batch), std::move(channels)};
  for (int64_t s : spatial)
    d.push_back(s >= 0 ? Dim(s) : Dim());
  return d;
}

/// Spatial rank from the first ranked value among `vs`, or nullopt.
std::optional<size_t> spatialRankOf(std::initializer_list<const Value *> vs) {
  for (const Value *v : vs)
    if (v && v->hasShape && v->rank() >= 3)
      return size_t(v->rank() - 2);
  return std::nullopt;
}

/// The window's output sizes must be the gradient's spatial sizes.
void requireWindowOutput(const Node &n, const WindowGeometry &g,
                         const Value *dy) {
  if (!dy->hasShape)
    return;
  for (size_t d = 0; d < g.rank(); ++d)
    requireEqualDims(n, Dim(g.out[d]), dy->dims[d + 2],
                     "dY " + typeText(dy) +
                         " is not the window output of "
                         "spatial dim " +
                         std::to_string(d));
}

/// The int64 shape input of ConvGradInput / AveragePoolGrad: its values
/// when constant, else only its length.
struct ShapeInput {
  std::optional<std::vector<int64_t>> values;
  int64_t rank = -1;
};

ShapeInput readShapeInput(Ctx &c, size_t i) {
  const Node &n = c.n;
  const Value *v = c.req(i);
  if (v->dtype != DType::Undefined && v->dtype != DType::I64)
    fail([&] {
      errorAt(n) << "x_shape (" << c.inputText(i) << ") must be int64, got "
                 << dtypeName(v->dtype);
    });
  if (v->hasShape && v->rank() != 1)
    fail([&] {
      errorAt(n) << "x_shape (" << c.inputText(i) << ") must be 1-D, got "
                 << typeText(v);
    });
  ShapeInput s;
  if (TensorPtr t = constantValue(*v)) {
    s.values = t->toInt64s();
    s.rank = int64_t(s.values->size());
    for (int64_t d : *s.values)
      if (d < 0)
        fail([&] { errorAt(n) << "x_shape has a negative dim " << d; });
  } else if (v->hasShape && v->dims[0].isKnown()) {
    s.rank = v->dims[0].value;
  }
  if (s.rank >= 0 && s.rank < 3)
    fail([&] {
      errorAt(n) << "x_shape must have at least 3 entries ([N, C, D1, ...]), "
                 << "got " << s.rank;
    });
  return s;
}

/// The checks Conv and ConvTranspose share on (X, W, B): floating point of
/// one dtype, X and W of rank >= 3 and the same rank. Returns the spatial
/// rank, or nullopt (output 0 left unranked) when neither rank is known.
std::optional<size_t> convSpatialRank(Ctx &c) {
  Node &n = c.n;
  Value *x = c.req(0), *w = c.req(1);
  for (size_t i = 0; i < 3; ++i)
    c.requireFloat(i);
  c.sameDType({0, 1, 2});
  requireWindowRank(c, 0);
  requireWindowRank(c, 1);
  auto r = spatialRankOf({x, w});
  if (!r) {
    setOut(c, 0, x->dtype, nullptr);
    return r;
  }
  if (x->hasShape && w->hasShape && x->rank() != w->rank())
    fail([&] {
      errorAt(n) << "X " << typeText(x) << " and W " << typeText(w)
                 << " must have the same rank";
    });
  return r;
}

/// Conv's and ConvTranspose's optional B: 1-D, one entry per output channel
/// (`m`); Conv's message names W (`w`), whose dim 0 `m` is.
void requireBias(Ctx &c, const Dim &m, const Value *w) {
  const Value *b = c.n.input(2);
  if (!b || !b->hasShape)
    return;
  if (b->rank() != 1)
    fail([&] {
      errorAt(c.n) << "B (" << c.inputText(2) << ") must be 1-D, got "
                   << typeText(b);
    });
  requireEqualDims(c.n, b->dims[0], m,
                   "B " + typeText(b) +
                       " must have one entry per output channel" +
                       (w ? " of W " + typeText(w) : std::string()));
}

void inferConv(Ctx &c) {
  Node &n = c.n;
  Value *x = c.req(0), *w = c.req(1);
  auto r = convSpatialRank(c);
  if (!r)
    return;
  std::vector<int64_t> kernel = spatialOf(w, *r);
  WindowAttrs a = readWindowAttrs(n, WindowKind::Conv, *r, kernel);
  Dim ch = dimOf(x, 1), m = dimOf(w, 0), cPerGroup = dimOf(w, 1);
  if (ch.isKnown() && cPerGroup.isKnown() &&
      ch.value != cPerGroup.value * a.group)
    fail([&] {
      errorAt(n) << "X " << typeText(x) << " has " << ch.value
                 << " channels but W " << typeText(w) << " expects "
                 << cPerGroup.value << " x group " << a.group;
    });
  if (m.isKnown() && m.value % a.group != 0)
    fail([&] {
      errorAt(n) << "W " << typeText(w) << " has " << m.value
                 << " output channels, not a multiple of group " << a.group;
    });
  requireBias(c, m, w);
  WindowGeometry g = resolveWindow(n, a, spatialOf(x, *r));
  setShapedOut(c, 0, x->dtype, windowDims(dimOf(x, 0), m, g.out));
}

void inferConvTranspose(Ctx &c) {
  Node &n = c.n;
  Value *x = c.req(0), *w = c.req(1);
  auto r = convSpatialRank(c);
  if (!r)
    return;
  WindowAttrs a = readWindowAttrs(n, WindowKind::Conv, *r, spatialOf(w, *r));
  Dim ch = dimOf(x, 1), wc = dimOf(w, 0), mPerGroup = dimOf(w, 1);
  requireEqualDims(n, ch, wc,
                   "X " + typeText(x) + " and W " + typeText(w) +
                       " must agree on the input channels (W is [C, M/group, "
                       "k...])");
  Dim cc = ch.isKnown() ? ch : wc;
  if (cc.isKnown() && cc.value % a.group != 0)
    fail([&] {
      errorAt(n) << "the " << cc.value << " input channels are not a multiple "
                 << "of group " << a.group;
    });
  Dim m = mPerGroup.isKnown() ? Dim(mPerGroup.value * a.group) : Dim();
  requireBias(c, m, nullptr);
  WindowGeometry g = resolveTransposedWindow(n, a, spatialOf(x, *r));
  setShapedOut(c, 0, x->dtype, windowDims(dimOf(x, 0), m, g.in));
}

void inferPool(Ctx &c) {
  Node &n = c.n;
  Value *x = c.req(0);
  c.requireFloat(0);
  requireWindowRank(c, 0);
  bool isMax = n.opType() == "MaxPool";
  const char *flag = isMax ? "storage_order" : "count_include_pad";
  int64_t v = n.attrInt(flag, 0);
  if (v != 0 && v != 1)
    fail([&] {
      errorAt(n) << "attribute '" << flag << "' must be 0 or 1, got " << v;
    });
  if (!isMax && n.numOutputs() > 1)
    fail([&] {
      errorAt(n) << "has " << n.numOutputs() << " outputs, expected 1";
    });
  auto r = spatialRankOf({x});
  if (!r && n.hasAttr("kernel_shape"))
    r = n.attrInts("kernel_shape").size();
  if (!r) {
    setOut(c, 0, x->dtype, nullptr);
    if (n.output(1))
      setOut(c, 1, DType::I64, nullptr);
    return;
  }
  WindowAttrs a = readWindowAttrs(n, WindowKind::Pool, *r);
  WindowGeometry g = resolveWindow(n, a, spatialOf(x, *r));
  Dims out = windowDims(dimOf(x, 0), dimOf(x, 1), g.out);
  setShapedOut(c, 0, x->dtype, out);
  if (n.output(1))
    setShapedOut(c, 1, DType::I64, out);
}

void inferGlobalPool(Ctx &c) {
  Value *x = c.req(0);
  c.requireFloat(0);
  requireWindowRank(c, 0);
  if (!x->hasShape) {
    setOut(c, 0, x->dtype, nullptr);
    return;
  }
  Dims out = x->dims;
  for (size_t d = 2; d < out.size(); ++d)
    out[d] = Dim(1);
  setShapedOut(c, 0, x->dtype, out);
}

void inferWindowGradFromShape(Ctx &c) {
  Node &n = c.n;
  bool conv = n.opType() == "ConvGradInput";
  size_t shapeIdx = conv ? 2 : 1;
  Value *dy = c.req(0);
  c.requireFloat(0);
  requireWindowRank(c, 0);
  const Value *w = conv ? c.req(1) : nullptr;
  if (conv) {
    c.requireFloat(1);
    requireWindowRank(c, 1);
  }
  ShapeInput s = readShapeInput(c, shapeIdx);
  if (!s.values) {
    if (s.rank >= 0)
      setShapedOut(c, 0, dy->dtype, Dims(size_t(s.rank), Dim()));
    else
      setOut(c, 0, dy->dtype, nullptr);
    return;
  }
  const std::vector<int64_t> &xs = *s.values;
  size_t r = xs.size() - 2;
  if (dy->hasShape && dy->rank() != int64_t(xs.size()))
    fail([&] {
      errorAt(n) << "dY " << typeText(dy) << " and x_shape " << dimsToString(xs)
                 << " must have the same rank";
    });
  std::vector<int64_t> spatial(xs.begin() + 2, xs.end());
  WindowAttrs a = conv
                      ? readWindowAttrs(n, WindowKind::Conv, r, spatialOf(w, r))
                      : readWindowAttrs(n, WindowKind::Pool, r);
  WindowGeometry g = resolveWindow(n, a, spatial);
  requireWindowOutput(n, g, dy);
  requireEqualDims(n, dimOf(dy, 0), Dim(xs[0]),
                   "dY " + typeText(dy) + " and x_shape differ in the batch");
  if (conv) {
    requireEqualDims(n, dimOf(dy, 1), dimOf(w, 0),
                     "dY " + typeText(dy) + " and W " + typeText(w) +
                         " differ in the output channels");
    Dim cPerGroup = dimOf(w, 1);
    if (cPerGroup.isKnown())
      requireEqualDims(n, Dim(xs[1]), Dim(cPerGroup.value * a.group),
                       "x_shape's channels do not match W " + typeText(w) +
                           " and group");
  } else {
    requireEqualDims(n, dimOf(dy, 1), Dim(xs[1]),
                     "dY " + typeText(dy) +
                         " and x_shape differ in the "
                         "channels");
  }
  setShapedOut(c, 0, dy->dtype, toDims(xs));
}

void inferConvGradWeight(Ctx &c) {
  Node &n = c.n;
  Value *dy = c.req(0), *x = c.req(1);
  c.requireFloat(0);
  c.requireFloat(1);
  requireWindowRank(c, 0);
  requireWindowRank(c, 1);
  if (!n.hasAttr("kernel_shape"))
    fail([&] { errorAt(n) << "requires attribute 'kernel_shape'"; });
  size_t r = n.attrInts("kernel_shape").size();
  for (const Value *v : {dy, x})
    if (v->hasShape && v->rank() != int64_t(r) + 2)
      fail([&] {
        errorAt(n) << typeText(v) << " does not have the rank of a " << r
                   << "-D kernel_shape";
      });
  WindowAttrs a = readWindowAttrs(n, WindowKind::Conv, r);
  WindowGeometry g = resolveWindow(n, a, spatialOf(x, r));
  requireWindowOutput(n, g, dy);
  requireEqualDims(n, dimOf(dy, 0), dimOf(x, 0),
                   "dY " + typeText(dy) + " and X " + typeText(x) +
                       " differ in the batch");
  Dim m = dimOf(dy, 1), ch = dimOf(x, 1);
  for (const Dim &d : {m, ch})
    if (d.isKnown() && d.value % a.group != 0)
      fail([&] {
        errorAt(n) << "channel count " << d.value
                   << " is not a multiple of group " << a.group;
      });
  Dims out = {m, ch.isKnown() ? Dim(ch.value / a.group) : Dim()};
  for (int64_t k : a.kernel)
    out.push_back(Dim(k));
  setShapedOut(c, 0, dy->dtype, out);
}

void inferMaxPoolGrad(Ctx &c) {
  Node &n = c.n;
  Value *dy = c.req(0), *x = c.req(1);
  c.requireFloat(0);
  c.requireFloat(1);
  requireWindowRank(c, 0);
  requireWindowRank(c, 1);
  auto r = spatialRankOf({x, dy});
  if (!r) {
    setOut(c, 0, dy->dtype, nullptr);
    return;
  }
  WindowAttrs a = readWindowAttrs(n, WindowKind::Pool, *r);
  WindowGeometry g = resolveWindow(n, a, spatialOf(x, *r));
  requireWindowOutput(n, g, dy);
  for (size_t d = 0; d < 2; ++d)
    requireEqualDims(n, dimOf(dy, d), dimOf(x, d),
                     "dY " + typeText(dy) + " and X " + typeText(x) +
                         " differ in dim " + std::to_string(d));
  setOut(c, 0, dy->dtype, x->hasShape ? &x->dims : nullptr);
}

const OpRule kRules[] = {
    {"", "AveragePool", 1, 1, 1, 1, inferPool},
    {"", "Conv", 2, 3, 1, 1, inferConv},
    {"", "ConvTranspose", 2, 3, 1, 1, inferConvTranspose},
    {"", "GlobalAveragePool", 1, 1, 1, 1, inferGlobalPool},
    {"", "MaxPool", 1, 1, 1, 2, inferPool},
    {kMpcDomain, "AveragePoolGrad", 2, 2, 1, 1, inferWindowGradFromShape},
    {kMpcDomain, "ConvGradInput", 3, 3, 1, 1, inferWindowGradFromShape},
    {kMpcDomain, "ConvGradWeight", 2, 2, 1, 1, inferConvGradWeight},
    {kMpcDomain, "MaxPoolGrad", 2, 2, 1, 1, inferMaxPoolGrad},
};

} // namespace

RuleRows convPoolRules() { return RuleRows(kRules); }

} // namespace mpc::shape_rules
