// The autodiff pass: builds the backward graph of the loss w.r.t. the
// trainable parameters.
//
// It clones the main graph into the training algorithm ("train_step"), seeds
// the backward with dLoss = 1 (a non-state scalar initializer the loss-scale
// pass later replaces with the scale), and walks the nodes on a path from a
// parameter to the loss in reverse topological order, calling each op's
// gradient rule (passes/gradients/). Fan-out gradients are summed as a
// balanced tree of Adds per value, built as the contributions arrive. The
// algorithm outputs the loss, then one gradient per parameter, then the new
// running statistics of training-mode BatchNormalizations (bound onto their
// state in update_binding); metadata mpc.loss, mpc.params, mpc.grads and
// mpc.grad_seed tell later passes which values those are. A model with its own
// training algorithm names the loss and the parameters itself (mpc.user_loss,
// mpc.user_params; passes/training_info.h). The backward itself is
// buildBackward (passes/autodiff.h), shared with ONNX's Gradient operator.
// infer-shapes must run first: the rules read static ranks and shapes, and type
// every value they create.
#include "passes/autodiff.h"
#include "ir/mpc_ops.h"
#include "ir/step_metadata.h"
#include "passes/eval_export_note.h"
#include "passes/gradients/gradient_rules.h"
#include "passes/shape_inference.h"
#include "passes/shape_only_input_note.h"
#include "support/diagnostics.h"
#include "support/name_pattern.h"

#include <algorithm>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

