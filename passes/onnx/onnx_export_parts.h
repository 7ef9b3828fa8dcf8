// The parts of the ONNX export that exportModel (onnx_export.cpp) and the
// model file writer (model_file_writer.cpp) share, so that both write the
// same messages for the same IR.
#pragma once

#include "ir/graph.h"

#include <string>
#include <vector>

namespace onnx {
class ModelProto;
class NodeProto;
class ValueInfoProto;
} // namespace onnx

namespace mpc {

/// A value's name and type (elem type, and shape when known). `vi` may hold
/// another value's: it is overwritten in place, without Clear(), which
/// frees the type's messages.
void exportValueInfo(const Value &v, onnx::ValueInfoProto &vi);

/// A node: op, name, domain, inputs (trailing omitted ones dropped, inner
/// ones ""), outputs, attributes.
void exportNode(const Node &n, onnx::NodeProto &np);

/// Writes ir_version, producer, opsets and metadata. The step model has no
/// training_info and its state are inputs, so the metadata naming training
/// state (mpc.params, mpc.loss_scale, ...) would be wrong there; it keeps only
/// the descriptive keys.
void exportHeader(const Model &model, onnx::ModelProto &proto,
                  bool forStepModel = false);

/// Ops of domain `mpc` used anywhere in the model, in order of first use.
std::vector<std::string> mpcOpsUsed(const Model &model);

} // namespace mpc
