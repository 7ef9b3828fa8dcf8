// sync-batchnorm (mpc-opt --sync-batchnorm, with --data-parallel): every
// training-mode BatchNormalization of the step normalises with the
// statistics of the global batch, as torch.nn.SyncBatchNorm does under DDP.
//
// With --data-parallel alone each rank normalises with its own B samples,
// so N ranks of B train a different model than one process of N*B (and
// small per-rank batches give noisy statistics). Here the forward of each
// training-mode BatchNormalization(X, scale, B, running_mean, running_var)
// becomes
//   count        elements per channel of this rank's X (a constant, or
//                Shape arithmetic for a symbolic batch)
//   sum, total = mpc.AllReduce<sum>(ReduceSum(X), count)
//   mean       = sum / total
//   squares    = mpc.AllReduce<sum>(ReduceSum((X - mean)^2))
//   var        = squares / total                       (biased, for Y)
//   Y          = BatchNormalization(X, scale, B, mean, var)   (inference form)
//   running_mean' = running_mean * momentum + mean * (1 - momentum)
//   running_var'  = running_var * momentum + squares / (total - 1) * (1 - m.)
// (two passes over X, as the CPU kernel's own statistics; totals rather than
// means, so ranks with different batch sizes weigh each sample alike), and
// its gradient mpc.BatchNormalizationGrad(dY, X, scale) becomes
//   dX0, dScale, dBias = BatchNormalizationGrad(dY, X, scale, mean, var)
//   sum_dy, sum_dy_xhat = mpc.AllReduce<sum>(dBias, dScale)
//   dX = dX0 - scale * inv_std / total * (sum_dy + xhat * sum_dy_xhat)
// the training-mode backward over the global batch (SyncBatchNorm's backward
// all-reduces the same two sums). dScale and dBias stay this rank's own:
// --data-parallel averages them with every other gradient. With one rank
// (any single process) every AllReduce is a copy and the step computes what
// the plain batch norm does, up to the order of its sums.
//
// Runs after autodiff (it rewrites the gradient autodiff wrote, so no
// gradient rule is involved) and before autocast, whose policy then keeps
// the statistics in fp32 (ReduceSum is an fp32 island, the element-wise ops
// follow their widest input). The forward graph (inference export) keeps
// the plain op. Values keep the names autodiff gave them: metadata and the
// running statistics' update bindings stay valid.
#include "ir/batch_norm_mode.h"
#include "ir/builder.h"
#include "ir/mpc_ops.h"
#include "ir/step_metadata.h"
#include "ir/value_takeover.h"
#include "passes/registry.h"
#include "passes/shape_inference.h"
#include "passes/training_support.h"
#include "support/diagnostics.h"

#include <algorithm>
#include <cctype>

namespace mpc {
namespace {

constexpr const char *kPass = "sync-batchnorm";

/// Creates the rewrite's nodes before one node, named after one stem, each
/// typed by shape inference as it is made.
class Emitter {
public:
  Emitter(Graph &g, int64_t opset, Node *before, std::string stem)
      : g_(g), b_(g), opset_(opset), before_(before), stem_(std::move(stem)) {}

  Node *node(const std::string &type, const std::vector<Value *> &inputs,
             const std::vector<std::string> &hints,
             const std::vector<std::pair<std::string, Attribute>> &attrs = {},
             const std::string &domain = "") {
    std::vector<std::string> names;
    for (const std::string &h : hints)
      names.push_back(stem_ + "_" + h);
    Node *n = createNamedNode(g_, type, domain, inputs, names, names.front(),
                              before_);
    for (const auto &a : attrs)
      n->setAttr(a.first, a.second);
    inferNode(*n, opset_);
    return n;
  }

  Value *op(const std::string &type, const std::vector<Value *> &inputs,
            const std::string &hint,
            const std::vector<std::pair<std::string, Attribute>> &attrs = {}) {
    return node(type, inputs, {hint}, attrs)->output(0);
  }

  Value *scalar(DType t, double v, const std::string &hint) {
    return b_.scalar(t, v, stem_ + "_" + hint);
  }

  Value *int64s(const std::vector<int64_t> &v, const std::string &hint) {
    return b_.int64s(v, stem_ + "_" + hint);
  }

  /// v itself when it already has dtype t, else a Cast.
  Value *castTo(Value *v, DType t, const std::string &hint) {
    if (v->dtype == t)
      return v;
    return op("Cast", {v}, hint, {{"to", Attribute::ofInt(toOnnxDataType(t))}});
  }

