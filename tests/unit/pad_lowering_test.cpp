// Pad's lowering (passes/onnx/pad_lowering.h): ONNX's own Pad node cases
// with their pads (graph inputs there) baked in as constants, a reference
// pad written out here (explicit mirror, clamp and wrap walks) over every
// mode, negative pads, the axes input, the attribute form of opset 2 and a
// symbolic batch dim, the errors that name the node, and the gradients of
// every mode by finite differences.
#include "tests/unit/gradcheck_harness.h"
#include "tests/unit/onnx_node_cases.h"

#include <random>

using namespace mpc;
using namespace mpc::node_cases;

namespace {

/// The reference: output element by element, each axis's source index
/// found by walking (not by the lowering's modulo arithmetic).
Tensor referencePad(const Tensor &x, const std::vector<int64_t> &begin,
                    const std::vector<int64_t> &end, const std::string &mode,
                    double value) {
  size_t r = x.dims.size();
  std::vector<int64_t> out(r);
  for (size_t d = 0; d < r; ++d)
    out[d] = x.dims[d] + begin[d] + end[d];
  Tensor y(x.dtype, out);
  std::vector<int64_t> at(r, 0);
  for (int64_t i = 0; i < y.numel(); ++i) {
    int64_t rem = i, src = 0;
    bool inside = true;
    for (size_t d = r; d-- > 0;) {
      at[d] = rem % out[d];
      rem /= out[d];
    }
    for (size_t d = 0; d < r; ++d) {
      int64_t s = at[d] - begin[d], n = x.dims[d];
      if (mode == "edge")
        s = std::min(std::max<int64_t>(s, 0), n - 1);
      else if (mode == "wrap")
        while (s < 0 || s >= n)
          s += s < 0 ? n : -n;
      else if (mode == "reflect")
        while (s < 0 || s >= n)
          s = s < 0 ? -s : 2 * (n - 1) - s;
      else if (s < 0 || s >= n)
        inside = false;
      src = src * n + s;
    }
    y.setFromDouble(i, inside ? x.getAsDouble(src) : value);
  }
  return y;
}

std::string ints(const std::vector<int64_t> &v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i)
    s += (i ? ", " : "") + std::to_string(v[i]);
  return s;
}

struct PadCase {
  std::string mode;
  std::vector<int64_t> dims, begin, end;
  double value = 0;
  int64_t opset = 17;
  std::vector<int64_t> axes; ///< opset 18+: pads given for these only
};

/// Runs the case's Pad (pads, value and axes as Constant nodes) on random
/// fp64 data and compares it with the reference.
void expectMatchesReference(const PadCase &c, const std::string &xDecl = "") {
  std::string dims = ints(c.dims);
  std::vector<int64_t> pads;
  std::vector<int64_t> fullBegin = c.begin, fullEnd = c.end;
  if (c.axes.empty()) {
    pads = c.begin;
    pads.insert(pads.end(), c.end.begin(), c.end.end());
  } else {
    fullBegin.assign(c.dims.size(), 0);
    fullEnd.assign(c.dims.size(), 0);
    for (size_t i = 0; i < c.axes.size(); ++i) {
      int64_t a =
          c.axes[i] < 0 ? c.axes[i] + int64_t(c.dims.size()) : c.axes[i];
      fullBegin[size_t(a)] = c.begin[i];
      fullEnd[size_t(a)] = c.end[i];
      pads.push_back(c.begin[i]);
    }
    pads.insert(pads.end(), c.end.begin(), c.end.end());
  }
  std::string text =
      "<ir_version: 8, opset_import: [\"\" : " + std::to_string(c.opset) +
      "]>\ng (" + (xDecl.empty() ? "double[" + dims + "] x" : xDecl) +
      ") => (double y) {\n";
  if (c.opset < 11) {
    text += "  y = Pad <mode = \"" + c.mode + "\", pads = [" + ints(pads) +
            "], value = " + std::to_string(c.value) + "> (x)\n}\n";
  } else {
    text += "  p = Constant <value = int64[" + std::to_string(pads.size()) +
            "] {" + ints(pads) + "}> ()\n";
    text += "  v = Constant <value = double {" + std::to_string(c.value) +
            "}> ()\n";
    std::string args = "x, p, v";
    if (!c.axes.empty()) {
      text += "  a = Constant <value = int64[" + std::to_string(c.axes.size()) +
              "] {" + ints(c.axes) + "}> ()\n";
      args += ", a";
    }
    text += "  y = Pad <mode = \"" + c.mode + "\"> (" + args + ")\n}\n";
  }
  std::mt19937 rng(3);
  std::uniform_real_distribution<double> u(-1, 1);
  Tensor x(DType::F64, c.dims);
  for (int64_t i = 0; i < x.numel(); ++i)
    x.setFromDouble(i, u(rng));
  std::unique_ptr<Model> model = parseModelText(text, "pad");
  auto backend = createCpuBackend();
  std::vector<InferenceOutput> out =
      runInference(*model, {{"x", x, ""}}, *backend);
  Tensor want = referencePad(x, fullBegin, fullEnd, c.mode, c.value);
  ASSERT_EQ(out.size(), 1u);
  ASSERT_EQ(out[0].value.dims, want.dims);
  EXPECT_EQ(out[0].value.bytes, want.bytes);
}

