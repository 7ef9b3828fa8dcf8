// fuse-rmsnorm: RMS normalisation written as arithmetic becomes one node.
//
// transformers' LlamaRMSNorm (LLaMA, Mistral, Qwen2, Gemma, ...) exports as
//   Mul(w, Mul(x, Div(1, Sqrt(Add(ReduceMean(Pow(x, 2)), eps)))))
// (torch.rsqrt is Sqrt and Reciprocal, which the importer lowers to
// Div(1, .)), with identity Casts around it in an fp32 export; ONNX's
// RMSNormalization, lowered at import, is
//   Mul(Div(x, Sqrt(Add(ReduceMean(Mul(x, x)), eps))), w).
// Six passes over the activation, each differentiated, and in mixed
// precision each its own cast or fp32 island. This pass replaces the whole
// pattern by one mpc.RMSNormalization(x, w) <axis, epsilon>
// (ir/mpc_ops.h), whose kernels are the layer-norm kernels without
// centering, and whose gradient is one mpc.RMSNormalizationGrad.
//
// Matched: the square as Pow(x, 2) or Mul(x, x); x may be an fp16/bf16
// input widened by a Cast that only the pattern reads, narrowed back by a
// Cast before the scale (the fused op computes in fp32 and rounds once);
// ReduceMean with keepdims
// over the trailing axes (attribute or constant input); eps and the 1 as
// one-element constants in either operand order; x * (1 / rms) or x / rms;
// an identity Cast before the scale; the scale Mul in either order, the
// scale broadcasting onto the normalised axes only. Refused: an
// intermediate something else reads or that is a graph output, a constant
// off its value, a scale that is x or broadcasts over the leading axes.
//
// Runs after infer-shapes and before autodiff, on the main graph and on a
// training algorithm the model already has.
#include "ir/mpc_ops.h"
#include "passes/fusion_rewrite.h"
#include "passes/pass.h"
#include "passes/shape_inference.h"

#include <algorithm>
#include <optional>
#include <unordered_set>

namespace mpc {
namespace {

struct RmsMatch {
  Value *x = nullptr, *scale = nullptr;
  Node *root = nullptr;
  int64_t axis = -1;
  double epsilon = 0;
  std::vector<Node *> nodes;
};

/// A one-element constant's value (an initializer that is not state, or a
/// Constant node's), else nullopt.
std::optional<double> scalarValue(const Value *v) {
  if (!v || v->isGraphInput() || (v->isInitializer() && v->isState))
    return std::nullopt;
  TensorPtr t = constantValue(*v);
  if (!t || t->numel() != 1 || !isFloating(t->dtype))
    return std::nullopt;
  return t->getAsDouble(0);
}

class RmsMatcher {
public:
  explicit RmsMatcher(Node &mean) : mean_(mean) {}

  bool match(RmsMatch &m) {
    if (!mean_.isOp("", "ReduceMean") || mean_.attrInt("keepdims", 1) != 1 ||
        !single(mean_.output(0)))
      return false;
    // The square, and x.
    Node *sq = producer(mean_.input(0), {"Pow", "Mul"});
    if (!sq || sq->numInputs() != 2)
      return false;
    Value *x = sq->input(0);
    if (sq->opType() == "Pow") {
      std::optional<double> e = scalarValue(sq->input(1));
      if (!e || *e != 2.0)
        return false;
    } else if (sq->input(1) != x) {
      return false;
    }
    if (!x || !x->hasShape || x->rank() < 1 || !isFloating(x->dtype))
      return false;
    if (!trailingAxes(*x, m.axis))
      return false;
    nodes_ = {sq, &mean_};
    // + eps, Sqrt.
    Node *add = consumer(mean_.output(0), "Add");
    if (!add)
      return false;
    int epsAt = add->input(0) == mean_.output(0) ? 1 : 0;
    std::optional<double> eps = scalarValue(add->input(size_t(epsAt)));
    if (!eps || *eps < 0)
      return false;
    Node *sqrt = consumer(add->output(0), "Sqrt");
    if (!sqrt)
      return false;
    // x / rms, or x * (1 / rms).
    Node *div = consumer(sqrt->output(0), "Div");
    if (!div)
      return false;
    Value *normalized = nullptr;
    if (div->input(1) == sqrt->output(0) && div->input(0) == x) {
      normalized = div->output(0);
    } else if (div->input(1) == sqrt->output(0) &&
               scalarValue(div->input(0)) == std::optional<double>(1.0)) {
      Node *mul = consumer(div->output(0), "Mul");
      if (!mul || !(mul->input(0) == x || mul->input(1) == x))
        return false;
      normalized = mul->output(0);
    } else {
      return false;
    }
    // An identity Cast, or the Cast back to the type x was widened from
    // (statistics in fp32 for an fp16/bf16 input: LlamaRMSNorm of a half
    // model, RMSNormalization's lowering), then the scale.
    Value *input = x;
    Node *next = consumer(normalized, "Cast", false);
    if (next && single(normalized)) {
      Node *widen = x->producer();
      if (next->attrInt("to", 0) == toOnnxDataType(x->dtype)) {
        nodes_.push_back(next);
        normalized = next->output(0);
      } else if (widen && widen->isOp("", "Cast") && widen->input(0) &&
                 isFloating(widen->input(0)->dtype) &&
                 next->attrInt("to", 0) ==
                     toOnnxDataType(widen->input(0)->dtype)) {
        nodes_.insert(nodes_.begin(), widen);
        nodes_.push_back(next);
        normalized = next->output(0);
        input = widen->input(0);
      }
    }
    Node *root = consumer(normalized, "Mul", false);
    if (!root || !single(normalized) || root->numInputs() != 2)
      return false;
    Value *w = root->input(0) == normalized ? root->input(1) : root->input(0);
    if (!w || w == x || w == input || w->dtype != input->dtype ||
        !scaleFits(*w, *x, m.axis))
      return false;
    nodes_.push_back(root);
    for (Node *n : nodes_)
      if (n != root && n->numOutputs() != 1)
        return false;
    // The widened x is the pattern's alone: it goes with the pattern.
    if (input != x)
      for (const Use &u : x->uses())
        if (std::find(nodes_.begin(), nodes_.end(), u.user) == nodes_.end())
          return false;
    if (!sameType(*root->output(0), *input))
      return false;
    m.x = input;
    m.scale = w;
    m.root = root;
    m.epsilon = *eps;
    m.nodes = nodes_;
    return true;
  }

private:
  static bool single(const Value *v) {
    return v && !v->isGraphOutput() && v->uses().size() == 1;
  }

