// mpc.Trainer's C++ side: a TrainingSession on a backend, fed the caller's
// batches (no data set of its own), the forward that Trainer.evaluate runs
// and the deployable one Trainer.predict runs. No Python types here: the
// binding converts arrays to tensors and releases the GIL around step(),
// evaluate() and predict().
#pragma once

#include "runtime/predictor.h"
#include "runtime/training_session.h"

#include <map>

#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace mpc {

/// What mpc.Trainer's keyword arguments set.
struct PyTrainerOptions {
  std::string device = "cpu";
  int64_t batch = 0; ///< 0: the model's own batch size
  bool seedGiven = false;
  uint64_t seed = 0;
  std::string log; ///< the CSV of the steps, as mpc-run --log
  bool externalData = false;
  bool quiet = true; ///< no progress lines (notes and warnings still come)
};

class PyTrainer {
public:
  /// `model`: the compiled step (nullptr: read from `path`); `resume`: a
  /// checkpoint to go on from ("" : none). Throws Error on bad input.
  PyTrainer(std::unique_ptr<Model> model, const std::string &path,
            const std::string &resume, const PyTrainerOptions &options);
  ~PyTrainer();

  /// The step's data inputs and the samples each batch holds.
  const std::vector<DataInputSpec> &inputs() const { return specs_; }
  int64_t batch() const { return batch_; }
  int64_t microBatches() { return session_->trainer().microBatches(); }

  /// One optimizer step on already checked micro-batches; returns the
  /// loss. Throws Error when the run must stop (the skipped-step limit).
  double step(std::vector<Trainer::Batch> microBatches);
  bool lastSkipped() const { return lastSkipped_; }
  int64_t skippedSteps() const { return session_->summary().skipped; }

  /// The forward's outputs (the loss, logits, ...) on one batch of
  /// `samples` (checked by the caller against evalInputs()): any number the
  /// forward's export allows. Throws Error when its export fixes another.
  std::vector<std::pair<std::string, Tensor>>
  evaluate(const Trainer::Batch &batch, int64_t samples);
  /// The inputs the forward reads.
  std::vector<DataInputSpec> evalInputs();

  /// What the deployable model computes on `inputs` with the parameters as
  /// they are (runtime/predictor.h): `outputs` (empty: every output but the
  /// loss) from only the inputs they need, any batch size.
  std::vector<InferenceOutput> predict(const std::vector<std::string> &outputs,
                                       std::vector<InferenceInput> inputs);

  Trainer &trainer() { return session_->trainer(); }
  TrainingSession &session() { return *session_; }
  /// One call at a time: steps, evaluations and saves share the state.
  std::mutex &lock() { return mutex_; }

private:
  /// The forward for batches of `samples`, made on the first evaluation of
  /// that size.
  Evaluator &evaluator(int64_t samples);

  std::unique_ptr<Backend> backend_;
  std::unique_ptr<TrainingSession> session_;
  std::vector<DataInputSpec> specs_;
  int64_t batch_ = 0;
  bool lastSkipped_ = false;
  /// By batch size: a held-out set's last, smaller batch gets its own.
  std::map<int64_t, std::unique_ptr<Evaluator>> evaluators_;
  /// By the outputs asked for.
  std::map<std::vector<std::string>, std::unique_ptr<Predictor>> predictors_;
  std::mutex mutex_;
};

} // namespace mpc
