// Type and shape inference for every op mpc supports (ONNX opsets 13-23 and
// the "mpc" domain of ir/mpc_ops.h).
//
// One table maps each supported op to its input/output counts and its
// inference rule. A rule reads the inputs' dtypes, shapes and constant data
// (initializers, Constant nodes) and sets the dtype and dims of every output;
// symbolic dims ("N") flow through. Type errors (mismatched dtypes, broadcast
// or inner-dim mismatches, bad attributes, wrong input counts) are mpc::Error
// naming the node. Where an input's type or shape is unknown the rule leaves
// the corresponding part of the output unknown rather than failing, so verify
// can run it on graphs that have not been through infer-shapes yet.
#pragma once

#include "ir/graph.h"

#include <cstdint>
#include <string>
#include <vector>

namespace mpc {

/// Sets dtype/hasShape/dims of every output of `n` from its inputs.
/// Inferred facts replace what the output held; where inference cannot tell
/// (unknown input shape, non-constant shape input), what the output already
/// held (e.g. from the model's value_info) is kept. Throws Error on type
/// errors and unsupported ops.
void inferNode(Node &n, int64_t opset);

/// inferNode on every node of `g`, in order.
void inferGraph(Graph &g, int64_t opset);

/// Forgets the types of every node output of `g` (e.g. the exporter's
/// value_info), so that inferGraph after a change of the inputs leaves no
/// stale dim where it cannot tell.
void forgetIntermediateShapes(Graph &g);

/// True when the op (domain "" for ONNX, "mpc" for mpc's own) is supported.
bool isSupportedOp(const std::string &domain, const std::string &op);

/// Every supported op, sorted; mpc ops as "mpc.X".
std::vector<std::string> supportedOpNames();

/// The data of a value known at compile time: an initializer's tensor, or the
/// value of the Constant node producing it; nullptr otherwise.
TensorPtr constantValue(const Value &v);

/// The tensor a Constant node produces (value, value_float(s), value_int(s)).
/// Throws Error when the node has no or more than one value attribute, or
/// one mpc does not support (strings, sparse tensors).
TensorPtr constantNodeTensor(const Node &n);

} // namespace mpc
