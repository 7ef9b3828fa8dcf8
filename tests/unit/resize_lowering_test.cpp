// Resize's lowering (passes/onnx/resize_lowering.h) against ONNX's own
// expected outputs: every nearest, linear and cubic case of ONNX's backend
// node tests, with the scales or sizes (graph inputs there) baked in as
// constants, as an exporter writes them (tests/unit/onnx_node_cases.h).
#include "tests/unit/onnx_node_cases.h"

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
