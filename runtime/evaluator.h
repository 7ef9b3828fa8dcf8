// Validation loss during training (mpc-run --eval-data): the model's
// forward in inference form (model.eval(): batch norms on their running
// statistics, dropout the identity) on the trainer's current parameters.
//
// The forward is the compiled model's main graph, in fp32 (the master
// weights as they are), with the loss as its only output. A validation set
// is read in full batches of the training batch size, in order (the last
// N mod B samples are left out, as a DataLoader with drop_last); the loss is
// the mean of the batches' losses, as an evaluation loop averaging batch
// means reports it. Data parallel, rank r takes batches r, r + N, ... and
// every rank gets every batch's loss, summed in batch order, so any number
// of ranks reports the bits of one process. Nothing of the trainer changes.
//
// With `allOutputs`, the forward keeps the main graph's other outputs too
// (logits beside the loss; not a batch norm's running statistics), and
// outputsOf runs it on one batch and returns them all (mpc.Trainer.evaluate).
#pragma once

#include "kernels/collective.h"
#include "runtime/backend.h"
#include "runtime/data/dataset.h"
#include "runtime/executor.h"
#include "runtime/trainer.h"

#include <memory>
#include <string>
#include <vector>

namespace mpc {

struct EvalResult {
  double loss = 0;     ///< mean of the batches' losses
  int64_t samples = 0; ///< samples evaluated (full batches only)
};

class Evaluator {
public:
  /// The forward of the trainer's model, for batches of `batch` samples;
  /// with `ema`, on the parameters' moving average (mpc-opt --ema-decay)
  /// in place of the parameters. Throws Error when the main graph has no
  /// scalar loss output, or `ema` and the model keeps no average.
  Evaluator(const Trainer &trainer, Backend &backend, int64_t batch,
            bool ema = false, bool allOutputs = false);

  /// The inputs a validation set must hold (the forward's graph inputs).
  std::vector<DataInputSpec> dataInputs() const;

  /// The forward it runs (the main graph in inference form).
  const Graph &forward() const { return *forward_; }

  /// Throws Error (naming `source`, the file) unless `data` holds at least
  /// one batch: mpc-run asks before the first step.
  void requireOneBatch(const Dataset &data, const std::string &source) const;

  /// The validation loss of `data` with the trainer's current parameters
  /// and statistics. `world`: the data-parallel world (nullptr: one rank);
  /// every rank must call it. Throws Error (naming `source`, the file) when
  /// the set holds less than one batch.
  EvalResult evaluate(const Trainer &trainer, const Dataset &data,
                      const std::string &source, Collective *world);

  /// The forward's outputs (name, value), in its order, on one batch of
  /// `batch` samples with the trainer's current parameters: bindState, then
  /// outputsOfBound. The batch must match dataInputs() (Executor::setInput
  /// checks names and dtypes).
  std::vector<std::pair<std::string, Tensor>>
  outputsOf(const Trainer &trainer, const Trainer::Batch &batch);

  /// Gives the forward the trainer's current state (or its average). With
  /// sharded masters (mpc-opt --shard-optimizer) this gathers them, so with
  /// several ranks every rank calls it at the same point: once per
  /// evaluation, before the ranks take the batches in turn (a rank may have
  /// no batch in the last round).
  void bindState(const Trainer &trainer);

  /// outputsOf on the state the last bindState gave.
  std::vector<std::pair<std::string, Tensor>>
  outputsOfBound(const Trainer::Batch &batch);

private:
  std::unique_ptr<Graph> forward_;
  std::unique_ptr<Executor> exec_;
  std::string lossName_;
  /// The forward's initializers that are the trainer's state, and the
  /// state each is read from (itself, or its moving average).
  std::vector<std::pair<std::string, std::string>> stateNames_;
  int64_t batch_ = 0;
};

} // namespace mpc
