// The unrolled LSTM (passes/onnx/rnn_lowering.h) with peepholes against
// ONNX's own expected outputs (Debian's libonnx-testdata). The node test
// passes sequence_lens as a graph input, which the lowering cannot read at
// import; here its values are baked in as a Constant first, as an exporter
// writes them, and the other inputs are fed as the case feeds them.
#include "passes/onnx/onnx_io.h"
#include "passes/support/diagnostics.h"
#include "runtime/backend.h"
#include "runtime/data/tensor_pb.h"
#include "runtime/inference.h"

#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <cmath>
#include <filesystem>
#include <fstream>

using namespace mpc;
namespace fs = std::filesystem;

TEST(RnnLowering, PeepholesMatchOnnx) {
  fs::path dir =
      "/usr/share/libonnx-testdata/data/node/test_lstm_with_peepholes";
  if (!fs::is_directory(dir))
    GTEST_SKIP() << dir << " is missing (Debian's libonnx-testdata)";
  onnx::ModelProto proto;
  std::ifstream in(dir / "model.onnx", std::ios::binary);
  ASSERT_TRUE(proto.ParseFromIstream(&in));
  auto *graph = proto.mutable_graph();
  std::vector<InferenceInput> inputs;
  int lens = -1;
  for (int i = 0; i < graph->input_size(); ++i) {
    Tensor t;
    std::string error;
    ASSERT_TRUE(readTensorProtoFile(
        (dir / "test_data_set_0" / ("input_" + std::to_string(i) + ".pb"))
            .string(),
        t, nullptr, error))
        << error;
    if (graph->input(i).name() == "sequence_lens") {
      onnx::GraphProto withConstant;
      onnx::NodeProto *c = withConstant.add_node();
      c->set_op_type("Constant");
      c->add_output("sequence_lens");
      onnx::AttributeProto *value = c->add_attribute();
      value->set_name("value");
      value->set_type(onnx::AttributeProto::TENSOR);
      tensorToProto(t, "sequence_lens", *value->mutable_t());
      for (const auto &n : graph->node())
        *withConstant.add_node() = n;
      graph->mutable_node()->Swap(withConstant.mutable_node());
      lens = i;
    } else {
      inputs.push_back({graph->input(i).name(), t, ""});
    }
  }
  ASSERT_GE(lens, 0);
  graph->mutable_input()->DeleteSubrange(lens, 1);
  std::unique_ptr<Model> model = importModel(proto, "peepholes", dir.string());
  auto backend = createCpuBackend();
  std::vector<InferenceOutput> out =
      runInference(*model, std::move(inputs), *backend);
  Tensor want;
  std::string error;
  ASSERT_TRUE(readTensorProtoFile(
      (dir / "test_data_set_0" / "output_0.pb").string(), want, nullptr, error))
      << error;
  ASSERT_EQ(out.size(), 1u);
  ASSERT_EQ(out[0].value.dims, want.dims);
  for (int64_t i = 0; i < want.numel(); ++i)
    EXPECT_NEAR(out[0].value.getAsDouble(i), want.getAsDouble(i), 1e-5)
        << "element " << i;
}
