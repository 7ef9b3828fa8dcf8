// ONNX's backend node test cases (Debian's libonnx-testdata) run with some
// of their graph inputs baked in as Constant nodes: the import-time
// lowerings read those (a Resize's scales, a OneHot's depth, an LSTM's
// sequence_lens) at import, where the cases pass them as data. The
// lowering tests compare the result with the case's expected output.
#pragma once

#include "ir/tensor_pb.h"
#include "passes/onnx/onnx_io.h"
#include "runtime/backend.h"
#include "runtime/inference.h"
#include "support/diagnostics.h"

#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

namespace mpc {
namespace node_cases {

namespace fs = std::filesystem;

inline const char *const kNodeTests = "/usr/share/libonnx-testdata/data/node";

inline Tensor readPb(const fs::path &p) {
  Tensor t;
  std::string error;
  EXPECT_TRUE(readTensorProtoFile(p.string(), t, nullptr, error)) << error;
  return t;
}

/// A case's model with the graph inputs `bake` picks turned into Constant
/// nodes of test_data_set_0's values, and the other inputs' values.
struct BakedCase {
  onnx::ModelProto proto;
  std::vector<InferenceInput> inputs;
};

inline BakedCase bakeInputs(
    const fs::path &dir,
    const std::function<bool(int index, const std::string &name)> &bake) {
  BakedCase c;
  std::ifstream in(dir / "model.onnx", std::ios::binary);
  EXPECT_TRUE(c.proto.ParseFromIstream(&in)) << dir;
  auto *graph = c.proto.mutable_graph();
  onnx::GraphProto constants;
  google::protobuf::RepeatedPtrField<onnx::ValueInfoProto> kept;
  for (int i = 0; i < graph->input_size(); ++i) {
    const std::string &name = graph->input(i).name();
    Tensor t = readPb(dir / "test_data_set_0" /
                      ("input_" + std::to_string(i) + ".pb"));
    if (!bake(i, name)) {
      c.inputs.push_back({name, std::move(t), ""});
      *kept.Add() = graph->input(i);
      continue;
    }
    onnx::NodeProto *k = constants.add_node();
    k->set_op_type("Constant");
    k->add_output(name);
    onnx::AttributeProto *value = k->add_attribute();
    value->set_name("value");
    value->set_type(onnx::AttributeProto::TENSOR);
    tensorToProto(t, name, *value->mutable_t());
  }
  graph->mutable_input()->Swap(&kept);
  for (const auto &n : graph->node())
    *constants.add_node() = n;
  graph->mutable_node()->Swap(constants.mutable_node());
  return c;
}

/// Imports (and so lowers) the baked case, runs it on the CPU backend and
/// compares its first output with the case's to `tol` (absolute and
/// relative); failures name the element.
inline void expectMatchesOutput(BakedCase c, const fs::path &dir, double tol) {
  std::vector<InferenceOutput> out;
  try {
    std::unique_ptr<Model> model =
        importModel(c.proto, dir.filename().string(), dir.string());
    auto backend = createCpuBackend();
    out = runInference(*model, std::move(c.inputs), *backend);
  } catch (const Error &e) {
    ADD_FAILURE() << e.what();
    return;
  }
  Tensor want = readPb(dir / "test_data_set_0" / "output_0.pb");
  ASSERT_GE(out.size(), 1u);
  ASSERT_EQ(out[0].value.dims, want.dims);
  int bad = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    double g = out[0].value.getAsDouble(i), w = want.getAsDouble(i);
    if (!(std::fabs(g - w) <= tol + tol * std::fabs(w)) && bad++ < 3)
      ADD_FAILURE() << "element " << i << ": got " << g << ", want " << w;
  }
}

} // namespace node_cases
} // namespace mpc
