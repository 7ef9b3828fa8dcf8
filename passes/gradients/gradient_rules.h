// Gradient rules: how autodiff differentiates one forward node.
//
// A rule reads the gradients flowing into a forward node's outputs and emits
// the backward nodes that compute the gradients of the inputs autodiff asks
// for (and only those: no dead gradient code). Rules live one file per op
// category in passes/gradients/ (elementwise.cpp, activation.cpp, ...: the
// category names of passes/shape_rules/) and are listed in one table
// (passes/gradients/registry.cpp); passes/autodiff.cpp drives them. Every
// value a rule creates is typed here (dtype and dims), because the backward
// graph must be as well typed as the forward graph infer-shapes produced.
#pragma once

#include "ir/graph.h"

#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <vector>

namespace mpc {

/// What a rule sees of one forward node and what it may emit. The backward
/// nodes are appended at the end of the graph, named "<fwdnode>_grad".
/// The emit helpers take attributes and name hints by value: a rule's
/// temporaries move into the new node and value instead of being copied.
class GradientContext {
public:
  using Attrs = std::vector<std::pair<std::string, Attribute>>;

  /// `outputGrads[i]` is dL/d(output i) or nullptr when no gradient flows
  /// into that output; `wanted[i]` says whether dL/d(input i) is needed.
  GradientContext(Graph &graph, Node &node, int64_t opset,
                  std::vector<Value *> outputGrads, std::vector<bool> wanted);

  Graph &graph() { return graph_; }
  Node &node() { return node_; }
  /// Default-domain opset of the model (attribute/input forms differ).
  int64_t opset() const { return opset_; }

  Value *in(size_t i) const { return node_.input(i); }
  Value *out(size_t i) const { return node_.output(i); }
  /// Gradient flowing into output i, or nullptr.
  Value *outGrad(size_t i) const {
    return i < outputGrads_.size() ? outputGrads_[i] : nullptr;
  }
  /// Whether the gradient of input i is needed.
  bool wants(size_t i) const { return i < wanted_.size() && wanted_[i]; }
  /// Records the gradient of input i (must be typed like the input).
  void setInputGrad(size_t i, Value *grad);
  /// The gradients recorded by the rule, one per input (nullptr: none).
  const std::vector<Value *> &inputGrads() const { return inputGrads_; }

  /// "<input name>_grad" made a valid identifier: the name hint of the value
  /// that ends the gradient of input i.
  std::string gradName(size_t i) const;
  /// "<node name>_grad_<what>": the name hint of an intermediate value.
  std::string tempName(std::string_view what) const;

  /// Emits a single-output node with the given output type.
  Value *emit(const std::string &opType, const std::vector<Value *> &inputs,
              Attrs attrs, DType dtype, Dims dims, std::string nameHint,
              const std::string &domain = "");
  /// Emits a single-output node whose output is typed like `typeOf`.
  Value *emitLike(const std::string &opType, const std::vector<Value *> &inputs,
                  Attrs attrs, const Value &typeOf, std::string nameHint,
                  const std::string &domain = "");
  /// Emits a single-output node of dtype t shaped like `shapeOf`.
  Value *emitShapedLike(const std::string &opType,
                        const std::vector<Value *> &inputs, Attrs attrs,
                        DType t, const Value &shapeOf, std::string nameHint,
                        const std::string &domain = "");
  /// Emits a node of domain "mpc" typed like `typeOf`.
  Value *emitMpc(const std::string &opType, const std::vector<Value *> &inputs,
                 Attrs attrs, const Value &typeOf, std::string nameHint);

  /// A scalar (rank 0) constant initializer of dtype t.
  Value *scalarConstant(DType t, double v, const std::string &what);
  /// A 1-D int64 constant initializer.
  Value *int64Constant(const std::vector<int64_t> &v, const std::string &what);

  /// g reduced to x's shape over broadcast axes (mpc.SumToShape), or g
  /// itself when the shapes already agree. The result has g's dtype.
  Value *sumToShape(Value *g, Value *x, std::string nameHint);
  /// sumToShape(g, in(i), gradName(i)), the name built only when a
  /// reduction is emitted (most gradients already have the input's shape).
  Value *sumToInputShape(Value *g, size_t i);
  /// x's shape as an int64 tensor: a constant when static, else Shape(x).
  Value *shapeOf(Value *x);
  /// g reshaped to x's shape (typed like x, g's dtype).
  Value *reshapeLike(Value *g, Value *x, std::string nameHint);
  /// Transpose swapping the last two axes (rank >= 2).
  Value *transposeLastTwo(Value *v, std::string nameHint);
  /// Unsqueeze at the given (non-negative, output-rank) axes; the axes are an
  /// input from opset 13, an attribute before.
  Value *unsqueeze(Value *v, const std::vector<int64_t> &axes,
                   std::string nameHint);
  /// a * b (numpy broadcasting; typed with the broadcast shape and a's dtype).
  Value *mul(Value *a, Value *b, std::string nameHint);
  /// Any binary elementwise op, typed like `mul`.
  Value *binary(const std::string &opType, Value *a, Value *b,
                std::string nameHint);
  /// Any unary elementwise op, typed like its input.
  Value *unary(const std::string &opType, Value *a, std::string nameHint);

