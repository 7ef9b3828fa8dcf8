// Resize lowered to weighted Gathers (resize_lowering.h).
#include "passes/onnx/resize_lowering.h"

#include "passes/onnx/import_constants.h"
#include "passes/onnx/lowering_builder.h"
#include "support/diagnostics.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace mpc {
namespace {

/// One resized axis: per output position, the source index and weight of
/// each tap (nearest: one, linear: two, cubic: four); tap k of every output
/// position is index[k] and weight[k].
struct AxisPlan {
  int64_t axis = 0, in = 0, out = 0;
  std::vector<std::vector<int64_t>> index;
  std::vector<std::vector<double>> weight;
};

/// The attributes that shape the taps.
struct Interpolation {
  std::string mode, coord, rounding;
  double cubicA = -0.75;
  bool excludeOutside = false;
};

/// ONNX's source coordinate of output position i. The resized length is
/// in * scale unrounded (sizes: exactly the output size), as ONNX defines it:
/// align_corners at a fractional scale does not map the last output to the
/// last input, and half_pixel_symmetric shifts the grid by what rounding
/// the length down to `out` cut off.
double sourceCoordinate(const std::string &mode, int64_t i, double scale,
                        int64_t in, int64_t out) {
  double x = double(i), resized = double(in) * scale;
  if (mode == "half_pixel")
    return (x + 0.5) / scale - 0.5;
  if (mode == "pytorch_half_pixel")
    return resized > 1 ? (x + 0.5) / scale - 0.5 : 0.0;
  if (mode == "half_pixel_symmetric") {
    double offset = double(in) / 2 * (1 - double(out) / resized);
    return offset + (x + 0.5) / scale - 0.5;
  }
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

/// Keys' cubic convolution kernel with parameter a at distance d >= 0 (the
/// one ONNX, PyTorch's bicubic and OpenCV use; a = -0.75 in PyTorch).
double cubicKernel(double d, double a) {
  if (d <= 1)
    return ((a + 2) * d - (a + 3)) * d * d + 1;
  if (d < 2)
    return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a;
  return 0;
}

/// Appends output position i's taps at source coordinate src to p.
void addTaps(const Node &n, const Interpolation &ip, AxisPlan &p, int64_t i,
             double src) {
  if (ip.mode == "nearest") {
    p.index[0].push_back(clampIndex(nearest(ip.rounding, src), p.in));
    p.weight[0].push_back(1.0);
    return;
  }
  if (ip.mode == "linear") {
    // Clamped to the input first, as ONNX and PyTorch do for linear.
    src = std::min(std::max(src, 0.0), double(p.in - 1));
    int64_t lo = int64_t(std::floor(src));
    double t = src - double(lo);
    p.index[0].push_back(lo);
    p.index[1].push_back(std::min(lo + 1, p.in - 1));
    p.weight[0].push_back(1.0 - t);
    p.weight[1].push_back(t);
    return;
  }
  // Cubic: the coordinate is not clamped; the four taps around it are, to
  // the edge (PyTorch's bounded access, ONNX's edge padding), or, with
  // exclude_outside, those outside the input lose their weight and the
  // rest are renormalised.
  double base = std::floor(src), t = src - base;
  double w[4], sum = 0;
  int64_t idx[4];
  for (int k = 0; k < 4; ++k) {
    idx[k] = int64_t(base) - 1 + k;
    w[k] = cubicKernel(std::fabs(t + 1 - k), ip.cubicA);
    if (ip.excludeOutside && (idx[k] < 0 || idx[k] >= p.in))
      w[k] = 0;
    sum += w[k];
  }
  if (ip.excludeOutside && !(std::fabs(sum) > 1e-12))
    errorAt(n) << "exclude_outside leaves output position " << i << " of axis "
               << p.axis << " no weight (cubic_coeff_a = " << ip.cubicA << ")";
  for (int k = 0; k < 4; ++k) {
    p.index[size_t(k)].push_back(clampIndex(idx[k], p.in));
    p.weight[size_t(k)].push_back(ip.excludeOutside ? w[k] / sum : w[k]);
  }
}

/// The attributes, each checked, or one line naming the node.
Interpolation readAttributes(const Node &n) {
  Interpolation ip;
  ip.mode = n.attrString("mode", "nearest");
  ip.coord = n.attrString("coordinate_transformation_mode", "half_pixel");
  ip.rounding = n.attrString("nearest_mode", "round_prefer_floor");
  ip.cubicA = n.attrFloat("cubic_coeff_a", -0.75f);
  ip.excludeOutside = n.attrInt("exclude_outside", 0) != 0;
  const std::string &c = ip.coord;
  if (ip.mode != "nearest" && ip.mode != "linear" && ip.mode != "cubic")
    errorAt(n) << "mode '" << ip.mode
               << "' is not supported (nearest, linear and cubic are)";
  if (c != "half_pixel" && c != "pytorch_half_pixel" && c != "align_corners" &&
      c != "asymmetric" && c != "tf_half_pixel_for_nn" &&
      c != "half_pixel_symmetric")
    errorAt(n) << "coordinate_transformation_mode '" << c
               << "' is not supported";
  if (ip.mode == "nearest" && ip.rounding != "round_prefer_floor" &&
      ip.rounding != "round_prefer_ceil" && ip.rounding != "floor" &&
      ip.rounding != "ceil")
    errorAt(n) << "nearest_mode '" << ip.rounding << "' is not supported";
  if (ip.mode == "cubic" && !std::isfinite(ip.cubicA))
    errorAt(n) << "cubic_coeff_a " << ip.cubicA << " is not a finite number";
  if (n.attrInt("antialias", 0) != 0)
    errorAt(n) << "antialias is not supported (" << ip.mode
               << " without it is; F.interpolate(antialias=True) exports it)";
  if (n.attrString("keep_aspect_ratio_policy", "stretch") != "stretch")
    errorAt(n) << "keep_aspect_ratio_policy other than stretch is not "
                  "supported";
  return ip;
}

/// The plan of every axis the Resize changes (identity axes left out),
/// from the last axis to the first.
std::vector<AxisPlan> planAxes(const Node &n, int64_t opset) {
  const Value *x = n.input(0);
  Interpolation ip = readAttributes(n);
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

  const size_t taps = ip.mode == "nearest" ? 1 : ip.mode == "linear" ? 2 : 4;
  std::vector<AxisPlan> plans;
  for (size_t k = axes.size(); k-- > 0;) {
    int64_t ax = axes[k];
    const Dim &d = x->dims[size_t(ax)];
    int64_t out = 0;
    double scale = 0;
    // Output lengths past this are not images a step holds, and their
    // index and weight tables (built here, 16-24 bytes a position and tap)
    // would not fit in memory either.
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
    if (identity && ip.coord != "tf_half_pixel_for_nn")
      continue; // every other mode maps i to i at scale 1, cubic included
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
    p.index.resize(taps);
    p.weight.resize(taps);
    for (int64_t i = 0; i < p.out; ++i)
      addTaps(n, ip, p, i, sourceCoordinate(ip.coord, i, scale, p.in, p.out));
    plans.push_back(std::move(p));
  }
  return plans;
}

bool allEqual(const std::vector<double> &v, double c) {
  for (double w : v)
    if (w != c)
      return false;
  return true;
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
    // The weights broadcast along the axis: [out, 1, ..., 1].
    std::vector<int64_t> wdims = {p.out};
    for (int64_t i = p.axis + 1; i < rank; ++i)
      wdims.push_back(1);
    // sum_k Gather(y, index[k]) * weight[k], summed from the first tap as
    // PyTorch does; a tap of no weight anywhere is left out (linear at an
    // integer scale, cubic at grid points), and a tap of weight 1
    // everywhere is the Gather alone (nearest).
    Value *sum = nullptr;
    for (size_t k = 0; k < p.index.size(); ++k) {
      if (allEqual(p.weight[k], 0.0))
        continue;
      std::string part = tag + "_tap" + std::to_string(k);
      Value *term = b.op("Gather", {y, b.int64s(p.index[k], part + "_source")},
                         part + "_gather", onAxis);
      if (!allEqual(p.weight[k], 1.0)) {
        Tensor w(x->dtype, wdims);
        for (int64_t i = 0; i < p.out; ++i)
          w.setFromDouble(i, p.weight[k][size_t(i)]);
        term = b.op("Mul", {term, b.constant(std::move(w), part + "_weight")},
                    part + "_weighted");
      }
      sum = sum ? b.op("Add", {sum, term}, part + "_sum") : term;
    }
    if (!sum) // cannot happen: every position's weights sum to 1
      errorAt(*n) << "has no weight on axis " << p.axis;
    y = sum;
  }
  if (y == x) // nothing to resize
    y = b.op("Identity", {x}, "same");
  return b.replaceWith(y);
}

} // namespace mpc
