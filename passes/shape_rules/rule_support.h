// The shape rules' shared support: Ctx (the node being inferred, its
// attribute readers and input checks, broadcasting), the checks several
// categories use, and the table row every category contributes.
//
// Internal to passes/shape_inference.cpp and passes/shape_rules/*.cpp: each
// category file (elementwise.cpp, conv_pool.cpp, ...) holds the rules of its
// ops and returns their rows from one function declared at the end of this
// header; passes/shape_inference.cpp gathers those rows into the table that
// inferNode looks ops up in. Everything is inline: verify re-infers every
// node a pass changed, and these helpers sit on that path.
#pragma once

#include "ir/graph.h"
#include "passes/shape_inference.h"
#include "passes/shape_small_vector.h"
#include "support/diagnostics.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mpc::shape_rules {

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

inline TypeInfo shaped(DType t, Dims d) { return {t, true, std::move(d)}; }
inline TypeInfo unranked(DType t) { return {t, false, {}}; }

/// Dims of a value, or nullopt when its rank is unknown (or it is omitted).
inline const Dims *dimsOf(const Value *v) {
  return v && v->hasShape ? &v->dims : nullptr;
}

/// A value's type as text for messages: "fp32[64x10]", "fp32[?]" if unranked.
inline std::string typeText(const Value *v) {
  std::string s = dtypeName(v->dtype);
  s += "[" + (v->hasShape ? dimsToString(v->dims) : std::string("?")) + "]";
  return s;
}

inline std::string intsText(const std::vector<int64_t> &v) {
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
inline Dim unifyDim(const Dim &a, const Dim &b) {
  if (a.isKnown())
    return a;
  if (b.isKnown())
    return b;
  return a.symbol.empty() ? b : a;
}

/// True when two dims are provably different sizes.
inline bool dimsConflict(const Dim &a, const Dim &b) {
  return a.isKnown() && b.isKnown() && a.value != b.value;
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
  /// A float-type attribute (an ONNX data type number, as Cast's `to`):
  /// required, or `dflt` when absent.
  DType floatTypeAttr(std::string_view name,
                      std::optional<DType> dflt = std::nullopt) const {
    int64_t v =
        dflt ? intAttr(name, toOnnxDataType(*dflt)) : requiredIntAttr(name);
    std::optional<DType> t = fromOnnxDataType(int(v));
    if (!t || !isFloating(*t))
      fail([&] {
        errorAt(n) << "attribute '" << name << "' = " << v
                   << " must be a float type";
      });
    return *t;
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

/// Two inputs that must have the same shape (a gradient and its forward value).
inline void requireSameShape(Ctx &c, size_t i, size_t j) {
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

/// Input i, when given, a scalar (rank 0 or [1]) of dtype `t`.
inline void requireScalar(Ctx &c, size_t i, DType t, const char *what) {
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

/// Dim d of v, unknown when v's rank is unknown.
inline Dim dimOf(const Value *v, size_t d) {
  return v && v->hasShape && d < v->dims.size() ? v->dims[d] : Dim();
}

/// Output i gets dtype t and dims d.
inline void setShapedOut(Ctx &c, size_t i, DType t, const Dims &d) {
  c.set(i, shaped(t, d));
}

/// Output i gets dtype t and dims *d (rank unknown when d is null).
inline void setOut(Ctx &c, size_t i, DType t, const Dims *d) {
  c.set(i, d ? shaped(t, *d) : unranked(t));
}

/// Two dims that must be equal: an error naming both when they differ.
inline void requireEqualDims(const Node &n, const Dim &a, const Dim &b,
                             const std::string &what) {
  if (a.isKnown() && b.isKnown() && a.value != b.value)
    fail([&] {
      errorAt(n) << what << " (" << a.value << " vs " << b.value << ")";
    });
}

// --- rules several categories list -------------------------------------------
// (defined in elementwise.cpp)

/// Output 0 typed and shaped like input 0, a number (not bool).
void inferUnaryNumeric(Ctx &c);
/// Output 0 typed and shaped like input 0, a floating-point tensor.
void inferUnaryFloat(Ctx &c);
/// The backward op of an elementwise op: dX typed like dY (input 0), shaped
/// like dY unified with input 1.
void inferElementwiseGrad(Ctx &c);

// --- the table's rows --------------------------------------------------------

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

/// A category's rows: a constant array of its file.
struct RuleRows {
  template <size_t N>
  constexpr explicit RuleRows(const OpRule (&rows)[N])
      : first(rows), count(N) {}
  const OpRule *begin() const { return first; }
  const OpRule *end() const { return first + count; }
  size_t size() const { return count; }

private:
  const OpRule *first;
  size_t count;
};

// Each category's rows, one function per file of passes/shape_rules/.
RuleRows elementwiseRules();   // elementwise.cpp
RuleRows activationRules();    // activation.cpp
RuleRows reductionRules();     // reduction.cpp
RuleRows matmulRules();        // matmul.cpp
RuleRows convPoolRules();      // conv_pool.cpp
RuleRows normalizationRules(); // normalization.cpp
RuleRows shapeOpsRules();      // shape_ops.cpp
RuleRows gatherScatterRules(); // gather_scatter.cpp
RuleRows selectionRules();     // selection.cpp
RuleRows lossRules();          // loss.cpp
RuleRows optimizerRules();     // optimizer.cpp
RuleRows randomRules();        // random.cpp
RuleRows fusedRules();         // fused.cpp
RuleRows shardRules();         // shard.cpp

/// ClipGradNorm's and ShardedClipGradNorm's rule (optimizer.cpp): one output
/// like each input (`inputs` names them in the message: "gradients",
/// "gradient chunks"), then the fp32 total norm; max_norm positive.
void inferClipGradNormLike(Ctx &c, const char *inputs);

} // namespace mpc::shape_rules
