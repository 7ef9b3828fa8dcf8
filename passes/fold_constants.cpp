// fold-constants: evaluates shape arithmetic and other constant subgraphs.
//
// Constant nodes become (non-state) initializers; Shape of a value whose
// selected dims are static becomes a constant; then every node of the fold
// list whose inputs are all constants and whose output is small is run on
// the CPU reference kernels (kernels/cpu/kernel_table.h, so a folded value is
// bit-identical to what mpc-run would compute) and replaced by an
// initializer of the same name. This turns the exporter's
// Shape -> Gather -> Unsqueeze -> Concat -> Reshape chains into a constant
// Reshape shape once the input shapes are known. A Dropout whose fixed ratio
// is 0 (or that is in inference mode) and whose mask nobody reads is
// removed: its output is its input. Unused non-state
// initializers are dropped and shapes re-inferred. Runs after infer-shapes
// (it needs the input shapes, e.g. from --input-shape) on the main graph and
// the training algorithm.
#include "kernels/cpu/kernel_table.h"
#include "passes/pass.h"
#include "passes/shape_inference.h"
#include "passes/shape_only_input_note.h"
#include "passes/verify.h"
#include "support/diagnostics.h"

#include <algorithm>
#include <set>
#include <unordered_set>

namespace mpc {
namespace {

/// Ops evaluated at compile time when all their inputs are constants.
const std::set<std::string> kFoldableOps = {"Abs",
                                            "Add",
                                            "And",
                                            "ArgMax",
                                            "ArgMin",
                                            "Cast",
                                            "Ceil",
                                            "Concat",
                                            "ConstantOfShape",
                                            "Cos",
                                            "CumSum",
                                            "Div",
                                            "Equal",
                                            "Exp",
                                            "Expand",
                                            "Flatten",
                                            "Floor",
                                            "Gather",
                                            "GatherND",
                                            "Greater",
                                            "GreaterOrEqual",
                                            "Identity",
                                            "IsInf",
                                            "IsNaN",
                                            "Less",
                                            "LessOrEqual",
                                            "Log",
                                            "Max",
                                            "Min",
                                            "Mod",
                                            "Mul",
                                            "Neg",
                                            "Not",
                                            "Or",
                                            "Pow",
                                            "Range",
                                            "ReduceProd",
                                            "Reshape",
                                            "Round",
                                            "ScatterElements",
                                            "ScatterND",
                                            "Shape",
                                            "Sign",
                                            "Sin",
                                            "Slice",
                                            "Sqrt",
                                            "Squeeze",
                                            "Sub",
                                            "TopK",
                                            "Transpose",
                                            "Trilu",
                                            "Unsqueeze",
                                            "Where",
                                            "Xor"};

/// Outputs larger than this stay computed at run time: folding them would
/// bloat the model for no gain (they are not shape arithmetic).
constexpr int64_t kMaxFoldedElements = 65536;

class Folder {
public:
  Folder(const Model &model, Graph &g, int64_t opset, Statistics &stats)
      : g_(g), opset_(opset), stats_(stats) {
    if (model.training)
      for (const auto &kv : model.training->updateBinding) {
        bound_.insert(kv.first);
        keep_.insert(kv.second);
      }
    // Values the metadata names (e.g. mpc.grad_seed) must survive.
    for (const auto &kv : model.metadata)
      for (const std::string &name : splitNames(kv.second))
        keep_.insert(name);
  }

  void run() {
    for (Node *n : g_.nodeList())
      if (n->isOp("", "Constant")) {
        replaceWithConstant(n, constantNodeTensor(*n));
        ++stats_["constants-to-initializers"];
      }
    for (Node *n : g_.nodeList()) {
      // Earlier folds may have made this node's inputs constant and its
      // output shape static.
      inferNode(*n, opset_);
      if (n->isOp("", "CastLike") && castLikeToCast(*n))
        ++stats_["castlike-to-cast"];
      if (n->isOp("", "Dropout") && identityDropout(*n)) {
        g_.replaceAllUsesWith(n->output(0), n->input(0));
        g_.removeNode(n);
        ++stats_["dropouts-removed"];
        continue;
      }
      if (!n->domain().empty() || !kFoldableOps.count(n->opType()) ||
          n->numOutputs() < 1 || !n->output(0))
        continue;
      if (n->opType() == "Shape") {
        if (TensorPtr t = staticShape(*n)) {
          replaceWithConstant(n, t);
          ++stats_["shapes-folded"];
          ++stats_["folded"];
        }
        continue;
      }
      std::vector<TensorPtr> folded = evaluate(*n);
      if (!folded.empty()) {
        replaceWithConstants(n, folded);
        ++stats_["folded"];
      }
    }
    for (Value *init : std::vector<Value *>(g_.initializers()))
      if (!init->isState && init->uses().empty() && !init->isGraphOutput() &&
          !keep_.count(init->name())) {
        g_.removeInitializer(init);
        ++stats_["initializers-removed"];
      }
    inferGraph(g_, opset_);
  }

private:
  static std::vector<std::string> splitNames(const std::string &s) {
    std::vector<std::string> out;
    std::string cur;
    for (char c : s + ",") {
      if (c != ',') {
        cur += c;
      } else if (!cur.empty()) {
        out.push_back(cur);
        cur.clear();
      }
    }
    return out;
  }

