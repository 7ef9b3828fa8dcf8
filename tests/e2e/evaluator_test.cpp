// End to end: the validation loss mpc-run --eval-data reports
// (runtime/evaluator.h).
//  - Before any update, the forward on a batch is the step's own loss on it
//    (the seed MLP: no batch norm, no dropout; fp32): the evaluator reads
//    the trainer's parameters and the loss the model defines.
//  - After training, the CNN's validation loss is that of the inference
//    model mpc-run --export-inference writes, run batch by batch by
//    mpc-run --infer's path (runInference): batch norms on the trained
//    running statistics, the mean of the batches' losses.
//  - Evaluating changes no state, and 2 and 3 ranks of a data-parallel world
//    report one process's bits.
#include "passes/onnx/onnx_io.h"
#include "runtime/data/npz.h"
#include "runtime/evaluator.h"
#include "runtime/inference.h"
#include "tests/e2e/batch_split.h"
#include "tests/support/thread_world.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <unistd.h>

using namespace mpc;

namespace {

const std::string &kModels = test::modelsDir();

std::unique_ptr<Model> compileFp32(const std::string &file,
                                   const std::string &optimizer) {
  return test::compileForBatch(file, test::fp32Options(optimizer), 64);
}

/// The first `samples` samples of models/<file> as their own npz.
std::string firstSamples(const std::string &file, int64_t samples,
                         const std::vector<DataInputSpec> &specs) {
  Dataset all = Dataset::fromNpz(kModels + file, specs);
  auto batch = all.batch(0, samples, false, 0);
  std::string path =
      ::testing::TempDir() + "first_" + std::to_string(samples) + "_" + file;
  std::vector<std::pair<std::string, Tensor>> arrays(batch.begin(),
                                                     batch.end());
  std::string error;
  EXPECT_TRUE(writeNpz(path, arrays, error)) << error;
  return path;
}

/// The mean loss over the first 4 batches of 64 of `val` of the inference
/// model t.exportInference writes (its moving average with `ema`), each
/// batch run by mpc-run --infer's path.
double exportedLoss(Trainer &t, bool ema, const Dataset &val,
                    Backend &backend) {
  std::string exported = ::testing::TempDir() + "evaluator_inference" +
                         (ema ? "_ema" : "") + ".onnx";
  InferenceExportOptions options;
  options.ema = ema;
  options.outputs = {*t.model().meta("mpc.loss")}; // the loss, with labels
  t.exportInference(exported, options);
  double sum = 0;
  for (int64_t b = 0; b < 4; ++b) {
    auto model = loadModel(exported);
    std::vector<InferenceInput> inputs;
    for (auto &[name, tensor] : val.batch(b, 64, false, 0))
      inputs.push_back({name, tensor, ""});
    auto outputs = runInference(*model, inputs, backend);
    EXPECT_EQ(outputs.size(), 1u);
    sum += outputs.at(0).value.getAsDouble(0);
  }
  std::remove(exported.c_str());
  return sum / 4;
}

} // namespace

TEST(Evaluator, BeforeAnyUpdateTheForwardIsTheStepsLoss) {
  auto backend = createCpuBackend();
  Trainer t(compileFp32("mlp_seed.onnx", "adam"), *backend);
  Evaluator eval(t, *backend, 64);
  int64_t batch = 64;
  Dataset data =
      Dataset::fromNpz(kModels + "mlp_seed_data.npz", t.dataInputs(batch));
  std::string one = firstSamples("mlp_seed_data.npz", 64, eval.dataInputs());
  Dataset first = Dataset::fromNpz(one, eval.dataInputs());
  EvalResult before = eval.evaluate(t, first, one, nullptr);
  EXPECT_EQ(before.samples, 64);
  StepRecord r = t.step(data.batch(0, 64, false, 0));
  EXPECT_EQ(before.loss, r.loss);
  // After the update the same batch evaluates lower (Adam on its loss).
  EvalResult after = eval.evaluate(t, first, one, nullptr);
  EXPECT_LT(after.loss, before.loss);
  std::remove(one.c_str());
}

