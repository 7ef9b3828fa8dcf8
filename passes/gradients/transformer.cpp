// Gradient rules of the transformer and residual-MLP family (issue 3):
// LayerNormalization, mpc.RMSNormalization, Gather (the embedding), Slice,
// Split, Where, Expand, Gelu, LeakyRelu, Clip, Max, Min, Sum, ReduceMax,
// CastLike and Dropout.
//
// Layer norm (and RMS norm) and Dropout are differentiated from forward outputs
// they do not always produce (the saved mean / inverse standard deviation, the
// dropout mask), so autodiff first gives the forward node those outputs
// (prepareTransformerForwardNode): the backward then reuses the forward's
// statistics and mask exactly instead of recomputing them. The backward ops
// of domain "mpc" are specified in ir/mpc_ops.h. Ops that only pick
// elements (Max, Min, ReduceMax) split the gradient evenly among ties, as
// PyTorch's maximum/minimum/amax do.
#include "passes/gradients/gradient_rules.h"

#include "ir/mpc_ops.h"
#include "passes/shape_inference.h"
#include "support/diagnostics.h"

namespace mpc {
namespace {

/// The name GradientContext gives backward nodes a prefix from.
std::string nodeHint(const Node &n) {
  return n.name().empty() ? n.opType() : n.name();
}

/// One output of a multi-output backward node; `present` false leaves the
/// slot empty (the op then does not compute it).
struct OutputSpec {
  bool present = false;
  DType dtype = DType::Undefined;
  Dims dims;
  std::string nameHint;
};

/// A multi-output backward node named like GradientContext's single-output
/// ones ("<fwdnode>_grad"), its outputs typed and then refined by shape
/// inference. Returns the outputs (nullptr for the empty slots).
std::vector<Value *> emitMulti(GradientContext &ctx, const std::string &opType,
                               const std::vector<Value *> &inputs,
                               GradientContext::Attrs attrs,
                               const std::vector<OutputSpec> &outputs,
                               const std::string &domain) {
  Graph &g = ctx.graph();
  std::vector<std::string> names;
  names.reserve(outputs.size());
  for (const OutputSpec &o : outputs)
    names.push_back(o.present
                        ? g.uniqueValueName(sanitizeIdentifier(o.nameHint))
                        : std::string());
  // The names and the attribute list move into the new node.
  Node *n = g.createNodeWithOutputs(
      opType, inputs, std::move(names),
      g.uniqueNodeName(nodeHint(ctx.node()) + "_grad"), domain);
  n->setAttrs(std::move(attrs));
  for (size_t i = 0; i < outputs.size(); ++i)
    if (Value *v = n->output(i))
      v->setType(outputs[i].dtype, outputs[i].dims);
  inferNode(*n, ctx.opset());
  return n->outputs();
}

/// The forward node with outputs 0..count-1 all present: appended when the
/// node's existing slots are all filled, else the node is replaced by one
/// that has them (outputs cannot be added in the middle), keeping the names
/// of the outputs it had. New outputs are named "<node>_<suffix>".
Node *withOutputs(Graph &g, Node *node, int64_t opset, size_t count,
                  const std::vector<std::string> &suffixes) {
  bool missing = node->numOutputs() < count;
  bool holes = false;
  for (size_t i = 0; i < node->numOutputs(); ++i) {
    missing |= i < count && !node->output(i);
    holes |= !node->output(i);
  }
  if (!missing)
    return node;
  std::string base = sanitizeIdentifier(nodeHint(*node));
  if (!holes) {
    for (size_t i = node->numOutputs(); i < count; ++i)
      node->addOutput(g.uniqueValueName(base + "_" + suffixes[i]));
    inferNode(*node, opset);
    return node;
  }
  size_t slots = std::max(count, node->numOutputs());
  std::vector<std::string> names;
  for (size_t i = 0; i < slots; ++i) {
    if (Value *old = node->output(i))
      names.push_back(g.uniqueValueName(old->name() + "_new"));
    else if (i < count)
      names.push_back(g.uniqueValueName(base + "_" + suffixes[i]));
    else
      names.push_back("");
  }
  std::string nodeName = node->name();
  node->setName(nodeName + "_replaced");
  Node *fresh = g.createNodeWithOutputs(node->opType(), node->inputs(), names,
                                        nodeName, node->domain(), node);
  for (const auto &kv : node->attributes())
    fresh->setAttr(kv.first, kv.second);
  for (size_t i = 0; i < node->numOutputs(); ++i)
    if (Value *old = node->output(i))
      fresh->output(i)->copyTypeFrom(*old);
  inferNode(*fresh, opset);
  std::vector<std::pair<Value *, std::string>> renames;
  for (size_t i = 0; i < node->numOutputs(); ++i)
    if (Value *old = node->output(i)) {
      renames.push_back({fresh->output(i), old->name()});
      g.replaceAllUsesWith(old, fresh->output(i));
    }
  g.removeNode(node);
  for (const auto &r : renames)
    g.renameValue(r.first, r.second);
  return fresh;
}

/// Whether a Dropout node can run in training mode: its training_mode input
/// (opset 12+) is present and not the constant false.
bool dropoutMayTrain(const Node &n, int64_t opset) {
  if (opset < 12 || !n.input(2))
    return false;
  auto v = constantInt64s(n.input(2));
  return !v || v->empty() || (*v)[0] != 0;
}

/// The forward's axis attribute normalised against x's rank.
int64_t normalizedAxis(GradientContext &ctx, const Value &x, int64_t dflt) {
  int64_t r = ctx.rankOf(x);
  int64_t a = ctx.node().attrInt("axis", dflt);
  if (a < -r || a >= r)
    errorAt(ctx.node()) << "axis " << a << " is out of range for rank " << r;
  return a < 0 ? a + r : a;
}

} // namespace

Node *prepareTransformerForwardNode(Graph &graph, Node *node, int64_t opset) {
  if (!node->domain().empty())
    return nullptr;
  // isOp: a node of another op is told apart by its op's length alone.
  if (node->isOp("", "LayerNormalization"))
    return withOutputs(graph, node, opset, 3, {"", "mean", "inv_std"});
  if (node->isOp("", "Dropout"))
    return dropoutMayTrain(*node, opset)
               ? withOutputs(graph, node, opset, 2, {"", "mask"})
               : node;
  return nullptr;
}

/// LayerNormalization's and mpc.RMSNormalization's rule: one `gradOp` node
/// reading `ins` (dY, X, scale, ...) with the forward's axis and `attrs`,
/// giving dX and the gradients of the normalised-shape parameters (inputs
/// 1 .. params), each summed back to its input's shape.
void normalizationGrad(GradientContext &ctx, const char *gradOp,
                       const std::vector<Value *> &ins,
                       GradientContext::Attrs attrs, size_t params) {
  Value *x = ctx.in(0), *dY = ctx.outGrad(0);
  int64_t axis = normalizedAxis(ctx, *x, -1);
  attrs.insert(attrs.begin(), {"axis", Attribute::ofInt(axis)});
  Dims norm(x->dims.begin() + axis, x->dims.end());
  std::vector<OutputSpec> outs = {
      {ctx.wants(0), dY->dtype, x->dims, ctx.gradName(0)}};
  const char *full[] = {"", "scale_full", "bias_full"};
  for (size_t i = 1; i <= params; ++i) {
    Value *p = ctx.in(i);
    outs.push_back(
        {ctx.wants(i), dY->dtype, norm,
         p && p->dims == norm ? ctx.gradName(i) : ctx.tempName(full[i])});
  }
  // Trailing outputs nobody needs are dropped, not left as empty slots.
  while (!outs.back().present)
    outs.pop_back();
  std::vector<Value *> grads =
      emitMulti(ctx, gradOp, ins, attrs, outs, kMpcDomain);
  if (ctx.wants(0))
    ctx.setInputGrad(0, grads[0]);
  for (size_t i = 1; i <= params; ++i)
    if (ctx.wants(i))
      ctx.setInputGrad(i, ctx.sumToInputShape(grads[i], i));
}

void gradLayerNormalization(GradientContext &ctx) {
  Node &n = ctx.node();
  if (ctx.outGrad(1) || ctx.outGrad(2))
    errorAt(n) << "the loss depends on the Mean/InvStdDev outputs; mpc "
                  "differentiates LayerNormalization through Y only";
  Value *mean = ctx.out(1), *inv = ctx.out(2);
  if (!mean || !inv)
    errorAt(n) << "internal: the Mean/InvStdDev outputs were not added "
                  "before differentiating";
  normalizationGrad(ctx, "LayerNormalizationGrad",
                    {ctx.outGrad(0), ctx.in(0), ctx.in(1), mean, inv}, {}, 2);
}

void gradRMSNormalization(GradientContext &ctx) {
  // The backward recomputes inv_std from X (mpc_ops.h) with the forward's
  // epsilon.
  normalizationGrad(
      ctx, "RMSNormalizationGrad", {ctx.outGrad(0), ctx.in(0), ctx.in(1)},
      {{"epsilon", Attribute::ofFloat(ctx.node().attrFloat("epsilon", 1e-5f))}},
      1);
}

void gradGather(GradientContext &ctx) {
  Value *data = ctx.in(0);
  int64_t axis = normalizedAxis(ctx, *data, 0);
  Value *dY = ctx.outGrad(0);
  ctx.setInputGrad(0, ctx.emitShapedLike("GatherGrad", {dY, ctx.in(1), data},
                                         {{"axis", Attribute::ofInt(axis)}},
                                         dY->dtype, *data, ctx.gradName(0),
                                         kMpcDomain));
}

void gradSlice(GradientContext &ctx) {
  Node &n = ctx.node();
  Value *data = ctx.in(0);
  Value *dY = ctx.outGrad(0);
  std::vector<Value *> inputs = {dY, data};
  GradientContext::Attrs attrs;
  if (ctx.opset() >= 10) {
    // starts, ends and the optional axes/steps keep their positions.
    for (size_t i = 1; i < n.numInputs(); ++i)
      inputs.push_back(ctx.in(i));
  } else {
    for (const char *a : {"starts", "ends", "axes"})
      if (const Attribute *v = n.attr(a))
        attrs.push_back({a, *v});
  }
  ctx.setInputGrad(0, ctx.emitShapedLike("SliceGrad", inputs, attrs, dY->dtype,
                                         *data, ctx.gradName(0), kMpcDomain));
}

void gradSplit(GradientContext &ctx) {
  Node &n = ctx.node();
  Value *x = ctx.in(0);
  int64_t axis = normalizedAxis(ctx, *x, 0);
  DType t = DType::Undefined;
  for (size_t i = 0; i < n.numOutputs(); ++i)
    if (Value *g = ctx.outGrad(i))
      t = g->dtype;
  // Outputs no gradient flows into contribute zeros of their shape.
  std::vector<Value *> pieces;
  for (size_t i = 0; i < n.numOutputs(); ++i) {
    Value *g = ctx.outGrad(i);
    if (!g) {
      Value *out = ctx.out(i);
      if (!out)
        errorAt(n) << "output " << i
                   << " is omitted; mpc differentiates "
                      "Split only when every output is produced";
      Tensor zero(t, {1});
      g = ctx.emitShapedLike("ConstantOfShape", {ctx.shapeOf(out)},
                             {{"value", Attribute::ofTensor(zero)}}, t, *out,
                             ctx.tempName("zeros"));
    }
    pieces.push_back(g);
  }
  ctx.setInputGrad(0, ctx.emitShapedLike("Concat", pieces,
                                         {{"axis", Attribute::ofInt(axis)}}, t,
                                         *x, ctx.gradName(0)));
}

void gradWhere(GradientContext &ctx) {
  Value *cond = ctx.in(0);
  Value *dY = ctx.outGrad(0);
  Value *zero = ctx.scalarConstant(dY->dtype, 0.0, "zero");
  for (size_t i = 1; i <= 2; ++i) {
    if (!ctx.wants(i))
      continue;
    // The branch that was not selected gets 0 where the other one was.
    std::vector<Value *> ins = i == 1 ? std::vector<Value *>{cond, dY, zero}
                                      : std::vector<Value *>{cond, zero, dY};
    Value *full = ctx.emit("Where", ins, {}, dY->dtype, dY->dims,
                           ctx.preSumName(i, dY->dims));
    ctx.setInputGrad(i, ctx.sumToInputShape(full, i));
  }
}

void gradExpand(GradientContext &ctx) {
  ctx.setInputGrad(0, ctx.sumToInputShape(ctx.outGrad(0), 0));
}

void gradGelu(GradientContext &ctx) {
  // Gelu, and mpc.Gelu / mpc.GeluTanh (fuse-gelu), whose name is the form.
  Node &n = ctx.node();
  std::string approximate = n.domain() == kMpcDomain
                                ? (n.opType() == "GeluTanh" ? "tanh" : "none")
                                : n.attrString("approximate", "none");
  ctx.setInputGrad(0, ctx.emitMpc("GeluGrad", {ctx.outGrad(0), ctx.in(0)},
                                  singleAttr("approximate",
                                             Attribute::ofString(approximate)),
                                  *ctx.in(0), ctx.gradName(0)));
}

void gradLeakyRelu(GradientContext &ctx) {
  Node &n = ctx.node();
  ctx.setInputGrad(
      0,
      ctx.emitMpc("LeakyReluGrad", {ctx.outGrad(0), ctx.in(0)},
                  {{"alpha", Attribute::ofFloat(n.attrFloat("alpha", 0.01f))}},
                  *ctx.in(0), ctx.gradName(0)));
}

void gradClip(GradientContext &ctx) {
  Node &n = ctx.node();
  std::vector<Value *> inputs = {ctx.outGrad(0), ctx.in(0)};
  GradientContext::Attrs attrs;
  if (ctx.opset() >= 11) {
    for (size_t i = 1; i < n.numInputs(); ++i)
      inputs.push_back(ctx.in(i));
  } else {
    for (const char *a : {"min", "max"})
      if (const Attribute *v = n.attr(a))
        attrs.push_back({a, *v});
  }
  ctx.setInputGrad(
      0, ctx.emitMpc("ClipGrad", inputs, attrs, *ctx.in(0), ctx.gradName(0)));
}

void gradMaxMin(GradientContext &ctx) {
  Node &n = ctx.node();
  Value *dY = ctx.outGrad(0);
  if (n.numInputs() == 1) {
    ctx.setInputGrad(0, dY);
    return;
  }
  std::vector<Value *> inputs = {dY, ctx.out(0)};
  for (size_t i = 0; i < n.numInputs(); ++i)
    inputs.push_back(ctx.in(i));
  for (size_t i = 0; i < n.numInputs(); ++i) {
    if (!ctx.wants(i))
      continue;
    Value *full = ctx.emit("ExtremumGrad", inputs,
                           {{"index", Attribute::ofInt(int64_t(i))}}, dY->dtype,
                           dY->dims, ctx.preSumName(i, dY->dims), kMpcDomain);
    ctx.setInputGrad(i, ctx.sumToInputShape(full, i));
  }
}

void gradSum(GradientContext &ctx) {
  Value *dY = ctx.outGrad(0);
  for (size_t i = 0; i < ctx.node().numInputs(); ++i)
    if (ctx.wants(i))
      ctx.setInputGrad(i, ctx.sumToInputShape(dY, i));
}

void gradReduceMax(GradientContext &ctx) {
  // The same axes handling as ReduceSum/ReduceMean's rule (reduce.cpp).
  Value *x = ctx.in(0);
  Value *dY = ctx.outGrad(0);
  std::vector<Value *> inputs = {dY, x, ctx.out(0)};
  GradientContext::Attrs attrs = reductionGradAttrs(ctx, inputs);
  ctx.setInputGrad(0, ctx.emitShapedLike("ReduceExtremumGrad", inputs, attrs,
                                         dY->dtype, *x, ctx.gradName(0),
                                         kMpcDomain));
}

void gradCastLike(GradientContext &ctx) {
  // As Cast: the gradient goes back in the input's precision.
  Value *dY = ctx.outGrad(0);
  Value *x = ctx.in(0);
  if (dY->dtype == x->dtype) {
    ctx.setInputGrad(0, dY);
    return;
  }
  ctx.setInputGrad(
      0, ctx.emitLike("Cast", {dY},
                      {{"to", Attribute::ofInt(toOnnxDataType(x->dtype))}}, *x,
                      ctx.gradName(0)));
}

void gradDropout(GradientContext &ctx) {
  Node &n = ctx.node();
  Value *dY = ctx.outGrad(0);
  if (!dropoutMayTrain(n, ctx.opset())) {
    ctx.setInputGrad(0, dY); // inference mode: Y = X
    return;
  }
  Value *mask = ctx.out(1);
  if (!mask)
    errorAt(n) << "internal: the mask output was not added before "
                  "differentiating";
  ctx.setInputGrad(0,
                   ctx.emitMpc("DropoutGrad", {dY, mask, ctx.in(1), ctx.in(2)},
                               {}, *ctx.in(0), ctx.gradName(0)));
}

} // namespace mpc