  /// Whether a value's data is fixed for the model's lifetime.
  bool isFixed(const Value &v) const {
    if (!v.isInitializer())
      return false;
    if (!v.isState)
      return true;
    // The importer marks every initializer as state; integer ones that no
    // update binding rewrites (shape constants the exporter stored as
    // initializers) never change. Floating state may be trained.
    return !isFloating(v.dtype) && !bound_.count(v.name());
  }

  /// Shape's output when the dims it selects are all static.
  TensorPtr staticShape(const Node &n) const {
    const Value *x = n.input(0);
    if (!x || !x->hasShape)
      return nullptr;
    int64_t r = x->rank();
    int64_t start = 0, end = r;
    if (opset_ >= 15) {
      start = n.attrInt("start", 0);
      end = n.attrInt("end", r);
    }
    auto clampAxis = [r](int64_t a) {
      return std::clamp<int64_t>(a < 0 ? a + r : a, 0, r);
    };
    start = clampAxis(start);
    end = clampAxis(end);
    std::vector<int64_t> dims;
    for (int64_t i = start; i < end; ++i) {
      if (!x->dims[size_t(i)].isKnown())
        return nullptr;
      dims.push_back(x->dims[size_t(i)].value);
    }
    return std::make_shared<Tensor>(
        Tensor::fromInt64s({int64_t(dims.size())}, dims));
  }

  /// CastLike(x, like) whose `like` has a known type is Cast(x) to that
  /// type: torch's dynamo exporter writes ones_like(tokens) as
  /// Expand(CastLike(1, tokens), Shape(tokens)), constant once it is a Cast.
  static bool castLikeToCast(Node &n) {
    const Value *like = n.numInputs() == 2 ? n.input(1) : nullptr;
    if (!n.input(0) || !like || like->dtype == DType::Undefined)
      return false;
    std::vector<std::pair<std::string, Attribute>> attrs = n.attributes();
    n.setOp("Cast", "");
    n.setAttrs(std::move(attrs)); // saturate, when given, means the same
    n.setAttr("to", Attribute::ofInt(toOnnxDataType(like->dtype)));
    n.truncateInputs(1);
    return true;
  }

  /// A Dropout that is the identity whatever the data: its ratio and
  /// training_mode are fixed and give ratio 0 or inference mode (the CPU
  /// kernel's reading: ratio 0.5 and inference when absent), its mask is
  /// unread and its output is no graph output. Exporters keep
  /// nn.Dropout(p=0.0) (Llama's attention dropout, a fine-tune with dropout
  /// off) in training mode; removed here, the step neither copies its input
  /// twice (forward and gradient) nor plans a buffer for the copy.
  bool identityDropout(const Node &n) const {
    if (!n.input(0) || !n.output(0) || n.output(0)->isGraphOutput() ||
        keep_.count(n.output(0)->name()))
      return false;
    if (n.numOutputs() > 1 && n.output(1) &&
        (!n.output(1)->uses().empty() || n.output(1)->isGraphOutput() ||
         keep_.count(n.output(1)->name())))
      return false;
    double ratio = n.attrFloat("ratio", 0.5f);
    bool training = false;
    const Value *r = n.numInputs() > 1 ? n.input(1) : nullptr;
    const Value *t = n.numInputs() > 2 ? n.input(2) : nullptr;
    if (r) {
      if (!isFixed(*r) || r->initializer()->numel() != 1 ||
          !isFloating(r->dtype))
        return false;
      ratio = r->initializer()->getAsDouble(0);
    }
    if (t) {
      if (!isFixed(*t) || t->initializer()->numel() != 1)
        return false;
      training = t->initializer()->getAsDouble(0) != 0;
    }
    return !training || ratio == 0;
  }

