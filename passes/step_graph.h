// The training step as mpc-run executes it.
//
// mpc-run runs a copy of training_info[0].algorithm that also outputs the
// values it reads after a step: the loss, the overflow flag, the gradient
// norm (--max-grad-norm) and every new state value of the update binding. Those
// outputs live to the end of the step, so the memory plan of mpc-opt
// --report=memory is made on exactly this graph too.
#pragma once

#include "ir/graph.h"

#include <memory>
#include <vector>

namespace mpc {

/// The step graph with the loss, found_inf, grad_norm and update-binding
/// values as outputs. Throws Error when the model has no step, or its metadata
/// or update binding names values the step does not have.
std::unique_ptr<Graph> runnableStep(const Model &model);

/// The values runnableStep adds as outputs of `step` (the algorithm or a copy
/// of it), each once, in the order it adds them; throws the same errors. Lets
/// a caller treat them as outputs without copying the step (plan-memory).
std::vector<Value *> runnableStepExtraOutputs(const Model &model,
                                              const Graph &step);

/// The loss value's name (mpc.loss, else the step's first output).
std::string stepLossName(const Model &model, const Graph &step);

} // namespace mpc