  /// The name hint for a full-shape gradient of input i that may still be
  /// reduced by sumToShape: gradName(i) when no reduction will follow.
  std::string preSumName(size_t i, const Dims &fullDims) const;

  /// The static rank of v; an error naming the node when it is unknown.
  int64_t rankOf(const Value &v) const;

private:
  Value *emitNode(const std::string &opType, const std::vector<Value *> &inputs,
                  Attrs attrs, DType dtype, bool hasShape, Dims dims,
                  std::string nameHint, const std::string &domain);

  Graph &graph_;
  Node &node_;
  int64_t opset_;
  std::vector<Value *> outputGrads_;
  std::vector<bool> wanted_;
  std::vector<Value *> inputGrads_;
  /// nodeHint_ + "_grad": the name hint of every emitted node.
  const std::string &nodeGradHint() const;

  /// The forward node's name, or its op type when unnamed: a reference,
  /// not a copy (neither changes while the rule runs).
  const std::string &nodeHint_;
  // Caches, filled on first use: a rule emits several nodes and temporaries.
  mutable std::string nodeGradHint_; ///< nodeGradHint()
  mutable std::string tempPrefix_;   ///< sanitized nodeHint_ + "_grad_"
};

/// A one-attribute list, built by moving: a braced {{name, attr}} list would
/// copy its element (attribute vectors included) out of the initializer list.
inline GradientContext::Attrs singleAttr(std::string name, Attribute attr) {
  GradientContext::Attrs attrs;
  attrs.emplace_back(std::move(name), std::move(attr));
  return attrs;
}

/// Differentiates one node: reads ctx.outGrad(i), calls ctx.setInputGrad(i)
/// for every input i with ctx.wants(i).
using GradientRule = void (*)(GradientContext &ctx);

struct GradientRuleInfo {
  /// nullptr for ops that pass no gradient to any input (the random draws):
  /// they are listed so that autodiff knows, not reported as missing.
  GradientRule rule;
  /// Inputs that never get a gradient even when they are floating point
  /// (class weights of the losses): the loss is not differentiated through
  /// them, as in PyTorch where they are not parameters.
  std::vector<int> nonDifferentiableInputs;
};

/// The rule for a default-domain op, or nullptr when there is none.
const GradientRuleInfo *findGradientRule(const std::string &opType,
                                         const std::string &domain);
/// The ops that have a rule, sorted (for the "no gradient rule" error).
std::vector<std::string> opsWithGradients();

/// Prepares a forward node before its rule runs, where the rule needs a
/// forward output the node does not produce yet (LayerNormalization's
/// Mean/InvStdDev, a training Dropout's mask, SoftmaxCrossEntropyLoss's
/// log_prob; registry.cpp dispatches to each category's part). Returns the
/// node to use (the same node, or its replacement).
Node *prepareForwardNode(Graph &graph, Node *node, int64_t opset);

// --- helpers shared by the rules ----------------------------------------

/// A valid ONNX-text identifier made from any name: [A-Za-z0-9_], not
/// starting with a digit.
std::string sanitizeIdentifier(const std::string &name);
/// sanitizeIdentifier on a string the caller owns, without a copy.
void sanitizeIdentifierInPlace(std::string &name);
/// sanitizeIdentifier(name) + suffix, built in one buffer; `suffix` must be
/// made of identifier chars ("_grad", "_grad_sum").
std::string sanitizedWithSuffix(std::string_view name, std::string_view suffix);
/// numpy broadcasting of two shapes (symbols kept when they agree).
Dims broadcastDims(const Dims &a, const Dims &b);
/// broadcastDims for one pair of aligned axes (a missing axis is Dim(1)).
Dim broadcastDim(const Dim &a, const Dim &b);
/// The int64 values of a constant (initializer or Constant node output).
std::optional<std::vector<int64_t>> constantInt64s(const Value *v);
/// The values of a constant as doubles.
std::optional<std::vector<double>> constantDoubles(const Value *v);

// --- the rules (one file per op category) ---------------------------------

// elementwise.cpp
void gradAdd(GradientContext &ctx);
void gradSub(GradientContext &ctx);
void gradMul(GradientContext &ctx);
void gradDiv(GradientContext &ctx);
void gradNeg(GradientContext &ctx);
void gradAbs(GradientContext &ctx);
void gradSqrt(GradientContext &ctx);
void gradExp(GradientContext &ctx);
void gradLog(GradientContext &ctx);
void gradPow(GradientContext &ctx);
void gradSin(GradientContext &ctx);
void gradCos(GradientContext &ctx);
void gradErf(GradientContext &ctx);
void gradIdentity(GradientContext &ctx);
void gradCast(GradientContext &ctx);
void gradWhere(GradientContext &ctx);
void gradClip(GradientContext &ctx);
void gradMaxMin(GradientContext &ctx); ///< Max and Min
void gradSum(GradientContext &ctx);
void gradCastLike(GradientContext &ctx);
void gradTrilu(GradientContext &ctx);

// activation.cpp
void gradRelu(GradientContext &ctx);
void gradTanh(GradientContext &ctx);
void gradSigmoid(GradientContext &ctx);
/// mpc.LogSigmoid (fuse-log-sigmoid): one mpc.LogSigmoidGrad.
void gradLogSigmoid(GradientContext &ctx);
void gradGelu(GradientContext &ctx); ///< Gelu, mpc.Gelu, mpc.GeluTanh
void gradLeakyRelu(GradientContext &ctx);
void gradSoftmax(GradientContext &ctx);
void gradLogSoftmax(GradientContext &ctx);

// reduction.cpp
void gradReduceSum(GradientContext &ctx);
void gradReduceMean(GradientContext &ctx);
void gradReduceMax(GradientContext &ctx);
void gradCumSum(GradientContext &ctx);

// matmul.cpp
void gradGemm(GradientContext &ctx);
void gradMatMul(GradientContext &ctx);

// conv_pool.cpp
void gradConv(GradientContext &ctx);
void gradConvTranspose(GradientContext &ctx);
void gradMaxPool(GradientContext &ctx);
void gradAveragePool(GradientContext &ctx);
void gradGlobalAveragePool(GradientContext &ctx);

// normalization.cpp
void gradLayerNormalization(GradientContext &ctx);
void gradRMSNormalization(GradientContext &ctx);
void gradBatchNormalization(GradientContext &ctx);
/// prepareForwardNode's part for LayerNormalization: gives the node its
/// Mean/InvStdDev outputs. Returns the node to use.
Node *prepareLayerNormalizationForward(Graph &graph, Node *node, int64_t opset);
/// Initializers read as running mean/var (inputs 3, 4) of a
/// BatchNormalization: model state, never trainable parameters (SPEC).
std::unordered_set<const Value *> batchNormRunningStats(const Graph &g);
/// (running-statistic state, its new value) for every training-mode
/// BatchNormalization whose running mean/var input is a state initializer
/// and whose matching output is present: the step's update_binding entries.
std::vector<std::pair<Value *, Value *>> batchNormStateUpdates(const Graph &g);

// shape_ops.cpp
void gradReshapeLike(GradientContext &ctx); ///< Reshape, Flatten, (Un)Squeeze
void gradTranspose(GradientContext &ctx);
void gradConcat(GradientContext &ctx);
void gradSlice(GradientContext &ctx);
void gradSplit(GradientContext &ctx);
void gradExpand(GradientContext &ctx);

// gather_scatter.cpp
void gradGather(GradientContext &ctx);
void gradGatherElements(GradientContext &ctx);
void gradGatherND(GradientContext &ctx);
void gradScatterND(GradientContext &ctx);
void gradScatterElements(GradientContext &ctx);

// selection.cpp
void gradTopK(GradientContext &ctx);

// loss.cpp
void gradSoftmaxCrossEntropyLoss(GradientContext &ctx);
void gradNegativeLogLikelihoodLoss(GradientContext &ctx);
/// prepareForwardNode's part for SoftmaxCrossEntropyLoss: gives the node its
/// log_prob output. Returns the node to use.
Node *prepareSoftmaxCrossEntropyLossForward(Graph &graph, Node *node,
                                            int64_t opset);

// random.cpp
void gradDropout(GradientContext &ctx);
/// prepareForwardNode's part for Dropout: a Dropout that may train gets its
/// mask output. Returns the node to use.
Node *prepareDropoutForward(Graph &graph, Node *node, int64_t opset);

} // namespace mpc
