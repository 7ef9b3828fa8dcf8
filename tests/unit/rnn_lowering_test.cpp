// The unrolled LSTM (passes/onnx/rnn_lowering.h) with peepholes against
// ONNX's own expected outputs: the node test passes sequence_lens as a graph
// input, which the lowering cannot read at import; here it is baked in as a
// constant (tests/unit/onnx_node_cases.h).
#include "tests/unit/onnx_node_cases.h"

using namespace mpc;
using namespace mpc::node_cases;

TEST(RnnLowering, PeepholesMatchOnnx) {
  fs::path dir = fs::path(kNodeTests) / "test_lstm_with_peepholes";
  if (!fs::is_directory(dir))
    GTEST_SKIP() << dir << " is missing (Debian's libonnx-testdata)";
  expectMatchesOutput(bakeInputs(dir,
                                 [](int, const std::string &name) {
                                   return name == "sequence_lens";
                                 }),
                      dir, 1e-5);
}
