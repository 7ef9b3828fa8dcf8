// Fuzz target: mpc-run's model and checkpoint loading (Trainer construction,
// resumeFrom) and the run that continues from a checkpoint.
//
// The fixture is a small MLP compiled by the default pipeline (what plain
// `mpc-opt` writes), exported and re-imported as mpc-run would load it. Each
// input is a checkpoint file: resumeFrom must refuse it with a one-line
// error naming the file, or accept it; an accepted checkpoint must then run
// a step on the batch mpc-run would cut from its data order (or stop with a
// clean error), save, and resume again. The same bytes are also given to
// mpc-run as the model: Trainer construction, the data inputs and synthetic
// data for them.
#include "passes/onnx/onnx_io.h"
#include "passes/pipeline.h"
#include "runtime/trainer.h"
#include "support/diagnostics.h"
#include "tests/fuzz/fuzz_support.h"

#include "onnx/onnx_pb.h"

using namespace mpc;

namespace {

const char *kTrainMlp = R"(
<ir_version: 8, opset_import: ["" : 17]>
train_mlp (float[4,3] x, int64[4] y) => (float loss)
  <float[5,3] w1 = {0.1, -0.2, 0.3, 0.05, 0.4, -0.1, 0.2, 0.2, -0.3, 0.1, 0.0,
                    0.15, -0.25, 0.35, 0.05},
   float[5] b1 = {0.0, 0.01, -0.01, 0.02, 0.0},
   float[2,5] w2 = {0.3, -0.1, 0.2, 0.1, -0.2, -0.3, 0.25, 0.1, 0.05, 0.2},
   float[2] b2 = {0.0, 0.0}>
{
  h = Gemm <transB = 1> (x, w1, b1)
  r = Relu (h)
  z = Gemm <transB = 1> (r, w2, b2)
  loss = SoftmaxCrossEntropyLoss <reduction = "mean"> (z, y)
}
)";

struct Fixture {
  onnx::ModelProto compiled;
  std::unique_ptr<Backend> backend = createCpuBackend();
};

const Fixture &fixture() {
  static const Fixture f = [] {
    Fixture f;
    std::unique_ptr<Model> model = parseModelText(kTrainMlp, "train_mlp");
    CompileOptions options;
    PipelineConfig config;
    Statistics stats;
    runPipeline(*model, defaultPipeline(), options, config, stats);
    exportModel(*model, f.compiled);
    return f;
  }();
  return f;
}

/// A fresh trainer on the compiled fixture, as `mpc-run model.onnx` makes.
std::unique_ptr<Trainer> freshTrainer() {
  const Fixture &f = fixture();
  return std::make_unique<Trainer>(
      importModel(f.compiled, "train_mlp.onnx", "."), *f.backend);
}

/// What mpc-run does after --resume: the data order continues from the
/// checkpoint's counters, one step runs, and the state is saved.
void continueRun(Trainer &trainer, const std::string &savePath) {
  int64_t batch = 0;
  std::vector<DataInputSpec> specs = trainer.dataInputs(batch);
  Dataset data = Dataset::synthetic(specs, batch * 4, trainer.seed);
  trainer.step(
      data.batch(trainer.stepsDone(), batch, trainer.shuffle, trainer.seed));
  trainer.saveCheckpoint(savePath);
}

void resumeIntoFixture(const std::string &path) {
  std::unique_ptr<Trainer> trainer = freshTrainer();
  try {
    trainer->resumeFrom(path);
  } catch (const Error &e) {
    fuzz::checkErrorMessage(e.what(), path + ": ");
    return;
  }
  const std::string saved = fuzz::scratchDir() + "/saved.onnx";
  try {
    continueRun(*trainer, saved);
  } catch (const Error &e) {
    // State of the right names and shapes may still hold values a kernel
    // refuses (a negative optimizer step): a clean error is fine.
    fuzz::checkErrorMessage(e.what(), "");
    return;
  }
  // What we wrote ourselves must always resume.
  std::unique_ptr<Trainer> again = freshTrainer();
  again->resumeFrom(saved);
  fuzz::require(again->stepsDone() == trainer->stepsDone() &&
                    again->seed == trainer->seed &&
                    again->shuffle == trainer->shuffle,
                "a saved checkpoint resumed with different counters");
}

void loadAsModel(const std::string &path) {
  try {
    Trainer trainer(loadModel(path), *fixture().backend);
    int64_t batch = 0;
    std::vector<DataInputSpec> specs = trainer.dataInputs(batch);
    Dataset data = Dataset::synthetic(specs, batch, trainer.seed);
    data.batch(0, batch, false, 0);
  } catch (const Error &e) {
    fuzz::checkErrorMessage(e.what(), "");
  }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const std::string path = fuzz::writeScratchFile("ckpt.onnx", data, size);
  resumeIntoFixture(path);
  loadAsModel(path);
  return 0;
}
