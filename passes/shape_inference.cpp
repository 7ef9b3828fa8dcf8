// Type and shape inference: one rule per supported op, in one table.
//
// Every rule reads the node's inputs (dtype, dims, constant data) and sets its
// outputs. Rules are written against ONNX's operator specs for opsets 13-23
// (where an op changed inside that range, e.g. axes becoming an input, both
// forms are handled by opset) and against ir/mpc_ops.h for domain
// "mpc". Unknown facts stay unknown: a rule never invents a dim it cannot
// prove, so verify can run inference on any graph without false errors.
#include "passes/shape_inference.h"

#include "ir/batch_norm_mode.h"
#include "ir/mpc_ops.h"
#include "ir/window_geometry.h"
#include "kernels/common/all_reduce_rule.h"
#include "kernels/lr_schedule_attrs.h"
#include "passes/onnx/import_lowering.h"
#include "passes/shape_small_vector.h"
#include "support/diagnostics.h"

#include <algorithm>
#include <cstring>
#include <iterator>
#include <limits>
#include <map>
#include <sstream>
#include <string_view>

namespace mpc {
namespace {

/// Calls `report` (an errorAt(...) << ... that throws) out of line. Verify
/// runs these checks on every node a pass changed: kept out of the rules,
/// a message's stream and strings no longer weigh on each check's fast path
/// (its registers and stack frame), which is only a compare and a branch.
template <typename Report>
[[gnu::cold, gnu::noinline]] void fail(const Report &report) {
  report();
}

/// Dims a rule builds on its way to an output: ranks are small, so they stay
/// off the heap (see passes/shape_small_vector.h).
using InlineDims = SmallVector<Dim, 8>;

/// What a rule infers for one output; dtype Undefined / !hasShape = unknown.
struct TypeInfo {
  DType dtype = DType::Undefined;
  bool hasShape = false;
  Dims dims;
};

TypeInfo shaped(DType t, Dims d) { return {t, true, std::move(d)}; }
TypeInfo unranked(DType t) { return {t, false, {}}; }

/// Dims of a value, or nullopt when its rank is unknown (or it is omitted).
const Dims *dimsOf(const Value *v) {
  return v && v->hasShape ? &v->dims : nullptr;
}

/// A value's type as text for messages: "fp32[64x10]", "fp32[?]" if unranked.
std::string typeText(const Value *v) {
  std::string s = dtypeName(v->dtype);
  s += "[" + (v->hasShape ? dimsToString(v->dims) : std::string("?")) + "]";
  return s;
}

std::string intsText(const std::vector<int64_t> &v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i)
    s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

/// The int64 values of a constant input, read in place (Ctx::constIntsInPlace).
struct ConstIntList {
  TensorPtr tensor;          ///< keeps `data` alive
  std::vector<int64_t> held; ///< the values converted, for non-int64 data
  const int64_t *data = nullptr;
  size_t size = 0;
  int64_t operator[](size_t i) const { return data[i]; }
  /// For messages: "[1, -1, 64]".
  std::string text() const {
    return intsText(std::vector<int64_t>(data, data + size));
  }
};

/// The more informative of two dims that must be equal (known beats symbolic
/// beats unknown).
Dim unifyDim(const Dim &a, const Dim &b) {
  if (a.isKnown())
    return a;
  if (b.isKnown())
    return b;
  return a.symbol.empty() ? b : a;
}

/// True when two dims are provably different sizes.
bool dimsConflict(const Dim &a, const Dim &b) {
  return a.isKnown() && b.isKnown() && a.value != b.value;
}

/// Product of dims: known if all are known, a symbol if exactly one symbol
/// remains and everything else is 1, else unknown.
Dim dimProduct(const Dims &dims, size_t begin, size_t end) {
  int64_t known = 1;
  const Dim *symbolic = nullptr;
  int unknowns = 0;
  for (size_t i = begin; i < end; ++i) {
    if (dims[i].isKnown()) {
      if (__builtin_mul_overflow(known, dims[i].value, &known))
        return Dim(); // absurd sizes: claim nothing
    } else if (!dims[i].symbol.empty() && !symbolic)
      symbolic = &dims[i];
    else
      ++unknowns;
  }
  if (unknowns == 0 && !symbolic)
    return Dim(known);
  if (unknowns == 0 && symbolic && known == 1)
    return *symbolic;
  if (unknowns == 0 && symbolic && known == 0)
    return Dim(0);
  return Dim();
}

/// The node being inferred and helpers that validate its inputs and
/// attributes with messages that name it.
class Ctx {
public:
  Ctx(Node &n, int64_t opset) : n(n), opset(opset) {}
  Node &n;
  int64_t opset;

  /// Input i that the op requires (error when omitted).
  Value *req(size_t i) const {
    Value *v = n.input(i);
    if (!v)
      fail([&] { errorAt(n) << "required input " << i << " is missing"; });
    return v;
  }
  /// Input i when given, else nullptr.
  Value *opt(size_t i) const { return n.input(i); }

  /// Sets output i (when the node has it) to `t`, keeping what the output
  /// already knew where `t` is unknown.
  void set(size_t i, const TypeInfo &t) const {
    if (t.hasShape)
      setShaped(i, t.dtype, t.dims.data(), t.dims.size());
    else
      setUnranked(i, t.dtype);
  }
  /// set() with dtype `t` (unless Undefined) and the dims
  /// [dims, dims + rank): the hot rules pass dims they hold inline or an
  /// input's own, so no Dims vector is built per node. `dims` may be the
  /// output's own dims (a node whose output is its input): then the ranks
  /// match and the merge below leaves them as they are.
  void setShaped(size_t i, DType t, const Dim *dims, size_t rank) const {
    Value *o = n.output(i);
    if (!o)
      return;
    if (t != DType::Undefined)
      o->dtype = t;
    if (o->hasShape && o->dims.size() == rank) {
      // Known beats symbolic beats unknown, whichever side it comes from.
      for (size_t d = 0; d < rank; ++d) {
        const Dim &inferred = dims[d];
        Dim &held = o->dims[d];
        if (inferred.isKnown() || (!held.isKnown() && !inferred.symbol.empty()))
          held = inferred;
      }
    } else {
      o->dims.assign(dims, dims + rank);
    }
    o->hasShape = true;
  }
  template <size_t N>
  void setShaped(size_t i, DType t, const SmallVector<Dim, N> &dims) const {
    setShaped(i, t, dims.data(), dims.size());
  }
  /// set() with an unknown shape: only the dtype (unless Undefined) is set.
  void setUnranked(size_t i, DType t) const {
    Value *o = n.output(i);
    if (o && t != DType::Undefined)
      o->dtype = t;
  }
  /// Output i gets input v's type.
  void setLike(size_t i, const Value *v) const { setShapeOf(i, v->dtype, v); }
  /// Output i gets dtype `t` and input v's shape.
  void setShapeOf(size_t i, DType t, const Value *v) const {
    if (v->hasShape)
      setShaped(i, t, v->dims.data(), v->dims.size());
    else
      setUnranked(i, t);
  }

  // --- attributes ------------------------------------------------------
  const Attribute *attrOfKind(std::string_view name, Attribute::Kind kind,
                              const char *what) const {
    const Attribute *a = n.attr(name);
    if (a && a->kind != kind)
      fail(
          [&] { errorAt(n) << "attribute '" << name << "' must be " << what; });
    return a;
  }
  int64_t intAttr(std::string_view name, int64_t dflt) const {
    const Attribute *a = attrOfKind(name, Attribute::Kind::Int, "an int");
    return a ? a->i : dflt;
  }
  int64_t requiredIntAttr(std::string_view name) const {
    const Attribute *a = n.attr(name);
    if (!a)
      fail([&] { errorAt(n) << "requires attribute '" << name << "'"; });
    if (a->kind != Attribute::Kind::Int)
      fail([&] { errorAt(n) << "attribute '" << name << "' must be an int"; });
    return a->i;
  }
  /// A 0/1 flag attribute.
  bool flagAttr(std::string_view name, bool dflt) const {
    int64_t v = intAttr(name, dflt ? 1 : 0);
    if (v != 0 && v != 1)
      fail([&] {
        errorAt(n) << "attribute '" << name << "' must be 0 or 1, got " << v;
      });
    return v == 1;
  }
  float floatAttr(std::string_view name, float dflt) const {
    const Attribute *a = n.attr(name);
    if (!a)
      return dflt;
    if (a->kind == Attribute::Kind::Int)
      return float(a->i);
    if (a->kind != Attribute::Kind::Float)
      fail([&] { errorAt(n) << "attribute '" << name << "' must be a float"; });
    return a->f;
  }
  std::vector<int64_t> intsAttr(std::string_view name) const {
    const std::vector<int64_t> *ints = intsAttrOrNull(name);
    return ints ? *ints : std::vector<int64_t>{};
  }
  /// The list of ints attribute `name` in place, or nullptr when absent.
  const std::vector<int64_t> *intsAttrOrNull(std::string_view name) const {
    const Attribute *a =
        attrOfKind(name, Attribute::Kind::Ints, "a list of ints");
    return a ? &a->ints : nullptr;
  }
  std::string stringAttr(std::string_view name, const std::string &dflt) const {
    const Attribute *a = attrOfKind(name, Attribute::Kind::String, "a string");
    return a ? a->s : dflt;
  }

