// ONNX's Gradient operator expanded into the backward subgraph of its y.
//
// Each Gradient node is checked (readGradientOp), then buildBackward
// (passes/autodiff.h) appends dy/dx for every x in xs to the graph, the node's
// outputs become Identity nodes of those gradients under the same names, and
// the node goes. The backward is appended at the end of the node list and the
// graph re-sorted, because a Gradient node need not come after the nodes that
// compute y (it reads xs, not y).
#include "passes/onnx/gradient_op.h"

#include "passes/autodiff.h"
#include "passes/shape_inference.h"
#include "support/diagnostics.h"

#include <algorithm>

namespace mpc {

bool isGradientOp(const Node &n) {
  return n.isOp(kOnnxPreviewTrainingDomain, "Gradient");
}

std::vector<Node *> gradientOps(const Graph &g) {
  std::vector<Node *> found;
  for (const auto &n : g.nodes())
    if (isGradientOp(*n))
      found.push_back(n.get());
  return found;
}

GradientOpSpec readGradientOp(const Node &n) {
  GradientOpSpec spec;
  const Attribute *xs = n.attr("xs");
  const Attribute *y = n.attr("y");
  const Attribute *zs = n.attr("zs");
  if (!xs || xs->kind != Attribute::Kind::Strings || xs->strings.empty())
    errorAt(n) << "needs attribute 'xs' (the names of the tensors to "
                  "differentiate with respect to)";
  if (!y || y->kind != Attribute::Kind::String || y->s.empty())
    errorAt(n) << "needs attribute 'y' (the name of the differentiated "
                  "tensor)";
  if (zs && zs->kind != Attribute::Kind::Strings)
    errorAt(n) << "attribute 'zs' must be a list of tensor names";
  spec.y = y->s;
  spec.xs = xs->strings;
  if (zs)
    spec.zs = zs->strings;
  std::vector<std::string> named = spec.xs;
  named.insert(named.end(), spec.zs.begin(), spec.zs.end());
  for (size_t i = 0; i < named.size(); ++i)
    if (std::find(named.begin(), named.begin() + long(i), named[i]) !=
        named.begin() + long(i))
      errorAt(n) << "'" << named[i] << "' is listed twice in xs/zs";
  if (n.numInputs() != named.size())
    errorAt(n) << "has " << n.numInputs() << " inputs but xs and zs name "
               << named.size() << " tensors (one input per name)";
  for (size_t i = 0; i < named.size(); ++i) {
    const Value *in = n.input(i);
    if (!in || in->name() != named[i])
      errorAt(n) << "input " << i << " is '" << (in ? in->name() : "")
                 << "', not the tensor '" << named[i]
                 << "' it stands for; mpc evaluates the gradient only at the "
                    "named tensors' own values";
  }
  if (n.numOutputs() > spec.xs.size())
    errorAt(n) << "has " << n.numOutputs() << " outputs but xs names "
               << spec.xs.size() << " tensors";
  if (std::find(named.begin(), named.end(), spec.y) != named.end())
    errorAt(n) << "y '" << spec.y << "' is also one of xs/zs";
  return spec;
}

void typeGraphWithGradientOps(Graph &g, int64_t opset) {
  for (Node *n : g.nodeList()) {
    if (isGradientOp(*n)) {
      for (size_t i = 0; i < n->numOutputs() && i < n->numInputs(); ++i)
        if (n->output(i) && n->input(i))
          n->output(i)->copyTypeFrom(*n->input(i));
    } else if (isSupportedOp(n->domain(), n->opType())) {
      inferNode(*n, opset);
    }
  }
}

namespace {

/// Checks what autodiff's own checks would report less precisely.
void checkTarget(const Node &n, const Graph &g, const GradientOpSpec &spec) {
  const Value *y = g.findValue(spec.y);
  if (!y)
    errorAt(n) << "y '" << spec.y << "' is not a value of graph '" << g.name()
               << "'";
  if (!y->producer())
    errorAt(n) << "y '" << spec.y
               << "' is a graph input or initializer, not computed by any "
                  "node";
  bool scalar = y->hasShape;
  for (const Dim &d : y->dims)
    scalar &= d.value == 1;
  if (y->dtype == DType::Undefined || !isFloating(y->dtype) || !scalar)
    errorAt(n) << "y '" << spec.y
               << "' must be a scalar float (rank 0 or all dims 1; mpc "
                  "differentiates scalars only), got "
               << y->typeString();
  for (const std::string &x : spec.xs) {
    const Value *v = g.findValue(x);
    if (v->dtype != DType::Undefined && !isFloating(v->dtype))
      errorAt(n) << "x '" << x << "' is " << dtypeName(v->dtype)
                 << ", not a floating-point tensor";
  }
}

void expandOne(Graph &g, Node *n, int64_t opset) {
  GradientOpSpec spec = readGradientOp(*n);
  checkTarget(*n, g, spec);
  const std::string where = describeNode(*n);
  Statistics stats;
  Backward bw;
  try {
    bw = buildBackward(g, spec.y, spec.xs, opset, stats);
  } catch (const Error &e) {
    throw Error(where + ": " + e.what());
  }
  // The outputs keep their names: Identity of each gradient under a
  // temporary name, every use moved over, then the Gradient node goes and the
  // Identity takes the name.
  std::vector<std::pair<Value *, std::string>> renames;
  for (size_t i = 0; i < n->numOutputs(); ++i) {
    Value *out = n->output(i);
    if (!out)
      continue;
    Value *grad = bw.grads[i];
    if (!grad) {
      // y does not depend on this x: its gradient is zero.
      const Value *x = bw.xs[i];
      auto dims = x->hasShape ? concreteDims(x->dims) : std::nullopt;
      if (!dims)
        errorAt(*n) << "y '" << spec.y << "' does not depend on '" << x->name()
                    << "' and its shape "
                    << (x->hasShape ? dimsToString(x->dims) : "?")
                    << " is not static, so its zero gradient cannot be built";
      grad = g.addInitializer(g.uniqueValueName(x->name() + "_zero_grad"),
                              Tensor(x->dtype, *dims));
    }
    Node *id = g.createNodeWithOutputs(
        "Identity", {grad}, {g.uniqueValueName(out->name() + "_expanded")},
        g.uniqueNodeName(n->name() + "_" + std::to_string(i)));
    id->output(0)->copyTypeFrom(*grad);
    g.replaceAllUsesWith(out, id->output(0));
    renames.emplace_back(id->output(0), out->name());
  }
  g.removeNode(n);
  for (auto &[value, name] : renames)
    g.renameValue(value, name);
  if (!g.topologicalSort())
    throw Error(where + ": y '" + spec.y +
                "' depends on this Gradient's own outputs (a cycle)");
}

} // namespace

int expandGradientOps(Graph &g, int64_t opset) {
  int expanded = 0;
  // One at a time, retyping in between: a later Gradient may differentiate
  // through the backward of an earlier one.
  while (true) {
    std::vector<Node *> ops = gradientOps(g);
    if (ops.empty())
      return expanded;
    typeGraphWithGradientOps(g, opset);
    expandOne(g, ops.front(), opset);
    ++expanded;
  }
}

} // namespace mpc
