// A model's own training algorithm (ONNX TrainingInfoProto) on mpc's pipeline.
//
// An ONNX training model says how to train itself: training_info.algorithm
// computes a loss, differentiates it with a Gradient node and feeds the
// gradients to an optimizer (Adam, Momentum, Adagrad of
// ai.onnx.preview.training, or plain arithmetic such as W - lr * dW), and
// update_binding writes the new values back onto the state. mpc keeps the
// user's optimizer exactly and builds everything before it itself:
//
//   import      lowerTrainingAlgorithm: the Gradient node goes; what read its
//               outputs reads one placeholder per x (a state initializer
//               named after the output) until the gradients exist. Metadata
//               mpc.user_loss (y), mpc.user_params (xs), mpc.user_grads (the
//               placeholders) and mpc.user_state (the user's bound state).
//               The initialization graph runs once here (applyInitialization).
//   autodiff    differentiates mpc.user_loss w.r.t. mpc.user_params.
//   autocast, loss-scale, master-weights   as for any model.
//   user-optimizer (instead of optimizer)  every placeholder is replaced by
//               the final gradient (fp32, unscaled), and each new value the
//               user binds onto state, except what the forward computes
//               (batch-norm statistics), becomes Where(found_inf, old, new):
//               an overflowing step leaves parameters, moments and the
//               update count as they were, as mpc's own optimizer does.
#pragma once

#include "passes/registry.h"

#include <string>
#include <utility>
#include <vector>

namespace mpc {

/// Called by the importer on a model whose training_info algorithm has a
/// Gradient node: replaces it by placeholders and records the metadata
/// above. A model without one is left as it is. Errors name the node.
void lowerTrainingAlgorithm(Model &model);

/// Runs the training_info initialization graph `init` (no inputs, supported
/// ops only) on the CPU reference backend and stores each output the binding
/// names into the main graph's initializer of that name (same dtype and
/// shape), so training starts from the state the model asks for.
void applyInitialization(
    Model &model, Graph &init,
    const std::vector<std::pair<std::string, std::string>> &binding);

/// True when the model trains with its own optimizer (mpc.user_grads set):
/// the default pipeline runs user-optimizer instead of optimizer.
bool hasUserOptimizer(const Model &model);

/// The default pipeline for this model: without the optimizer pass when the
/// model has its own (the user-optimizer pass sets mpc.optimizer, so an
/// optimizer pass after it refuses to run).
std::vector<PipelineEntry> defaultPipelineFor(const Model &model);

/// The user-optimizer pass (see above). Does nothing on a model without its
/// own training algorithm.
void runUserOptimizer(Model &model, PassContext &ctx);

} // namespace mpc
