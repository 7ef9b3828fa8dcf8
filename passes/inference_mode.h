// Turns a training forward graph into its inference form.
//
// The main graph of a compiled model is the forward the step was built from,
// so BatchNormalization still has training_mode=1 (batch statistics, running
// statistics as extra outputs). For inference (--infer, --export-inference,
// --eval-data) it must normalise with the running statistics, as PyTorch's
// model.eval() does. Dropout, which the exporter's training mode gives a
// training_mode input of true, loses that input: without it Dropout is the
// identity.
#pragma once

#include "ir/graph.h"

namespace mpc {

/// Rewrites every training-mode BatchNormalization whose running-statistic
/// outputs nobody reads into its inference form, and drops every Dropout's
/// training_mode input. Returns how many changed.
int64_t switchToInferenceMode(Graph &g);

} // namespace mpc
