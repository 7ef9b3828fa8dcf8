// Turns a training forward graph into its inference form.
//
// The main graph of a compiled model is the forward the step was built from,
// so BatchNormalization still has training_mode=1 (batch statistics, running
// statistics as extra outputs). For inference (--infer, --export-inference)
// it must normalise with the running statistics, as PyTorch's model.eval()
// does. Dropout needs no change: without a training_mode input it is the
// identity.
#pragma once

#include "passes/ir/graph.h"

namespace mpc {

/// Rewrites every training-mode BatchNormalization whose running-statistic
/// outputs nobody reads into its inference form. Returns how many changed.
int64_t switchToInferenceMode(Graph &g);

} // namespace mpc