namespace mpc {
namespace {

/// Floating-point state initializers selected by --trainable / --frozen, in
/// initializer order. Batch-norm running statistics are state the forward
/// updates, never parameters, whatever the patterns say (SPEC).
std::vector<Value *> trainableParameters(Graph &g, const CompileOptions &opts,
                                         size_t &frozenCount) {
  auto trainable = compileNamePattern(opts.trainable, "trainable");
  auto frozen = compileNamePattern(opts.frozen, "frozen");
  std::unordered_set<const Value *> runningStats = batchNormRunningStats(g);
  std::vector<Value *> params;
  frozenCount = 0;
  for (Value *init : g.initializers()) {
    if (!init->isState || !isFloating(init->dtype) || runningStats.count(init))
      continue;
    bool selected = !trainable || trainable->search(init->name());
    if (frozen && frozen->search(init->name()))
      selected = false;
    if (selected)
      params.push_back(init);
    else
      ++frozenCount;
  }
  return params;
}

/// Says which initializers the torch exporter's signature keeps from
/// training (passes/onnx/torch_export_signature.h), and that it does not
/// record requires_grad=False.
void noteFrozenByExporter(const Model &model, const Graph &g,
                          PassContext &ctx) {
  std::vector<std::string> names;
  for (const std::string &name : model.frozenByExporter)
    if (g.findValue(name))
      names.push_back(name);
  if (names.empty())
    return;
  std::string list;
  for (size_t i = 0; i < names.size() && i < 4; ++i)
    list += (i ? ", " : "") + names[i];
  if (names.size() > 4)
    list += ", ... (" + std::to_string(names.size() - 4) + " more)";
  ctx.notes.push_back(
      std::to_string(names.size()) +
      " floating-point initializer(s) stay frozen: the torch exporter's "
      "signature calls them buffers or constants (" +
      list +
      "); it does not record requires_grad=False on a parameter, so freeze "
      "such parameters with --frozen=REGEX");
}

/// Whether `v` can be a loss: a floating value of known type with no
/// element but one (rank 0 or every dim 1).
bool isScalarFloat(const Value &v) {
  if (!v.hasShape || !isFloating(v.dtype))
    return false;
  for (const Dim &d : v.dims)
    if (d.value != 1)
      return false;
  return true;
}

/// The loss: the pass option loss=NAME, else --loss=NAME, else the graph's
/// single output, else its single scalar floating output (Hugging Face
/// models and `return loss, logits` export the loss beside the logits; the
/// other outputs stay the inference model's). Anything else is an error
/// listing the candidates.
Value *findLoss(Graph &g, PassContext &ctx) {
  auto it = ctx.passOptions.find("loss");
  const std::string *named = it != ctx.passOptions.end() ? &it->second
                             : ctx.options.loss.empty()  ? nullptr
                                                         : &ctx.options.loss;
  if (named) {
    Value *v = g.findValue(*named);
    if (!v) {
      auto err = error();
      err << "--loss: '" << *named << "' is not a value of graph '" << g.name()
          << "'";
      if (!g.outputs().empty()) {
        err << " (its outputs:";
        const char *sep = " ";
        for (const Value *o : g.outputs()) {
          err << sep << o->name();
          sep = ", ";
        }
        err << ")";
      }
    }
    return v;
  }
  if (g.outputs().size() == 1)
    return g.outputs()[0];
  if (g.outputs().empty())
    error() << "graph '" << g.name()
            << "' has no output, so no loss to train; a forward with its "
               "loss as an output is needed";
  std::vector<Value *> scalars;
  std::string listed;
  for (Value *o : g.outputs()) {
    listed += (listed.empty() ? "" : ", ") + o->name() + " " + o->typeString();
    if (isScalarFloat(*o))
      scalars.push_back(o);
  }
  if (scalars.size() == 1) {
    ctx.notes.push_back("the loss is '" + scalars[0]->name() +
                        "', the only scalar floating output of " +
                        std::to_string(g.outputs().size()) +
                        " (--loss=NAME chooses another); the others are the "
                        "inference model's outputs");
    return scalars[0];
  }
  error() << "graph '" << g.name() << "' has " << g.outputs().size()
          << " outputs (" << listed << ") and "
          << (scalars.empty() ? std::string("none")
                              : std::to_string(scalars.size()))
          << " of them " << (scalars.size() == 1 ? "is" : "are")
          << " a scalar float: name the loss with --loss=NAME"
          << (scalars.empty() ? ", or export a forward that returns its mean "
                                "loss (e.g. `return loss, logits`)"
                              : "");
  return nullptr;
}

void checkLoss(const Value &loss) {
  const Node *p = loss.producer();
  if (!p)
    error() << "autodiff: the loss '" << loss.name()
            << "' is a graph input or initializer, not computed by any node";
  if (loss.dtype == DType::Undefined || !loss.hasShape)
    errorAt(*p) << "the type of the loss '" << loss.name()
                << "' is unknown; run infer-shapes before autodiff";
  // The usual cause is a forward that returns its logits (or a loss with
  // reduction='none'): say how to export the loss.
  if (!isScalarFloat(loss))
    errorAt(*p) << "the loss '" << loss.name()
                << "' must be a scalar float (rank 0 or all dims 1), got "
                << loss.typeString()
                << "; export a forward that returns its mean loss (e.g. "
                   "`return loss, logits`), or name it with --loss=NAME";
}

bool isDifferentiableInput(const GradientRuleInfo *info, size_t i) {
  if (!info)
    return true; // unknown ops: assume so, to report them
  const auto &nd = info->nonDifferentiableInputs;
  return std::find(nd.begin(), nd.end(), int(i)) == nd.end();
}

/// A value may carry a gradient unless it is known not to be floating point
/// (untyped values are caught by the type check).
bool mayBeFloating(const Value *v) {
  return v && (v->dtype == DType::Undefined || isFloating(v->dtype));
}

/// A set of values of one graph: a flag per Value::id() (no hashing; autodiff
/// asks about every input of every node several times), with a hash set for
/// the rare value owned by another graph.
class ValueSet {
public:
  explicit ValueSet(const Graph &g) : g_(&g), flags_(g.numValueIds(), 0) {}
  void insert(const Value *v) {
    if (v->owner() != g_)
      foreign_.insert(v);
    else if (v->id() < flags_.size())
      flags_[v->id()] = 1;
    else
      foreign_.insert(v); // created after the analysis began
  }
  bool count(const Value *v) const {
    if (v->owner() == g_ && v->id() < flags_.size() && flags_[v->id()])
      return true;
    return !foreign_.empty() && foreign_.count(v);
  }

private:
  const Graph *g_;
  std::vector<char> flags_;
  std::unordered_set<const Value *> foreign_;
};

/// Which values lie on a path from a parameter to the loss.
struct Activity {
  explicit Activity(const Graph &g) : fromParams(g), toLoss(g) {}
  ValueSet fromParams, toLoss;
  /// Each analysed node's gradient rule (nullptr: none), so the per-input
  /// questions below do not look the op up by name again and again.
  std::unordered_map<const Node *, const GradientRuleInfo *> rules;

