// torch.optim.Adafactor's update in standard ops
// (passes/optimizer/adafactor.h).
#include "passes/optimizer/adafactor.h"

#include "ir/builder.h"
#include "passes/training_support.h"
#include "support/joined.h"

#include <cmath>
#include <limits>

namespace mpc {
namespace {

/// Builds the update's nodes at the end of the algorithm, each output named
/// after `prefix` and typed as given.
class Ops {
public:
  Ops(Model &model, Graph &g, std::string prefix)
      : model_(model), g_(g), b_(g), prefix_(std::move(prefix)) {}

  Value *op(const char *type, const std::vector<Value *> &inputs,
            const std::string &name, DType t, const std::vector<int64_t> &dims,
            const Builder::Attrs &attrs = {}) {
    return named(type, inputs, prefix_ + name, t, dims, attrs);
  }
  /// op() with the output named `name` as it is (no prefix).
  Value *named(const char *type, const std::vector<Value *> &inputs,
               const std::string &name, DType t,
               const std::vector<int64_t> &dims,
               const Builder::Attrs &attrs = {}) {
    Node *n = createNamedNode(g_, type, "", inputs, {name}, name);
    n->setAttrs(attrs);
    n->output(0)->setType(t, toDims(dims));
    return n->output(0);
  }
  Value *scalarOp(const char *type, const std::vector<Value *> &inputs,
                  const std::string &name) {
    return op(type, inputs, name, DType::F32, {});
  }
  Value *constant(double v, const std::string &name) {
    return b_.scalar(DType::F32, v, prefix_ + name);
  }
  /// ReduceSum of x over `axes`, keeping them (dims: the result's).
  Value *sum(Value *x, const std::vector<int64_t> &axes,
             const std::string &name, std::vector<int64_t> dims) {
    std::vector<Value *> inputs = {x};
    Builder::Attrs attrs = {{"keepdims", Attribute::ofInt(1)}};
    b_.reduceSumAxes(model_.opsetVersion(""), axes, inputs, attrs,
                     prefix_ + name + "_axes");
    return op("ReduceSum", inputs, name, DType::F32, std::move(dims), attrs);
  }
  /// torch.lerp(self, end, weight) with ATen's two formulas, the scalar
  /// weight's |w| < 0.5 (`small`) choosing at run time.
  Value *lerp(Value *self, Value *end, const AdafactorStep &s,
              const std::string &name, const std::vector<int64_t> &dims) {
    Value *diff = op("Sub", {end, self}, name + "_diff", DType::F32, dims);
    Value *near = op(
        "Add",
        {self, op("Mul", {s.betaT, diff}, name + "_w_diff", DType::F32, dims)},
        name + "_lerp_small", DType::F32, dims);
    Value *far = op("Sub",
                    {end, op("Mul", {diff, s.oneMinusBeta}, name + "_diff_1_w",
                             DType::F32, dims)},
                    name + "_lerp_large", DType::F32, dims);
    return op("Where", {s.smallBeta, near, far}, name + "_lerp", DType::F32,
              dims);
  }
  /// sqrt(sum of x^2) / sqrt(numel): the RMS torch's norm(2) / numel**0.5
  /// gives, as an fp32 scalar.
  Value *rms(Value *x, int64_t rank, int64_t numel, const std::string &name) {
    std::vector<int64_t> all(size_t(rank), 1), axes;
    for (int64_t a = 0; a < rank; ++a)
      axes.push_back(a);
    Value *sq =
        op("Mul", {x, x}, name + "_sq", DType::F32, *concreteDims(x->dims));
    Value *total = sum(sq, axes, name + "_sum_sq", all);
    Value *norm = op("Sqrt", {total}, name + "_norm", DType::F32, all);
    return op("Div", {norm, constant(std::sqrt(double(numel)), name + "_n")},
              name, DType::F32, all);
  }

private:
  Model &model_;
  Graph &g_;
  Builder b_;
  std::string prefix_;
};

} // namespace

AdafactorStep adafactorStep(Model &model, Graph &g, Value *step, Value *lr,
                            Value *skip, const AdafactorConfig &c) {
  Ops o(model, g, "adafactor_");
  AdafactorStep s;
  s.skip = skip;
  const Builder::Attrs toF32 = {
      {"to", Attribute::ofInt(toOnnxDataType(DType::F32))}};
  const double eps1 =
      c.eps1 >= 0 ? c.eps1 : double(std::numeric_limits<float>::epsilon());
  s.one = o.constant(1, "one");
  s.eps1 = o.constant(eps1, "eps1");
  s.eps1Sq = o.constant(eps1 * eps1, "eps1_sq");
  s.eps2 = o.constant(c.eps2, "eps2");
  s.d = o.constant(c.d, "d");
  Value *t = o.scalarOp(
      "Add", {o.op("Cast", {step}, "step_f32", DType::F32, {}, toF32), s.one},
      "t");
  s.betaT =
      o.scalarOp("Pow", {t, o.constant(c.beta2Decay, "beta2_decay")}, "beta_t");
  s.smallBeta = o.op(
      "Less",
      {o.scalarOp("Abs", {s.betaT}, "beta_t_abs"), o.constant(0.5, "half")},
      "beta_t_small", DType::Bool, {});
  s.oneMinusBeta = o.scalarOp("Sub", {s.one, s.betaT}, "one_minus_beta_t");
  Value *rate = lr ? o.op("Cast", {lr}, "lr_f32", DType::F32, {}, toF32)
                   : o.constant(c.lr, "lr");
  Value *invSqrtT = o.scalarOp(
      "Div", {s.one, o.scalarOp("Sqrt", {t}, "sqrt_t")}, "inv_sqrt_t");
  s.rho = o.scalarOp("Min", {rate, invSqrtT}, "rho");
  if (c.weightDecay != 0)
    s.decayFactor = o.scalarOp(
        "Sub",
        {s.one,
         o.scalarOp("Mul", {rate, o.constant(c.weightDecay, "weight_decay")},
                    "lr_wd")},
        "decay_factor");
  return s;
}

Value *addAdafactorUpdate(Model &model, Graph &g, Value *p, Value *grad,
                          const AdafactorStep &s, const AdafactorConfig &c,
                          std::vector<std::string> &moments) {
  const std::vector<int64_t> dims = p->initializer()->dims;
  const int64_t rank = int64_t(dims.size());
  int64_t numel = 1;
  for (int64_t d : dims)
    numel *= d;
  Ops o(model, g, p->name() + "_adafactor_");

  // The per-tensor scalars keep the parameter's rank (sizes 1): ReduceSum
  // with keepdims.
  const std::vector<int64_t> ones(size_t(rank), 1);
  Value *alpha = o.op("Mul",
                      {o.op("Max", {s.eps2, o.rms(p, rank, numel, "p_rms")},
                            "p_scale", DType::F32, ones),
                       s.rho},
                      "alpha", DType::F32, ones);
  Value *param = p;
  if (s.decayFactor)
    param = o.op("Mul", {p, s.decayFactor}, "decayed", DType::F32, dims);

  Value *sq = o.op("Mul", {grad, grad}, "g_sq", DType::F32, dims);
  Value *variance = nullptr;
  std::vector<std::pair<Value *, Value *>> state; // (old, new)
  if (rank > 1) {
    // row_mean = norm(g, dim=-1)^2 / C, col_mean = norm(g, dim=-2)^2 / R.
    auto mean = [&](int64_t axis, const char *name) {
      std::vector<int64_t> kept = dims;
      kept[size_t(rank + axis)] = 1;
      Value *ss = o.sum(sq, {rank + axis}, std::string(name) + "_sum_sq", kept);
      Value *norm =
          o.op("Sqrt", {ss}, std::string(name) + "_norm", DType::F32, kept);
      Value *norm2 = o.op("Mul", {norm, norm}, std::string(name) + "_norm_sq",
                          DType::F32, kept);
      return std::make_pair(
          o.op("Div",
               {norm2, o.constant(double(dims[size_t(rank + axis)]),
                                  std::string(name) + "_count")},
               std::string(name) + "_mean", DType::F32, kept),
          kept);
    };
    auto [rowMean, rowDims] = mean(-1, "row");
    auto [colMean, colDims] = mean(-2, "col");
    Value *row = addState(model, joined("", p->name(), "_row_var"),
                          Tensor::zeros(DType::F32, rowDims));
    Value *col = addState(model, joined("", p->name(), "_col_var"),
                          Tensor::zeros(DType::F32, colDims));
    Value *rowNew = o.lerp(row, rowMean, s, "row_var", rowDims);
    Value *colNew = o.lerp(col, colMean, s, "col_var", colDims);
    state = {{row, rowNew}, {col, colNew}};
    Value *outer = o.op("MatMul", {rowNew, colNew}, "outer", DType::F32, dims);
    // row_var.mean(dim=-2, keepdim=True).clamp_(min=eps1)
    std::vector<int64_t> rowMeanDims = rowDims;
    rowMeanDims[size_t(rank - 2)] = 1;
    Value *rowSum = o.sum(rowNew, {rank - 2}, "row_var_sum", rowMeanDims);
    Value *rowAvg = o.op(
        "Div", {rowSum, o.constant(double(dims[size_t(rank - 2)]), "rows")},
        "row_var_mean", DType::F32, rowMeanDims);
    Value *rowFloor =
        o.op("Max", {rowAvg, s.eps1}, "row_var_floor", DType::F32, rowMeanDims);
    variance = o.op("Div", {outer, rowFloor}, "var_estimate", DType::F32, dims);
  } else {
    Value *v = addState(model, joined("", p->name(), "_variance"),
                        Tensor::zeros(DType::F32, dims));
    Value *vNew = o.lerp(v, sq, s, "variance", dims);
    state = {{v, vNew}};
    variance = vNew;
  }
  // update = var_estimate.clamp_(min=eps1 * eps1).rsqrt_() * grad
  Value *floored =
      o.op("Max", {variance, s.eps1Sq}, "var_floor", DType::F32, dims);
  Value *inv = o.op(
      "Div", {s.one, o.op("Sqrt", {floored}, "var_sqrt", DType::F32, dims)},
      "var_rsqrt", DType::F32, dims);
  Value *update = o.op("Mul", {inv, grad}, "update", DType::F32, dims);
  // denom = max(1, rms(update) / d); param += (-alpha / denom) * update
  Value *denom =
      o.op("Max",
           {s.one, o.op("Div", {o.rms(update, rank, numel, "u_rms"), s.d},
                        "u_rms_d", DType::F32, ones)},
           "denom", DType::F32, ones);
  Value *negStep =
      o.op("Neg", {o.op("Div", {alpha, denom}, "step_size", DType::F32, ones)},
           "neg_step_size", DType::F32, ones);
  Value *updated = o.op(
      "Add", {param, o.op("Mul", {negStep, update}, "delta", DType::F32, dims)},
      "updated", DType::F32, dims);

  // A skipped step keeps every value: Where copies them bit for bit.
  auto gate = [&](Value *before, Value *after) {
    if (!s.skip)
      return after;
    return o.named("Where", {s.skip, before, after}, before->name() + "_new",
                   DType::F32, *concreteDims(before->dims));
  };
  for (auto &[old, now] : state) {
    bindState(model, old, gate(old, now));
    moments.push_back(old->name());
  }
  return gate(p, updated);
}

} // namespace mpc
