// Attention's lowering (passes/onnx/attention_lowering.h) against ONNX's
// reference: the cases of models/make_attention_cases.py (causal, a bool
// mask with a row masked everywhere over grouped key/value heads, a float
// mask with a given scale, causal and a mask together, 3-D inputs with
// softcap), run on the CPU backend; the errors that name the node; and the
// gradients through the lowering by finite differences.
#include "passes/onnx/onnx_io.h"
#include "support/diagnostics.h"
#include "tests/unit/gradcheck_harness.h"
#include "tests/unit/onnx_node_cases.h"

using namespace mpc;
using namespace mpc::node_cases;

namespace {

const fs::path kCases = fs::path(MPC_SOURCE_DIR) / "models" / "attention_cases";

std::string errorOf(const std::string &signature, const std::string &body) {
  try {
    parseModelText("<ir_version: 9, opset_import: [\"\" : 23]>\ng (" +
                       signature + ") => (float[1,2,3,4] y) {\n" + body + "\n}",
                   "attention.onnxtext");
  } catch (const Error &e) {
    return e.what();
  }
  return "no error";
}

} // namespace

TEST(AttentionLowering, MatchesOnnxReferenceOutputs) {
  int checked = 0;
  for (const char *name :
       {"causal", "bool_mask_gqa", "float_mask", "causal_mask", "three_d"}) {
    SCOPED_TRACE(name);
    fs::path dir = kCases / name;
    ASSERT_TRUE(fs::is_directory(dir)) << dir;
    expectMatchesOutput(
        bakeInputs(dir, [](int, const std::string &) { return false; }), dir,
        2e-6);
    ++checked;
  }
  EXPECT_EQ(checked, 5);
}

TEST(AttentionLowering, RefusesWhatItCannotLowerNamingTheNode) {
  std::string qkv = "float[1,2,3,4] q, float[1,2,3,4] k, float[1,2,3,4] v";
  EXPECT_NE(errorOf(qkv + ", float[1,2,3,4] pk, float[1,2,3,4] pv",
                    "  y = Attention (q, k, v, , pk, pv)")
                .find("node 'Attention_0' (Attention): input 4 (a key/value "
                      "cache or sequence lengths) is not supported"),
            std::string::npos);
  EXPECT_NE(errorOf(qkv + ", bool[3,2] m", "  y = Attention (q, k, v, m)")
                .find("takes an attn_mask as long as the keys (3)"),
            std::string::npos);
  EXPECT_NE(errorOf("float[1,3,4] q, float[1,3,4] k, float[1,3,4] v",
                    "  y = Attention (q, k, v)")
                .find("3-D Q, K and V need q_num_heads and kv_num_heads"),
            std::string::npos);
  EXPECT_NE(errorOf("float[1,3,3,4] q, float[1,2,3,4] k, float[1,2,3,4] v",
                    "  y = Attention (q, k, v)")
                .find("3 query heads are not a multiple of 2 key/value heads"),
            std::string::npos);
}

TEST(AttentionLowering, GradientsMatchFiniteDifferences) {
  using namespace gradcheck;
  GradCase causal;
  causal.name = "Attention causal, grouped heads";
  causal.params = {
      {"q", {1, 2, 3, 4}}, {"k", {1, 1, 3, 4}}, {"v", {1, 1, 3, 4}}};
  causal.body = "y = Attention <is_causal = 1> (q, k, v)";
  causal.opset = 23;
  GradCase masked = causal;
  masked.name = "Attention float mask, softcap, scale";
  masked.params = {
      {"q", {1, 2, 3, 4}}, {"k", {1, 2, 3, 4}}, {"v", {1, 2, 3, 4}}};
  masked.body = "m = Constant <value = double[3,3] {0, -1, 0.5, 0.25, 0, -2, "
                "1, 0, 0}> ()\n y = Attention <softcap = 3.0, scale = 0.4> (q, "
                "k, v, m)";
  GradCase boolMask = causal;
  boolMask.name = "Attention bool mask";
  boolMask.params = masked.params;
  boolMask.data = {{"bool[3,3] m = {1, 0, 1, 1, 1, 0, 0, 1, 1}"}};
  boolMask.body = "y = Attention (q, k, v, m)";
  GradCase threeD = causal;
  threeD.name = "Attention 3-D";
  threeD.params = {{"q", {2, 3, 4}}, {"k", {2, 3, 4}}, {"v", {2, 3, 4}}};
  threeD.body = "y = Attention <q_num_heads = 2, kv_num_heads = 2> (q, k, v)";
  checkAll({causal, masked, boolMask, threeD});
}
