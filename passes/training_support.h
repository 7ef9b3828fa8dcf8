// Helpers shared by the passes that rewrite the training step after autodiff.
//
// loss-scale, master-weights and optimizer all read the parameters and
// gradients autodiff recorded (mpc.params, mpc.grads), create new state, cast
// gradients and bind new state values; doing that in one place keeps their
// naming, their ordering checks and their error messages the same.
#pragma once

#include "passes/pass.h"

#include <string>
#include <string_view>
#include <vector>

namespace mpc {

/// The training algorithm with its parameters and gradients (same order).
struct TrainingValues {
  Graph *algorithm = nullptr;
  std::vector<Value *> params;
  std::vector<Value *> grads;
};

/// Resolves mpc.params / mpc.grads in the training algorithm. Throws
/// "<pass>: no gradients (run autodiff first)" when autodiff has not run, and
/// a one-line error naming the value when the metadata is inconsistent.
TrainingValues requireGradients(Model &model, const std::string &pass);

/// Throws "<pass>: <reason> (<key> is set)" when metadata `key` is present:
/// how each pass refuses to run twice or after a pass that must follow it.
void refuseIfMeta(const Model &model, const std::string &pass,
                  std::string_view key, const std::string &reason);

/// A new state initializer of the training algorithm, named `hint` unless
/// that name is taken in the algorithm or the main graph (state is written
/// into the main graph on export, so the name must be free in both).
Value *addState(Model &model, const std::string &hint, Tensor data);

/// The first node (in graph order) that reads v, or nullptr.
Node *firstUser(const Graph &g, const Value *v);

/// A Cast of v to `to`: an existing one when v already has it, else a new
/// Cast inserted before `before` (nullptr: at the end). `inserted` is
/// incremented when a Cast is created.
Value *castOrReuse(Graph &g, Value *v, DType to, Node *before,
                   int64_t &inserted);

/// A node with fresh output names derived from `outputHints` and a node name
/// derived from `nodeHint`. An omitted input is nullptr.
Node *createNamedNode(Graph &g, const std::string &opType,
                      const std::string &domain,
                      const std::vector<Value *> &inputs,
                      const std::vector<std::string> &outputHints,
                      const std::string &nodeHint, Node *before = nullptr);

/// Makes newGrads the gradients: replaces each old gradient among the
/// algorithm's outputs and rewrites mpc.grads.
void replaceGradients(Model &model, TrainingValues &tv,
                      const std::vector<Value *> &newGrads);

/// Adds newValue as an algorithm output and binds state := newValue.
void bindState(Model &model, const Value *state, Value *newValue);

/// Imports domain "mpc" (version 1) unless the model already does.
void ensureMpcOpset(Model &model);

/// A number as a user wrote it: "0.001", "1e-08", "2000" (printf %g).
std::string formatNumber(double v);

} // namespace mpc
