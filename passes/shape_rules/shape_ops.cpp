// Shape rules of the ops that move or make shapes rather than compute:
// Reshape, Flatten, Transpose, Concat, Split, Squeeze, Unsqueeze, Slice,
// Expand, Shape, and the constants Constant, ConstantOfShape and Range
// (whose shapes come from attributes or constant inputs), and mpc.SliceGrad.
#include "passes/shape_rules/rule_support.h"

#include "ir/mpc_ops.h"

#include <algorithm>
#include <limits>

namespace mpc::shape_rules {

namespace {

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

void inferSplit(Ctx &c) {
  Value *x = c.req(0);
  size_t outs = c.n.numOutputs();
  std::optional<std::vector<int64_t>> sizes;
  if (c.opset >= 13) {
    if (c.n.hasAttr("split"))
      fail([&] {
        errorAt(c.n) << "'split' is an input since opset 13, not an attribute "
                        "(model opset "
                     << c.opset << ")";
      });
    if (c.opt(1))
      sizes = c.constInts(1, "split");
  } else {
    if (c.n.numInputs() > 1)
      fail([&] {
        errorAt(c.n) << "takes 'split' as an attribute before opset 13, not as "
                        "an input (model opset "
                     << c.opset << ")";
      });
    if (c.n.hasAttr("split"))
      sizes = c.intsAttr("split");
  }
  bool numOutputs = c.n.hasAttr("num_outputs");
  if (numOutputs && c.opset < 18)
    fail([&] {
      errorAt(c.n) << "attribute 'num_outputs' exists from opset 18 (model "
                      "opset "
                   << c.opset << ")";
    });
  if (numOutputs && c.opt(1))
    fail([&] {
      errorAt(c.n) << "has both the 'split' input and 'num_outputs'";
    });
  if (numOutputs && c.intAttr("num_outputs", 0) != int64_t(outs))
    fail([&] {
      errorAt(c.n) << "num_outputs " << c.intAttr("num_outputs", 0) << " but "
                   << outs << " outputs";
    });
  if (sizes && sizes->size() != outs)
    fail([&] {
      errorAt(c.n) << "split " << intsText(*sizes) << " has " << sizes->size()
                   << " entries for " << outs << " outputs";
    });
  if (!x->hasShape) {
    for (size_t i = 0; i < outs; ++i)
      c.set(i, unranked(x->dtype));
    return;
  }
  if (x->rank() == 0)
    fail([&] {
      errorAt(c.n) << "cannot split a scalar (" << c.inputText(0) << ")";
    });
  int64_t axis = c.axis(c.intAttr("axis", 0), x->rank());
  const Dim &len = x->dims[size_t(axis)];
  std::vector<Dim> pieces(outs, Dim());
  if (sizes) {
    int64_t total = 0;
    for (size_t i = 0; i < outs; ++i) {
      if ((*sizes)[i] < 0)
        fail([&] {
          errorAt(c.n) << "split " << intsText(*sizes)
                       << " has a negative size";
        });
      total += (*sizes)[i];
      pieces[i] = Dim((*sizes)[i]);
    }
    if (len.isKnown() && total != len.value)
      fail([&] {
        errorAt(c.n) << "split " << intsText(*sizes) << " sums to " << total
                     << " but axis " << axis << " of " << typeText(x)
                     << " has length " << len.value;
      });
  } else if (len.isKnown() && (!c.opt(1) || numOutputs)) {
    int64_t n = int64_t(outs);
    if (numOutputs) {
      int64_t chunk = (len.value + n - 1) / n;
      for (int64_t i = 0; i < n; ++i)
        pieces[size_t(i)] =
            Dim(std::max<int64_t>(0, std::min(chunk, len.value - i * chunk)));
      if (len.value > 0 && pieces.back() == Dim(0))
        fail([&] {
          errorAt(c.n) << "cannot split axis " << axis << " of " << typeText(x)
                       << " into " << n << " non-empty pieces of " << chunk;
        });
    } else {
      if (len.value % n != 0)
        fail([&] {
          errorAt(c.n) << "cannot split axis " << axis << " of " << typeText(x)
                       << " into " << n << " equal pieces";
        });
      for (int64_t i = 0; i < n; ++i)
        pieces[size_t(i)] = Dim(len.value / n);
    }
  }
  for (size_t i = 0; i < outs; ++i) {
    Dims d = x->dims;
    d[size_t(axis)] = pieces[i];
    c.set(i, shaped(x->dtype, d));
  }
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

void inferSliceGrad(Ctx &c) {
  Value *dy = c.req(0);
  Value *data = c.req(1);
  c.requireFloat(0);
  if (c.n.numInputs() > 2) {
    c.req(2);
    c.req(3);
    for (size_t i = 2; i < c.n.numInputs(); ++i)
      c.requireIndex(i, "starts, ends, axes and steps");
  }
  if (dy->hasShape && data->hasShape && dy->rank() != data->rank())
    fail([&] {
      errorAt(c.n) << "dY " << typeText(dy) << " and data " << typeText(data)
                   << " must have the same rank";
    });
  c.setShapeOf(0, dy->dtype, data);
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

const OpRule kRules[] = {
    {"", "Concat", 1, kAny, 1, 1, inferConcat},
    {"", "Constant", 0, 0, 1, 1, inferConstant},
    {"", "ConstantOfShape", 1, 1, 1, 1, inferConstantOfShape},
    {"", "Expand", 2, 2, 1, 1, inferExpand},
    {"", "Range", 3, 3, 1, 1, inferRange},
    {"", "Flatten", 1, 1, 1, 1, inferFlatten},
    {"", "Reshape", 2, 2, 1, 1, inferReshape},
    {"", "Shape", 1, 1, 1, 1, inferShape},
    {"", "Slice", 1, 5, 1, 1, inferSlice},
    {"", "Split", 1, 2, 1, kAny, inferSplit},
    {"", "Squeeze", 1, 2, 1, 1, inferSqueeze},
    {"", "Transpose", 1, 1, 1, 1, inferTranspose},
    {"", "Unsqueeze", 1, 2, 1, 1, inferUnsqueeze},
    {kMpcDomain, "SliceGrad", 2, 6, 1, 1, inferSliceGrad},
};

} // namespace

RuleRows shapeOpsRules() { return RuleRows(kRules); }

} // namespace mpc::shape_rules
