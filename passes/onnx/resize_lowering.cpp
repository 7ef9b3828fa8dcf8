// Resize lowered to Gathers (resize_lowering.h).
#include "passes/onnx/resize_lowering.h"

#include "passes/onnx/import_constants.h"
#include "passes/onnx/lowering_builder.h"
#include "passes/support/diagnostics.h"

#include <cmath>
#include <string>

namespace mpc {
namespace {

/// One resized axis: per output position, the source index (nearest) or the
/// two neighbours and the second one's weight (linear).
struct AxisPlan {
  int64_t axis = 0, in = 0, out = 0;
  std::vector<int64_t> i0, i1;
  std::vector<double> w1;
};

/// ONNX's source coordinate of output position i. The resized length is
/// in * scale unrounded (sizes: exactly the output size), as ONNX defines it:
/// align_corners at a fractional scale does not map the last output to the
/// last input.
double sourceCoordinate(const std::string &mode, int64_t i, double scale,
                        int64_t in) {
  double x = double(i), resized = double(in) * scale;
  if (mode == "half_pixel")
    return (x + 0.5) / scale - 0.5;
  if (mode == "pytorch_half_pixel")
    return resized > 1 ? (x + 0.5) / scale - 0.5 : 0.0;
  if (mode == "align_corners")
    return resized == 1 ? 0.0 : x * double(in - 1) / (resized - 1);
  if (mode == "tf_half_pixel_for_nn")
    return (x + 0.5) / scale;
  return x / scale; // asymmetric
}

int64_t nearest(const std::string &rounding, double x) {
  double f = std::floor(x);
  if (rounding == "floor")
    return int64_t(f);
  if (rounding == "ceil")
    return int64_t(std::ceil(x));
  if (x - f == 0.5) // a tie
    return int64_t(rounding == "round_prefer_ceil" ? f + 1 : f);
  return int64_t(std::round(x));
}

int64_t clampIndex(int64_t i, int64_t in) {
  return i < 0 ? 0 : i >= in ? in - 1 : i;
}

/// The plan of every axis the Resize changes (identity axes left out),
/// from the last axis to the first.
std::vector<AxisPlan> planAxes(const Node &n, int64_t opset) {
  const Value *x = n.input(0);
  std::string mode = n.attrString("mode", "nearest");
  std::string coord =
      n.attrString("coordinate_transformation_mode", "half_pixel");
  std::string rounding = n.attrString("nearest_mode", "round_prefer_floor");
  if (mode != "nearest" && mode != "linear")
    errorAt(n) << "mode '" << mode
               << "' is not supported (nearest and linear are)";
  if (coord != "half_pixel" && coord != "pytorch_half_pixel" &&
      coord != "align_corners" && coord != "asymmetric" &&
      coord != "tf_half_pixel_for_nn")
    errorAt(n) << "coordinate_transformation_mode '" << coord
               << "' is not supported";
  if (n.attrInt("antialias", 0) != 0)
    errorAt(n) << "antialias is not supported";
  if (n.attrString("keep_aspect_ratio_policy", "stretch") != "stretch")
    errorAt(n) << "keep_aspect_ratio_policy other than stretch is not "
                  "supported";
  if (!x->hasShape)
    errorAt(n) << "needs its input's rank at compile time";
  int64_t rank = x->rank();

  std::vector<int64_t> axes;
  if (const Attribute *a = n.attr("axes"))
    for (int64_t ax : a->ints)
      axes.push_back(ax < 0 ? ax + rank : ax);
  else
    for (int64_t ax = 0; ax < rank; ++ax)
      axes.push_back(ax);
  for (int64_t ax : axes)
    if (ax < 0 || ax >= rank)
      errorAt(n) << "axis out of range for rank " << rank;

  const Value *scalesIn = n.numInputs() > 2 ? n.input(2) : nullptr;
  const Value *sizesIn = n.numInputs() > 3 ? n.input(3) : nullptr;
  // An export with do_constant_folding writes the scales as a float
  // initializer, which fixedAtImport takes as it is.
  TensorPtr scales = fixedAtImport(scalesIn, opset);
  TensorPtr sizes = fixedAtImport(sizesIn, opset);
  if (scales && scales->numel() == 0)
    scales = nullptr;
  if (sizes && sizes->numel() == 0)
    sizes = nullptr;
  if (!scales && !sizes)
    errorAt(n) << "needs its scales or sizes at compile time (constants or "
                  "shape arithmetic), got values computed from data";
  const TensorPtr &given = sizes ? sizes : scales;
  if (given->numel() != int64_t(axes.size()))
    errorAt(n) << (sizes ? "sizes" : "scales") << " has " << given->numel()
               << " values for " << axes.size() << " axes";

  std::vector<AxisPlan> plans;
  for (size_t k = axes.size(); k-- > 0;) {
    int64_t ax = axes[k];
    const Dim &d = x->dims[size_t(ax)];
    int64_t out = 0;
    double scale = 0;
    // Output lengths past this are not images a step holds, and their
    // index and weight tables (built here, 16-24 bytes a position) would
    // not fit in memory either.
    constexpr double kMaxOut = double(int64_t(1) << 24);
    if (sizes) {
      double v = sizes->getAsDouble(int64_t(k));
      if (!(v >= 1 && v <= kMaxOut))
        errorAt(n) << "size " << v << " on axis " << ax
                   << " is not between 1 and 2^24";
      out = int64_t(v);
    } else {
      scale = scales->getAsDouble(int64_t(k));
      if (!(scale > 0) || !std::isfinite(scale))
        errorAt(n) << "scale " << scale << " on axis " << ax
                   << " is not a positive number";
    }
    bool identity = sizes ? (d.isKnown() && out == d.value) : scale == 1.0;
    if (identity && coord != "tf_half_pixel_for_nn")
      continue; // every mode maps i to i at scale 1
    if (!d.isKnown())
      errorAt(n) << "resizes axis " << ax << ", whose size is not known at "
                 << "compile time";
    AxisPlan p;
    p.axis = ax;
    p.in = d.value;
    if (sizes) {
      p.out = out;
      scale = double(out) / double(p.in);
    } else {
      double o = std::floor(double(p.in) * scale);
      if (!(o <= kMaxOut))
        errorAt(n) << "scale " << scale << " makes axis " << ax << " " << o
                   << " long";
      p.out = int64_t(o);
    }
    if (p.out <= 0 || p.in <= 0)
      errorAt(n) << "resizes axis " << ax << " from " << p.in << " to "
                 << p.out;
    for (int64_t i = 0; i < p.out; ++i) {
      double src = sourceCoordinate(coord, i, scale, p.in);
      if (mode == "nearest") {
        p.i0.push_back(clampIndex(nearest(rounding, src), p.in));
        continue;
      }
      src = std::min(std::max(src, 0.0), double(p.in - 1));
      int64_t lo = int64_t(std::floor(src));
      p.i0.push_back(lo);
      p.i1.push_back(std::min(lo + 1, p.in - 1));
      p.w1.push_back(src - double(lo));
    }
    plans.push_back(std::move(p));
  }
  return plans;
}

} // namespace

std::vector<Node *> lowerResize(Graph &g, Node *n, int64_t opset) {
  if (opset < 11)
    errorAt(*n) << "Resize before opset 11 is not supported (the model "
                   "imports opset "
                << opset << ")";
  if (n->numInputs() < 1 || !n->input(0) || n->numOutputs() != 1 ||
      !n->output(0))
    errorAt(*n) << "Resize takes X and has one output";
  Value *x = n->input(0);
  if (x->dtype == DType::Undefined || !isFloating(x->dtype))
    errorAt(*n) << "resizes floating-point tensors only";
  std::vector<AxisPlan> plans = planAxes(*n, opset);

  LoweringBuilder b(g, n);
  Value *y = x;
  const int64_t rank = x->rank();
  for (const AxisPlan &p : plans) {
    std::string tag = "axis" + std::to_string(p.axis);
    Builder::Attrs onAxis = {{"axis", Attribute::ofInt(p.axis)}};
    Value *g0 = b.op("Gather", {y, b.int64s(p.i0, tag + "_source")},
                     tag + "_near", onAxis);
    bool blends = false;
    for (double w : p.w1)
      blends |= w != 0.0;
    if (!blends) {
      y = g0;
      continue;
    }
    // The weights broadcast along the axis: [out, 1, ..., 1].
    std::vector<int64_t> wdims = {p.out};
    for (int64_t i = p.axis + 1; i < rank; ++i)
      wdims.push_back(1);
    Tensor w0(x->dtype, wdims), w1(x->dtype, wdims);
    for (int64_t i = 0; i < p.out; ++i) {
      w0.setFromDouble(i, 1.0 - p.w1[size_t(i)]);
      w1.setFromDouble(i, p.w1[size_t(i)]);
    }
    Value *g1 = b.op("Gather", {y, b.int64s(p.i1, tag + "_next")}, tag + "_far",
                     onAxis);
    Value *a = b.op("Mul", {g0, b.constant(std::move(w0), tag + "_w0")},
                    tag + "_near_part");
    Value *c = b.op("Mul", {g1, b.constant(std::move(w1), tag + "_w1")},
                    tag + "_far_part");
    y = b.op("Add", {a, c}, tag + "_blend");
  }
  if (y == x) // nothing to resize
    y = b.op("Identity", {x}, "same");
  return b.replaceWith(y);
}

} // namespace mpc
