// OneHot's lowering (passes/onnx/onehot_lowering.h) against ONNX's own
// expected outputs: the four OneHot node cases (axis given, negative,
// omitted; negative indices; float indices), with depth (a graph input
// there) baked in as a constant (tests/unit/onnx_node_cases.h).
#include "tests/unit/onnx_node_cases.h"

using namespace mpc;
using namespace mpc::node_cases;

TEST(OneHotLowering, MatchesOnnxReferenceOutputs) {
  if (!fs::is_directory(kNodeTests))
    GTEST_SKIP() << kNodeTests << " is missing (Debian's libonnx-testdata)";
  int checked = 0;
  for (const char *name :
       {"test_onehot_negative_indices", "test_onehot_with_axis",
        "test_onehot_with_negative_axis", "test_onehot_without_axis"}) {
    SCOPED_TRACE(name);
    fs::path dir = fs::path(kNodeTests) / name;
    expectMatchesOutput(bakeInputs(dir,
                                   [](int, const std::string &input) {
                                     return input == "depth";
                                   }),
                        dir, 0);
    ++checked;
  }
  EXPECT_EQ(checked, 4);
}
