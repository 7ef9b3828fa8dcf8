// Resize's lowering (passes/onnx/resize_lowering.h) against ONNX's own
// expected outputs: every nearest, linear and cubic case of ONNX's backend
// node tests, with the scales or sizes (graph inputs there) baked in as
// constants, as an exporter writes them (tests/unit/onnx_node_cases.h);
// linear and cubic in every coordinate mode, N-D, against ONNX's reference
// implementation written out here; and the cubic gradients by finite
// differences.
#include "tests/unit/gradcheck_harness.h"
#include "tests/unit/onnx_node_cases.h"

#include <algorithm>
#include <numeric>
#include <random>
#include <sstream>

using namespace mpc;
using namespace mpc::node_cases;

namespace {

std::string attrString(const onnx::NodeProto &n, const std::string &name) {
  for (const auto &a : n.attribute())
    if (a.name() == name)
      return a.s();
  return "";
}

/// Whether the case is one the lowering takes (not crop).
bool lowerable(const onnx::ModelProto &m) {
  for (const auto &n : m.graph().node())
    if (n.op_type() == "Resize" &&
        attrString(n, "coordinate_transformation_mode") == "tf_crop_and_resize")
      return false;
  return true;
}

} // namespace

TEST(ResizeLowering, MatchesOnnxReferenceOutputs) {
  if (!fs::is_directory(kNodeTests))
    GTEST_SKIP() << kNodeTests << " is missing (Debian's libonnx-testdata)";
  int checked = 0;
  for (const auto &entry : fs::directory_iterator(kNodeTests)) {
    std::string name = entry.path().filename().string();
    if (name.rfind("test_resize_", 0) != 0)
      continue;
    SCOPED_TRACE(name);
    // Every input after X (roi, scales, sizes) is baked in.
    BakedCase c = bakeInputs(entry.path(),
                             [](int i, const std::string &) { return i >= 1; });
    if (!lowerable(c.proto))
      continue;
    expectMatchesOutput(std::move(c), entry.path(), 1e-5);
    ++checked;
  }
  // ONNX 1.12 has 13 nearest and linear cases and 9 cubic ones (every
  // coordinate mode PyTorch exports, cubic_coeff_a -0.5 with
  // exclude_outside): all of them ran.
  EXPECT_GE(checked, 22);
}

namespace {

/// Keys' cubic kernel, as in ONNX's reference (onnx/reference/ops/op_resize.py
/// cubic_coeffs).
double keys(double d, double a) {
  d = std::fabs(d);
  if (d <= 1)
    return ((a + 2) * d - (a + 3)) * d * d + 1;
  if (d < 2)
    return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a;
  return 0;
}

/// ONNX's reference interpolate_1d_with_x, its way: the source coordinate,
/// then the n nearest indices of the edge-padded input (ties to the lower
/// index), the ratio in (0, 1] (1 at a grid point), exclude_outside zeroing
/// and renormalising. Returns (source index, weight) pairs.
std::vector<std::pair<int64_t, double>>
referenceTaps(const std::string &mode, const std::string &coord, double a,
              bool exclude, int64_t in, double scale, int64_t outInt,
              int64_t i) {
  double x = double(i), outLen = scale * double(in), src = 0;
  if (coord == "align_corners")
    src = outLen == 1 ? 0 : x * double(in - 1) / (outLen - 1);
  else if (coord == "asymmetric")
    src = x / scale;
  else if (coord == "pytorch_half_pixel")
    src = outLen == 1 ? 0 : (x + 0.5) / scale - 0.5; // the spec's 0
  else if (coord == "half_pixel")
    src = (x + 0.5) / scale - 0.5;
  else { // half_pixel_symmetric
    double center = double(in) / 2;
    src = center * (1 - double(outInt) / outLen) + (x + 0.5) / scale - 0.5;
  }
  double ratio = src == std::floor(src) ? 1.0 : src - std::floor(src);
  std::vector<double> coeffs =
      mode == "linear"
          ? std::vector<double>{1 - ratio, ratio}
          : std::vector<double>{keys(ratio + 1, a), keys(ratio, a),
                                keys(1 - ratio, a), keys(2 - ratio, a)};
  int64_t n = int64_t(coeffs.size()), pad = (n + 1) / 2;
  std::vector<int64_t> idx(size_t(in + 2 * pad));
  std::iota(idx.begin(), idx.end(), 0);
  double xp = src + double(pad);
  std::stable_sort(idx.begin(), idx.end(), [&](int64_t l, int64_t r) {
    return std::fabs(xp - double(l)) < std::fabs(xp - double(r));
  });
  idx.resize(size_t(n));
  std::sort(idx.begin(), idx.end());
  double sum = 0;
  std::vector<std::pair<int64_t, double>> taps;
  for (int64_t k = 0; k < n; ++k) {
    int64_t at = idx[size_t(k)] - pad;
    double w = coeffs[size_t(k)];
    if (exclude && (at < 0 || at >= in))
      w = 0;
    sum += w;
    taps.push_back({std::min(std::max<int64_t>(at, 0), in - 1), w});
  }
  if (exclude)
    for (auto &t : taps)
      t.second /= sum;
  return taps;
}

struct InterpCase {
  std::string mode, coord;
  std::vector<int64_t> dims;
  std::vector<double> scales; ///< one per axis, or empty
  std::vector<int64_t> sizes; ///< one per axis, or empty
  double a = -0.75;
  bool exclude = false;
};

std::string joined(const std::vector<double> &v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) {
    std::ostringstream o;
    o.precision(9); // round-trips the float32 scales and a
    o << v[i];
    s += (i ? ", " : "") + o.str();
  }
  return s;
}