  const GradientRuleInfo *ruleOf(const Node &n) const {
    auto it = rules.find(&n);
    return it != rules.end() ? it->second
                             : findGradientRule(n.opType(), n.domain());
  }
  bool active(const Value *v) const {
    return v && fromParams.count(v) && toLoss.count(v);
  }
  /// Input i gets a gradient from node n, whose rule is `info`
  /// (ruleOf(n), looked up once per node by the callers, not per input).
  bool wantsInput(const Node &n, const GradientRuleInfo *info, size_t i) const {
    return active(n.input(i)) && isDifferentiableInput(info, i);
  }
  bool activeNode(const Node &n, const GradientRuleInfo *info) const {
    bool out = false;
    for (const Value *o : n.outputs())
      out |= o && toLoss.count(o);
    if (!out)
      return false;
    for (size_t i = 0; i < n.numInputs(); ++i)
      if (wantsInput(n, info, i))
        return true;
    return false;
  }
  bool activeNode(const Node &n) const { return activeNode(n, ruleOf(n)); }
};

Activity analyze(const Graph &g, const Value *loss,
                 const std::vector<Value *> &params) {
  Activity a(g);
  for (const Value *p : params)
    a.fromParams.insert(p);
  std::vector<Node *> nodes = g.nodeList();
  a.rules.reserve(nodes.size());
  for (const Node *n : nodes) {
    const GradientRuleInfo *info = findGradientRule(n->opType(), n->domain());
    a.rules.emplace(n, info);
    bool reached = false;
    for (size_t i = 0; i < n->numInputs(); ++i)
      reached |= n->input(i) && a.fromParams.count(n->input(i)) &&
                 isDifferentiableInput(info, i);
    if (reached)
      for (const Value *o : n->outputs())
        if (mayBeFloating(o))
          a.fromParams.insert(o);
  }
  a.toLoss.insert(loss);
  for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) {
    const Node *n = *it;
    bool feeds = false;
    for (const Value *o : n->outputs())
      feeds |= o && a.toLoss.count(o);
    if (!feeds)
      continue;
    const GradientRuleInfo *info = a.ruleOf(*n);
    for (size_t i = 0; i < n->numInputs(); ++i)
      if (mayBeFloating(n->input(i)) && isDifferentiableInput(info, i))
        a.toLoss.insert(n->input(i));
  }
  return a;
}

std::string opName(const Node &n) {
  return n.domain().empty() ? n.opType() : n.domain() + "." + n.opType();
}

/// Every node on the path has a rule and typed values.
void checkDifferentiable(const Graph &g, const Activity &a) {
  for (const Node *n : g.nodeList()) {
    const GradientRuleInfo *info = a.ruleOf(*n);
    if (!a.activeNode(*n, info))
      continue;
    if (!info) {
      // The list only for the message (built here, not per compile).
      std::string opList;
      for (const std::string &op : opsWithGradients())
        opList += (opList.empty() ? "" : ", ") + op;
      error() << "no gradient rule for op '" << opName(*n) << "' (node '"
              << n->name() << "'); ops with gradients: " << opList;
    }
    auto checkTyped = [&](const Value *v) {
      if (v->dtype == DType::Undefined || !v->hasShape)
        errorAt(*n) << "the type of '" << v->name()
                    << "' is unknown; run infer-shapes before autodiff";
    };
    for (size_t i = 0; i < n->numInputs(); ++i)
      if (a.wantsInput(*n, info, i))
        checkTyped(n->input(i));
    for (const Value *o : n->outputs())
      if (o && a.toLoss.count(o))
        checkTyped(o);
  }
}

/// Accumulates gradient contributions as a balanced tree of Adds, built as
/// they arrive (pairwise summation, as a binary counter carries): a value
/// with k contributions gets k - 1 Adds of depth about log2 k, and holds at
/// most log2 k + 1 partial sums at a time, so each contribution can be freed
/// soon after it is made (as with a chain) while a huge fan-out (100,000
/// consumers) stays linear and shallow for every later pass. Up to three
/// contributions this is the chain ((g1 + g2) + g3), bit for bit.
class GradientMap {
public:
  /// Gradients are kept for the values that exist now (the forward's): by
  /// Value::id(), with a hash map for any other.
  GradientMap(Graph &g, int64_t opset)
      : g_(g), opset_(opset), byId_(g.numValueIds()) {}