TEST(Evaluator, TheCnnsLossIsTheExportedInferenceModels) {
  auto backend = createCpuBackend();
  Trainer t(compileFp32("cnn.onnx", "adam"), *backend);
  int64_t batch = 64;
  Dataset data =
      Dataset::fromNpz(kModels + "cnn_data.npz", t.dataInputs(batch));
  for (int64_t s = 0; s < 8; ++s)
    t.step(data.batch(s, 64, false, 0));
  std::map<std::string, std::vector<uint8_t>> state;
  for (const Value *init : t.model().training->algorithm->initializers())
    if (init->isState)
      state[init->name()] = t.state(init->name()).bytes;

  Evaluator eval(t, *backend, 64);
  Dataset val = Dataset::fromNpz(kModels + "cnn_data.npz", eval.dataInputs());
  EvalResult got = eval.evaluate(t, val, "cnn_data.npz", nullptr);
  EXPECT_EQ(got.samples, 256);

  EXPECT_EQ(got.loss, exportedLoss(t, false, val, *backend));

  // Nothing of the trainer changed (the running statistics included), and
  // a second evaluation agrees.
  for (const auto &[name, bytes] : state)
    EXPECT_EQ(t.state(name).bytes, bytes) << name;
  EXPECT_EQ(eval.evaluate(t, val, "cnn_data.npz", nullptr).loss, got.loss);
}

TEST(Evaluator, RanksReportOneProcesssBits) {
  auto backend = createCpuBackend();
  // Batches of 32: 8 of them, so 3 ranks take 3, 3 and 2.
  Trainer one(test::compileForBatch("cnn.onnx", test::fp32Options("adam"), 32),
              *backend);
  Evaluator single(one, *backend, 32);
  Dataset val = Dataset::fromNpz(kModels + "cnn_data.npz", single.dataInputs());
  const double want = single.evaluate(one, val, "cnn_data.npz", nullptr).loss;
  for (int ranks : {2, 3}) {
    test::ThreadWorld world(ranks);
    std::vector<double> got(static_cast<size_t>(ranks));
    world.run([&](int r) {
      auto rankBackend = createCpuBackend();
      CompileOptions o = test::fp32Options("adam");
      o.dataParallel = true;
      Trainer tr(test::compileForBatch("cnn.onnx", o, 32), *rankBackend,
                 &world.rank(r));
      Evaluator e(tr, *rankBackend, 32);
      Dataset d = Dataset::fromNpz(kModels + "cnn_data.npz", e.dataInputs());
      got[size_t(r)] = e.evaluate(tr, d, "cnn_data.npz", &world.rank(r)).loss;
    });
    for (int r = 0; r < ranks; ++r)
      EXPECT_EQ(got[size_t(r)], want) << ranks << " ranks, rank " << r;
  }
}

TEST(Evaluator, ASetSmallerThanABatchIsRefusedNamingTheFile) {
  auto backend = createCpuBackend();
  Trainer t(compileFp32("mlp_seed.onnx", "sgd"), *backend);
  Evaluator eval(t, *backend, 64);
  std::string few = firstSamples("mlp_seed_data.npz", 10, eval.dataInputs());
  Dataset d = Dataset::fromNpz(few, eval.dataInputs());
  try {
    eval.evaluate(t, d, few, nullptr);
    FAIL() << "a set of 10 samples evaluated in batches of 64";
  } catch (const Error &e) {
    EXPECT_EQ(std::string(e.what()),
              few + ": holds 10 samples, fewer than one batch of 64");
  }
  std::remove(few.c_str());
}

// --eval-ema: the forward on the parameters' moving average (and the
// model's own batch-norm statistics, AveragedModel's default), which is the
// model --export-inference --export-ema writes.
TEST(Evaluator, TheAverageIsTheExportedAverage) {
  CompileOptions o = test::fp32Options("adam");
  o.emaDecay = 0.8;
  auto backend = createCpuBackend();
  Trainer t(test::compileForBatch("cnn.onnx", o, 64), *backend);
  int64_t batch = 64;
  Dataset data =
      Dataset::fromNpz(kModels + "cnn_data.npz", t.dataInputs(batch));
  for (int64_t s = 0; s < 6; ++s)
    t.step(data.batch(s, 64, false, 0));
  Evaluator plain(t, *backend, 64), averaged(t, *backend, 64, true);
  Dataset val = Dataset::fromNpz(kModels + "cnn_data.npz", plain.dataInputs());
  double p = plain.evaluate(t, val, "cnn_data.npz", nullptr).loss;
  double a = averaged.evaluate(t, val, "cnn_data.npz", nullptr).loss;
  EXPECT_NE(p, a);

  EXPECT_EQ(a, exportedLoss(t, true, val, *backend));
}

TEST(Evaluator, AnAverageTheModelDoesNotKeepIsRefused) {
  auto backend = createCpuBackend();
  Trainer t(compileFp32("mlp_seed.onnx", "sgd"), *backend);
  try {
    Evaluator e(t, *backend, 64, true);
    FAIL() << "evaluated an average the model does not keep";
  } catch (const Error &e) {
    EXPECT_EQ(std::string(e.what()),
              "the model keeps no moving average of its parameters (compile "
              "it with mpc-opt --ema-decay=D)");
  }
}
