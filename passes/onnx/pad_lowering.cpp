// Pad lowered to Slice/Concat/Expand or Gather (pad_lowering.h).
#include "passes/onnx/pad_lowering.h"

#include "passes/onnx/import_constants.h"
#include "passes/onnx/lowering_builder.h"
#include "support/diagnostics.h"

#include <limits>
#include <string>

namespace mpc {
namespace {

/// The longest padded axis a lowering builds an index table for (as
/// Resize's lowering bounds its tables).
constexpr int64_t kMaxPaddedLength = int64_t(1) << 24;

/// One padded axis: `begin` and `end` elements added (negative: removed).
struct AxisPad {
  int64_t axis = 0, begin = 0, end = 0;
};

/// The node's pads per axis (zero pairs left out), its constant value and
/// its mode, from the inputs (opset 11+) or the attributes.
std::vector<AxisPad> padsOf(const Node &n, int64_t opset, int64_t rank,
                            double &value) {
  std::vector<int64_t> pads, axes;
  value = 0;
  if (opset < 11) {
    if (!n.attr("pads"))
      errorAt(n) << "attribute 'pads' is required before opset 11";
    pads = n.attrInts("pads");
    value = n.attrFloat("value", 0.0f);
  } else {
    const Value *padsIn = n.numInputs() > 1 ? n.input(1) : nullptr;
    if (!padsIn)
      errorAt(n) << "input 'pads' is required";
    TensorPtr p = fixedAtImport(padsIn, opset);
    if (!p || p->dtype != DType::I64)
      errorAt(n) << "needs its pads at compile time as int64 (constants or "
                    "shape arithmetic), '"
                 << padsIn->name() << "' is computed from data";
    pads = p->toInt64s();
    if (const Value *cv = n.numInputs() > 2 ? n.input(2) : nullptr) {
      TensorPtr c = fixedAtImport(cv, opset);
      if (!c || c->numel() != 1)
        errorAt(n) << "needs its constant_value at compile time as one "
                      "element, '"
                   << cv->name() << "' is not";
      value = c->getAsDouble(0);
    }
    if (const Value *ax = n.numInputs() > 3 ? n.input(3) : nullptr) {
      TensorPtr a = fixedAtImport(ax, opset);
      if (!a || (a->dtype != DType::I64 && a->dtype != DType::I32))
        errorAt(n) << "needs its axes at compile time as integers, '"
                   << ax->name() << "' is not";
      axes = a->toInt64s();
    }
  }
  if (axes.empty())
    for (int64_t i = 0; i < rank; ++i)
      axes.push_back(i);
  if (pads.size() != 2 * axes.size())
    errorAt(n) << "pads has " << pads.size() << " entries, expected "
               << 2 * axes.size() << " (a begin and an end for each of "
               << axes.size() << " axes)";
  std::vector<AxisPad> out;
  std::vector<bool> seen(size_t(rank), false);
  for (size_t i = 0; i < axes.size(); ++i) {
    int64_t a = axes[i] < 0 ? axes[i] + rank : axes[i];
    if (a < 0 || a >= rank)
      errorAt(n) << "axis " << axes[i] << " is out of range for rank " << rank;
    if (seen[size_t(a)])
      errorAt(n) << "axis " << axes[i] << " is given twice";
    seen[size_t(a)] = true;
    int64_t begin = pads[i], end = pads[i + axes.size()];
    if (begin < -kMaxPaddedLength || begin > kMaxPaddedLength ||
        end < -kMaxPaddedLength || end > kMaxPaddedLength)
      errorAt(n) << "pads " << begin << ", " << end << " on axis " << a
                 << " are out of range (at most 2^24)";
    if (begin || end)
      out.push_back({a, begin, end});
  }
  return out;
}

/// Output position j's source index for reflect, edge or wrap.
int64_t sourceIndex(const std::string &mode, int64_t s, int64_t in) {
  if (mode == "edge")
    return s < 0 ? 0 : s >= in ? in - 1 : s;
  if (mode == "wrap")
    return ((s % in) + in) % in;
  // reflect: mirror about the first and last element (not repeating them);
  // a period of 2 (in - 1) folds any distance back into [0, in).
  int64_t period = 2 * (in - 1);
  int64_t r = ((s % period) + period) % period;
  return r < in ? r : period - r;
}

class PadLowering {
public:
  PadLowering(LoweringBuilder &b, Node &n, DType t, int64_t rank)
      : b_(b), n_(n), t_(t), rank_(rank) {}

  /// Pads x along p.axis in constant mode; `dims` are x's (updated).
  Value *constant(Value *x, const AxisPad &p, double value,
                  std::vector<Dim> &dims) {
    std::string tag = "axis" + std::to_string(p.axis);
    Dim &d = dims[size_t(p.axis)];
    if (p.begin < 0 || p.end < 0) {
      int64_t start = std::max<int64_t>(0, -p.begin);
      int64_t stop = p.end < 0 ? p.end : std::numeric_limits<int64_t>::max();
      if (d.isKnown() && d.value + std::min<int64_t>(p.begin, 0) +
                                 std::min<int64_t>(p.end, 0) <
                             0)
        errorAt(n_) << "pads " << p.begin << ", " << p.end << " remove more "
                    << "than the " << d.value << " elements of axis " << p.axis;
      x = b_.op("Slice",
                {x, b_.int64s({start}, tag + "_crop_start"),
                 b_.int64s({stop}, tag + "_crop_end"),
                 b_.int64s({p.axis}, tag + "_crop_axis")},
                tag + "_crop");
      if (d.isKnown())
        d = Dim(d.value + std::min<int64_t>(p.begin, 0) +
                std::min<int64_t>(p.end, 0));
    }
    std::vector<Value *> parts;
    if (p.begin > 0)
      parts.push_back(block(x, p.axis, p.begin, value, dims, tag + "_before"));
    parts.push_back(x);
    if (p.end > 0)
      parts.push_back(block(x, p.axis, p.end, value, dims, tag + "_after"));
    if (parts.size() > 1)
      x = b_.op("Concat", parts, tag + "_padded",
                {{"axis", Attribute::ofInt(p.axis)}});
    if (d.isKnown())
      d = Dim(d.value + std::max<int64_t>(p.begin, 0) +
              std::max<int64_t>(p.end, 0));
    return x;
  }