  /// Runs a foldable node whose inputs are fixed: a tensor per output
  /// (TopK has two), or none when it is not.
  std::vector<TensorPtr> evaluate(const Node &n) const {
    std::vector<const Tensor *> inputs;
    for (const Value *in : n.inputs()) {
      if (in && !isFixed(*in))
        return {};
      inputs.push_back(in ? in->initializer().get() : nullptr);
    }
    if (inputs.empty())
      return {};
    // Inference (just run) says how big the result is: never materialise a
    // large Expand or ConstantOfShape only to throw it away.
    for (const Value *out : n.outputs()) {
      auto dims = out && out->hasShape ? concreteDims(out->dims) : std::nullopt;
      if (out && (!dims || elementCount(*dims) < 0 ||
                  elementCount(*dims) > kMaxFoldedElements))
        return {};
    }
    std::vector<Tensor> outputs;
    runCpuNode(n, inputs, outputs);
    if (outputs.size() != n.numOutputs())
      return {};
    std::vector<TensorPtr> folded;
    for (Tensor &t : outputs) {
      if (t.numel() > kMaxFoldedElements)
        return {};
      folded.push_back(std::make_shared<Tensor>(std::move(t)));
    }
    return folded;
  }

  /// Replaces each output of n by an initializer holding its tensor.
  void replaceWithConstants(Node *n, const std::vector<TensorPtr> &ts) {
    std::vector<std::pair<Value *, std::string>> named;
    for (size_t i = 0; i < ts.size(); ++i)
      if (Value *out = n->output(i)) {
        Value *c = g_.addInitializer(out->name() + "_folded", ts[i]);
        c->isState = false;
        g_.replaceAllUsesWith(out, c);
        named.emplace_back(c, out->name());
      }
    g_.removeNode(n); // frees the outputs' names
    for (auto &[c, name] : named)
      g_.renameValue(c, name);
  }

  /// Replaces n's single output by an initializer holding t, same name.
  void replaceWithConstant(Node *n, TensorPtr t) {
    Value *out = n->output(0);
    if (!out) {
      g_.removeNode(n);
      return;
    }
    std::string name = out->name();
    Value *c = g_.addInitializer(name + "_folded", std::move(t));
    c->isState = false;
    g_.replaceAllUsesWith(out, c);
    g_.removeNode(n);
    g_.renameValue(c, name);
  }

  Graph &g_;
  int64_t opset_;
  Statistics &stats_;
  std::unordered_set<std::string> bound_; ///< state rewritten by a binding
  std::unordered_set<std::string> keep_;  ///< names bindings/metadata use
};

} // namespace

void runFoldConstants(Model &model, PassContext &ctx) {
  int64_t opset = model.opsetVersion("");
  if (opset < 0)
    opset = 17;
  // Make sure every stat appears, zero or not, so reports are comparable.
  for (const char *key :
       {"constants-to-initializers", "shapes-folded", "castlike-to-cast",
        "dropouts-removed", "folded", "initializers-removed"})
    ctx.stats[key] += 0;
  // Inference changes no type where the last verify found every type as
  // inference gives it, on a model as that verify left it (passes/verify.h):
  // then a run that folds and removes nothing changes nothing.
  Graph *alg = model.training ? model.training->algorithm.get() : nullptr;
  bool typesAsInferred =
      ctx.unchangedSinceVerify &&
      lastVerifyFoundTypesAsInferred(model, *model.graph, opset) &&
      (!alg || lastVerifyFoundTypesAsInferred(model, *alg, opset));
  // Folding a Shape of a static input erases the evidence of two inputs
  // merged by the exporter: look before it (autodiff looks again, for
  // pipelines without this pass).
  if (!alg)
    noteMergedInputs(*model.graph, ctx);
  Folder(model, *model.graph, opset, ctx.stats).run();
  if (alg)
    Folder(model, *alg, opset, ctx.stats).run();
  ctx.changedNothing =
      typesAsInferred && ctx.stats["constants-to-initializers"] == 0 &&
      ctx.stats["folded"] == 0 && ctx.stats["dropouts-removed"] == 0 &&
      ctx.stats["initializers-removed"] == 0;
}

} // namespace mpc