  // --- input checks ----------------------------------------------------
  std::string inputText(size_t i) const {
    return "input " + std::to_string(i) + " ('" + n.input(i)->name() + "')";
  }
  /// All given inputs among `idx` have the same dtype (when known).
  void sameDType(std::initializer_list<size_t> idx) const {
    const Value *first = nullptr;
    size_t firstIdx = 0;
    for (size_t i : idx) {
      const Value *v = n.input(i);
      if (!v || v->dtype == DType::Undefined)
        continue;
      if (!first) {
        first = v;
        firstIdx = i;
      } else if (v->dtype != first->dtype) {
        fail([&] {
          errorAt(n) << inputText(i) << " is " << dtypeName(v->dtype) << " but "
                     << inputText(firstIdx) << " is " << dtypeName(first->dtype)
                     << " (the inputs must have the same type)";
        });
      }
    }
  }
  void requireFloat(size_t i) const {
    const Value *v = n.input(i);
    if (v && v->dtype != DType::Undefined && !isFloating(v->dtype))
      fail([&] {
        errorAt(n) << inputText(i) << " must be floating point, got "
                   << dtypeName(v->dtype);
      });
  }
  /// Numbers (not bool).
  void requireNumeric(size_t i) const {
    const Value *v = n.input(i);
    if (v && v->dtype == DType::Bool)
      fail([&] { errorAt(n) << inputText(i) << " must be numeric, got bool"; });
  }
  void requireIndex(size_t i, const char *what) const {
    const Value *v = n.input(i);
    if (v && v->dtype != DType::Undefined && v->dtype != DType::I64 &&
        v->dtype != DType::I32)
      fail([&] {
        errorAt(n) << what << " (" << inputText(i)
                   << ") must be int64 or int32, got " << dtypeName(v->dtype);
      });
  }
  void requireDType(size_t i, DType t) const {
    const Value *v = n.input(i);
    if (v && v->dtype != DType::Undefined && v->dtype != t)
      fail([&] {
        errorAt(n) << inputText(i) << " must be " << dtypeName(t) << ", got "
                   << dtypeName(v->dtype);
      });
  }
  void requireRank(size_t i, int64_t rank) const {
    const Value *v = n.input(i);
    if (v && v->hasShape && v->rank() != rank)
      fail([&] {
        errorAt(n) << inputText(i) << " must have rank " << rank << ", got "
                   << typeText(v);
      });
  }
  /// A 1-D int64 shape/axes input's values when known at compile time.
  std::optional<std::vector<int64_t>> constInts(size_t i,
                                                const char *what) const {
    const Value *v = n.input(i);
    if (!v)
      return std::nullopt;
    requireDType(i, DType::I64);
    if (v->hasShape && v->rank() > 1)
      fail([&] {
        errorAt(n) << what << " (" << inputText(i) << ") must be 1-D, got "
                   << typeText(v);
      });
    TensorPtr t = constantValue(*v);
    if (!t)
      return std::nullopt;
    return t->toInt64s();
  }
  /// constInts() without the copy: the values of an int64 constant are read
  /// where they lie (other dtypes are converted into `held`). Returns false
  /// when the input is omitted or its value is not known at compile time.
  bool constIntsInPlace(size_t i, const char *what, ConstIntList &out) const {
    const Value *v = n.input(i);
    if (!v)
      return false;
    requireDType(i, DType::I64);
    if (v->hasShape && v->rank() > 1)
      fail([&] {
        errorAt(n) << what << " (" << inputText(i) << ") must be 1-D, got "
                   << typeText(v);
      });
    out.tensor = constantValue(*v);
    if (!out.tensor)
      return false;
    if (out.tensor->dtype == DType::I64) {
      int64_t count = out.tensor->numel(); // as toInt64s() counts them
      out.data = out.tensor->data<int64_t>();
      out.size = size_t(count > 0 ? count : 0);
    } else {
      out.held = out.tensor->toInt64s();
      out.data = out.held.data();
      out.size = out.held.size();
    }
    return true;
  }
  /// Number of elements of a 1-D input when its dim is known.
  std::optional<int64_t> length1D(size_t i) const {
    const Value *v = n.input(i);
    if (v && v->hasShape && v->rank() == 1 && v->dims[0].isKnown())
      return v->dims[0].value;
    return std::nullopt;
  }

  /// Normalises an axis into [0, rank) (or [0, rank] when `inclusive`).
  int64_t axis(int64_t a, int64_t rank, const char *what = "axis",
               bool inclusive = false) const {
    int64_t hi = inclusive ? rank : rank - 1;
    if (a < -rank || a > hi)
      fail([&] {
        errorAt(n) << what << " " << a << " is out of range for rank " << rank
                   << " (valid: " << -rank << " to " << hi << ")";
      });
    return a < 0 ? a + rank : a;
  }
  /// Normalised axes, each at most once.
  std::vector<int64_t> axes(const std::vector<int64_t> &in,
                            int64_t rank) const {
    std::vector<int64_t> out;
    for (int64_t a : in) {
      int64_t x = axis(a, rank, "axis");
      if (std::find(out.begin(), out.end(), x) != out.end())
        fail([&] {
          errorAt(n) << "axis " << a << " is listed twice in axes "
                     << intsText(in);
        });
      out.push_back(x);
    }
    return out;
  }

