// mpc.Trainer's C++ side: a TrainingSession on a backend, fed the caller's
// batches (no data set of its own), and the forward that Trainer.evaluate
// runs. No Python types here: the binding converts arrays to tensors and
// releases the GIL around step() and evaluate().
#pragma once

#include "runtime/training_session.h"

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

  /// The forward's outputs on one batch (checked by the caller against
  /// evalInputs()), of batch() samples as mpc-run's evaluation takes them.
  std::vector<std::pair<std::string, Tensor>>
  evaluate(const Trainer::Batch &batch);
  /// The inputs the forward reads.
  std::vector<DataInputSpec> evalInputs();

  Trainer &trainer() { return session_->trainer(); }
  TrainingSession &session() { return *session_; }
  /// One call at a time: steps, evaluations and saves share the state.
  std::mutex &lock() { return mutex_; }

private:
  /// The forward, made on the first evaluation.
  Evaluator &evaluator();

  std::unique_ptr<Backend> backend_;
  std::unique_ptr<TrainingSession> session_;
  std::vector<DataInputSpec> specs_;
  int64_t batch_ = 0;
  bool lastSkipped_ = false;
  std::unique_ptr<Evaluator> evaluator_;
  std::mutex mutex_;
};

} // namespace mpc
