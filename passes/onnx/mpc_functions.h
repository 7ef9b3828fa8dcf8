// Model-local functions for mpc's custom ops, written in standard ONNX ops.
//
// SPEC: every op of domain "mpc" in a written model is also a function of the
// model, so any ONNX runtime (and a reader) knows what it computes. Every
// fixed-arity mpc op of ir/mpc_ops.h has a body here (the layer
// gradients in mpc_functions_layers.cpp); the variadic ones
// (UnscaleGradients, ClipGradNorm, ExtremumGrad) cannot be FunctionProtos,
// whose formal inputs and outputs are a fixed list: the training model
// carries them without one, and the --emit=step model writes them inline in
// standard ops (expand_variadic.h).
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

#include "ir/graph.h"

#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <unordered_set>
#include <vector>

namespace onnx {
class AttributeProto;
class FunctionProto;
class ModelProto;
class NodeProto;
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

/// A graph as the written model holds it, as far as completing its mpc
/// nodes reads it. appendMpcFunctions reads a GraphProto; the model file
/// writer (writeModelFile), which writes each node as it goes and never
/// holds the whole GraphProto, answers the same questions from the IR.
class WrittenGraph {
public:
  virtual ~WrittenGraph() = default;
  /// Element type of value `name` as the first of the graph's value_info,
  /// inputs, outputs (with a tensor type) and initializers gives it; 0 when
  /// none does.
  virtual int elemType(const std::string &name) const = 0;
  /// Dims (-1 where unknown) of value `name` from the first of value_info,
  /// inputs and outputs that gives its shape; empty when none does.
  virtual std::vector<int64_t> dims(const std::string &name) const = 0;
  /// Whether a value (input, output, initializer, node output) or a node
  /// of the graph has this name.
  virtual bool uses(const std::string &name) const = 0;
  /// A node of domain mpc as the first look over the graphs reads it: its
  /// op and which inputs it gives, and its whole NodeProto (as written
  /// before completion) only when asked, as most ops need no more.
  struct MpcNode {
    const std::string &opType;
    size_t numInputs;
    std::function<bool(size_t)> given;
    std::function<const onnx::NodeProto &()> proto;
  };
  /// Calls `f` with each node of domain mpc, in order.
  virtual void
  forEachMpcNode(const std::function<void(const MpcNode &)> &f) = 0;
  /// Whether a default-domain node (or one nested in it) has op type `op`.
  virtual bool usesDefaultOp(const std::string &op) const = 0;

  /// A name the graph does not use yet (the hint, else hint_1, hint_2, ...).
  std::string fresh(const std::string &hint);
  /// The graph's Constant `false` for omitted found_inf inputs, once made.
  std::string falseFlag;

private:
  std::unordered_set<std::string> handedOut_;
};

/// appendMpcFunctions in two steps, for a writer that makes each node's
/// NodeProto only as it writes it: the constructor adds the functions to
/// `proto` (imports and versions as appendMpcFunctions; `proto` holds no
/// graphs, `graphs` are the graphs it will hold, `stepModel` says that it
/// has no training_info), and complete() completes one node. The attribute
/// completion of a node depends only on its op and attributes unless its
/// body's completion reads shapes, so it is made once per such signature.
class MpcNodeCompleter {
public:
  MpcNodeCompleter(const std::vector<std::string> &ops, const Model &model,
                   onnx::ModelProto &proto,
                   const std::vector<WrittenGraph *> &graphs, bool stepModel);
  ~MpcNodeCompleter();
  /// Whether nodes of this op are completed (its function is written).
  bool completes(const onnx::NodeProto &n) const;
  /// completes() for a node of this domain and op.
  bool completes(const std::string &domain, const std::string &opType) const;
  /// For a writer that writes nodes itself: whether complete() would change
  /// a node of `g` of op `opType` (one completes() accepts) only in ways a
  /// writer can repeat. That is: its attributes become what they become on
  /// any node of that op with the same attributes (the op's completion
  /// reads nothing else), and its omitted inputs are filled with names
  /// that exist already (the graph's `false` once made, another input);
  /// complete() makes no node and no name for it, and throws nothing.
  /// `inputs` are the node's inputs as written before completion (trailing
  /// omitted ones dropped, "" for inner ones); on true they are the
  /// completed node's. `outputsNamed` says that the node has all of its
  /// function's outputs, named, out of `numOutputs`.
  bool completesInPlace(const std::string &opType, const WrittenGraph &g,
                        std::vector<const std::string *> &inputs,
                        size_t numOutputs, bool outputsNamed) const;
  /// Completes `n`, a node of `g` that completes() accepts; the nodes that
  /// make its missing inputs go to `emit`, to be written just before it.
  void complete(onnx::NodeProto &n, WrittenGraph &g,
                const std::function<void(const onnx::NodeProto &)> &emit);

  struct Memo;

private:
  std::set<std::string> written_;
  std::unique_ptr<Memo> memo_;
};

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