  /// v's whole gradient (nullptr: none), once every contribution is in:
  /// the partial sums left are added, smallest first.
  Value *get(const Value *v, Statistics &stats) {
    Partials *slot = find(v);
    if (!slot || slot->empty())
      return nullptr;
    while (slot->size() > 1)
      carry(v, *slot, stats);
    return slot->front().sum;
  }

  void add(const Value *v, Value *grad, Statistics &stats) {
    Partials &slot = v->owner() == &g_ && v->id() < byId_.size()
                         ? byId_[v->id()]
                         : others_[v];
    slot.push_back({grad, 0});
    // Two partial sums of as many contributions each become one.
    while (slot.size() > 1 && slot.back().level == slot[slot.size() - 2].level)
      carry(v, slot, stats);
  }

private:
  /// The sum of 2^level contributions (at the top level: of any number).
  struct Partial {
    Value *sum;
    int level;
  };
  using Partials = std::vector<Partial>;

  Partials *find(const Value *v) {
    if (v->owner() == &g_ && v->id() < byId_.size())
      return &byId_[v->id()];
    auto it = others_.find(v);
    return it == others_.end() ? nullptr : &it->second;
  }

  /// Replaces the last two partial sums by their Add (earlier one first).
  void carry(const Value *v, Partials &slot, Statistics &stats) {
    Partial b = slot.back();
    slot.pop_back();
    Partial &a = slot.back();
    Node *sum = g_.createNodeWithOutputs(
        "Add", {a.sum, b.sum},
        {g_.uniqueValueName(sanitizedWithSuffix(v->name(), "_grad_sum"))},
        g_.uniqueNodeName(sanitizedWithSuffix(v->name(), "_grad_accum")));
    sum->output(0)->copyTypeFrom(*v);
    sum->output(0)->dtype = b.sum->dtype;
    inferNode(*sum, opset_);
    ++stats["gradient-sums"];
    a = {sum->output(0), std::max(a.level, b.level) + 1};
  }

  Graph &g_;
  int64_t opset_;
  std::vector<Partials> byId_;
  std::unordered_map<const Value *, Partials> others_;
};

/// A parameter holding NaN or infinity trains nothing (every step's loss
/// is NaN, every loss-scaled step is skipped): one line naming it, before
/// the backward is built.
void refuseNonFiniteParameter(const Value &p) {
  if (!p.isInitializer())
    return;
  const std::string note = p.initializer()->nonFiniteNote();
  if (note.empty())
    return;
  error() << "parameter '" << p.name() << "' holds " << note
          << ": no step can train from it (a run that diverged saved "
          << "it, or the file is corrupt)";
}

} // namespace

