// What torch.onnx.export's dynamo exporter (torch >= 2.5, dynamo=True, the
// default from torch 2.9) records about the module it traced, and what the
// importer does with it.
//
// The exporter writes, in the metadata_props that ONNX IR 10 added to
// ValueInfoProto and NodeProto (ONNX 1.12's proto keeps them as unknown
// fields, which protobuf preserves):
//   - for every initializer, its role in torch.export's graph signature
//     (pkg.torch.export.graph_signature.InputSpec.kind: PARAMETER, BUFFER,
//     CONSTANT_TENSOR);
//   - for every node, the aten op it was translated from
//     (pkg.torch.onnx.class_hierarchy).
//
// An ONNX graph alone cannot tell a parameter from a buffer or a constant
// (SPEC: every floating-point initializer trains), and the exporter's
// translation writes every batch norm in inference form, dropping the
// training-mode trace's running-statistics updates. With the signature:
//   - PARAMETERs are the model's state and train (--trainable/--frozen
//     still choose among them);
//   - every other initializer is a constant (buffers such as BART's
//     final_logits_bias or rotary inv_freq, lifted constants), except the
//     running statistics of a batch norm, which stay state; autodiff notes
//     the floating-point ones it leaves frozen;
//   - a BatchNormalization traced from a training-mode module
//     (aten._native_batch_norm_legit_functional) is put back in training
//     mode: batch statistics, and its running mean and var outputs become
//     state updates as in a TorchScript export.
// The exporter records nothing about requires_grad: a parameter with
// requires_grad=False (Whisper's sinusoidal encoder positions) is a
// PARAMETER like any other, byte for byte the same export (torch 2.15), so
// it trains unless --frozen names it; a module that registers such a table
// as a buffer (register_buffer) has it frozen by the signature.
// An initializer with no role at all is one the exporter's ONNX optimizer
// made (optimize=True, its default): that optimizer folds batch norms into
// convolutions and merges parameters whose values are equal, which changes
// what trains, so such a model is refused with a line saying how to export
// it instead (optimize=False).
#pragma once

#include "ir/graph.h"

#include <onnx/onnx_pb.h>

namespace mpc {

/// Applies the signature that `gp` (the graph g was imported from, its
/// initializers already state) carries, if any, to g's initializers and
/// batch norms. Returns false, changing nothing, when gp has none.
/// `persistentBuffers` (optional) receives the initializers the signature
/// calls persistent buffers: the module's state_dict holds them besides
/// its parameters (mpc-run --export-safetensors writes them back).
/// `frozen` (optional) receives the floating-point initializers it keeps
/// from training (buffers and constants; not a training-mode batch norm's
/// running statistics), for autodiff's note.
bool applyTorchExportSignature(
    const onnx::GraphProto &gp, Graph &g,
    std::vector<std::string> *persistentBuffers = nullptr,
    std::vector<std::string> *frozen = nullptr);

} // namespace mpc
