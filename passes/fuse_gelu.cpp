// fuse-gelu: the GELU that torch.onnx writes as arithmetic becomes one node.
//
// Before opset 20 PyTorch exports nn.GELU as elementwise arithmetic:
//   erf form:  Mul(Mul(x, Add(Erf(Div(x, sqrt2)), 1)), 0.5)
//   tanh form: Mul(0.5, Mul(x, Add(1, Tanh(Mul(sqrt(2/pi),
//                  Add(x, Mul(0.044715, Mul(x, Mul(x, x)))))))))
// Each piece is a full pass over the activation, and autodiff differentiates
// every piece, so the backward gets about twice as many passes and their
// temporaries. This pass replaces a whole pattern by one node: default-domain
// Gelu (approximate = "none" / "tanh") when the model imports opset >= 20,
// else mpc.Gelu / mpc.GeluTanh (ir/mpc_ops.h), which have function
// bodies in standard ops, so the written model stays self-describing. Its
// gradient is then one mpc.GeluGrad.
//
// Matched: the three factors x, 0.5 and (1 + Erf(...)) / (1 + Tanh(...)) in
// any association and operand order of the Muls (torch's, and the
// `x * 0.5 * (1 + erf(x / sqrt2))` a model may spell out); Erf's argument as
// Div(x, sqrt2) or Mul(x, 1/sqrt2); the cube as Mul(x, Mul(x, x)) in any
// order or Pow(x, 3). Constants are single-element initializers (not state)
// or Constant nodes of x's dtype, compared with a relative tolerance of the
// dtype's precision (fp16/bf16 exports round 1/sqrt2 and 0.044715).
// Refused: a constant off its value, an intermediate value that something
// else reads or that is a graph output (the pieces must die with the
// rewrite), a constant that broadcasts x to a larger shape.
//
// Runs after infer-shapes (it reads dtypes and shapes) and before autodiff,
// on the main graph and on a training algorithm the model already has.
#include "ir/mpc_ops.h"
#include "passes/fusion_rewrite.h"
#include "passes/pass.h"
#include "passes/shape_inference.h"

#include <cmath>
#include <string_view>
#include <unordered_set>

namespace mpc {
namespace {

/// How close a constant must be to its exact value, relative: the
/// precision of the dtype it is stored in.
double tolerance(DType t) {
  switch (t) {
  case DType::F16:
    return 1e-3; // 2^-10 ulp at 1
  case DType::BF16:
    return 8e-3; // 2^-7
  default:
    return 1e-6; // fp32 rounds these constants to ~1e-8
  }
}

/// A matched GELU: its input, its output node and every node it replaces.
struct GeluMatch {
  Value *x = nullptr;
  Node *root = nullptr;
  bool tanhForm = false;
  std::vector<Node *> nodes;
};

class GeluMatcher {
public:
  explicit GeluMatcher(Node &root) : root_(root) {}

  /// Fills `m` and returns true when root is the last Mul of a GELU.
  bool match(GeluMatch &m) {
    if (!isOp(root_, "Mul") || !root_.output(0))
      return false;
    DType t = root_.output(0)->dtype;
    if (!isFloating(t))
      return false;
    std::vector<Value *> leaves;
    if (!collectFactors(root_.output(0), true, leaves) || leaves.size() != 3)
      return false;
    // Which leaf is 0.5, which is 1 + f(...), the remaining one is x.
    for (size_t h = 0; h < 3; ++h)
      for (size_t p = 0; p < 3; ++p) {
        if (h == p)
          continue;
        Value *x = leaves[3 - h - p];
        std::vector<Node *> saved = nodes_;
        if (isScalar(leaves[h], x, 0.5) && matchOnePlus(leaves[p], x)) {
          if (!sameType(*root_.output(0), *x))
            return false;
          m.x = x;
          m.root = &root_;
          m.tanhForm = tanhForm_;
          m.nodes = nodes_;
          return true;
        }
        nodes_ = saved;
      }
    return false;
  }

private:
  static bool isOp(const Node &n, std::string_view op) {
    return n.isOp("", op);
  }