Backward buildBackward(Graph &g, const std::string &lossName,
                       const std::vector<std::string> &xNames, int64_t opset,
                       Statistics &stats) {
  auto lookUp = [&](const std::vector<std::string> &names) {
    std::vector<Value *> values;
    for (const std::string &name : names) {
      Value *v = g.findValue(name);
      if (!v)
        error() << "autodiff: '" << name << "' is not a value of graph '"
                << g.name() << "'";
      values.push_back(v);
    }
    return values;
  };
  checkLoss(*g.findValue(lossName));
  std::vector<Value *> xs = lookUp(xNames);
  Activity activity = analyze(g, g.findValue(lossName), xs);
  // Forward nodes whose rules need an extra forward output get it now; a
  // replaced node invalidates the analysis, so redo it.
  bool replaced = false;
  for (Node *n : g.nodeList())
    if (activity.activeNode(*n))
      replaced |= prepareForwardNode(g, n, opset) != n;
  Value *loss = g.findValue(lossName);
  if (replaced) {
    xs = lookUp(xNames);
    activity = analyze(g, loss, xs);
  }
  checkDifferentiable(g, activity);

  Backward bw;
  bw.loss = loss;
  bw.xs = xs;
  // The seed dLoss = 1, shaped like the loss.
  std::vector<int64_t> lossDims = *concreteDims(loss->dims);
  Tensor one(loss->dtype, lossDims);
  one.setFromDouble(0, 1.0);
  bw.seed = g.addInitializer(
      g.uniqueValueName(sanitizeIdentifier(loss->name()) + "_grad_seed"),
      std::move(one));

  GradientMap grads(g, opset);
  grads.add(loss, bw.seed, stats);
  bw.nodesBefore = g.numNodes();
  std::vector<Node *> forward = g.nodeList();
  bw.forwardNodes.insert(forward.begin(), forward.end());
  for (auto it = forward.rbegin(); it != forward.rend(); ++it) {
    Node *n = *it;
    const GradientRuleInfo *info = activity.ruleOf(*n);
    if (!activity.activeNode(*n, info))
      continue;
    std::vector<Value *> outGrads;
    outGrads.reserve(n->numOutputs());
    for (const Value *o : n->outputs())
      outGrads.push_back(o ? grads.get(o, stats) : nullptr);
    std::vector<bool> wanted(n->numInputs());
    for (size_t i = 0; i < n->numInputs(); ++i)
      wanted[i] = activity.wantsInput(*n, info, i);
    // The lists move into the context (one allocation each per node).
    GradientContext gc(g, *n, opset, std::move(outGrads), std::move(wanted));
    info->rule(gc);
    for (size_t i = 0; i < n->numInputs(); ++i) {
      if (!gc.wants(i))
        continue;
      Value *gi = gc.inputGrads()[i];
      if (!gi)
        errorAt(*n) << "internal: the gradient rule of " << n->opType()
                    << " built no gradient for input " << i;
      grads.add(n->input(i), gi, stats);
    }
  }
  for (Value *x : xs)
    bw.grads.push_back(activity.active(x) ? grads.get(x, stats) : nullptr);
  return bw;
}

