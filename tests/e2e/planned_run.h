// Training a compiled step as its file would be read back, and checking it
// against its memory plan: shared by the tests that compare two compiles of
// one model bit for bit (shrink-saved on and off, the default recompute
// against none).
#pragma once

#include "parity_harness.h"
#include "passes/memory_report.h"
#include "passes/onnx/onnx_io.h"
#include "runtime/state_dict.h"

#include "onnx/onnx_pb.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace mpc {

/// The model as mpc-run reads it: written to ONNX and imported again.
inline std::unique_ptr<Model> asWritten(const Model &m) {
  onnx::ModelProto proto;
  exportModel(m, proto);
  return importModel(proto, "compiled.onnx", ".");
}

/// The bytes the plan keeps for the backward.
inline size_t savedBytes(const MemoryPlan &p) {
  size_t sum = 0;
  for (size_t b : p.savedForBackward)
    sum += b;
  return sum;
}

/// The losses of `steps` steps on `data` (in models/) and the parameters'
/// bytes after them.
struct PlannedRun {
  std::vector<double> losses;
  std::vector<std::vector<uint8_t>> params;
};

/// Trains `compiled` as written on the CPU backend, expecting the arena and
/// live peaks its memory `plan` states.
inline PlannedRun trainAsPlanned(const Model &compiled, const MemoryPlan &plan,
                                 const std::string &data, int steps) {
  PlannedRun run;
  auto backend = createCpuBackend();
  Trainer trainer(asWritten(compiled), *backend);
  int64_t batch = 0;
  auto specs = trainer.dataInputs(batch);
  Dataset set = Dataset::fromNpz(parity::modelsDir() + data, specs);
  for (int i = 0; i < steps; ++i)
    run.losses.push_back(
        trainer.step(set.batch(trainer.stepsDone(), batch, false, 0)).loss);
  EXPECT_EQ(trainer.arenaPeakBytes(), plan.arenaBytes);
  EXPECT_EQ(trainer.peakBytes(), plan.livePeakBytes);
  for (const StateDictEntry &e : trainer.stateDict()) {
    const uint8_t *bytes = e.value.data<uint8_t>();
    run.params.emplace_back(bytes, bytes + e.value.byteSize());
  }
  return run;
}

} // namespace mpc