/// Runs the case on random fp64 data and compares every element with the
/// reference's separable sum over the taps of every axis.
void expectMatchesReferenceInterpolation(const InterpCase &c) {
  size_t r = c.dims.size();
  std::vector<double> scale(r);
  std::vector<int64_t> out(r);
  for (size_t d = 0; d < r; ++d) {
    if (c.sizes.empty()) {
      scale[d] = double(float(c.scales[d])); // scales are float32
      out[d] = int64_t(std::floor(double(c.dims[d]) * scale[d]));
    } else {
      out[d] = c.sizes[d];
      scale[d] = double(out[d]) / double(c.dims[d]);
    }
  }
  std::vector<double> dims(c.dims.begin(), c.dims.end());
  std::string given =
      c.sizes.empty()
          ? "  s = Constant <value = float[" + std::to_string(r) + "] {" +
                joined(c.scales) + "}> ()\n"
          : "  s = Constant <value = int64[" + std::to_string(r) + "] {" +
                joined(std::vector<double>(c.sizes.begin(), c.sizes.end())) +
                "}> ()\n";
  std::string text = "<ir_version: 8, opset_import: [\"\" : 19]>\ng (double[" +
                     joined(dims) + "] x) => (double y) {\n" + given +
                     "  y = Resize <mode = \"" + c.mode +
                     "\", coordinate_transformation_mode = \"" + c.coord +
                     "\", cubic_coeff_a = " + joined({c.a}) +
                     ", exclude_outside = " + (c.exclude ? "1" : "0") +
                     "> (x, , " + (c.sizes.empty() ? "s" : ", s") + ")\n}\n";
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> u(-1, 1);
  Tensor x(DType::F64, c.dims);
  for (int64_t i = 0; i < x.numel(); ++i)
    x.setFromDouble(i, u(rng));
  std::vector<InferenceOutput> got;
  try {
    std::unique_ptr<Model> model = parseModelText(text, "resize");
    auto backend = createCpuBackend();
    got = runInference(*model, {{"x", x, ""}}, *backend);
  } catch (const Error &e) {
    FAIL() << e.what() << "\n" << text;
  }
  ASSERT_EQ(got.size(), 1u);
  ASSERT_EQ(got[0].value.dims, out);

  // Per axis and output position, the reference's taps.
  std::vector<std::vector<std::vector<std::pair<int64_t, double>>>> taps(r);
  for (size_t d = 0; d < r; ++d)
    for (int64_t i = 0; i < out[d]; ++i)
      taps[d].push_back(referenceTaps(c.mode, c.coord, c.a, c.exclude,
                                      c.dims[d], scale[d], out[d], i));
  int bad = 0;
  std::vector<int64_t> at(r);
  for (int64_t e = 0; e < got[0].value.numel(); ++e) {
    int64_t rem = e;
    for (size_t d = r; d-- > 0;) {
      at[d] = rem % out[d];
      rem /= out[d];
    }
    // sum over every combination of the axes' taps of the weights' product
    double want = 0;
    std::vector<size_t> k(r, 0);
    while (true) {
      double w = 1;
      int64_t src = 0;
      for (size_t d = 0; d < r; ++d) {
        const auto &t = taps[d][size_t(at[d])][k[d]];
        w *= t.second;
        src = src * c.dims[d] + t.first;
      }
      want += w * x.getAsDouble(src);
      size_t d = r;
      while (d-- > 0 && ++k[d] == taps[d][size_t(at[d])].size())
        k[d] = 0;
      if (d == size_t(-1))
        break;
    }
    double g = got[0].value.getAsDouble(e);
    if (!(std::fabs(g - want) <= 1e-12) && bad++ < 3)
      ADD_FAILURE() << "element " << e << ": got " << g << ", want " << want;
  }
}

} // namespace