std::string padErrorOf(const std::string &body,
                       const std::string &inputs = "float[2,3] x") {
  std::string text = "<ir_version: 8, opset_import: [\"\" : 17]>\ng (" +
                     inputs + ") => (float y) {\n" + body + "\n}\n";
  try {
    parseModelText(text, "pad");
  } catch (const Error &e) {
    return e.what();
  }
  return "";
}

} // namespace

TEST(PadLowering, MatchesOnnxReferenceOutputs) {
  if (!fs::is_directory(kNodeTests))
    GTEST_SKIP() << kNodeTests << " is missing (Debian's libonnx-testdata)";
  for (const char *name :
       {"test_constant_pad", "test_edge_pad", "test_reflect_pad"}) {
    SCOPED_TRACE(name);
    fs::path dir = fs::path(kNodeTests) / name;
    ASSERT_TRUE(fs::is_directory(dir));
    // pads and constant_value are baked in; x stays data.
    expectMatchesOutput(
        bakeInputs(dir, [](int i, const std::string &) { return i >= 1; }), dir,
        0);
  }
}

TEST(PadLowering, MatchesAReferencePadInEveryMode) {
  std::vector<PadCase> cases = {
      {"constant", {2, 3, 4}, {0, 1, 2}, {1, 0, 3}, 0.5},
      {"constant", {3, 5}, {-1, 2}, {0, -2}, -2}, // crops and pads
      {"constant", {4, 4}, {0, 0}, {0, 0}, 1},    // nothing to pad
      {"reflect", {2, 3, 4}, {0, 2, 3}, {1, 1, 2}},
      {"reflect", {2, 3}, {0, 5}, {0, 6}}, // past one period of 2 (n - 1)
      {"edge", {2, 3, 4}, {1, 2, 0}, {0, 3, 5}},
      {"edge", {3, 5}, {0, -1}, {2, -2}},
      {"constant", {2, 3, 4}, {2}, {1}, 3, 18, {-1}}, // the axes input
      {"edge", {2, 3, 4}, {1, 2}, {2, 0}, 0, 18, {0, 2}},
      {"wrap", {2, 3, 4}, {0, 4, 1}, {1, 2, 5}, 0, 19},
      {"constant", {2, 3}, {1, 0}, {0, 2}, 7, 2}, // pads as an attribute
      {"reflect", {3, 4}, {2, 1}, {0, 3}, 0, 2},
  };
  for (const PadCase &c : cases) {
    SCOPED_TRACE(c.mode + " opset " + std::to_string(c.opset) + " pads " +
                 ints(c.begin) + " / " + ints(c.end));
    expectMatchesReference(c);
  }
  // A symbolic batch dim: constant mode builds its value blocks from
  // Shape(x) at run time.
  PadCase batch = {"constant", {3, 2, 4}, {0, 1, 0}, {0, 2, 1}, -1};
  SCOPED_TRACE("symbolic batch");
  expectMatchesReference(batch, "double[N,2,4] x");
}

TEST(PadLowering, RefusesWhatItCannotLowerNamingTheNode) {
  EXPECT_NE(padErrorOf("  y = Pad <mode = \"reflect\"> (x, p)",
                       "float[2,3] x, int64[4] p")
                .find("needs its pads at compile time"),
            std::string::npos);
  std::string pads = "  p = Constant <value = int64[4] {0, 1, 0, 1}> ()\n";
  EXPECT_NE(padErrorOf(pads + "  y = Pad <mode = \"wrap\"> (x, p)")
                .find("mode 'wrap' is not supported"),
            std::string::npos);
  EXPECT_NE(padErrorOf("  p = Constant <value = int64[3] {0, 1, 0}> ()\n"
                       "  y = Pad (x, p)")
                .find("pads has 3 entries, expected 4"),
            std::string::npos);
  EXPECT_NE(padErrorOf("  p = Constant <value = int64[4] {0, -3, 0, -3}> ()\n"
                       "  y = Pad (x, p)")
                .find("remove more than the 3 elements of axis 1"),
            std::string::npos);
}

TEST(PadLowering, GradientsOfEveryModeMatchFiniteDifferences) {
  using namespace gradcheck;
  auto padCase = [](const std::string &name, const std::string &mode,
                    const std::string &pads, int64_t opset = 17) {
    GradCase c;
    c.name = name;
    c.params = {{"x", {2, 3, 4}, -1, 1}};
    c.data = {{"int64[6] p = {" + pads + "}"}};
    c.body = "y = Pad <mode = \"" + mode + "\"> (x, p)";
    c.opset = opset;
    return c;
  };
  checkAll({padCase("Pad constant", "constant", "0, 1, 2, 1, 0, 3"),
            padCase("Pad constant crop", "constant", "0, -1, 2, 1, 0, -2"),
            padCase("Pad reflect", "reflect", "0, 2, 3, 0, 1, 2"),
            padCase("Pad edge", "edge", "1, 2, 0, 0, 3, 5"),
            padCase("Pad wrap", "wrap", "0, 4, 1, 1, 2, 5", 19)});
}
