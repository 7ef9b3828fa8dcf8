// Model-local functions for mpc's custom ops, written in standard ONNX ops.
//
// SPEC: every op of domain "mpc" in a written model is also a function of the
// model, so any ONNX runtime (and a reader) knows what it computes. Every
// fixed-arity mpc op of passes/ir/mpc_ops.h has a body here (the layer
// gradients in mpc_functions_layers.cpp); the variadic ones
// (UnscaleGradients, ClipGradNorm, ExtremumGrad) cannot be FunctionProtos,
// whose formal inputs and outputs are a fixed list, and are written without
// one.
//
// A FunctionProto of ONNX 1.12 has no default attribute values and no way to
// test whether an optional input was given, so a written mpc node must carry
// everything its body reads. appendMpcFunctions completes the nodes of the
// written model accordingly (see there); the completed node computes exactly
// what the original node computes, on mpc's own kernels too.
//
// The same bodies also lower mpc ops to standard ops inside the IR
// (inlineMpcFunction, inlineMpcFunctions), e.g. to hand a step to a runtime
// that has no mpc kernels.
#pragma once

#include "passes/ir/graph.h"

#include <memory>
#include <string>
#include <vector>

namespace onnx {
class FunctionProto;
class ModelProto;
} // namespace onnx

namespace mpc {

/// The mpc ops that have function bodies, sorted.
std::vector<std::string> mpcOpsWithFunctions();

/// The body of `op` in ONNX text syntax, or nullptr when it has none.
/// Bodies of the layer gradients are in mpc_functions_layers.cpp.
const char *mpcFunctionText(const std::string &op);

/// Parses the body of `op` into `fn`. Throws Error when the op has no body or
/// its text does not parse (a bug in the table).
void parseMpcFunction(const std::string &op, onnx::FunctionProto &fn);

/// Adds a FunctionProto (domain "mpc") for each op in `ops` that has a body,
/// imports the mpc domain, and completes every mpc node of the proto's graphs
/// (main graph, training algorithm and initialization) so it matches its
/// function:
///  - an attribute the node leaves at its default is written with the
///    default the kernels use (lr = 1e-3, axis = -1, reduction = "mean", ...);
///    ignore_index has no default and stays absent (the body then ignores
///    nothing, as the kernel does);
///  - an omitted found_inf becomes a Constant `false` (never skip);
///  - SGD without momentum buffer (momentum = 0) gets its parameter wired in
///    as the buffer, which momentum 0 never reads;
///  - ReduceGrad's `axes` attribute becomes the axes input (a Constant; an
///    empty one when there are neither), as ReduceSum-13 takes it;
///  - the loss gradients without `weights` get all-ones weights [C] (Shape +
///    ConstantOfShape);
///  - ClipGrad's omitted bounds become -inf / +inf (or the opset-6
///    attributes), DropoutGrad's ratio its attribute or 0.5 and its
///    training_mode false, SliceGrad's axes / steps 0..n-1 / ones (n the
///    static length of starts);
///  - the window ops (ConvGradInput, ConvGradWeight, MaxPoolGrad,
///    AveragePoolGrad) get every window attribute explicit, auto_pad
///    resolved into pads (SAME_* from X's static sizes); GeluGrad gets
///    approximate_tanh (1 for approximate = "tanh");
///  - an omitted output (SGD's buffer without momentum) gets a name nothing
///    reads.
/// (ONNX 1.12 type-infers a function node only when it has every formal
/// input and output, so the nodes are written with exactly their function's
/// signature.) A node no body can express (BatchNormalizationGrad with
/// mean/var, SAME_* pads of unknown sizes) makes a step model (a main graph
/// and no training_info: exportStepModel's) throw Error naming the node and
/// why; a training model then keeps that op without a function, as mpc's
/// kernels run it.
/// Functions import the model's default-domain opset (the bodies use opset
/// 15-17 ops whose semantics have not changed since); a model importing an
/// older default opset gets no functions, as ONNX's checker would reject
/// bodies written in newer ops. The scatter bodies (GatherGrad,
/// GatherElementsGrad, MaxPoolGrad) need opset 16: an opset-15 model is
/// raised to 16 when no node's meaning changes (no RoiAlign), else those
/// ops get no function. The IR version is raised to 8 (local functions)
/// when needed.
void appendMpcFunctions(const std::vector<std::string> &ops, const Model &model,
                        onnx::ModelProto &proto);

/// A graph computing what `node` computes, from its function body: the
/// node's inputs (names, types) are its inputs, its outputs (names) are its
/// outputs, the body's own values get fresh names, attribute references take
/// the node's attributes (or the defaults above), and omitted inputs are
/// completed as appendMpcFunctions completes them. Throws Error if the op has
/// no body.
std::unique_ptr<Graph> inlineMpcFunction(const Node &node);

/// Replaces every mpc node of `graph` that has a body by the body's nodes
/// (values keep their names, so outputs and bindings still match). Returns
/// how many nodes were replaced.
size_t inlineMpcFunctions(Graph &graph);

} // namespace mpc