  /// The single-consumer node producing v (an intermediate of the pattern),
  /// or nullptr when v has other readers, is a graph output or is not made
  /// by `op`.
  Node *interior(Value *v, const char *op) {
    if (!v || v->isGraphOutput() || v->uses().size() != 1)
      return nullptr;
    Node *n = v->producer();
    if (!n || !isOp(*n, op) || n->numOutputs() != 1)
      return nullptr;
    nodes_.push_back(n);
    return n;
  }

  /// The factors of the product v: recurses through Muls whose result only
  /// this product reads.
  bool collectFactors(Value *v, bool isRoot, std::vector<Value *> &leaves) {
    Node *n = nullptr;
    if (isRoot) {
      n = &root_;
      nodes_.push_back(n);
    } else if (v->producer() && isOp(*v->producer(), "Mul") &&
               v->uses().size() == 1 && !v->isGraphOutput()) {
      n = interior(v, "Mul");
    }
    if (!n) {
      leaves.push_back(v);
      return leaves.size() <= 3;
    }
    if (n->numInputs() != 2 || !n->input(0) || !n->input(1))
      return false;
    return collectFactors(n->input(0), false, leaves) &&
           collectFactors(n->input(1), false, leaves);
  }

  /// v is a one-element constant of x's dtype within tolerance of `want`,
  /// whose rank does not broadcast x to a larger shape.
  static bool isScalar(Value *v, Value *x, double want) {
    if (!v || v == x || v->dtype != x->dtype || v->isState || v->isGraphInput())
      return false;
    TensorPtr t;
    if (v->isInitializer())
      t = v->initializer();
    else if (v->producer() && isOp(*v->producer(), "Constant"))
      t = constantNodeTensor(*v->producer());
    if (!t || t->numel() != 1)
      return false;
    int64_t maxRank = x->hasShape ? x->rank() : 0;
    if (int64_t(t->dims.size()) > maxRank)
      return false;
    double got = t->getAsDouble(0);
    return std::fabs(got - want) <= tolerance(v->dtype) * std::fabs(want);
  }

  /// Binary node n has inputs {x, c} in either order with c a scalar of
  /// value `want`; returns the other input's index or -1.
  static int scalarOperand(const Node &n, Value *x, double want) {
    if (n.numInputs() != 2)
      return -1;
    for (int i = 0; i < 2; ++i)
      if (isScalar(n.input(size_t(i)), x, want))
        return 1 - i;
    return -1;
  }

  /// v = Add(1, f(u)) with f Erf or Tanh, and u the right argument of x.
  bool matchOnePlus(Value *v, Value *x) {
    Node *add = interior(v, "Add");
    if (!add)
      return false;
    int other = scalarOperand(*add, x, 1.0);
    if (other < 0)
      return false;
    Value *fx = add->input(size_t(other));
    if (fx && fx->producer() && isOp(*fx->producer(), "Erf")) {
      Node *erf = interior(fx, "Erf");
      tanhForm_ = false;
      return erf && matchErfArgument(erf->input(0), x);
    }
    Node *tanh = interior(fx, "Tanh");
    tanhForm_ = true;
    return tanh && matchTanhArgument(tanh->input(0), x);
  }

  /// u = x / sqrt(2) as Div(x, sqrt2) or Mul(x, 1/sqrt2).
  bool matchErfArgument(Value *u, Value *x) {
    if (!u || !u->producer())
      return false;
    if (isOp(*u->producer(), "Div")) {
      Node *div = interior(u, "Div");
      return div && div->numInputs() == 2 && div->input(0) == x &&
             isScalar(div->input(1), x, std::sqrt(2.0));
    }
    Node *mul = interior(u, "Mul");
    if (!mul)
      return false;
    int other = scalarOperand(*mul, x, 1.0 / std::sqrt(2.0));
    return other >= 0 && mul->input(size_t(other)) == x;
  }

  /// u = sqrt(2/pi) * (x + 0.044715 * x^3).
  bool matchTanhArgument(Value *u, Value *x) {
    Node *scale = interior(u, "Mul");
    if (!scale)
      return false;
    const double pi = std::acos(-1.0);
    int s = scalarOperand(*scale, x, std::sqrt(2.0 / pi));
    if (s < 0)
      return false;
    Node *sum = interior(scale->input(size_t(s)), "Add");
    if (!sum || sum->numInputs() != 2)
      return false;
    int xi = sum->input(0) == x ? 0 : sum->input(1) == x ? 1 : -1;
    if (xi < 0)
      return false;
    Node *kappa = interior(sum->input(size_t(1 - xi)), "Mul");
    if (!kappa)
      return false;
    int c = scalarOperand(*kappa, x, 0.044715);
    return c >= 0 && matchCube(kappa->input(size_t(c)), x);
  }

