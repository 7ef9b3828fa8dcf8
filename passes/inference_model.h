// The model users deploy, built from a compiled model's forward.
//
// A compiled model's main graph is the forward the step was built from: it
// computes the loss (so it reads the labels), keeps batch norms in training
// mode and dropout on. The deployable model computes the chosen outputs
// (default: every output but the loss, e.g. the logits of a model returning
// (loss, logits)) from only the inputs they need, in inference form
// (passes/inference_mode.h), with no training state, its batch dimension
// symbolic, in fp32 or, for deployment, fp16/bf16 (the autocast policy:
// products in half precision, fp32 islands; inputs and outputs keep their
// types).
//
// mpc-opt keeps the forward as the export wrote it (keepShapeGenericForward),
// so that --input-shape/--batch, which fix the training step's shapes, do not
// fix the deployable model's.
#pragma once

#include "ir/graph.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace mpc {

/// What the deployable model computes (mpc-run --export-inference).
struct InferenceExportOptions {
  /// The outputs the deployed model computes, by name (mpc-run --outputs=):
  /// any value of the forward; empty: every graph output but the loss.
  std::vector<std::string> outputs;
  /// The type of the exported model's floating weights and computation
  /// (mpc-run --precision=fp32|fp16|bf16 with --export-inference).
  DType precision = DType::F32;
  /// The parameters' moving average (mpc-opt --ema-decay) in place of the
  /// parameters (mpc-run --export-ema).
  bool ema = false;
};

/// Builds the deployable model from `compiled`'s main graph. `weights`
/// replaces initializers by name (the trainer's current state, or the
/// parameters' moving average). Choices the user did not spell out (which
/// outputs, a batch dimension that stays static) are appended to `notes`.
/// Throws Error for an output that is not a value of the forward.
std::unique_ptr<Model>
buildInferenceModel(const Model &compiled,
                    const InferenceExportOptions &options,
                    const std::map<std::string, TensorPtr> &weights,
                    std::vector<std::string> &notes);

/// After a compile that fixed input shapes (--input-shape, --batch), makes
/// `compiled`'s main graph the forward as imported (`imported`, its dims
/// as the export declared them), reading the compiled state. Nothing
/// changes when a state tensor's type differs from the forward's (the
/// forward then stays the specialised one).
void keepShapeGenericForward(Model &compiled, std::unique_ptr<Graph> imported);

} // namespace mpc