// Every coordinate mode the exporters write, up, down and by a fractional
// scale, in 1-D and over three axes at once, scales and sizes, cubic with
// both PyTorch's and ONNX's favourite a, with and without exclude_outside.
TEST(ResizeLowering, MatchesOnnxsReferenceInEveryCoordinateMode) {
  std::vector<InterpCase> cases;
  for (const char *coord :
       {"half_pixel", "pytorch_half_pixel", "half_pixel_symmetric",
        "align_corners", "asymmetric"}) {
    for (const char *mode : {"linear", "cubic"}) {
      cases.push_back({mode, coord, {7}, {2.5}, {}});
      cases.push_back({mode, coord, {9}, {0.45}, {}});
      cases.push_back({mode, coord, {2, 5, 4}, {1.0, 1.7, 0.6}, {}});
      cases.push_back({mode, coord, {3, 4, 5}, {}, {5, 3, 12}});
      cases.push_back({mode, coord, {4, 6}, {}, {1, 1}}); // to one pixel
    }
    cases.push_back({"cubic", coord, {5, 6}, {1.5, 0.7}, {}, -0.5, true});
    cases.push_back({"cubic", coord, {1, 8}, {}, {3, 5}, -0.75, true});
    cases.push_back({"cubic", coord, {2, 4}, {3.0, 2.0}, {}, -0.5, false});
  }
  for (const InterpCase &c : cases) {
    SCOPED_TRACE(c.mode + " " + c.coord + " dims " +
                 joined(std::vector<double>(c.dims.begin(), c.dims.end())) +
                 " scales " + joined(c.scales) + " sizes " +
                 joined(std::vector<double>(c.sizes.begin(), c.sizes.end())) +
                 " a " + joined({c.a}) + (c.exclude ? " exclude" : ""));
    expectMatchesReferenceInterpolation(c);
  }
}

// Cubic's gradient is the four Gathers' scatter-adds times their weights:
// checked against central differences up, down with exclude_outside, and at
// a fractional scale with align_corners, two axes at once.
TEST(ResizeLowering, CubicGradientsMatchFiniteDifferences) {
  using namespace gradcheck;
  auto cubic = [](const std::string &name, const std::string &attrs,
                  const std::string &scales) {
    GradCase c;
    c.name = name;
    c.params = {{"x", {1, 2, 5, 4}}};
    c.data = {{"double[4] scales = {" + scales + "}"}};
    c.body = "y = Resize <mode = \"cubic\", " + attrs + "> (x, , scales)";
    return c;
  };
  checkAll({cubic("bicubic x2 half_pixel", "cubic_coeff_a = -0.75",
                  "1.0, 1.0, 2.0, 2.0"),
            cubic("bicubic x1.5 align_corners",
                  "coordinate_transformation_mode = \"align_corners\"",
                  "1.0, 1.0, 1.5, 1.5"),
            cubic("cubic down exclude_outside a=-0.5",
                  "cubic_coeff_a = -0.5, exclude_outside = 1",
                  "1.0, 1.0, 0.6, 0.5")});
}