  /// v = x^3 as Mul(x, Mul(x, x)) (either order) or Pow(x, 3).
  bool matchCube(Value *v, Value *x) {
    if (!v || !v->producer())
      return false;
    if (isOp(*v->producer(), "Pow")) {
      Node *pow = interior(v, "Pow");
      if (!pow || pow->numInputs() != 2 || pow->input(0) != x)
        return false;
      // The exponent may have its own dtype (Pow's T1).
      Value *e = pow->input(1);
      TensorPtr t;
      if (e && e->isInitializer() && !e->isState)
        t = e->initializer();
      else if (e && e->producer() && isOp(*e->producer(), "Constant"))
        t = constantNodeTensor(*e->producer());
      return t && t->numel() == 1 &&
             int64_t(t->dims.size()) <= (x->hasShape ? x->rank() : 0) &&
             t->getAsDouble(0) == 3.0;
    }
    Node *outer = interior(v, "Mul");
    if (!outer || outer->numInputs() != 2)
      return false;
    int xi = outer->input(0) == x ? 0 : outer->input(1) == x ? 1 : -1;
    if (xi < 0)
      return false;
    Node *square = interior(outer->input(size_t(1 - xi)), "Mul");
    return square && square->numInputs() == 2 && square->input(0) == x &&
           square->input(1) == x;
  }

  Node &root_;
  std::vector<Node *> nodes_;
  bool tanhForm_ = false;
};

/// Replaces the matched nodes by one GELU node; the root's output keeps its
/// name (it may be a graph output or bound by name).
void rewrite(Graph &g, const GeluMatch &m, bool onnxGelu,
             std::unordered_set<Node *> &removed) {
  Node *root = m.root;
  std::string name = root->name();
  std::string prefix = name.substr(0, name.rfind('/') + 1);
  std::string op = onnxGelu ? "Gelu" : (m.tanhForm ? "GeluTanh" : "Gelu");
  Node *gelu =
      g.createNode(op, {m.x}, 1, prefix + op, onnxGelu ? "" : kMpcDomain, root);
  if (onnxGelu && m.tanhForm)
    gelu->setAttr("approximate", Attribute::ofString("tanh"));
  Value *out = root->output(0);
  std::string outName = out->name();
  gelu->output(0)->copyTypeFrom(*out);
  g.replaceAllUsesWith(out, gelu->output(0));
  // Constants the pattern read; removed below once nothing reads them.
  std::vector<Value *> operands;
  for (Node *n : m.nodes)
    for (Value *v : n->inputs())
      if (v && v != m.x)
        operands.push_back(v);
  // Consumers first: the root, then the rest in reverse match order (each
  // node's only reader is matched before it).
  std::vector<Node *> order = m.nodes;
  while (!order.empty()) {
    bool progress = false;
    for (auto it = order.begin(); it != order.end();) {
      Node *n = *it;
      if (n->output(0)->uses().empty() && !n->output(0)->isGraphOutput()) {
        g.removeNode(n);
        removed.insert(n);
        it = order.erase(it);
        progress = true;
      } else {
        ++it;
      }
    }
    if (!progress)
      break; // cannot happen: every matched value is read inside the match
  }
  g.renameValue(gelu->output(0), outName);
  removeUnreadConstants(g, operands, removed);
}

} // namespace

void runFuseGelu(Model &model, PassContext &ctx) {
  bool onnxGelu = model.opsetVersion("") >= 20;
  fuseEachGraph(model, ctx,
                [&](Graph &g, Node &n, std::unordered_set<Node *> &removed) {
                  GeluMatch m;
                  if (!GeluMatcher(n).match(m))
                    return false;
                  rewrite(g, m, onnxGelu, removed);
                  ++ctx.stats[m.tanhForm ? "fused-tanh" : "fused-erf"];
                  return true;
                });
}

} // namespace mpc
