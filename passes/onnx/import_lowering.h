// The ONNX ops mpc has no kernel for but lowers at import to ops it does
// have: InstanceNormalization (instance_norm_lowering.h), Resize
// (resize_lowering.h), DepthToSpace and SpaceToDepth
// (depth_space_lowering.h), Einsum (einsum_lowering.h), OneHot
// (onehot_lowering.h), Pad (pad_lowering.h), LSTM/GRU/RNN (rnn_lowering.h),
// SplitToSequence with its SequenceAt readers (sequence_split_lowering.h),
// RMSNormalization (rms_norm_lowering.h), Tile (tile_lowering.h), Attention
// (attention_lowering.h), the
// activations of activation_lowering.h and the reductions of reduce_lowering.h.
// The importer calls lowerAtImport() on the main graph; every later pass, the
// runtime and the written model see only the lowered ops.
//
// A lowering's constants take its input's element type, so the graph is
// typed first: nodes are inferred in order, and the nodes a lowering
// inserts are inferred before the next node. A graph with nothing to lower
// is not touched (no inference).
#pragma once

#include "ir/graph.h"

#include <string>
#include <vector>

namespace mpc {

/// Ops the importer lowers: supported, though no pass sees them.
bool isLoweredAtImport(const std::string &domain, const std::string &op);

/// Those ops' names, sorted (the unsupported-op error lists them too).
std::vector<std::string> opsLoweredAtImport();

/// Lowers every such node of g, a graph of a model that imports `opset`;
/// returns how many.
int lowerAtImport(Graph &g, int64_t opset);

} // namespace mpc
