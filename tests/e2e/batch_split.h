// Helpers of the end-to-end tests that split one batch into parts trained
// separately and compare with the whole (--grad-accum's micro-batches,
// --data-parallel's ranks): one model file compiled for either batch size,
// and the distance between their states.
#pragma once

#include "passes/onnx/onnx_io.h"
#include "passes/pipeline.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

namespace mpc {
namespace test {

inline const std::string &modelsDir() {
  static const std::string dir = std::string(MPC_SOURCE_DIR) + "/models/";
  return dir;
}

/// fp32 training with `optimizer` at the rates the batch-splitting tests
/// use (SGD 0.05 with momentum 0.9, Adam 1e-3), K micro-batches a step.
inline CompileOptions fp32Options(const std::string &optimizer, int64_t k = 1) {
  CompileOptions o;
  o.precision = DType::F32;
  o.optimizer = optimizer;
  o.lr = optimizer == "sgd" ? 0.05 : 1e-3;
  o.momentum = optimizer == "sgd" ? 0.9 : 0.0;
  o.gradAccum = k;
  return o;
}

/// models/<file> compiled for batch `batch`: a static batch dim is made
/// symbolic first, so one file serves the part and the whole batch.
inline std::unique_ptr<Model> compileForBatch(const std::string &file,
                                              CompileOptions o, int64_t batch) {
  auto model = loadModel(modelsDir() + file);
  for (Value *in : model->graph->inputs())
    if (in->hasShape && !in->dims.empty())
      in->dims[0] = Dim::symbolic("batch");
  o.batch = batch;
  Statistics stats;
  runPipeline(*model, defaultPipeline(), o, PipelineConfig{}, stats);
  return model;
}

/// Largest |a - b| relative to the largest |b| of the tensor.
inline double relativeDifference(const Tensor &a, const Tensor &b) {
  std::vector<float> x = a.toFloats(), y = b.toFloats();
  EXPECT_EQ(x.size(), y.size());
  double diff = 0, scale = 0;
  for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
    diff = std::max(diff, std::fabs(double(x[i]) - double(y[i])));
    scale = std::max(scale, std::fabs(double(y[i])));
  }
  return scale > 0 ? diff / scale : diff;
}

/// A tensor's bytes, to compare states bit for bit.
inline std::vector<uint8_t> bytesOf(const Tensor &t) {
  return std::vector<uint8_t>(t.bytes.data(), t.bytes.data() + t.byteSize());
}

} // namespace test
} // namespace mpc
