// Helpers of the end-to-end parity tests on the committed issue-3 models
// (models/make_issue3_models.py): compile with the default pipeline, train
// on the committed data, compare with the committed PyTorch trajectories.
//
// Header-only so that each e2e test file stays self-contained; the
// procedure is tests/e2e/mlp_seed_test.cpp's.
#pragma once

#include "passes/onnx/onnx_io.h"
#include "passes/pipeline.h"
#include "passes/registry.h"
#include "runtime/trainer.h"
#include "support/diagnostics.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

namespace mpc {
namespace parity {

inline const std::string &modelsDir() {
  static const std::string dir = std::string(MPC_SOURCE_DIR) + "/models/";
  return dir;
}

/// models/<file> through the whole default pipeline.
inline std::unique_ptr<Model> compile(const std::string &file,
                                      const CompileOptions &options) {
  auto model = loadModel(modelsDir() + file);
  Statistics stats;
  runPipeline(*model, defaultPipeline(), options, PipelineConfig{}, stats);
  return model;
}

/// The optimizers of the committed trajectories (make_issue3_models.py's
/// RUNS): SGD(lr=0.05, momentum=0.9) and Adam(lr=1e-3).
inline CompileOptions options(const std::string &optimizer, DType precision) {
  CompileOptions o;
  o.precision = precision;
  o.optimizer = optimizer;
  if (optimizer == "sgd") {
    o.lr = 0.05;
    o.momentum = 0.9;
  } else {
    o.lr = 1e-3;
  }
  return o;
}

/// The losses of a committed "step,loss" trajectory.
inline std::vector<double> readReference(const std::string &file) {
  std::ifstream in(modelsDir() + file);
  EXPECT_TRUE(in) << file;
  std::vector<double> losses;
  std::string line;
  std::getline(in, line); // header
  while (std::getline(in, line))
    losses.push_back(std::stod(line.substr(line.find(',') + 1)));
  return losses;
}

/// Trains `steps` steps on models/<dataFile>, batches in order.
inline std::vector<StepRecord> train(std::unique_ptr<Model> model,
                                     const std::string &dataFile,
                                     int64_t steps) {
  auto backend = createCpuBackend();
  Trainer trainer(std::move(model), *backend);
  int64_t batch = 0;
  auto specs = trainer.dataInputs(batch);
  Dataset data = Dataset::fromNpz(modelsDir() + dataFile, specs);
  std::vector<StepRecord> records;
  for (int64_t i = 0; i < steps; ++i)
    records.push_back(
        trainer.step(data.batch(trainer.stepsDone(), batch, false, 0)));
  return records;
}

/// fp32 training matches PyTorch's trajectory step for step. `batch` is
/// --batch, for a model whose batch dim is symbolic (0: none).
inline void expectMatchesPyTorch(const std::string &modelFile,
                                 const std::string &dataFile,
                                 const std::string &optimizer,
                                 const std::string &reference, double tolerance,
                                 int64_t batch = 0) {
  std::vector<double> ref = readReference(reference);
  ASSERT_EQ(ref.size(), 30u) << reference;
  CompileOptions o = options(optimizer, DType::F32);
  o.batch = batch;
  std::vector<StepRecord> run = train(compile(modelFile, o), dataFile, 30);
  for (size_t i = 0; i < ref.size(); ++i) {
    double rel = std::fabs(run[i].loss - ref[i]) / std::fabs(ref[i]);
    EXPECT_LT(rel, tolerance) << modelFile << " " << reference << " step " << i
                              << ": mpc " << run[i].loss << " torch " << ref[i];
    EXPECT_FALSE(run[i].skipped);
  }
}

/// A mixed-precision run follows the fp32 run of the same model, data and
/// optimizer: relative loss difference under `tolerance` at every step, no
/// skipped step, and the loss falls to under `fall` of its first value.
inline void expectFollowsFp32(const std::string &modelFile,
                              const std::string &dataFile,
                              const std::string &optimizer, DType precision,
                              int64_t steps, double tolerance, double fall) {
  std::vector<StepRecord> ref = train(
      compile(modelFile, options(optimizer, DType::F32)), dataFile, steps);
  std::vector<StepRecord> run =
      train(compile(modelFile, options(optimizer, precision)), dataFile, steps);
  for (int64_t i = 0; i < steps; ++i) {
    double rel = std::fabs(run[size_t(i)].loss - ref[size_t(i)].loss) /
                 std::fabs(ref[size_t(i)].loss);
    EXPECT_LT(rel, tolerance)
        << modelFile << " " << optimizer << " " << dtypeName(precision)
        << " step " << i << ": " << run[size_t(i)].loss << " vs fp32 "
        << ref[size_t(i)].loss;
    EXPECT_FALSE(run[size_t(i)].skipped) << "step " << i;
  }
  EXPECT_LT(run.back().loss, fall * run.front().loss) << dtypeName(precision);
}

/// The dtypes of a node's floating inputs.
inline std::vector<DType> floatInputTypes(const Node &n) {
  std::vector<DType> types;
  for (const Value *v : n.inputs())
    if (v && isFloating(v->dtype))
      types.push_back(v->dtype);
  return types;
}

} // namespace parity
} // namespace mpc