  /// v (of X's rank with keepdims, or [C]) reshaped to `dims`.
  Value *reshape(Value *v, const std::vector<int64_t> &dims,
                 const std::string &hint) {
    return op("Reshape", {v, int64s(dims, hint + "_shape")}, hint);
  }

  /// ReduceSum of v over every axis but 1, keepdims: [1, C, 1, ...].
  Value *sumPerChannel(Value *v, const std::string &hint) {
    Builder::Attrs attrs = {{"keepdims", Attribute::ofInt(1)}};
    std::vector<Value *> inputs = {v};
    b_.reduceSumAxes(opset_, axesButChannel(v->rank()), inputs, attrs,
                     stem_ + "_" + hint + "_axes");
    return op("ReduceSum", inputs, hint, attrs);
  }

  /// mpc.AllReduce<sum>(values...), one output per value.
  Node *allReduceSum(const std::vector<Value *> &values,
                     const std::vector<std::string> &hints) {
    return node("AllReduce", values, hints,
                {{"reduction", Attribute::ofString("sum")}}, kMpcDomain);
  }

  /// The elements per channel of x (every dim but 1) in dtype t: a constant
  /// when x's dims are known, else the product of the unknown ones read by
  /// Shape (and the known ones' product) when the step runs.
  Value *elementsPerChannel(Value *x, DType t) {
    int64_t known = 1;
    std::vector<int64_t> unknownAxes;
    for (int64_t d = 0; d < x->rank(); ++d)
      if (d != 1) {
        if (x->dims[size_t(d)].isKnown())
          known *= x->dims[size_t(d)].value;
        else
          unknownAxes.push_back(d);
      }
    if (unknownAxes.empty())
      return scalar(t, double(known), "local_count");
    // Each dim is converted before the product: the CUDA backend
    // multiplies floats only, and converts int64 to fp32 (then widens).
    Value *shape = op("Shape", {x}, "shape");
    Value *product = nullptr;
    for (int64_t d : unknownAxes) {
      const std::string name = "dim" + std::to_string(d);
      Value *dim =
          op("Gather",
             {shape, scalar(DType::I64, double(d), "axis" + std::to_string(d))},
             name);
      dim = castTo(castTo(dim, DType::F32, name + "_fp32"), t, name + "_wide");
      product = product ? op("Mul", {product, dim}, "dims") : dim;
    }
    if (known != 1)
      product = op("Mul", {product, scalar(t, double(known), "known_dims")},
                   "local_count");
    return product;
  }

private:
  Graph &g_;
  Builder b_; ///< makes the constants (initializers: placed nowhere)
  int64_t opset_;
  Node *before_;
  std::string stem_;
};

/// What the forward's rewrite leaves for the gradient's.
struct GlobalStatistics {
  Value *x = nullptr;     ///< X widened to the statistics' dtype
  Value *total = nullptr; ///< elements per channel over every rank (scalar)
  Value *meanC = nullptr, *varC = nullptr; ///< [C], widened dtype
  Value *mean = nullptr, *var = nullptr;   ///< [C], the BN's mean/var dtype
};

std::string stemOf(const Node &n) {
  std::string s = n.name().empty() ? n.output(0)->name() : n.name();
  // Node names of torch exports ("/bn/BatchNormalization") make poor value
  // names: keep letters, digits and '_' ('/' and '.' become '_').
  std::string out;
  for (char c : s)
    out += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  while (!out.empty() && out.front() == '_')
    out.erase(out.begin());
  return out.empty() ? "batch_norm" : out;
}

GlobalStatistics rewriteForward(Graph &g, int64_t opset, Node *n,
                                ValueTakeovers &takeovers) {
  Value *x = n->input(0);
  if (!x->hasShape || x->rank() < 2)
    errorAt(*n) << kPass << ": input X '" << x->name()
                << "' needs a known rank of at least 2 (got " << x->typeString()
                << ")";
  for (size_t i = 1; i < 5; ++i)
    if (!n->input(i))
      errorAt(*n) << kPass << ": input " << i << " is missing";
  Value *scale = n->input(1), *bias = n->input(2), *runMean = n->input(3),
        *runVar = n->input(4);
  if (!scale->hasShape || scale->rank() != 1 || !scale->dims[0].isKnown())
    errorAt(*n) << kPass << ": scale '" << scale->name()
                << "' needs a known [C] shape (got " << scale->typeString()
                << ")";
  const int64_t c = scale->dims[0].value;
  const DType w = x->dtype == DType::F64 ? DType::F64 : DType::F32;
  const DType statsType = runMean->dtype;

  Emitter e(g, opset, n, stemOf(*n));
  GlobalStatistics s;
  s.x = e.castTo(x, w, "x_wide");
  Node *totals = e.allReduceSum(
      {e.sumPerChannel(s.x, "local_sum"), e.elementsPerChannel(x, w)},
      {"sum", "total_count"});
  Value *sum = totals->output(0);
  s.total = totals->output(1);
  Value *meanK = e.op("Div", {sum, s.total}, "mean_kept");
  Value *dev = e.op("Sub", {s.x, meanK}, "deviation");
  Value *squares =
      e.allReduceSum(
           {e.sumPerChannel(e.op("Mul", {dev, dev}, "squared_deviation"),
                            "local_squares")},
           {"squares"})
          ->output(0);
  Value *varK = e.op("Div", {squares, s.total}, "var_kept");
  s.meanC = e.reshape(meanK, {c}, "mean");
  s.varC = e.reshape(varK, {c}, "var");
  s.mean = e.castTo(s.meanC, statsType, "mean_stats");
  s.var = e.castTo(s.varC, statsType, "var_stats");

  std::vector<std::pair<std::string, Attribute>> attrs = {
      {"epsilon", Attribute::ofFloat(n->attrFloat("epsilon", 1e-5f))}};
  Value *y =
      e.op("BatchNormalization", {x, scale, bias, s.mean, s.var}, "y", attrs);
  takeovers.take(n->output(0), y);

  // The running statistics with the kernel's arithmetic (kernels/cpu/
  // batch_norm.cpp): old * momentum + new * (1 - momentum), in their dtype.
  const float momentum = n->attrFloat("momentum", 0.9f);
  Value *keep = e.scalar(statsType, double(momentum), "momentum");
  Value *take =
      e.scalar(statsType, double(1.0f - momentum), "one_minus_momentum");
  auto blend = [&](Value *old, Value *fresh, const std::string &hint) {
    return e.op("Add",
                {e.op("Mul", {old, keep}, hint + "_kept"),
                 e.op("Mul", {fresh, take}, hint + "_taken")},
                hint);
  };
  if (n->numOutputs() > 1 && n->output(1))
    takeovers.take(n->output(1), blend(runMean, s.mean, "running_mean"));
  if (n->numOutputs() > 2 && n->output(2)) {
    Value *unbiased =
        e.op("Div",
             {squares,
              e.op("Sub", {s.total, e.scalar(w, 1, "one")}, "count_less_one")},
             "unbiased_var_kept");
    Value *unbiasedC = e.castTo(e.reshape(unbiased, {c}, "unbiased_var"),
                                statsType, "unbiased_var_stats");
    takeovers.take(n->output(2), blend(runVar, unbiasedC, "running_var"));
  }
  // BatchNormalization-9's saved_mean and saved_var: the batch statistics.
  if (n->numOutputs() > 3 && n->output(3))
    takeovers.take(n->output(3),
                   e.castTo(s.meanC, n->output(3)->dtype, "saved_mean"));
  if (n->numOutputs() > 4 && n->output(4))
    takeovers.take(n->output(4),
                   e.castTo(s.varC, n->output(4)->dtype, "saved_var"));
  g.removeNode(n);
  return s;
}

void rewriteGradient(Graph &g, int64_t opset, Node *grad,
                     const GlobalStatistics &s, ValueTakeovers &takeovers) {
  Value *dY = grad->input(0), *x = grad->input(1), *scale = grad->input(2);
  const float epsilon = grad->attrFloat("epsilon", 1e-5f);
  const DType w = s.x->dtype;
  Emitter e(g, opset, grad, stemOf(*grad));
  Node *local = e.node("BatchNormalizationGrad", {dY, x, scale, s.mean, s.var},
                       {"dx_direct", "dscale", "dbias"},
                       {{"epsilon", Attribute::ofFloat(epsilon)}}, kMpcDomain);
  Value *direct = local->output(0), *dScale = local->output(1),
        *dBias = local->output(2);
  if (Value *dX = grad->output(0)) {
    Node *sums = e.allReduceSum({dBias, dScale}, {"sum_dy", "sum_dy_xhat"});
    Value *sumDy = e.castTo(sums->output(0), w, "sum_dy_wide");
    Value *sumDyXhat = e.castTo(sums->output(1), w, "sum_dy_xhat_wide");
    // inv_std as the kernels compute it: 1 / sqrt(var + epsilon).
    Value *invStd =
        e.op("Div",
             {e.scalar(w, 1, "one"),
              e.op("Sqrt",
                   {e.op("Add", {s.varC, e.scalar(w, epsilon, "epsilon")},
                         "var_eps")},
                   "std")},
             "inv_std");
    // dX = dX0 - (X * a + b) per channel, a = k * inv_std * sum_dy_xhat /
    // total and b = k * sum_dy / total - mean * a, k = scale * inv_std.
    Value *k = e.op("Mul", {e.castTo(scale, w, "scale_wide"), invStd}, "k");
    Value *a =
        e.op("Div",
             {e.op("Mul", {e.op("Mul", {k, invStd}, "k_inv_std"), sumDyXhat},
                   "slope_sum"),
              s.total},
             "slope");
    Value *b =
        e.op("Sub",
             {e.op("Div", {e.op("Mul", {k, sumDy}, "offset_sum"), s.total},
                   "offset_mean"),
              e.op("Mul", {s.meanC, a}, "mean_slope")},
             "offset");
    std::vector<int64_t> keptDims(size_t(x->rank()), 1);
    keptDims[1] = scale->dims[0].value;
    Value *correction = e.op(
        "Add",
        {e.op("Mul", {s.x, e.reshape(a, keptDims, "slope_kept")}, "x_slope"),
         e.reshape(b, keptDims, "offset_kept")},
        "correction");
    Value *fresh =
        e.op("Sub", {e.castTo(direct, w, "dx_direct_wide"), correction}, "dx");
    takeovers.take(dX, e.castTo(fresh, dX->dtype, "dx_narrow"));
  }
  takeovers.take(grad->numOutputs() > 1 ? grad->output(1) : nullptr, dScale);
  takeovers.take(grad->numOutputs() > 2 ? grad->output(2) : nullptr, dBias);
  g.removeNode(grad);
}

/// The training-form gradient node autodiff wrote for batch norm n (it reads
/// n's X and scale, without statistics), or nullptr when nothing was
/// differentiated through n. Looked for among X's readers.
Node *gradientOf(const Node &n, const std::vector<Node *> &taken) {
  for (const Use &u : n.input(0)->uses()) {
    Node *grad = u.user;
    if (u.index == 1 && grad->isOp(kMpcDomain, "BatchNormalizationGrad") &&
        grad->numInputs() == 3 && grad->input(2) == n.input(1) &&
        grad->attrFloat("epsilon", 1e-5f) == n.attrFloat("epsilon", 1e-5f) &&
        std::find(taken.begin(), taken.end(), grad) == taken.end())
      return grad;
  }
  return nullptr;
}

} // namespace

void runSyncBatchNorm(Model &model, PassContext &ctx) {
  if (!ctx.options.syncBatchNorm) {
    ctx.changedNothing = true;
    return;
  }
  if (!ctx.options.dataParallel)
    throw Error(std::string(kPass) +
                ": --sync-batchnorm needs --data-parallel (the statistics "
                "are the ranks' global batch's)");
  checkPassOrder(model, kPass);
  TrainingValues tv = requireGradients(model, kPass);
  Graph &g = *tv.algorithm;
  const int64_t opset = model.opsetVersion("");
  std::vector<Node *> norms, grads;
  for (const auto &owned : g.nodes())
    if (owned->isOp("", "BatchNormalization") && isBatchNormTraining(*owned))
      norms.push_back(owned.get());
  for (Node *n : norms)
    grads.push_back(gradientOf(*n, grads));
  ensureMpcOpset(model);
  ValueTakeovers takeovers(g);
  for (size_t i = 0; i < norms.size(); ++i) {
    GlobalStatistics s = rewriteForward(g, opset, norms[i], takeovers);
    if (grads[i])
      rewriteGradient(g, opset, grads[i], s, takeovers);
  }
  takeovers.finish();
  writeMeta(model, meta::kSyncBatchNorm, std::to_string(norms.size()));
  ctx.stats["batch-norms"] = int64_t(norms.size());
  ctx.stats["with-gradient"] = int64_t(
      norms.size() - size_t(std::count(grads.begin(), grads.end(), nullptr)));
}

} // namespace mpc
