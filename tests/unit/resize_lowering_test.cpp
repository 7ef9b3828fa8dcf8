// Resize's lowering (passes/onnx/resize_lowering.h) against ONNX's own
// expected outputs: every nearest and linear case of ONNX's backend node
// tests (Debian's libonnx-testdata).
//
// Those models take their scales or sizes as graph inputs, which the
// lowering cannot read at import (mpc-onnx-node leaves them unclaimed with
// that reason). Here the case's values for them are baked into the model as
// constants first, as an exporter writes them; then the model is imported
// (and so lowered), run on the CPU backend, and compared with the case's
// output to 1e-5.
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
#include <sstream>

using namespace mpc;
namespace fs = std::filesystem;

namespace {

const char *kNodeTests = "/usr/share/libonnx-testdata/data/node";

std::string attrString(const onnx::NodeProto &n, const std::string &name) {
  for (const auto &a : n.attribute())
    if (a.name() == name)
      return a.s();
  return "";
}

/// Whether the case is one the lowering takes (not cubic, not crop).
bool lowerable(const onnx::ModelProto &m) {
  for (const auto &n : m.graph().node())
    if (n.op_type() == "Resize" &&
        (attrString(n, "mode") == "cubic" ||
         attrString(n, "coordinate_transformation_mode") ==
             "tf_crop_and_resize"))
      return false;
  return true;
}

Tensor readPb(const fs::path &p) {
  Tensor t;
  std::string error;
  EXPECT_TRUE(readTensorProtoFile(p.string(), t, nullptr, error)) << error;
  return t;
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
    onnx::ModelProto proto;
    std::ifstream in(entry.path() / "model.onnx", std::ios::binary);
    ASSERT_TRUE(proto.ParseFromIstream(&in));
    if (!lowerable(proto))
      continue;
    fs::path data = entry.path() / "test_data_set_0";
    // Every graph input after X (roi, scales, sizes) becomes a Constant
    // node, as torch.onnx.export writes them.
    auto *graph = proto.mutable_graph();
    ASSERT_GE(graph->input_size(), 2);
    onnx::GraphProto constants;
    for (int i = 1; i < graph->input_size(); ++i) {
      Tensor t = readPb(data / ("input_" + std::to_string(i) + ".pb"));
      onnx::NodeProto *c = constants.add_node();
      c->set_op_type("Constant");
      c->add_output(graph->input(i).name());
      onnx::AttributeProto *value = c->add_attribute();
      value->set_name("value");
      value->set_type(onnx::AttributeProto::TENSOR);
      tensorToProto(t, graph->input(i).name(), *value->mutable_t());
    }
    graph->mutable_input()->DeleteSubrange(1, graph->input_size() - 1);
    for (const auto &n : graph->node())
      *constants.add_node() = n;
    graph->mutable_node()->Swap(constants.mutable_node());
    std::unique_ptr<Model> model;
    try {
      model = importModel(proto, name, entry.path().string());
    } catch (const Error &e) {
      ADD_FAILURE() << e.what();
      continue;
    }
    auto backend = createCpuBackend();
    std::vector<InferenceInput> inputs(1);
    inputs[0].value = readPb(data / "input_0.pb");
    std::vector<InferenceOutput> out;
    try {
      out = runInference(*model, std::move(inputs), *backend);
    } catch (const Error &e) {
      ADD_FAILURE() << e.what();
      continue;
    }
    Tensor want = readPb(data / "output_0.pb");
    ASSERT_EQ(out.size(), 1u);
    ASSERT_EQ(out[0].value.dims, want.dims);
    int bad = 0;
    for (int64_t i = 0; i < want.numel(); ++i) {
      double g = out[0].value.getAsDouble(i), w = want.getAsDouble(i);
      if (!(std::fabs(g - w) <= 1e-5 + 1e-5 * std::fabs(w)) && bad++ < 3)
        ADD_FAILURE() << "element " << i << ": got " << g << ", want " << w;
    }
    ++checked;
  }
  // ONNX 1.12 has 13 nearest and linear cases: all of them ran.
  EXPECT_GE(checked, 13);
}
