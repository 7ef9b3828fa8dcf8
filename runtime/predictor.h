// Predictions in process: what the model users deploy would output now.
//
// The deployable forward (passes/inference_model.h: the chosen outputs from
// only the inputs they need, in inference form, its batch and other export-
// symbolic dimensions left symbolic) built on the trainer's current
// parameters and run as mpc-run --infer runs a model (runtime/inference.h:
// inputs checked by name, dtype and shape, one line naming the input). Unlike
// the Evaluator it needs no labels and takes any batch size or sequence
// length the export allows (mpc.Trainer.predict, model.eval() under
// torch.no_grad() in PyTorch terms).
#pragma once

#include "passes/inference_model.h"
#include "runtime/inference.h"
#include "runtime/trainer.h"

#include <memory>
#include <string>
#include <vector>

namespace mpc {

class Predictor {
public:
  /// `outputs`: what to compute (any value of the forward; empty: every
  /// output but the loss). Nothing is built until the first run.
  Predictor(Backend &backend, std::vector<std::string> outputs);

  /// The outputs on `inputs` with the trainer's parameters as they are now.
  /// The deployable model is built again only when the trainer has stepped
  /// since the last call. Throws Error naming the output, input or node.
  std::vector<InferenceOutput> run(Trainer &trainer,
                                   std::vector<InferenceInput> inputs);

  /// The deployable model's inputs (after a run, else built now).
  std::vector<std::string> inputNames(Trainer &trainer);

private:
  void buildFor(Trainer &trainer);

  Backend &backend_;
  InferenceExportOptions options_;
  std::unique_ptr<Model> model_; ///< built at trainer step builtAt_
  int64_t builtAt_ = -1;
};

} // namespace mpc
