// What torch's dynamo exporter translates but loses, found in what it
// records of the trace.
//
// The exporter writes, in each node's metadata_props, the FX node it
// translated (pkg.torch.onnx.fx_node, e.g. "... call_function[target=
// torch.ops.aten.cross_entropy_loss.default](args = (%linear, %y, None, 1,
// -100, 0.1), kwargs = {})"). Some aten arguments have no place in the ONNX
// op it writes, and the exporter drops them without a word:
//
//   - CrossEntropyLoss(label_smoothing=e) / F.cross_entropy(...,
//     label_smoothing=e) becomes SoftmaxCrossEntropyLoss, which has no
//     smoothing: the file computes the unsmoothed loss (torch 2.15). The
//     TorchScript exporter refuses the same model ("ONNX does not support
//     label_smoothing"); a model that spells the smoothing out in ops
//     (timm's LabelSmoothingCrossEntropy) exports whole.
//
// Training such a file would silently train another loss than the model's,
// so the importer refuses it, naming the node, the value and the rewrite
// that exports. A file without the metadata (another exporter, or one
// stripped of it) cannot be checked: docs/models.md says so.
#pragma once

#include "ir/graph.h"

#include <onnx/onnx_pb.h>

namespace mpc {

/// Throws one line naming the node of g (imported from gp, before any
/// lowering) whose traced aten call had an argument the exporter dropped.
void checkDroppedTorchArguments(const onnx::GraphProto &gp, const Graph &g);

} // namespace mpc
