// noteEvalModeExport: the notes a training compile gives a forward that was
// exported in eval mode by mistake (model.eval() before torch.onnx.export,
// or the TorchScript exporter's default training=TrainingMode.EVAL). Such a
// file trains without complaint, but not as the module does: its batch norms
// normalise with their running statistics and never update them, its dropout
// is gone, and with constant folding its batch norms are folded into the
// convolutions before them, under names the module does not have.
#pragma once

#include "ir/graph.h"
#include "passes/pass.h"

#include <vector>

namespace mpc {

/// Adds to ctx.notes one line for the batch norms of `g` in inference form
/// whose mean and var are constants of the file, and one for the trained
/// `params` named as the TorchScript exporter names the constants it folds
/// ("onnx::Conv_18"); each says how to export in training mode. Nothing is
/// refused: a batch norm frozen on purpose looks the same.
void noteEvalModeExport(const Graph &g, const std::vector<Value *> &params,
                        PassContext &ctx);

} // namespace mpc