  /// Pads x along p.axis by gathering source indices (reflect, edge, wrap).
  Value *gathered(Value *x, const AxisPad &p, const std::string &mode,
                  std::vector<Dim> &dims) {
    std::string tag = "axis" + std::to_string(p.axis);
    Dim &d = dims[size_t(p.axis)];
    if (!d.isKnown())
      errorAt(n_) << "pads axis " << p.axis << " in mode '" << mode
                  << "', which needs the axis's size at compile time";
    int64_t in = d.value, out = in + p.begin + p.end;
    if (out < 0 || out > kMaxPaddedLength)
      errorAt(n_) << "pads " << p.begin << ", " << p.end << " make axis "
                  << p.axis << " of " << in << " elements " << out << " long";
    if (in == 0 && out > 0)
      errorAt(n_) << "cannot pad the empty axis " << p.axis << " in mode '"
                  << mode << "'";
    if (mode == "reflect" && in == 1 && (p.begin > 0 || p.end > 0))
      errorAt(n_) << "reflect needs at least 2 elements on axis " << p.axis;
    std::vector<int64_t> src(static_cast<size_t>(out));
    for (int64_t j = 0; j < out; ++j)
      src[size_t(j)] = sourceIndex(mode, j - p.begin, in);
    d = Dim(out);
    return b_.op("Gather", {x, b_.int64s(src, tag + "_source")},
                 tag + "_padded", {{"axis", Attribute::ofInt(p.axis)}});
  }

private:
  /// A block of `count` copies of value along `axis`, x's size elsewhere:
  /// Expand of a scalar to dims known here, or to Shape(x)'s otherwise.
  Value *block(Value *x, int64_t axis, int64_t count, double value,
               const std::vector<Dim> &dims, const std::string &tag) {
    Value *shape = nullptr;
    bool known = true;
    for (int64_t i = 0; i < rank_; ++i)
      known &= i == axis || dims[size_t(i)].isKnown();
    if (known) {
      std::vector<int64_t> s;
      for (int64_t i = 0; i < rank_; ++i)
        s.push_back(i == axis ? count : dims[size_t(i)].value);
      shape = b_.int64s(s, tag + "_shape");
    } else {
      Value *full = b_.op("Shape", {x}, tag + "_shape_of");
      std::vector<Value *> pieces;
      if (axis > 0)
        pieces.push_back(b_.op("Slice",
                               {full, b_.int64s({0}, tag + "_lead_start"),
                                b_.int64s({axis}, tag + "_lead_end")},
                               tag + "_lead"));
      pieces.push_back(b_.int64s({count}, tag + "_count"));
      if (axis + 1 < rank_)
        pieces.push_back(
            b_.op("Slice",
                  {full, b_.int64s({axis + 1}, tag + "_tail_start"),
                   b_.int64s({rank_}, tag + "_tail_end")},
                  tag + "_tail"));
      shape = pieces.size() == 1 ? pieces[0]
                                 : b_.op("Concat", pieces, tag + "_shape",
                                         {{"axis", Attribute::ofInt(0)}});
    }
    return b_.op("Expand", {b_.scalar(t_, value, tag + "_value"), shape}, tag);
  }

  LoweringBuilder &b_;
  Node &n_;
  DType t_;
  int64_t rank_;
};

} // namespace

std::vector<Node *> lowerPad(Graph &g, Node *n, int64_t opset) {
  if (n->numInputs() < 1 || !n->input(0) || n->numOutputs() != 1 ||
      !n->output(0))
    errorAt(*n) << "Pad takes data and has one output";
  Value *x = n->input(0);
  if (x->dtype == DType::Undefined || !x->hasShape)
    errorAt(*n) << "needs its input's type and rank at compile time";
  const int64_t rank = x->rank();
  std::string mode = n->attrString("mode", "constant");
  if (mode != "constant" && mode != "reflect" && mode != "edge" &&
      !(mode == "wrap" && opset >= 19))
    errorAt(*n) << "mode '" << mode
                << "' is not supported (constant, reflect, edge"
                << (opset >= 19 ? ", wrap)" : ")");
  double value = 0;
  std::vector<AxisPad> pads = padsOf(*n, opset, rank, value);

  LoweringBuilder b(g, n);
  PadLowering lower(b, *n, x->dtype, rank);
  std::vector<Dim> dims(x->dims.begin(), x->dims.end());
  Value *y = x;
  for (const AxisPad &p : pads)
    y = mode == "constant" ? lower.constant(y, p, value, dims)
                           : lower.gathered(y, p, mode, dims);
  if (y == x) // all pads zero
    y = b.op("Identity", {x}, "same");
  return b.replaceWith(y);
}

} // namespace mpc
