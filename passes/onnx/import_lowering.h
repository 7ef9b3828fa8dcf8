// The lower-onnx pass: the ONNX ops mpc has no kernel for, rewritten into
// ops it does have: InstanceNormalization (instance_norm_lowering.h), Resize
// (resize_lowering.h), DepthToSpace and SpaceToDepth
// (depth_space_lowering.h), Einsum (einsum_lowering.h), OneHot
// (onehot_lowering.h), Pad (pad_lowering.h), LSTM/GRU/RNN (rnn_lowering.h),
// SplitToSequence with its SequenceAt readers (sequence_split_lowering.h),
// RMSNormalization (rms_norm_lowering.h), Tile (tile_lowering.h), Attention
// (attention_lowering.h), the activations of activation_lowering.h and the
// reductions of reduce_lowering.h. Every other pass, the runtime and the
// written model see only the lowered ops.
//
// Where it runs. The importer lowers the main graph itself
// (ImportOptions::lower, on for every caller: mpc-run, the tests, the fuzz
// targets read lowered graphs). mpc-opt imports without it and runs
// lower-onnx as the first pass of its pipeline, so --print-after=lower-onnx,
// --stats (lower-onnx.nodes-lowered and one row per op), --time-passes and
// the verifier see it, and --passes= (no pass) prints the model as imported.
// It must be first: every other pass, verify included, knows only the
// lowered ops, so parsePipeline puts it in front of a list that leaves it out
// and refuses one that names it later. Two kinds of model are lowered at
// import even then, because the rest of the import reads the lowered main
// graph: one whose main graph has ONNX Gradient nodes (their expansion
// differentiates through the lowered ops, gradient_op.h), and one with
// training_info (its algorithm is imported against the main graph and its
// initialization writes into it, training_info.h). The pass then finds
// nothing left to do.
//
// A lowering's constants take its input's element type, so the graph is
// typed first: nodes are inferred in order, and the nodes a lowering
// inserts are inferred before the next node. A graph with nothing to lower
// is not touched (no inference).
#pragma once

#include "passes/pass.h"

#include <map>
#include <string>
#include <vector>

namespace mpc {

/// The pass's name in the registry and in --passes.
inline constexpr char kLowerOnnx[] = "lower-onnx";

/// Ops the importer lowers: supported, though no pass sees them.
bool isLoweredAtImport(const std::string &domain, const std::string &op);

/// Those ops' names, sorted (the unsupported-op error lists them too).
std::vector<std::string> opsLoweredAtImport();

/// Lowers every such node of g, a graph of a model that imports `opset`;
/// returns how many, and adds them by op type to `perOp` when given.
int lowerAtImport(Graph &g, int64_t opset,
                  std::map<std::string, int64_t> *perOp = nullptr);

/// The lower-onnx pass: lowerAtImport on the main graph. Statistics
/// nodes-lowered and one counter per op type; changedNothing when there was
/// nothing to lower (a model the importer lowered already).
void runLowerOnnx(Model &model, PassContext &ctx);

} // namespace mpc