  /// v's producer when it is one of `ops` and v is read only here.
  Node *producer(Value *v, std::initializer_list<const char *> ops) {
    if (!single(v) || !v->producer())
      return nullptr;
    for (const char *op : ops)
      if (v->producer()->isOp("", op))
        return v->producer();
    return nullptr;
  }

  /// v's only reader when it is an `op` node (added to the match unless
  /// `take` is false).
  Node *consumer(Value *v, const char *op, bool take = true) {
    if (!v || v->isGraphOutput() || v->uses().size() != 1)
      return nullptr;
    Node *n = v->uses()[0].user;
    if (!n->isOp("", op) || n->numOutputs() != 1 || !n->output(0))
      return nullptr;
    if (take)
      nodes_.push_back(n);
    return n;
  }

  /// ReduceMean's axes are the trailing axes [axis, rank) of x.
  bool trailingAxes(const Value &x, int64_t &axis) const {
    std::vector<int64_t> axes;
    if (mean_.hasAttr("axes")) {
      axes = mean_.attrInts("axes");
    } else if (mean_.numInputs() > 1 && mean_.input(1)) {
      TensorPtr t = constantValue(*mean_.input(1));
      if (!t || t->dtype != DType::I64)
        return false;
      axes = t->toInt64s();
    }
    int64_t r = x.rank();
    if (axes.empty() || int64_t(axes.size()) > r)
      return false;
    for (int64_t &a : axes)
      a = a < 0 ? a + r : a;
    std::sort(axes.begin(), axes.end());
    for (size_t i = 0; i < axes.size(); ++i)
      if (axes[i] != r - int64_t(axes.size()) + int64_t(i))
        return false;
    axis = axes.front();
    return true;
  }

  /// w broadcasts onto x's axes [axis, rank) without adding axes of its own.
  static bool scaleFits(const Value &w, const Value &x, int64_t axis) {
    if (!w.hasShape || w.rank() > x.rank() - axis)
      return false;
    for (int64_t k = 0; k < w.rank(); ++k) {
      const Dim &d = w.dims[size_t(w.rank() - 1 - k)];
      const Dim &xd = x.dims[size_t(x.rank() - 1 - k)];
      if (!(d == Dim(1) || d == xd))
        return false;
    }
    return true;
  }

  Node &mean_;
  std::vector<Node *> nodes_;
};

/// Replaces the matched nodes by one mpc.RMSNormalization; the root's
/// output keeps its name (it may be a graph output or bound by name).
void rewrite(Graph &g, const RmsMatch &m, std::unordered_set<Node *> &removed) {
  Node *root = m.root;
  std::string name = root->name();
  std::string prefix = name.substr(0, name.rfind('/') + 1);
  Node *rms = g.createNode("RMSNormalization", {m.x, m.scale}, 1,
                           prefix + "RMSNormalization", kMpcDomain, root);
  rms->setAttr("axis", Attribute::ofInt(m.axis));
  rms->setAttr("epsilon", Attribute::ofFloat(float(m.epsilon)));
  Value *out = root->output(0);
  std::string outName = out->name();
  rms->output(0)->copyTypeFrom(*out);
  g.replaceAllUsesWith(out, rms->output(0));
  std::vector<Value *> operands;
  for (Node *n : m.nodes)
    for (Value *v : n->inputs())
      if (v && v != m.x && v != m.scale)
        operands.push_back(v);
  // Readers before what they read: the match is in producer order.
  for (auto it = m.nodes.rbegin(); it != m.nodes.rend(); ++it) {
    g.removeNode(*it);
    removed.insert(*it);
  }
  g.renameValue(rms->output(0), outName);
  removeUnreadConstants(g, operands, removed);
}

} // namespace

void runFuseRmsNorm(Model &model, PassContext &ctx) {
  fuseEachGraph(model, ctx,
                [&](Graph &g, Node &n, std::unordered_set<Node *> &removed) {
                  RmsMatch m;
                  if (!RmsMatcher(n).match(m))
                    return false;
                  rewrite(g, m, removed);
                  ++ctx.stats["fused"];
                  return true;
                });
}

} // namespace mpc