void runAutodiff(Model &model, PassContext &ctx) {
  if (hasMeta(model, meta::kGrads))
    error() << "autodiff: the model already has gradients (metadata "
               "mpc.grads); run autodiff once";
  // Work on a clone of the main graph (or on an existing algorithm) and
  // attach it only once it is complete, so an error leaves the model as it
  // was.
  std::unique_ptr<Graph> fresh;
  if (!model.training)
    fresh = model.graph->clone();
  Graph &g = fresh ? *fresh : *model.training->algorithm;
  int64_t opset = model.opsetVersion("");
  if (opset < 0)
    opset = 17;

  // A model's own training algorithm names its loss and parameters in its
  // Gradient node (passes/training_info.h); otherwise the loss is the
  // graph's output and the parameters are chosen by --trainable/--frozen.
  const std::string *userLoss = readMeta(model, meta::kUserLoss);
  std::string lossName = userLoss ? *userLoss : findLoss(g, ctx)->name();
  if (!g.findValue(lossName))
    error() << "autodiff: the loss '" << lossName << "' (mpc.user_loss) is "
            << "not a value of graph '" << g.name() << "'";
  checkLoss(*g.findValue(lossName));

  size_t frozenCount = 0;
  std::vector<Value *> params;
  if (hasMeta(model, meta::kUserParams)) {
    for (const std::string &name : readMeta(model, meta::kUserParams)) {
      Value *p = g.findValue(name);
      if (!p || !p->isInitializer() || !p->isState)
        error() << "autodiff: parameter '" << name << "' (mpc.user_params) "
                << "is not a state initializer of graph '" << g.name() << "'";
      params.push_back(p);
    }
  } else {
    params = trainableParameters(g, ctx.options, frozenCount);
    noteFrozenByExporter(model, g, ctx);
    noteEvalModeExport(g, params, ctx);
    noteMergedInputs(g, ctx);
  }
  std::vector<std::string> requested;
  for (Value *p : params) {
    requested.push_back(p->name());
    refuseNonFiniteParameter(*p);
  }

  Backward bw = buildBackward(g, lossName, requested, opset, ctx.stats);
  Value *loss = bw.loss;
  Value *seed = bw.seed;
  size_t nodesBefore = bw.nodesBefore;
  const std::unordered_set<const Node *> &forwardNodes = bw.forwardNodes;
  // The parameters the loss reaches and their gradients, side by side.
  std::vector<Value *> reaching, reachingGrads;
  for (size_t i = 0; i < bw.xs.size(); ++i)
    if (bw.grads[i]) {
      reaching.push_back(bw.xs[i]);
      reachingGrads.push_back(bw.grads[i]);
    }
  if (reaching.empty()) {
    auto err = errorAt(*loss->producer());
    err << "no trainable parameter reaches the loss '" << loss->name() << "' ("
        << params.size() << " trainable";
    if (frozenCount)
      err << ", " << frozenCount << " excluded by --trainable/--frozen";
    err << ")";
  }

  // Outputs: the loss, then one gradient per parameter, named <param>_grad.
  g.clearOutputs();
  g.addOutput(loss);
  // Per value of g, by Value::id() (every gradient is a value of g; the
  // flags grow with the Identity nodes made below): how many parameters
  // share it as their gradient, and whether a parameter claimed it.
  std::vector<int> sharedBy(g.numValueIds(), 0);
  for (Value *grad : reachingGrads)
    ++sharedBy[grad->id()];
  std::vector<char> claimedFlags(g.numValueIds(), 0);
  auto claimed = [&](const Value *v) {
    return v->id() < claimedFlags.size() && claimedFlags[v->id()];
  };
  std::vector<std::string> paramNames, gradNames;
  paramNames.reserve(reaching.size());
  gradNames.reserve(reaching.size());
  for (size_t r = 0; r < reaching.size(); ++r) {
    Value *p = reaching[r];
    Value *grad = reachingGrads[r];
    std::string desired = sanitizedWithSuffix(p->name(), "_grad");
    // A parameter's gradient must be a value of its own that nothing else
    // reads (not even another parameter's gradient): later passes rewrite
    // gradients (unscale, cast, clip) and must not change anything else by
    // doing so.
    bool ownable = grad->producer() && !grad->isInitializer() &&
                   !grad->isGraphInput() && grad->uses().empty() &&
                   sharedBy[grad->id()] == 1;
    // A partial gradient may hold the name <param>_grad: move it aside.
    Value *holder = g.findValue(desired);
    if (holder && holder != grad && !claimed(holder) && holder->producer() &&
        !forwardNodes.count(holder->producer()))
      g.renameValue(holder, g.uniqueValueName(desired + "_part"));
    if (!ownable) {
      Node *id = g.createNodeWithOutputs("Identity", {grad},
                                         {g.uniqueValueName(desired)},
                                         g.uniqueNodeName(desired));
      id->output(0)->copyTypeFrom(*grad);
      inferNode(*id, opset);
      grad = id->output(0);
    } else if (grad->name() != desired) {
      g.renameValue(grad, g.uniqueValueName(desired));
    }
    if (grad->id() >= claimedFlags.size())
      claimedFlags.resize(g.numValueIds(), 0);
    claimedFlags[grad->id()] = 1;
    g.addOutput(grad);
    paramNames.push_back(p->name());
    gradNames.push_back(grad->name());
  }

  // Batch-norm running statistics: the forward's new values are step
  // outputs bound onto the state. Like PyTorch's forward they apply on every
  // step, also one the loss scaler skips (mpc_ops.h).
  std::vector<std::pair<std::string, std::string>> statUpdates;
  for (const auto &u : batchNormStateUpdates(g)) {
    bool bound = false; // by a training_info the model came with
    if (model.training)
      for (const auto &existing : model.training->updateBinding)
        bound |= existing.first == u.first->name();
    if (bound)
      continue;
    g.addOutput(u.second);
    statUpdates.emplace_back(u.first->name(), u.second->name());
  }

  if (fresh) {
    fresh->setName("train_step");
    TrainingInfo info;
    info.algorithm = std::move(fresh);
    model.training = std::move(info);
  }
  for (const auto &b : statUpdates)
    model.training->updateBinding.push_back(b);

  bool usesMpc = false;
  for (const Node *n : g.nodeList())
    usesMpc |= std::string_view(n->domain()) == kMpcDomain; // length first
  if (usesMpc && model.opsetVersion(kMpcDomain) < 0)
    model.setOpsetVersion(kMpcDomain, 1);

  writeMeta(model, meta::kLoss, loss->name());
  writeMeta(model, meta::kParams, paramNames);
  writeMeta(model, meta::kGrads, gradNames);
  writeMeta(model, meta::kGradSeed, seed->name());
  ctx.stats["parameters"] = int64_t(reaching.size());
  ctx.stats["backward-nodes"] = int64_t(g.numNodes() - nodesBefore);
}

} // namespace mpc
