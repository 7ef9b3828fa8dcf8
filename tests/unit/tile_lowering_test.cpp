// Tile's lowering (passes/onnx/tile_lowering.h): ONNX's own Tile node
// cases with their repeats (a graph input there) baked in as a constant
// (tests/unit/onnx_node_cases.h), the errors that name the node, and the
// gradient (Expand's sum over the copies) by finite differences.
#include "passes/onnx/onnx_io.h"
#include "support/diagnostics.h"
#include "tests/unit/gradcheck_harness.h"
#include "tests/unit/onnx_node_cases.h"

using namespace mpc;
using namespace mpc::node_cases;

#define EXPECT_CONTAINS(haystack, needle)                                      \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos)             \
      << "message: " << (haystack)

TEST(TileLowering, MatchesOnnxReferenceOutputs) {
  if (!fs::is_directory(kNodeTests))
    GTEST_SKIP() << kNodeTests << " is missing (Debian's libonnx-testdata)";
  for (const char *name : {"test_tile", "test_tile_precomputed"}) {
    SCOPED_TRACE(name);
    fs::path dir = fs::path(kNodeTests) / name;
    ASSERT_TRUE(fs::is_directory(dir));
    expectMatchesOutput(
        bakeInputs(dir, [](int i, const std::string &) { return i == 1; }), dir,
        0);
  }
}

TEST(TileLowering, RefusesWhatItCannotLowerNamingTheNode) {
  auto errorOf = [](const std::string &signature, const std::string &body) {
    try {
      parseModelText("<ir_version: 8, opset_import: [\"\" : 17]>\ng (" +
                         signature + ") => (float[4,6] y) {\n" + body + "\n}",
                     "tile.onnxtext");
    } catch (const Error &e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_CONTAINS(errorOf("float[2,3] x, int64[2] r", "  y = Tile (x, r)"),
                  "node 'Tile_0' (Tile): needs its repeats at compile time as "
                  "int64, 'r' is not");
  EXPECT_CONTAINS(
      errorOf("float[2,3] x", "  r = Constant <value = int64[3] {2, 2, 1}> ()\n"
                              "  y = Tile (x, r)"),
      "node 'Tile_1' (Tile): needs one repeat per axis of its input (2), got "
      "3");
  EXPECT_CONTAINS(errorOf("float[2,3] x",
                          "  r = Constant <value = int64[2] {2, -1}> ()\n"
                          "  y = Tile (x, r)"),
                  "repeat -1 on axis 1 of 3 is not supported");
}

TEST(TileLowering, GradientMatchesFiniteDifferences) {
  using namespace gradcheck;
  GradCase rows;
  rows.name = "Tile over both axes";
  rows.params = {{"x", {2, 3}}};
  rows.data = {{"int64[2] r = {3, 2}"}};
  rows.body = "y = Tile(x, r)";
  GradCase one = rows;
  one.name = "Tile over the middle axis only";
  one.params = {{"x", {2, 3, 2}}};
  one.data = {{"int64[3] r = {1, 4, 1}"}};
  checkAll({rows, one});
}