  /// Numpy (multidirectional) broadcasting of two shapes.
  Dims broadcast(const Dims &a, const Dims &b) const {
    InlineDims out;
    broadcastInto(a.data(), a.size(), b.data(), b.size(), out);
    return Dims(out.begin(), out.end());
  }
  /// broadcast() of [a, a + na) and [b, b + nb) into `out` (which must not
  /// hold either): the hot rules' form, with no vector per call.
  void broadcastInto(const Dim *a, size_t na, const Dim *b, size_t nb,
                     InlineDims &out) const {
    size_t rank = std::max(na, nb);
    out.clear();
    out.reserve(rank);
    const Dim one(1);
    for (size_t i = 0; i < rank; ++i) {
      const Dim &x = i + na >= rank ? a[i + na - rank] : one;
      const Dim &y = i + nb >= rank ? b[i + nb - rank] : one;
      if (x == one)
        out.push_back(y);
      else if (y == one)
        out.push_back(x);
      else if (x.isKnown() && y.isKnown()) {
        if (x.value != y.value)
          fail([&] {
            errorAt(n) << "shapes " << dimsToString(Dims(a, a + na)) << " and "
                       << dimsToString(Dims(b, b + nb))
                       << " cannot be broadcast together";
          });
        out.push_back(x);
      } else if (x.isKnown())
        out.push_back(x); // the symbolic side must be 1 or equal to x
      else if (y.isKnown())
        out.push_back(y);
      else if (!x.symbol.empty() && x.symbol == y.symbol)
        out.push_back(x);
      else
        out.push_back(Dim());
    }
  }
  /// Sets output 0 to dtype `t` and the broadcast shape of the given inputs
  /// (unranked if one of them is).
  void setBroadcast(DType t, std::initializer_list<size_t> idx) const {
    // The shape so far: the first input's own dims (broadcasting onto no
    // dims at all gives the dims themselves), then each result in turn, in
    // two buffers that take turns so a result never overwrites its operand.
    const Dim *acc = nullptr;
    size_t accRank = 0;
    bool first = true;
    InlineDims results[2];
    size_t turn = 0;
    for (size_t i : idx) {
      const Dims *d = dimsOf(n.input(i));
      if (!d) {
        setUnranked(0, t);
        return;
      }
      if (first) {
        acc = d->data();
        accRank = d->size();
        first = false;
        continue;
      }
      InlineDims &out = results[turn];
      turn ^= 1;
      broadcastInto(acc, accRank, d->data(), d->size(), out);
      acc = out.data();
      accRank = out.size();
    }
    setShaped(0, t, acc, accRank);
  }
};

TypeInfo maybeShaped(DType t, const std::optional<Dims> &d) {
  return d ? shaped(t, *d) : unranked(t);
}

// --- elementwise ------------------------------------------------------------

void inferIdentity(Ctx &c) { c.setLike(0, c.req(0)); }

void inferUnaryNumeric(Ctx &c) {
  c.requireNumeric(0);
  c.setLike(0, c.req(0));
}

void inferUnaryFloat(Ctx &c) {
  c.requireFloat(0);
  c.setLike(0, c.req(0));
}

void inferNot(Ctx &c) {
  c.requireDType(0, DType::Bool);
  c.setLike(0, c.req(0));
}

/// IsNaN, IsInf: a bool of X's shape for a floating-point X.
void inferFloatPredicate(Ctx &c) {
  Value *x = c.req(0);
  c.requireFloat(0);
  c.setShapeOf(0, DType::Bool, x);
}

/// And, Or, Xor: bool operands, broadcast.
void inferLogical(Ctx &c) {
  c.req(0);
  c.req(1);
  c.requireDType(0, DType::Bool);
  c.requireDType(1, DType::Bool);
  c.setBroadcast(DType::Bool, {0, 1});
}

void inferBinaryArith(Ctx &c) {
  Value *a = c.req(0);
  c.req(1);
  c.sameDType({0, 1});
  c.requireNumeric(0);
  c.requireNumeric(1);
  c.setBroadcast(a->dtype, {0, 1});
}

/// Mod: broadcast like Add; floating operands need fmod=1 (ONNX: the
/// integer remainder's sign rule, fmod=0, is undefined for floats).
void inferMod(Ctx &c) {
  inferBinaryArith(c);
  const Value *a = c.n.input(0);
  int64_t fmod = c.intAttr("fmod", 0);
  if (fmod != 0 && fmod != 1)
    fail([&] { errorAt(c.n) << "fmod must be 0 or 1, got " << fmod; });
  if (a->dtype != DType::Undefined && isFloating(a->dtype) && fmod == 0)
    fail([&] {
      errorAt(c.n) << "takes " << dtypeName(a->dtype)
                   << " operands only with fmod=1 (ONNX Mod)";
    });
}

/// CumSum(x, axis): x's type; axis an int32/int64 scalar.
void inferCumSum(Ctx &c) {
  Value *x = c.req(0);
  c.requireNumeric(0);
  const Value *axis = c.req(1);
  if (axis->dtype != DType::Undefined && axis->dtype != DType::I64 &&
      axis->dtype != DType::I32)
    fail([&] {
      errorAt(c.n) << "axis must be int32 or int64, got " << typeText(axis);
    });
  if (axis->hasShape && axis->rank() != 0 &&
      !(axis->rank() == 1 && axis->dims[0].isKnown() &&
        axis->dims[0].value == 1))
    fail([&] {
      errorAt(c.n) << "axis (" << c.inputText(1) << ") must be a scalar, got "
                   << typeText(axis);
    });
  if (x->hasShape && x->rank() == 0)
    fail([&] { errorAt(c.n) << "x must have rank >= 1"; });
  c.setLike(0, x);
}

/// Trilu(input, k?): the input's type; rank >= 2, k an int64 scalar.
void inferTrilu(Ctx &c) {
  Value *x = c.req(0);
  if (x->hasShape && x->rank() < 2)
    fail([&] {
      errorAt(c.n) << "input must have rank >= 2, got " << typeText(x);
    });
  if (const Value *k = c.opt(1)) {
    c.requireDType(1, DType::I64);
    if (k->hasShape && k->rank() != 0 &&
        !(k->rank() == 1 && k->dims[0].isKnown() && k->dims[0].value == 1))
      fail([&] {
        errorAt(c.n) << "k (" << c.inputText(1) << ") must be a scalar, got "
                     << typeText(k);
      });
  }
  c.setLike(0, x);
}

void inferPow(Ctx &c) {
  Value *base = c.req(0);
  c.req(1);
  c.requireNumeric(0);
  c.requireNumeric(1);
  c.setBroadcast(base->dtype, {0, 1});
}

void inferCompare(Ctx &c) {
  c.req(0);
  c.req(1);
  c.sameDType({0, 1});
  if (c.n.opType() != "Equal") {
    c.requireNumeric(0);
    c.requireNumeric(1);
  }
  c.setBroadcast(DType::Bool, {0, 1});
}

void inferWhere(Ctx &c) {
  c.req(0);
  Value *x = c.req(1);
  c.req(2);
  c.requireDType(0, DType::Bool);
  c.sameDType({1, 2});
  c.setBroadcast(x->dtype, {0, 1, 2});
}

void inferCast(Ctx &c) {
  const Value *x = c.req(0);
  int64_t to = c.requiredIntAttr("to");
  auto t = fromOnnxDataType(int(to));
  if (!t)
    fail([&] {
      errorAt(c.n) << "attribute 'to' = " << to
                   << " is not a data type mpc supports (float, float16, "
                      "bfloat16, double, int64, int32, int8, uint8, bool)";
    });
  c.setShapeOf(0, *t, x);
}

// --- matrix products --------------------------------------------------------

void inferGemm(Ctx &c) {
  Value *a = c.req(0);
  Value *b = c.req(1);
  c.sameDType({0, 1, 2});
  c.requireNumeric(0);
  bool transA = c.flagAttr("transA", false);
  bool transB = c.flagAttr("transB", false);
  c.floatAttr("alpha", 1.0f);
  c.floatAttr("beta", 1.0f);
  c.requireRank(0, 2);
  c.requireRank(1, 2);
  if (!a->hasShape || !b->hasShape) {
    Dim out[2];
    if (a->hasShape)
      out[0] = a->dims[transA ? 1 : 0];
    if (b->hasShape)
      out[1] = b->dims[transB ? 0 : 1];
    c.setShaped(0, a->dtype, out, 2);
    return;
  }
  Dim m = a->dims[transA ? 1 : 0], ka = a->dims[transA ? 0 : 1];
  Dim kb = b->dims[transB ? 1 : 0], nn = b->dims[transB ? 0 : 1];
  if (dimsConflict(ka, kb))
    fail([&] {
      errorAt(c.n) << "inner dimensions differ: A is " << typeText(a)
                   << (transA ? " (transposed)" : "") << ", B is "
                   << typeText(b) << (transB ? " (transposed)" : "") << " ("
                   << ka.value << " vs " << kb.value << ")";
    });
  const Dim out[2] = {m, nn};
  if (const Value *cv = c.opt(2)) {
    if (cv->hasShape) {
      if (cv->rank() > 2)
        fail([&] {
          errorAt(c.n) << "C (" << c.inputText(2)
                       << ") must have rank <= 2, got " << typeText(cv);
        });
      // C broadcasts one way onto [M, N].
      for (size_t i = 0; i < cv->dims.size(); ++i) {
        const Dim &d = cv->dims[i];
        const Dim &target = out[2 - cv->dims.size() + i];
        if (d.isKnown() && d.value != 1 && dimsConflict(d, target))
          fail([&] {
            errorAt(c.n) << "C (" << typeText(cv)
                         << ") does not broadcast to the product's shape "
                         << dimsToString(Dims(out, out + 2));
          });
      }
    }
  }
  c.setShaped(0, a->dtype, out, 2);
}

void inferMatMul(Ctx &c) {
  Value *a = c.req(0);
  Value *b = c.req(1);
  c.sameDType({0, 1});
  c.requireNumeric(0);
  if ((a->hasShape && a->rank() == 0) || (b->hasShape && b->rank() == 0))
    fail([&] {
      errorAt(c.n) << "inputs must have rank >= 1, got " << typeText(a)
                   << " and " << typeText(b);
    });
  if (!a->hasShape || !b->hasShape) {
    c.set(0, unranked(a->dtype));
    return;
  }
  // A 1-D a is [1, K] and a 1-D b is [K, 1] for the product (their extra
  // dim is dropped again), so neither has batch dims. Read in place: verify
  // re-infers every MatMul a pass touched.
  const Dims &ad = a->dims, &bd = b->dims;
  bool aVec = ad.size() == 1, bVec = bd.size() == 1;
  const Dim &ka = ad.back(), &kb = bVec ? bd[0] : bd[bd.size() - 2];
  if (dimsConflict(ka, kb))
    fail([&] {
      errorAt(c.n) << "inner dimensions differ: " << typeText(a) << " x "
                   << typeText(b) << " (" << ka.value << " vs " << kb.value
                   << ")";
    });
  InlineDims batch;
  c.broadcastInto(ad.data(), aVec ? 0 : ad.size() - 2, bd.data(),
                  bVec ? 0 : bd.size() - 2, batch);
  if (!aVec)
    batch.push_back(ad[ad.size() - 2]);
  if (!bVec)
    batch.push_back(bd.back());
  c.setShaped(0, a->dtype, batch);
}

// --- shape manipulation -----------------------------------------------------

/// Known product and symbols of a list of dims (for Reshape's -1).
struct DimCount {
  int64_t known = 1;
  /// A multiset: only which symbols and how often counts, not their order.
  /// (Interned, so equal names are equal symbols.)
  SmallVector<DimSymbol, 8> symbols;
  bool unknown = false;
  void add(const Dim &d) {
    if (d.isKnown())
      unknown |= __builtin_mul_overflow(known, d.value, &known);
    else if (!d.symbol.empty())
      symbols.push_back(d.symbol);
    else
      unknown = true;
  }
};

void inferReshape(Ctx &c) {
  Value *x = c.req(0);
  c.req(1);
  bool allowZero = c.opset >= 14 && c.flagAttr("allowzero", false);
  ConstIntList shape;
  if (!c.constIntsInPlace(1, "shape", shape)) {
    auto len = c.length1D(1);
    if (len)
      c.setShaped(0, x->dtype, InlineDims(size_t(*len), Dim()));
    else
      c.setUnranked(0, x->dtype);
    return;
  }
  InlineDims out;
  out.reserve(shape.size);
  int inferIdx = -1;
  bool hasZero = false;
  for (size_t i = 0; i < shape.size; ++i) {
    int64_t v = shape[i];
    if (v == -1) {
      if (inferIdx >= 0)
        fail([&] {
          errorAt(c.n) << "shape " << shape.text() << " has more than one -1";
        });
      inferIdx = int(i);
      out.push_back(Dim());
    } else if (v < -1) {
      fail([&] {
        errorAt(c.n) << "shape " << shape.text() << " has invalid entry " << v;
      });
    } else if (v == 0 && !allowZero) {
      if (x->hasShape && int64_t(i) >= x->rank())
        fail([&] {
          errorAt(c.n) << "shape " << shape.text() << " copies dim " << i
                       << " (0) but the input " << typeText(x) << " has rank "
                       << x->rank();
        });
      out.push_back(x->hasShape ? x->dims[i] : Dim());
    } else {
      hasZero |= v == 0;
      out.push_back(Dim(v));
    }
  }
  if (allowZero && hasZero && inferIdx >= 0)
    fail([&] {
      errorAt(c.n) << "shape " << shape.text()
                   << " has both 0 and -1 while allowzero=1";
    });
  if (!x->hasShape) {
    c.setShaped(0, x->dtype, out);
    return;
  }
  DimCount in, rest;
  for (const Dim &d : x->dims)
    in.add(d);
  for (size_t i = 0; i < out.size(); ++i)
    if (int(i) != inferIdx)
      rest.add(out[i]);
  // Symbols copied through (batch dim "N" kept by a 0) cancel out.
  for (size_t r = 0; r < rest.symbols.size();) {
    const DimSymbol *match =
        std::find(in.symbols.begin(), in.symbols.end(), rest.symbols[r]);
    if (match == in.symbols.end()) {
      ++r;
      continue;
    }
    in.symbols.erase(size_t(match - in.symbols.begin()));
    rest.symbols.erase(r);
  }
  bool exact = !in.unknown && !rest.unknown && in.symbols.empty() &&
               rest.symbols.empty();
  // Built only when reported: verify infers every Reshape after every pass.
  auto mismatch = [&] {
    return "cannot reshape " + typeText(x) + " to shape " + shape.text();
  };
  if (inferIdx >= 0) {
    if (exact) {
      if (rest.known == 0) {
        if (in.known != 0)
          fail([&] { errorAt(c.n) << mismatch(); });
      } else if (in.known % rest.known != 0) {
        fail([&] {
          errorAt(c.n) << mismatch() << " (" << in.known
                       << " elements do not divide by " << rest.known << ")";
        });
      } else {
        out[size_t(inferIdx)] = Dim(in.known / rest.known);
      }
    } else if (!in.unknown && !rest.unknown && rest.symbols.empty() &&
               in.symbols.size() == 1 && in.known == rest.known) {
      Dim symbolic;
      symbolic.symbol = in.symbols[0];
      out[size_t(inferIdx)] = symbolic;
    }
  } else if (exact && in.known != rest.known) {
    fail([&] {
      errorAt(c.n) << mismatch() << " (" << in.known << " vs " << rest.known
                   << " elements)";
    });
  }
  c.setShaped(0, x->dtype, out);
}

void inferFlatten(Ctx &c) {
  Value *x = c.req(0);
  int64_t axis = c.intAttr("axis", 1);
  if (!x->hasShape) {
    c.set(0, shaped(x->dtype, {Dim(), Dim()}));
    return;
  }
  int64_t a = c.axis(axis, x->rank(), "axis", true);
  c.set(0, shaped(x->dtype, {dimProduct(x->dims, 0, size_t(a)),
                             dimProduct(x->dims, size_t(a), x->dims.size())}));
}

void inferTranspose(Ctx &c) {
  Value *x = c.req(0);
  // Read in place (verify reruns this a lot); absent means reversed axes.
  const std::vector<int64_t> *perm = c.intsAttrOrNull("perm");
  if (!x->hasShape) {
    if (perm)
      c.setShaped(0, x->dtype, InlineDims(perm->size(), Dim()));
    else
      c.setUnranked(0, x->dtype);
    return;
  }
  int64_t r = x->rank();
  InlineDims out;
  out.reserve(size_t(r));
  if (!perm) {
    for (int64_t i = r - 1; i >= 0; --i)
      out.push_back(x->dims[size_t(i)]);
    c.setShaped(0, x->dtype, out);
    return;
  }
  if (int64_t(perm->size()) != r)
    fail([&] {
      errorAt(c.n) << "perm " << intsText(*perm) << " has " << perm->size()
                   << " entries but the input " << typeText(x) << " has rank "
                   << r;
    });
  SmallVector<bool, 16> seen(size_t(r), false);
  for (int64_t p : *perm) {
    if (p < 0 || p >= r || seen[size_t(p)])
      fail([&] {
        errorAt(c.n) << "perm " << intsText(*perm)
                     << " is not a permutation of 0.." << r - 1;
      });
    seen[size_t(p)] = true;
    out.push_back(x->dims[size_t(p)]);
  }
  c.setShaped(0, x->dtype, out);
}

void inferSoftmax(Ctx &c) {
  Value *x = c.req(0);
  c.requireFloat(0);
  int64_t axis = c.intAttr("axis", c.opset >= 13 ? -1 : 1);
  if (x->hasShape)
    c.axis(axis, x->rank());
  c.setLike(0, x);
}

/// Checks the [N, C, d1...] scores / [N, d1...] labels / [C] weights of the
/// loss ops and returns the per-element loss shape [N, d1...].
std::optional<Dims> lossShape(Ctx &c) {
  Value *scores = c.req(0);
  Value *labels = c.req(1);
  c.requireFloat(0);
  c.requireIndex(1, "labels");
  c.sameDType({0, 2});
  std::string reduction = c.stringAttr("reduction", "mean");
  if (reduction != "mean" && reduction != "sum" && reduction != "none")
    fail([&] {
      errorAt(c.n) << "attribute 'reduction' must be \"mean\", \"sum\" or "
                      "\"none\", got \""
                   << reduction << "\"";
    });
  c.intAttr("ignore_index", 0);
  if (scores->hasShape && scores->rank() < 2)
    fail([&] {
      errorAt(c.n) << "scores (" << c.inputText(0)
                   << ") must have rank >= 2 ([N, C, ...]), got "
                   << typeText(scores);
    });
  if (const Value *w = c.opt(2)) {
    c.requireRank(2, 1);
    if (w->hasShape && scores->hasShape &&
        dimsConflict(w->dims[0], scores->dims[1]))
      fail([&] {
        errorAt(c.n) << "weights " << typeText(w) << " must have one entry per "
                     << "class (" << scores->dims[1].value << ")";
      });
  }
  std::optional<Dims> out;
  if (scores->hasShape) {
    Dims d = scores->dims;
    d.erase(d.begin() + 1);
    out = d;
  }
  if (labels->hasShape) {
    if (out && labels->dims.size() != out->size())
      fail([&] {
        errorAt(c.n) << "labels " << typeText(labels)
                     << " must have the shape of scores " << typeText(scores)
                     << " without the class dim (" << dimsToString(*out) << ")";
      });
    if (!out)
      out = labels->dims;
    for (size_t i = 0; i < out->size(); ++i) {
      if (dimsConflict((*out)[i], labels->dims[i]))
        fail([&] {
          errorAt(c.n) << "labels " << typeText(labels)
                       << " must have the shape of scores " << typeText(scores)
                       << " without the class dim (" << dimsToString(*out)
                       << ")";
        });
      (*out)[i] = unifyDim((*out)[i], labels->dims[i]);
    }
  }
  return out;
}

void inferSoftmaxCrossEntropyLoss(Ctx &c) {
  auto perElement = lossShape(c);
  const Value *scores = c.n.input(0);
  bool none = c.stringAttr("reduction", "mean") == "none";
  c.set(0, none ? maybeShaped(scores->dtype, perElement)
                : shaped(scores->dtype, {}));
  c.setLike(1, scores);
}

void inferNegativeLogLikelihoodLoss(Ctx &c) {
  auto perElement = lossShape(c);
  const Value *x = c.n.input(0);
  bool none = c.stringAttr("reduction", "mean") == "none";
  c.set(0, none ? maybeShaped(x->dtype, perElement) : shaped(x->dtype, {}));
}

/// The opset from which a reduction takes axes as an input.
int64_t axesInputOpset(const std::string &op) {
  return op == "ReduceSum" ? 13 : 18;
}

void inferReduce(Ctx &c) {
  Value *x = c.req(0);
  if (c.n.opType() != "ReduceMax") // ReduceMax takes bool from opset 20
    c.requireNumeric(0);
  int64_t since = axesInputOpset(c.n.opType());
  bool keepDims = c.flagAttr("keepdims", true);
  std::optional<std::vector<int64_t>> axes;
  bool noop = false;
  if (c.opset >= since) {
    if (c.n.hasAttr("axes"))
      fail([&] {
        errorAt(c.n) << "'axes' is an input since opset " << since
                     << ", not an attribute (model opset " << c.opset << ")";
      });
    noop = c.flagAttr("noop_with_empty_axes", false);
    axes = std::vector<int64_t>{};
    if (c.opt(1))
      axes = c.constInts(1, "axes");
  } else {
    if (c.n.numInputs() > 1)
      fail([&] {
        errorAt(c.n) << "takes 'axes' as an attribute before opset " << since
                     << ", not as an input (model opset " << c.opset << ")";
      });
    axes = c.intsAttr("axes");
  }
  if (!x->hasShape) {
    c.set(0, unranked(x->dtype));
    return;
  }
  if (!axes) {
    // Which axes is only known at run time.
    c.set(0, keepDims ? shaped(x->dtype, Dims(x->dims.size(), Dim()))
                      : unranked(x->dtype));
    return;
  }
  if (axes->empty()) {
    if (noop) {
      c.setLike(0, x);
      return;
    }
    for (int64_t i = 0; i < x->rank(); ++i)
      axes->push_back(i);
  }
  std::vector<int64_t> norm = c.axes(*axes, x->rank());
  Dims out;
  for (int64_t i = 0; i < x->rank(); ++i) {
    bool reduced = std::find(norm.begin(), norm.end(), i) != norm.end();
    if (!reduced)
      out.push_back(x->dims[size_t(i)]);
    else if (keepDims)
      out.push_back(Dim(1));
  }
  c.set(0, shaped(x->dtype, std::move(out)));
}

void inferConstant(Ctx &c) {
  TensorPtr t = constantNodeTensor(c.n);
  c.set(0, shaped(t->dtype, toDims(t->dims)));
}

void inferShape(Ctx &c) {
  Value *x = c.req(0);
  int64_t start = c.opset >= 15 ? c.intAttr("start", 0) : 0;
  bool hasEnd = c.opset >= 15 && c.n.hasAttr("end");
  int64_t end = hasEnd ? c.intAttr("end", 0) : 0;
  if (!x->hasShape) {
    c.set(0, shaped(DType::I64, {Dim()}));
    return;
  }
  int64_t r = x->rank();
  if (!hasEnd)
    end = r;
  auto clampAxis = [r](int64_t a) {
    if (a < 0)
      a += r;
    return std::clamp<int64_t>(a, 0, r);
  };
  c.set(0,
        shaped(DType::I64,
               {Dim(std::max<int64_t>(0, clampAxis(end) - clampAxis(start)))}));
}

void inferGather(Ctx &c) {
  Value *data = c.req(0);
  Value *indices = c.req(1);
  c.requireIndex(1, "indices");
  int64_t axis = c.intAttr("axis", 0);
  if (!data->hasShape || !indices->hasShape) {
    if (data->hasShape)
      c.axis(axis, data->rank());
    c.set(0, unranked(data->dtype));
    return;
  }
  if (data->rank() == 0)
    fail([&] {
      errorAt(c.n) << "data (" << c.inputText(0) << ") must have rank >= 1";
    });
  int64_t a = c.axis(axis, data->rank());
  const Dim &size = data->dims[size_t(a)];
  if (TensorPtr idx = constantValue(*indices); idx && size.isKnown()) {
    for (int64_t i : idx->toInt64s())
      if (i < -size.value || i >= size.value)
        fail([&] {
          errorAt(c.n) << "index " << i << " is out of range for axis " << a
                       << " of size " << size.value << " (input "
                       << typeText(data) << ")";
        });
  }
  Dims out(data->dims.begin(), data->dims.begin() + a);
  out.insert(out.end(), indices->dims.begin(), indices->dims.end());
  out.insert(out.end(), data->dims.begin() + a + 1, data->dims.end());
  c.set(0, shaped(data->dtype, std::move(out)));
}

void inferConcat(Ctx &c) {
  if (c.n.numInputs() == 0)
    fail([&] { errorAt(c.n) << "needs at least one input"; });
  for (size_t i = 0; i < c.n.numInputs(); ++i)
    c.req(i);
  for (size_t i = 1; i < c.n.numInputs(); ++i)
    c.sameDType({0, i});
  int64_t axis = c.requiredIntAttr("axis");
  DType t = DType::Undefined;
  const Value *ref = nullptr;
  for (const Value *v : c.n.inputs()) {
    if (t == DType::Undefined)
      t = v->dtype;
    if (v->hasShape && !ref)
      ref = v;
  }
  if (!ref) {
    c.set(0, unranked(t));
    return;
  }
  int64_t r = ref->rank();
  if (r == 0)
    fail([&] {
      errorAt(c.n) << "inputs must have rank >= 1, got " << typeText(ref);
    });
  int64_t a = c.axis(axis, r);
  Dims out = ref->dims;
  bool sumKnown = true;
  int64_t sum = 0;
  for (size_t i = 0; i < c.n.numInputs(); ++i) {
    const Value *v = c.n.input(i);
    if (!v->hasShape) {
      sumKnown = false;
      continue;
    }
    if (v->rank() != r)
      fail([&] {
        errorAt(c.n) << c.inputText(i) << " " << typeText(v)
                     << " has a different rank than " << typeText(ref);
      });
    for (int64_t d = 0; d < r; ++d) {
      if (d == a)
        continue;
      if (dimsConflict(out[size_t(d)], v->dims[size_t(d)]))
        fail([&] {
          errorAt(c.n) << c.inputText(i) << " " << typeText(v)
                       << " differs from " << typeText(ref) << " in dim " << d
                       << " (only the concat axis " << a << " may differ)";
        });
      out[size_t(d)] = unifyDim(out[size_t(d)], v->dims[size_t(d)]);
    }
    if (v->dims[size_t(a)].isKnown())
      sum += v->dims[size_t(a)].value;
    else
      sumKnown = false;
  }
  out[size_t(a)] = sumKnown ? Dim(sum) : Dim();
  c.set(0, shaped(t, std::move(out)));
}

/// Axes of Squeeze/Unsqueeze: an input from opset 13, an attribute before.
/// nullopt when given as an input whose value is not known.
std::optional<std::vector<int64_t>> squeezeAxes(Ctx &c, bool &given) {
  if (c.opset >= 13) {
    if (c.n.hasAttr("axes"))
      fail([&] {
        errorAt(c.n) << "'axes' is an input since opset 13, not an attribute "
                        "(model opset "
                     << c.opset << ")";
      });
    given = c.opt(1) != nullptr;
    if (!given)
      return std::vector<int64_t>{};
    return c.constInts(1, "axes");
  }
  if (c.n.numInputs() > 1)
    fail([&] {
      errorAt(c.n) << "takes 'axes' as an attribute before opset 13, not as an "
                      "input (model opset "
                   << c.opset << ")";
    });
  given = c.n.hasAttr("axes");
  return c.intsAttr("axes");
}

void inferUnsqueeze(Ctx &c) {
  Value *x = c.req(0);
  bool given = false;
  auto axes = squeezeAxes(c, given);
  if (!given)
    fail([&] {
      errorAt(c.n) << (c.opset >= 13 ? "requires the 'axes' input"
                                     : "requires attribute 'axes'");
    });
  if (!axes || !x->hasShape) {
    auto len = c.length1D(1);
    if (x->hasShape && !axes && len)
      c.set(0, shaped(x->dtype, Dims(size_t(x->rank() + *len), Dim())));
    else
      c.set(0, unranked(x->dtype));
    return;
  }
  int64_t outRank = x->rank() + int64_t(axes->size());
  std::vector<int64_t> norm = c.axes(*axes, outRank);
  Dims out;
  size_t next = 0;
  for (int64_t i = 0; i < outRank; ++i) {
    if (std::find(norm.begin(), norm.end(), i) != norm.end())
      out.push_back(Dim(1));
    else
      out.push_back(x->dims[next++]);
  }
  c.set(0, shaped(x->dtype, std::move(out)));
}

void inferSqueeze(Ctx &c) {
  Value *x = c.req(0);
  bool given = false;
  auto axes = squeezeAxes(c, given);
  if (!x->hasShape || !axes) {
    c.set(0, unranked(x->dtype));
    return;
  }
  Dims out;
  if (!given || axes->empty()) {
    for (const Dim &d : x->dims) {
      if (!d.isKnown()) {
        // A symbolic dim might be 1 and squeezed away: rank unknown.
        c.set(0, unranked(x->dtype));
        return;
      }
      if (d.value != 1)
        out.push_back(d);
    }
    c.set(0, shaped(x->dtype, std::move(out)));
    return;
  }
  std::vector<int64_t> norm = c.axes(*axes, x->rank());
  for (int64_t i = 0; i < x->rank(); ++i) {
    const Dim &d = x->dims[size_t(i)];
    if (std::find(norm.begin(), norm.end(), i) == norm.end()) {
      out.push_back(d);
    } else if (d.isKnown() && d.value != 1) {
      fail([&] {
        errorAt(c.n) << "cannot squeeze axis " << i << " of size " << d.value
                     << " (input " << typeText(x) << ")";
      });
    }
  }
  c.set(0, shaped(x->dtype, std::move(out)));
}

void inferSlice(Ctx &c) {
  Value *x = c.req(0);
  std::optional<std::vector<int64_t>> starts, ends, axes, steps;
  bool axesKnown = true;
  if (c.opset >= 10) {
    c.req(1);
    c.req(2);
    c.requireIndex(1, "starts");
    c.requireIndex(2, "ends");
    auto readInts = [&](size_t i) -> std::optional<std::vector<int64_t>> {
      const Value *v = c.n.input(i);
      if (!v)
        return std::nullopt;
      if (v->hasShape && v->rank() != 1)
        fail([&] {
          errorAt(c.n) << c.inputText(i) << " must be 1-D, got " << typeText(v);
        });
      TensorPtr t = constantValue(*v);
      return t ? std::optional(t->toInt64s()) : std::nullopt;
    };
    starts = readInts(1);
    ends = readInts(2);
    axes = readInts(3);
    steps = readInts(4);
    axesKnown = !c.opt(3) || axes;
    if (c.opt(4) && !steps) {
      c.set(0, x->hasShape ? shaped(x->dtype, Dims(x->dims.size(), Dim()))
                           : unranked(x->dtype));
      return;
    }
  } else {
    starts = c.intsAttr("starts");
    ends = c.intsAttr("ends");
    if (c.n.hasAttr("axes"))
      axes = c.intsAttr("axes");
  }
  if (!x->hasShape) {
    c.set(0, unranked(x->dtype));
    return;
  }
  int64_t r = x->rank();
  if (!axesKnown) {
    c.set(0, shaped(x->dtype, Dims(size_t(r), Dim())));
    return;
  }
  size_t k = starts ? starts->size() : ends ? ends->size() : 0;
  if (!axes) {
    if (!starts && !ends) {
      auto len = c.length1D(1);
      if (!len) {
        c.set(0, shaped(x->dtype, Dims(size_t(r), Dim())));
        return;
      }
      k = size_t(*len);
    }
    axes = std::vector<int64_t>();
    for (size_t i = 0; i < k; ++i)
      axes->push_back(int64_t(i));
  }
  k = axes->size();
  if ((starts && starts->size() != k) || (ends && ends->size() != k) ||
      (steps && steps->size() != k))
    fail([&] {
      errorAt(c.n) << "starts, ends, axes and steps must have the same length";
    });
  std::vector<int64_t> norm = c.axes(*axes, r);
  Dims out = x->dims;
  for (size_t j = 0; j < k; ++j) {
    Dim &d = out[size_t(norm[j])];
    int64_t step = steps ? (*steps)[j] : 1;
    if (step == 0)
      fail([&] { errorAt(c.n) << "steps must not be 0"; });
    if (!starts || !ends) {
      d = Dim();
      continue;
    }
    int64_t s = (*starts)[j], e = (*ends)[j];
    if (!d.isKnown()) {
      // Only "the whole axis" is provable without the size.
      bool whole =
          step == 1 && s == 0 && e >= std::numeric_limits<int32_t>::max();
      if (!whole)
        d = Dim();
      continue;
    }
    int64_t size = d.value;
    if (s < 0)
      s += size;
    if (e < 0)
      e += size;
    int64_t count;
    if (step > 0) {
      s = std::clamp<int64_t>(s, 0, size);
      e = std::clamp<int64_t>(e, 0, size);
      count = e > s ? (e - s + step - 1) / step : 0;
    } else {
      s = std::clamp<int64_t>(s, 0, size - 1);
      e = std::clamp<int64_t>(e, -1, size - 1);
      count = s > e ? (s - e + (-step) - 1) / (-step) : 0;
    }
    d = Dim(count);
  }
  c.set(0, shaped(x->dtype, std::move(out)));
}

void inferExpand(Ctx &c) {
  Value *x = c.req(0);
  c.req(1);
  auto shape = c.constInts(1, "shape");
  if (!x->hasShape) {
    c.set(0, unranked(x->dtype));
    return;
  }
  if (!shape) {
    auto len = c.length1D(1);
    c.set(0,
          len ? shaped(x->dtype, Dims(size_t(std::max(*len, x->rank())), Dim()))
              : unranked(x->dtype));
    return;
  }
  for (int64_t v : *shape)
    if (v < 0)
      fail([&] {
        errorAt(c.n) << "shape " << intsText(*shape) << " has a negative entry";
      });
  c.set(0, shaped(x->dtype, c.broadcast(x->dims, toDims(*shape))));
}

void inferConstantOfShape(Ctx &c) {
  c.req(0);
  DType t = DType::F32;
  if (const Attribute *a =
          c.attrOfKind("value", Attribute::Kind::Tensor, "a tensor")) {
    if (a->t->numel() != 1)
      fail([&] {
        errorAt(c.n) << "attribute 'value' must hold exactly one element, got "
                     << dimsToString(a->t->dims);
      });
    t = a->t->dtype;
  }
  auto shape = c.constInts(0, "shape");
  if (shape) {
    for (int64_t v : *shape)
      if (v < 0)
        fail([&] {
          errorAt(c.n) << "shape " << intsText(*shape)
                       << " has a negative entry";
        });
    c.set(0, shaped(t, toDims(*shape)));
    return;
  }
  auto len = c.length1D(0);
  c.set(0, len ? shaped(t, Dims(size_t(*len), Dim())) : unranked(t));
}

// --- random ops
// ---------------------------------------------------------------

/// The output dtype of a random op: its `dtype` attribute, else `fallback`;
/// `floatOnly` (RandomUniform/Normal and their *Like forms) refuses others.
DType randomOutputDType(Ctx &c, DType fallback, bool floatOnly) {
  if (!c.n.hasAttr("dtype"))
    return fallback;
  int64_t onnx = c.intAttr("dtype", 1);
  auto t = fromOnnxDataType(int(onnx));
  if (!t || (floatOnly && !isFloating(*t)))
    fail([&] {
      errorAt(c.n) << "attribute 'dtype' = " << onnx << " is not "
                   << (floatOnly ? "a floating-point type mpc supports "
                                   "(float, float16, bfloat16, double)"
                                 : "a data type mpc supports");
    });
  return *t;
}

/// RandomUniform / RandomNormal: the `shape` attribute's dims.
void inferRandom(Ctx &c) {
  if (!c.n.attr("shape"))
    fail([&] { errorAt(c.n) << "attribute 'shape' is required"; });
  std::vector<int64_t> shape = c.intsAttr("shape");
  for (int64_t v : shape)
    if (v < 0)
      fail([&] {
        errorAt(c.n) << "shape " << intsText(shape) << " has a negative entry";
      });
  c.floatAttr("seed", 0.0f);
  c.set(0, shaped(randomOutputDType(c, DType::F32, true), toDims(shape)));
}

/// RandomUniformLike / RandomNormalLike: the input's shape; its dtype
/// unless `dtype` says otherwise. Bernoulli: the same, of probabilities.
void inferRandomLike(Ctx &c) {
  Value *x = c.req(0);
  bool bernoulli = c.n.opType() == "Bernoulli";
  if (bernoulli)
    c.requireFloat(0);
  c.floatAttr("seed", 0.0f);
  DType t = randomOutputDType(c, x->dtype, !bernoulli);
  if (!bernoulli && !c.n.hasAttr("dtype") && x->dtype != DType::Undefined &&
      !isFloating(x->dtype))
    fail([&] {
      errorAt(c.n) << "without a 'dtype' attribute the output takes the "
                      "input's type, which must be floating point, got "
                   << typeText(x);
    });
  c.setShapeOf(0, t, x);
}

/// GatherND: indices.shape[:-1] + data.shape[batch_dims + k:], k the last
/// dim of indices (known here, or the output is left unranked).
void inferGatherND(Ctx &c) {
  Value *data = c.req(0);
  const Value *idx = c.req(1);
  c.requireDType(1, DType::I64);
  int64_t b = c.intAttr("batch_dims", 0);
  if (idx->hasShape && idx->rank() < 1)
    fail([&] {
      errorAt(c.n) << "indices must have rank >= 1, got " << typeText(idx);
    });
  if (!data->hasShape || !idx->hasShape || !idx->dims.back().isKnown()) {
    c.setUnranked(0, data->dtype);
    return;
  }
  int64_t r = data->rank(), q = idx->rank(), k = idx->dims.back().value;
  if (q < 1 || b < 0 || b >= std::min(r, q) || k < 1 || b + k > r)
    fail([&] {
      errorAt(c.n) << "indices " << typeText(idx) << " with batch_dims " << b
                   << " do not address data " << typeText(data);
    });
  Dims dims(idx->dims.begin(), idx->dims.end() - 1);
  dims.insert(dims.end(), data->dims.begin() + b + k, data->dims.end());
  c.setShaped(0, data->dtype, dims.data(), dims.size());
}

/// ScatterND: data's type; indices int64 of rank >= 1 whose last dim k is
/// at most data's rank; updates of data's dtype (their shape, indices'
/// leading dims then data's from k on, is checked where all are known).
void inferScatterND(Ctx &c) {
  Value *data = c.req(0);
  const Value *idx = c.req(1), *upd = c.req(2);
  c.requireDType(1, DType::I64);
  c.sameDType({0, 2});
  if (idx->hasShape && data->hasShape) {
    if (idx->rank() < 1)
      fail([&] { errorAt(c.n) << "indices must have rank >= 1"; });
    const Dim &k = idx->dims.back();
    if (k.isKnown() && (k.value < 1 || k.value > int64_t(data->rank())))
      fail([&] {
        errorAt(c.n) << "the last dim of indices (" << k.value
                     << ") must be in [1, " << data->rank() << "], data's rank";
      });
    int64_t want = int64_t(idx->rank()) - 1 + int64_t(data->rank()) -
                   (k.isKnown() ? k.value : 0);
    if (k.isKnown() && upd->hasShape && int64_t(upd->rank()) != want)
      fail([&] {
        errorAt(c.n) << "updates must have rank " << want << ", got "
                     << typeText(upd);
      });
  }
  std::string r = c.stringAttr("reduction", "none");
  if (r != "none" && r != "add" && r != "mul" && r != "max" && r != "min")
    fail([&] {
      errorAt(c.n) << "reduction '" << r
                   << "' is not one of none, add, mul, max, min";
    });
  c.setLike(0, data);
}

/// Range: a 1-D tensor of start's dtype; its length when all three are known.
void inferRange(Ctx &c) {
  Value *start = c.req(0);
  c.req(1);
  c.req(2);
  // constInts reads int64 constants only; other dtypes get an unknown length.
  if (start->dtype != DType::I64) {
    c.set(0, shaped(start->dtype, Dims{Dim()}));
    return;
  }
  auto s = c.constInts(0, "start"), l = c.constInts(1, "limit"),
       d = c.constInts(2, "delta");
  if (s && l && d && s->size() == 1 && l->size() == 1 && d->size() == 1 &&
      (*d)[0] != 0) {
    int64_t n =
        ((*l)[0] - (*s)[0] + (*d)[0] - ((*d)[0] > 0 ? 1 : -1)) / (*d)[0];
    c.set(0, shaped(start->dtype, Dims{Dim(std::max<int64_t>(n, 0))}));
    return;
  }
  c.set(0, shaped(start->dtype, Dims{Dim()}));
}

// --- mpc domain (ir/mpc_ops.h) ---------------------------------------

/// Two inputs that must have the same shape (a gradient and its forward value).
void requireSameShape(Ctx &c, size_t i, size_t j) {
  const Value *a = c.n.input(i), *b = c.n.input(j);
  if (!a || !b || !a->hasShape || !b->hasShape)
    return;
  bool ok = a->rank() == b->rank();
  for (size_t d = 0; ok && d < a->dims.size(); ++d)
    ok = !dimsConflict(a->dims[d], b->dims[d]);
  if (!ok)
    fail([&] {
      errorAt(c.n) << c.inputText(i) << " " << typeText(a) << " and "
                   << c.inputText(j) << " " << typeText(b)
                   << " must have the same shape";
    });
}

/// dX typed like dY (input 0), shaped like dY unified with input 1.
void inferElementwiseGrad(Ctx &c) {
  Value *dy = c.req(0);
  Value *y = c.req(1);
  c.requireFloat(0);
  requireSameShape(c, 0, 1);
  if (c.n.hasAttr("axis") && dy->hasShape)
    c.axis(c.intAttr("axis", -1), dy->rank());
  const Value *ref = dy->hasShape ? dy : y;
  c.setShapeOf(0, dy->dtype, ref);
}

/// The loss gradients: dScores/dX typed and shaped like input 1.
void inferLossGrad(Ctx &c) {
  c.req(0);
  Value *x = c.req(1);
  c.req(2);
  c.requireFloat(0);
  c.requireFloat(1);
  c.requireIndex(2, "labels");
  std::string reduction = c.stringAttr("reduction", "mean");
  if (reduction != "mean" && reduction != "sum" && reduction != "none")
    fail([&] {
      errorAt(c.n) << "attribute 'reduction' must be \"mean\", \"sum\" or "
                      "\"none\", got \""
                   << reduction << "\"";
    });
  const Value *dl = c.n.input(0);
  if (reduction != "none" && dl->hasShape && dl->rank() != 0)
    fail([&] {
      errorAt(c.n) << "dL (" << c.inputText(0) << ") must be a scalar for "
                   << "reduction \"" << reduction << "\", got " << typeText(dl);
    });
  if (x->hasShape && x->rank() < 2)
    fail([&] {
      errorAt(c.n) << c.inputText(1)
                   << " must have rank >= 2 ([N, C, ...]), got " << typeText(x);
    });
  c.setLike(0, x);
}

void inferSumToShape(Ctx &c) {
  Value *dy = c.req(0);
  Value *x = c.req(1);
  if (dy->hasShape && x->hasShape) {
    // X must broadcast one way onto dY's shape.
    bool ok = x->rank() <= dy->rank();
    size_t offset = ok ? dy->dims.size() - x->dims.size() : 0;
    for (size_t i = 0; ok && i < x->dims.size(); ++i)
      ok = x->dims[i] == Dim(1) ||
           !dimsConflict(x->dims[i], dy->dims[offset + i]);
    if (!ok)
      fail([&] {
        errorAt(c.n) << "shape " << dimsToString(x->dims)
                     << " does not broadcast to " << dimsToString(dy->dims);
      });
  }
  c.setShapeOf(0, dy->dtype, x);
}

void inferSumToShapeAs(Ctx &c) {
  inferSumToShape(c);
  Value *dy = c.req(0);
  Value *x = c.req(1);
  // dY's elements are widened to X's dtype: it must hold them exactly.
  if (dy->dtype != DType::Undefined && x->dtype != DType::Undefined &&
      dy->dtype != x->dtype && !widensExactly(dy->dtype, x->dtype))
    fail([&] {
      errorAt(c.n) << "X (" << dtypeName(x->dtype)
                   << ") must be a float type at least as wide as dY ("
                   << dtypeName(dy->dtype) << ")";
    });
  c.setShapeOf(0, x->dtype, x);
}

/// mpc.SoftmaxGradAs: SoftmaxGrad with dX of Y's dtype; dY is widened
/// exactly to it (passes/fold_widening_casts.cpp).
void inferSoftmaxGradAs(Ctx &c) {
  inferElementwiseGrad(c);
  Value *dy = c.req(0);
  Value *y = c.req(1);
  c.requireFloat(1);
  if (dy->dtype != DType::Undefined && y->dtype != DType::Undefined &&
      dy->dtype != y->dtype && !widensExactly(dy->dtype, y->dtype))
    fail([&] {
      errorAt(c.n) << "Y (" << dtypeName(y->dtype)
                   << ") must be a float type at least as wide as dY ("
                   << dtypeName(dy->dtype) << ")";
    });
  c.setShapeOf(0, y->dtype, dy->hasShape ? dy : y);
}

/// The divisor D of SoftmaxGradDiv / DivSoftmaxTo: one element of `of`'s
/// dtype and of rank at most its rank (so the Div keeps its shape).
void requireOneElementOf(Ctx &c, const Value *d, const Value *of,
                         const char *what) {
  if (d->dtype != DType::Undefined && of->dtype != DType::Undefined &&
      d->dtype != of->dtype)
    fail([&] {
      errorAt(c.n) << "D (" << dtypeName(d->dtype) << ") must have " << what
                   << "'s dtype (" << dtypeName(of->dtype) << ")";
    });
  bool single = true;
  for (const Dim &k : d->dims)
    single = single && k.isKnown() && k.value == 1;
  if (d->hasShape && (!single || (of->hasShape && d->rank() > of->rank())))
    fail([&] {
      errorAt(c.n) << "D must be one element of rank at most " << what
                   << "'s, got " << dimsToString(d->dims);
    });
}

/// mpc.SoftmaxGradDiv: SoftmaxGradAs divided by the one-element D (Y's
/// dtype) and cast to `to`.
void inferSoftmaxGradDiv(Ctx &c) {
  inferSoftmaxGradAs(c);
  Value *y = c.req(1);
  requireOneElementOf(c, c.req(2), y, "Y");
  int64_t to = c.requiredIntAttr("to");
  auto t = fromOnnxDataType(int(to));
  if (!t || !isFloating(*t))
    fail([&] {
      errorAt(c.n) << "attribute 'to' = " << to << " must be a float type";
    });
  Value *dy = c.n.input(0);
  c.setShapeOf(0, *t, dy->hasShape ? dy : y);
}

/// mpc.SoftmaxTo: Softmax of X widened exactly to `to` (a float type at
/// least as wide as X's), Y in that type; Ylow (optional) Y cast to `low`.
void inferSoftmaxTo(Ctx &c) {
  Value *x = c.req(0);
  c.requireFloat(0);
  int64_t to = c.requiredIntAttr("to");
  auto t = fromOnnxDataType(int(to));
  if (!t || !isFloating(*t) ||
      (x->dtype != DType::Undefined && x->dtype != *t &&
       !widensExactly(x->dtype, *t)))
    fail([&] {
      errorAt(c.n) << "attribute 'to' = " << to
                   << " must be a float type at least as wide as X ("
                   << dtypeName(x->dtype) << ")";
    });
  if (x->hasShape)
    c.axis(c.intAttr("axis", -1), x->rank());
  c.setShapeOf(0, *t, x);
  // The optional Ylow: Y cast down to `low` (default fp16) for the next
  // matrix product.
  int64_t low = c.intAttr("low", toOnnxDataType(DType::F16));
  auto l = fromOnnxDataType(int(low));
  if (c.n.output(1) && (!l || !isFloating(*l)))
    fail([&] {
      errorAt(c.n) << "attribute 'low' = " << low << " must be a float type";
    });
  if (c.n.output(1))
    c.setShapeOf(1, *l, x);
}

/// mpc.DivSoftmaxTo: SoftmaxTo of X divided by the one-element D (X's
/// dtype).
void inferDivSoftmaxTo(Ctx &c) {
  inferSoftmaxTo(c);
  Value *x = c.req(0);
  Value *d = c.req(1);
  requireOneElementOf(c, d, x, "X");
}

void inferReduceGrad(Ctx &c) {
  Value *dy = c.req(0);
  Value *x = c.req(1);
  c.flagAttr("keepdims", true);
  c.flagAttr("mean", false);
  if (c.opt(2))
    c.requireIndex(2, "axes");
  c.setShapeOf(0, dy->dtype, x);
}

void requireScalar(Ctx &c, size_t i, DType t, const char *what) {
  const Value *v = c.n.input(i);
  if (!v)
    return;
  c.requireDType(i, t);
  if (v->hasShape && v->rank() != 0 &&
      !(v->rank() == 1 && v->dims[0] == Dim(1)))
    fail([&] {
      errorAt(c.n) << what << " (" << c.inputText(i)
                   << ") must be a scalar, got " << typeText(v);
    });
}

void inferUnscaleGradients(Ctx &c) {
  c.req(0);
  requireScalar(c, 0, DType::F32, "scale");
  if (c.n.numOutputs() != c.n.numInputs())
    fail([&] {
      errorAt(c.n) << "has " << c.n.numInputs() - 1 << " gradients but "
                   << c.n.numOutputs()
                   << " outputs (expected found_inf and one "
                   << "per gradient)";
    });
  c.set(0, shaped(DType::Bool, {}));
  for (size_t i = 1; i < c.n.numInputs(); ++i) {
    Value *g = c.req(i);
    c.requireFloat(i);
    c.setShapeOf(i, DType::F32, g);
  }
}

void inferAllReduce(Ctx &c) {
  // The op's own rules (kernels/common/all_reduce_rule.h), as the kernels
  // apply them.
  const size_t first =
      allReduceFirstValue(c.n, c.n.numInputs(), c.n.numOutputs());
  allReduceOpOf(c.n);
  allReduceWireOf(c.n);
  if (first) {
    c.req(0);
    requireScalar(c, 0, DType::Bool, "gate");
  }
  for (size_t i = first; i < c.n.numInputs(); ++i) {
    Value *x = c.req(i);
    c.setShapeOf(i - first, x->dtype, x);
  }
}

void inferUpdateLossScale(Ctx &c) {
  c.req(0);
  c.req(1);
  c.req(2);
  requireScalar(c, 0, DType::F32, "scale");
  requireScalar(c, 1, DType::I64, "growth_tracker");
  requireScalar(c, 2, DType::Bool, "found_inf");
  if (c.floatAttr("growth_factor", 2.0f) <= 0 ||
      c.floatAttr("backoff_factor", 0.5f) <= 0)
    fail([&] {
      errorAt(c.n) << "growth_factor and backoff_factor must be positive";
    });
  if (c.intAttr("growth_interval", 2000) <= 0)
    fail([&] { errorAt(c.n) << "growth_interval must be positive"; });
  c.set(0, shaped(DType::F32, {}));
  c.set(1, shaped(DType::I64, {}));
}

void inferClipGradNorm(Ctx &c) {
  if (c.n.numOutputs() != c.n.numInputs() + 1)
    fail([&] {
      errorAt(c.n) << "has " << c.n.numInputs() << " gradients but "
                   << c.n.numOutputs() << " outputs (expected one per gradient "
                   << "and total_norm)";
    });
  float maxNorm = c.floatAttr("max_norm", 0.0f);
  if (!(maxNorm > 0))
    fail([&] {
      errorAt(c.n) << "attribute 'max_norm' must be positive, got " << maxNorm;
    });
  for (size_t i = 0; i < c.n.numInputs(); ++i) {
    c.requireFloat(i);
    c.setLike(i, c.req(i));
  }
  c.set(c.n.numInputs(), shaped(DType::F32, {}));
}

/// found_inf (optional) and step of the optimizer ops.
/// found_inf, step and the optional `lr` input at `lrInput`.
void checkOptimizerControls(Ctx &c, size_t lrInput) {
  requireScalar(c, 0, DType::Bool, "found_inf");
  c.req(1);
  requireScalar(c, 1, DType::I64, "step");
  if (c.floatAttr("lr", 0.0f) < 0)
    fail([&] { errorAt(c.n) << "attribute 'lr' must not be negative"; });
  if (const Value *lr = c.opt(lrInput)) {
    if (lr->dtype != DType::Undefined && lr->dtype != DType::F64 &&
        lr->dtype != DType::F32)
      fail([&] {
        errorAt(c.n) << "lr (" << c.inputText(lrInput)
                     << ") must be fp64 or fp32, got " << typeText(lr);
      });
    requireScalar(c, lrInput, lr->dtype, "lr");
  }
}

void inferSGD(Ctx &c) {
  checkOptimizerControls(c, 5);
  Value *p = c.req(2);
  c.req(3);
  c.requireFloat(2);
  requireSameShape(c, 2, 3);
  if (c.opt(4))
    requireSameShape(c, 2, 4);
  if (c.n.numOutputs() == 2 && !c.opt(4))
    fail(
        [&] { errorAt(c.n) << "has a momentum output but no momentum input"; });
  c.flagAttr("nesterov", false);
  c.setLike(0, p);
  if (Value *buf = c.opt(4))
    c.setLike(1, buf);
}

void inferAdam(Ctx &c) {
  checkOptimizerControls(c, 6);
  Value *p = c.req(2);
  c.req(3);
  Value *m = c.req(4);
  Value *v = c.req(5);
  c.requireFloat(2);
  for (size_t i = 3; i <= 5; ++i)
    requireSameShape(c, 2, i);
  c.flagAttr("decoupled", false);
  c.setLike(0, p);
  c.setLike(1, m);
  c.setLike(2, v);
}

void inferLearningRate(Ctx &c) {
  c.req(0);
  requireScalar(c, 0, DType::I64, "step");
  lrScheduleOf(c.n);
  c.set(0, shaped(DType::F64, {}));
}

void inferIncrementStep(Ctx &c) {
  c.req(0);
  requireScalar(c, 0, DType::I64, "step");
  requireScalar(c, 1, DType::Bool, "found_inf");
  c.set(0, shaped(DType::I64, {}));
}

// The transformer and residual-MLP family's rules (issue 3).
#include "passes/shape_inference_transformer.inc"
// The convolution, pooling and batch-norm family's rules (issue 3).
#include "passes/shape_inference_conv.inc"
// ONNX's training operators (ai.onnx.preview.training, issue 5).
#include "passes/shape_inference_training_ops.inc"
// GatherElements and its gradient (issue 5).
#include "passes/shape_inference_gather_elements.inc"
// The fusion passes' ops (fuse-gelu, fold-transpose).
#include "passes/shape_inference_fused.inc"
// TopK, ArgMax and ArgMin.
#include "passes/shape_inference_selection.inc"

// --- the table --------------------------------------------------------------

using InferFn = void (*)(Ctx &);

/// One supported op: input/output count ranges (-1: any number) and its rule.
struct OpRule {
  const char *domain;
  const char *op;
  int minInputs, maxInputs;
  int minOutputs, maxOutputs;
  InferFn infer;
};

constexpr int kAny = -1;

const OpRule kRules[] = {
    // Elementwise.
    {"", "Abs", 1, 1, 1, 1, inferUnaryNumeric},
    {"", "Add", 2, 2, 1, 1, inferBinaryArith},
    {"", "Cast", 1, 1, 1, 1, inferCast},
    {"", "Div", 2, 2, 1, 1, inferBinaryArith},
    {"", "Equal", 2, 2, 1, 1, inferCompare},
    {"", "Erf", 1, 1, 1, 1, inferUnaryNumeric},
    {"", "Exp", 1, 1, 1, 1, inferUnaryFloat},
    {"", "Greater", 2, 2, 1, 1, inferCompare},
    {"", "Identity", 1, 1, 1, 1, inferIdentity},
    {"", "Less", 2, 2, 1, 1, inferCompare},
    {"", "Log", 1, 1, 1, 1, inferUnaryFloat},
    {"", "Mod", 2, 2, 1, 1, inferMod},
    {"", "Mul", 2, 2, 1, 1, inferBinaryArith},
    {"", "Neg", 1, 1, 1, 1, inferUnaryNumeric},
    {"", "Sign", 1, 1, 1, 1, inferUnaryNumeric},
    {"", "Not", 1, 1, 1, 1, inferNot},
    {"", "IsNaN", 1, 1, 1, 1, inferFloatPredicate},
    {"", "IsInf", 1, 1, 1, 1, inferFloatPredicate},
    {"", "And", 2, 2, 1, 1, inferLogical},
    {"", "Or", 2, 2, 1, 1, inferLogical},
    {"", "Xor", 2, 2, 1, 1, inferLogical},
    {"", "LessOrEqual", 2, 2, 1, 1, inferCompare},
    {"", "GreaterOrEqual", 2, 2, 1, 1, inferCompare},
    {"", "Sin", 1, 1, 1, 1, inferUnaryFloat},
    {"", "Floor", 1, 1, 1, 1, inferUnaryFloat},
    {"", "Ceil", 1, 1, 1, 1, inferUnaryFloat},
    {"", "Round", 1, 1, 1, 1, inferUnaryFloat},
    {"", "Cos", 1, 1, 1, 1, inferUnaryFloat},
    {"", "Pow", 2, 2, 1, 1, inferPow},
    {"", "Relu", 1, 1, 1, 1, inferUnaryNumeric},
    {"", "Sigmoid", 1, 1, 1, 1, inferUnaryFloat},
    {"", "Sqrt", 1, 1, 1, 1, inferUnaryFloat},
    {"", "Sub", 2, 2, 1, 1, inferBinaryArith},
    {"", "Tanh", 1, 1, 1, 1, inferUnaryFloat},
    {"", "Where", 3, 3, 1, 1, inferWhere},
    // Matrix products, normalisation, losses, reductions.
    {"", "Gemm", 2, 3, 1, 1, inferGemm},
    {"", "MatMul", 2, 2, 1, 1, inferMatMul},
    {"", "Softmax", 1, 1, 1, 1, inferSoftmax},
    {"", "LogSoftmax", 1, 1, 1, 1, inferSoftmax},
    {"", "SoftmaxCrossEntropyLoss", 2, 3, 1, 2, inferSoftmaxCrossEntropyLoss},
    {"", "NegativeLogLikelihoodLoss", 2, 3, 1, 1,
     inferNegativeLogLikelihoodLoss},
    {"", "ReduceMax", 1, 2, 1, 1, inferReduce},
    {"", "ReduceMean", 1, 2, 1, 1, inferReduce},
    {"", "ReduceProd", 1, 2, 1, 1, inferReduce},
    {"", "CumSum", 2, 2, 1, 1, inferCumSum},
    {"", "ReduceSum", 1, 2, 1, 1, inferReduce},
    // Shapes and constants.
    {"", "Concat", 1, kAny, 1, 1, inferConcat},
    {"", "Constant", 0, 0, 1, 1, inferConstant},
    {"", "ConstantOfShape", 1, 1, 1, 1, inferConstantOfShape},
    {"", "Expand", 2, 2, 1, 1, inferExpand},
    {"", "Range", 3, 3, 1, 1, inferRange},
    // Random draws (the step seed and the node's key; random_math.h).
    {"", "RandomUniform", 0, 0, 1, 1, inferRandom},
    {"", "RandomNormal", 0, 0, 1, 1, inferRandom},
    {"", "RandomUniformLike", 1, 1, 1, 1, inferRandomLike},
    {"", "RandomNormalLike", 1, 1, 1, 1, inferRandomLike},
    {"", "Bernoulli", 1, 1, 1, 1, inferRandomLike},
    {"", "ScatterND", 3, 3, 1, 1, inferScatterND},
    {"", "GatherND", 2, 2, 1, 1, inferGatherND},
    {"", "TopK", 2, 2, 1, 2, selection_shapes::inferTopK},
    {"", "ArgMax", 1, 1, 1, 1, selection_shapes::inferArgExtremum},
    {"", "ArgMin", 1, 1, 1, 1, selection_shapes::inferArgExtremum},
    {"", "Flatten", 1, 1, 1, 1, inferFlatten},
    {"", "Gather", 2, 2, 1, 1, inferGather},
    {"", "GatherElements", 2, 2, 1, 1,
     gather_elements_shapes::inferGatherElements},
    {"", "ScatterElements", 3, 3, 1, 1,
     gather_elements_shapes::inferScatterElements},
    {kMpcDomain, "GatherElementsGrad", 3, 3, 1, 1,
     gather_elements_shapes::inferGatherElementsGrad},
    {"", "Reshape", 2, 2, 1, 1, inferReshape},
    {"", "Shape", 1, 1, 1, 1, inferShape},
    {"", "Slice", 1, 5, 1, 1, inferSlice},
    {"", "Squeeze", 1, 2, 1, 1, inferSqueeze},
    {"", "Transpose", 1, 1, 1, 1, inferTranspose},
    {"", "Trilu", 1, 2, 1, 1, inferTrilu},
    {"", "Unsqueeze", 1, 2, 1, 1, inferUnsqueeze},
    // Transformer and residual-MLP family (shape_inference_transformer.inc).
    {"", "CastLike", 2, 2, 1, 1, inferCastLike},
    {"", "Clip", 1, 3, 1, 1, inferClip},
    {"", "Dropout", 1, 3, 1, 2, inferDropout},
    {"", "Gelu", 1, 1, 1, 1, inferGelu},
    {"", "LayerNormalization", 2, 3, 1, 3, inferLayerNormalization},
    {"", "LeakyRelu", 1, 1, 1, 1, inferLeakyRelu},
    {"", "Max", 1, kAny, 1, 1, inferVariadic},
    {"", "Min", 1, kAny, 1, 1, inferVariadic},
    {"", "Split", 1, 2, 1, kAny, inferSplit},
    {"", "Sum", 1, kAny, 1, 1, inferVariadic},
    {kMpcDomain, "ClipGrad", 2, 4, 1, 1, inferClipGrad},
    {kMpcDomain, "DropoutGrad", 2, 4, 1, 1, inferDropoutGrad},
    {kMpcDomain, "ExtremumGrad", 3, kAny, 1, 1, inferExtremumGrad},
    {kMpcDomain, "GatherGrad", 3, 3, 1, 1, inferGatherGrad},
    {kMpcDomain, "ErfGrad", 2, 2, 1, 1, inferElementwiseGrad},
    {kMpcDomain, "LogSigmoid", 1, 1, 1, 1, inferUnaryFloat},
    {kMpcDomain, "LogSigmoidGrad", 2, 2, 1, 1, inferElementwiseGrad},
    {kMpcDomain, "GeluGrad", 2, 2, 1, 1, inferGeluGrad},
    {kMpcDomain, "Gelu", 1, 1, 1, 1, fused_shapes::inferGelu},
    {kMpcDomain, "GeluTanh", 1, 1, 1, 1, fused_shapes::inferGelu},
    {kMpcDomain, "FusedMatMul", 2, 2, 1, 1, fused_shapes::inferFusedMatMul},
    {kMpcDomain, "LayerNormalizationGrad", 5, 5, 1, 3,
     inferLayerNormalizationGrad},
    {kMpcDomain, "RMSNormalization", 2, 2, 1, 1, inferRMSNormalization},
    {kMpcDomain, "RMSNormalizationGrad", 3, 3, 1, 2, inferRMSNormalizationGrad},
    {kMpcDomain, "LeakyReluGrad", 2, 2, 1, 1, inferElementwiseGrad},
    {kMpcDomain, "ReduceExtremumGrad", 3, 4, 1, 1, inferReduceExtremumGrad},
    {kMpcDomain, "SliceGrad", 2, 6, 1, 1, inferSliceGrad},
    // Convolution, pooling and batch-norm family (shape_inference_conv.inc).
    {"", "AveragePool", 1, 1, 1, 1, conv_shapes::inferPool},
    {"", "BatchNormalization", 5, 5, 1, 5,
     conv_shapes::inferBatchNormalization},
    {"", "Conv", 2, 3, 1, 1, conv_shapes::inferConv},
    {"", "ConvTranspose", 2, 3, 1, 1, conv_shapes::inferConvTranspose},
    {"", "GlobalAveragePool", 1, 1, 1, 1, conv_shapes::inferGlobalPool},
    {"", "MaxPool", 1, 1, 1, 2, conv_shapes::inferPool},
    {kMpcDomain, "AveragePoolGrad", 2, 2, 1, 1,
     conv_shapes::inferWindowGradFromShape},
    {kMpcDomain, "BatchNormalizationGrad", 3, 5, 1, 3,
     conv_shapes::inferBatchNormalizationGrad},
    {kMpcDomain, "ConvGradInput", 3, 3, 1, 1,
     conv_shapes::inferWindowGradFromShape},
    {kMpcDomain, "ConvGradWeight", 2, 2, 1, 1,
     conv_shapes::inferConvGradWeight},
    {kMpcDomain, "MaxPoolGrad", 2, 2, 1, 1, conv_shapes::inferMaxPoolGrad},
    // ONNX training operators (shape_inference_training_ops.inc).
    {kOnnxTrainingDomain, "Adagrad", 5, kAny, 1, kAny,
     training_shapes::inferAdagrad},
    {kOnnxTrainingDomain, "Adam", 6, kAny, 1, kAny, training_shapes::inferAdam},
    {kOnnxTrainingDomain, "Momentum", 5, kAny, 1, kAny,
     training_shapes::inferMomentum},
    // mpc domain.
    {kMpcDomain, "Adam", 6, 7, 3, 3, inferAdam},
    {kMpcDomain, "ClipGradNorm", 1, kAny, 2, kAny, inferClipGradNorm},
    {kMpcDomain, "IncrementStep", 1, 2, 1, 1, inferIncrementStep},
    {kMpcDomain, "LearningRate", 1, 1, 1, 1, inferLearningRate},
    {kMpcDomain, "LogSoftmaxGrad", 2, 2, 1, 1, inferElementwiseGrad},
    {kMpcDomain, "NegativeLogLikelihoodLossGrad", 3, 4, 1, 1, inferLossGrad},
    {kMpcDomain, "ReduceGrad", 2, 3, 1, 1, inferReduceGrad},
    {kMpcDomain, "ReluGrad", 2, 2, 1, 1, inferElementwiseGrad},
    {kMpcDomain, "SGD", 4, 6, 1, 2, inferSGD},
    {kMpcDomain, "SoftmaxCrossEntropyLossGrad", 3, 4, 1, 1, inferLossGrad},
    {kMpcDomain, "SoftmaxGrad", 2, 2, 1, 1, inferElementwiseGrad},
    {kMpcDomain, "SoftmaxGradAs", 2, 2, 1, 1, inferSoftmaxGradAs},
    {kMpcDomain, "SoftmaxGradDiv", 3, 3, 1, 1, inferSoftmaxGradDiv},
    {kMpcDomain, "SoftmaxTo", 1, 1, 1, 2, inferSoftmaxTo},
    {kMpcDomain, "DivSoftmaxTo", 2, 2, 1, 2, inferDivSoftmaxTo},
    {kMpcDomain, "SumToShape", 2, 2, 1, 1, inferSumToShape},
    {kMpcDomain, "SumToShapeAs", 2, 2, 1, 1, inferSumToShapeAs},
    {kMpcDomain, "UnscaleGradients", 1, kAny, 1, kAny, inferUnscaleGradients},
    {kMpcDomain, "AllReduce", 1, kAny, 1, kAny, inferAllReduce},
    {kMpcDomain, "UpdateLossScale", 3, 3, 2, 2, inferUpdateLossScale},
};

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
/// power-of-two table a few times larger than kRules: verify infers every
/// node a pass changed, and a lookup here is one hash, usually one slot and
/// one name comparison (a std::unordered_map cost a division, a bucket list
/// and a memcmp more per node).
class RuleTable {
public:
  RuleTable() {
    for (const OpRule &r : kRules) {
      Slot s{r.op, r.domain, &r};
      size_t i = slotOf(s.op);
      while (slots_[i].rule &&
             !(slots_[i].op == s.op && slots_[i].domain == s.domain))
        i = (i + 1) & kMask;
      if (!slots_[i].rule) // the first of duplicate entries wins
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
  static_assert(std::size(kRules) * 2 < kSize, "keep the table sparse");
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
  for (const OpRule &r : kRules)
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
