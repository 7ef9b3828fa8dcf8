// Shape rules of the training step's ops, what runs between the backward
// pass and the weight update: mpc.AllReduce (data parallel),
// mpc.UnscaleGradients and mpc.UpdateLossScale (dynamic loss scaling),
// mpc.ClipGradNorm, mpc.LearningRate, mpc.IncrementStep, the optimizers
// mpc.SGD and mpc.Adam (ir/mpc_ops.h), and ONNX's training operators
// Adagrad, Momentum and Adam (domain ai.onnx.preview.training, opset 1).
#include "passes/shape_rules/rule_support.h"

#include "ir/mpc_ops.h"
#include "kernels/common/all_reduce_rule.h"
#include "kernels/lr_schedule_attrs.h"

namespace mpc::shape_rules {

void inferClipGradNormLike(Ctx &c, const char *inputs) {
  if (c.n.numOutputs() != c.n.numInputs() + 1)
    fail([&] {
      errorAt(c.n) << "has " << c.n.numInputs() << " " << inputs << " but "
                   << c.n.numOutputs() << " outputs (expected one per gradient "
                   << "and total_norm)";
    });
  float maxNorm = c.floatAttr("max_norm", 0.0f);
  if (!(maxNorm > 0))
    fail([&] {
      errorAt(c.n) << "attribute 'max_norm' must be positive, got " << maxNorm;
    });
  for (size_t i = 0; i < c.n.numInputs(); ++i) {
    c.requireFloat(i);
    c.setLike(i, c.req(i));
  }
  c.set(c.n.numInputs(), shaped(DType::F32, {}));
}

namespace {

void inferUnscaleGradients(Ctx &c) {
  c.req(0);
  requireScalar(c, 0, DType::F32, "scale");
  if (c.n.numOutputs() != c.n.numInputs())
    fail([&] {
      errorAt(c.n) << "has " << c.n.numInputs() - 1 << " gradients but "
                   << c.n.numOutputs()
                   << " outputs (expected found_inf and one "
                   << "per gradient)";
    });
  c.set(0, shaped(DType::Bool, {}));
  for (size_t i = 1; i < c.n.numInputs(); ++i) {
    Value *g = c.req(i);
    c.requireFloat(i);
    c.setShapeOf(i, DType::F32, g);
  }
}

void inferAllReduce(Ctx &c) {
  // The op's own rules (kernels/common/all_reduce_rule.h), as the kernels
  // apply them.
  const size_t first =
      allReduceFirstValue(c.n, c.n.numInputs(), c.n.numOutputs());
  allReduceOpOf(c.n);
  allReduceWireOf(c.n);
  if (first) {
    c.req(0);
    requireScalar(c, 0, DType::Bool, "gate");
  }
  for (size_t i = first; i < c.n.numInputs(); ++i) {
    Value *x = c.req(i);
    c.setShapeOf(i - first, x->dtype, x);
  }
}

void inferUpdateLossScale(Ctx &c) {
  c.req(0);
  c.req(1);
  c.req(2);
  requireScalar(c, 0, DType::F32, "scale");
  requireScalar(c, 1, DType::I64, "growth_tracker");
  requireScalar(c, 2, DType::Bool, "found_inf");
  if (c.floatAttr("growth_factor", 2.0f) <= 0 ||
      c.floatAttr("backoff_factor", 0.5f) <= 0)
    fail([&] {
      errorAt(c.n) << "growth_factor and backoff_factor must be positive";
    });
  if (c.intAttr("growth_interval", 2000) <= 0)
    fail([&] { errorAt(c.n) << "growth_interval must be positive"; });
  c.set(0, shaped(DType::F32, {}));
  c.set(1, shaped(DType::I64, {}));
}

void inferClipGradNorm(Ctx &c) { inferClipGradNormLike(c, "gradients"); }

/// found_inf (optional) and step of the optimizer ops.
/// found_inf, step and the optional `lr` input at `lrInput`.
void checkOptimizerControls(Ctx &c, size_t lrInput) {
  requireScalar(c, 0, DType::Bool, "found_inf");
  c.req(1);
  requireScalar(c, 1, DType::I64, "step");
  if (c.floatAttr("lr", 0.0f) < 0)
    fail([&] { errorAt(c.n) << "attribute 'lr' must not be negative"; });
  if (const Value *lr = c.opt(lrInput)) {
    if (lr->dtype != DType::Undefined && lr->dtype != DType::F64 &&
        lr->dtype != DType::F32)
      fail([&] {
        errorAt(c.n) << "lr (" << c.inputText(lrInput)
                     << ") must be fp64 or fp32, got " << typeText(lr);
      });
    requireScalar(c, lrInput, lr->dtype, "lr");
  }
}

/// The optional loss scale an update unscales its gradient by
/// (`grad_scale`, gradScaleInput): an fp32 scalar, beside an fp32 master.
void checkGradScale(Ctx &c) {
  const size_t at = size_t(gradScaleInput(c.n.domain(), c.n.opType()));
  const Value *scale = c.opt(at);
  if (!scale)
    return;
  requireScalar(c, at, DType::F32, "grad_scale");
  const Value *p = c.n.input(2);
  if (p && p->dtype != DType::Undefined && p->dtype != DType::F32)
    fail([&] {
      errorAt(c.n) << "unscales its gradient by " << c.inputText(at)
                   << " but the parameter " << c.inputText(2) << " is "
                   << dtypeName(p->dtype) << " (the scale is for fp32 masters)";
    });
}

/// An optimizer moment (input i) of parameter input 2: the parameter's
/// dtype, or bf16 beside an fp32 parameter (--optimizer-state-dtype=bf16:
/// the kernels widen it, update in fp32 and round the new moment back).
void requireMomentType(Ctx &c, size_t i) {
  const Value *p = c.n.input(2), *m = c.n.input(i);
  if (!p || !m || p->dtype == DType::Undefined || m->dtype == DType::Undefined)
    return;
  if (m->dtype == p->dtype ||
      (m->dtype == DType::BF16 && p->dtype == DType::F32))
    return;
  fail([&] {
    errorAt(c.n) << c.inputText(i) << " is " << dtypeName(m->dtype)
                 << " but the parameter " << c.inputText(2) << " is "
                 << dtypeName(p->dtype)
                 << " (optimizer state is the parameter's dtype, or bf16 "
                    "beside fp32)";
  });
}

/// An update's optional 16-bit working copy of the new master p' (output
/// lowCopyOutput): Cast<to = low>(p') of an fp32 master, fp16 or bf16.
void setWorkingCopy(Ctx &c, const Value *p) {
  const size_t at = size_t(lowCopyOutput(c.n.domain(), c.n.opType()));
  if (c.n.numOutputs() <= at || !c.n.output(at))
    return;
  DType low = c.floatTypeAttr("low", DType::F16);
  if (low != DType::F16 && low != DType::BF16)
    fail([&] {
      errorAt(c.n) << "attribute 'low' is " << dtypeName(low)
                   << "; the working copy of a master is fp16 or bf16";
    });
  if (p->dtype != DType::Undefined && p->dtype != DType::F32)
    fail([&] {
      errorAt(c.n) << "writes a " << dtypeName(low) << " working copy of "
                   << c.inputText(2) << ", which is " << dtypeName(p->dtype)
                   << " (copies are of fp32 masters)";
    });
  c.setShapeOf(at, low, p);
}

void inferSGD(Ctx &c) {
  checkOptimizerControls(c, 5);
  Value *p = c.req(2);
  c.req(3);
  c.requireFloat(2);
  c.requireFloat(3); // fp32, or fp16/bf16 widened as read
  requireSameShape(c, 2, 3);
  if (c.opt(4)) {
    requireSameShape(c, 2, 4);
    requireMomentType(c, 4);
  }
  if (c.n.numOutputs() >= 2 && c.n.output(1) && !c.opt(4))
    fail(
        [&] { errorAt(c.n) << "has a momentum output but no momentum input"; });
  c.flagAttr("nesterov", false);
  checkGradScale(c);
  c.setLike(0, p);
  if (Value *buf = c.opt(4))
    if (c.n.numOutputs() >= 2 && c.n.output(1))
      c.setLike(1, buf);
  setWorkingCopy(c, p);
}

void inferAdam(Ctx &c) {
  checkOptimizerControls(c, 6);
  Value *p = c.req(2);
  c.req(3);
  Value *m = c.req(4);
  Value *v = c.req(5);
  c.requireFloat(2);
  c.requireFloat(3); // fp32, or fp16/bf16 widened as read
  for (size_t i = 3; i <= 5; ++i)
    requireSameShape(c, 2, i);
  requireMomentType(c, 4);
  requireMomentType(c, 5);
  c.sameDType({4, 5});
  c.flagAttr("decoupled", false);
  checkGradScale(c);
  c.setLike(0, p);
  c.setLike(1, m);
  c.setLike(2, v);
  setWorkingCopy(c, p);
}

void inferLearningRate(Ctx &c) {
  c.req(0);
  requireScalar(c, 0, DType::I64, "step");
  lrScheduleOf(c.n);
  c.set(0, shaped(DType::F64, {}));
}

void inferIncrementStep(Ctx &c) {
  c.req(0);
  requireScalar(c, 0, DType::I64, "step");
  requireScalar(c, 1, DType::Bool, "found_inf");
  c.set(0, shaped(DType::I64, {}));
}

// ONNX's training operators are variadic: inputs are R (learning rate,
// float scalar), T (update count, int64 scalar), then `groups` runs of
// n tensors each (X1..Xn, G1..Gn, then the optimizer state), and outputs
// are `outGroups` runs of n (X1_new..Xn_new, then the new state).
// Output k*n + i is shaped and typed like X_i's state tensor of run k,
// which has X_i's shape. In a namespace of their own: their Adam is not
// mpc's.
namespace preview {

/// Checks a training optimizer with `groups` input runs and `outGroups`
/// output runs; fewer output runs than `outGroups` are allowed (trailing
/// outputs omitted), but always whole runs.
void inferOptimizer(Ctx &c, size_t groups, size_t outGroups) {
  size_t nin = c.n.numInputs();
  if (nin < 2 + groups || (nin - 2) % groups != 0)
    fail([&] {
      errorAt(c.n) << "has " << nin << " inputs; expected R, T and " << groups
                   << " runs of n tensors (2 + " << groups << "n inputs)";
    });
  size_t n = (nin - 2) / groups;
  size_t nout = c.n.numOutputs();
  if (nout == 0 || nout % n != 0 || nout / n > outGroups)
    fail([&] {
      errorAt(c.n) << "has " << nout << " outputs for " << n
                   << " tensors; expected a multiple of " << n << " up to "
                   << outGroups * n;
    });
  c.req(0);
  c.req(1);
  const Value *r = c.n.input(0);
  if (r->dtype != DType::Undefined && r->dtype != DType::F32 &&
      r->dtype != DType::F64)
    fail([&] {
      errorAt(c.n) << "R (" << c.inputText(0)
                   << ") must be float or double, got " << dtypeName(r->dtype);
    });
  if (r->hasShape && r->rank() != 0 &&
      !(r->rank() == 1 && r->dims[0] == Dim(1)))
    fail([&] {
      errorAt(c.n) << "R (" << c.inputText(0) << ") must be a scalar, got "
                   << typeText(r);
    });
  requireScalar(c, 1, DType::I64, "T");
  for (size_t i = 0; i < n; ++i) {
    size_t x = 2 + i;
    c.req(x);
    const Value *xv = c.n.input(x);
    if (xv->dtype != DType::Undefined && xv->dtype != DType::F32 &&
        xv->dtype != DType::F64)
      fail([&] {
        errorAt(c.n) << c.inputText(x) << " must be float or double, got "
                     << dtypeName(xv->dtype);
      });
    for (size_t g = 1; g < groups; ++g) {
      size_t j = 2 + g * n + i;
      c.req(j);
      c.sameDType({x, j});
      requireSameShape(c, x, j);
    }
  }
  for (size_t k = 0; k < nout / n; ++k)
    for (size_t i = 0; i < n; ++i) {
      // Run 0 is X's; run k >= 1 is the state run k + 1 of the inputs
      // (inputs: X, G, state...; outputs: X, state...).
      size_t src = k == 0 ? 2 + i : 2 + (k + 1) * n + i;
      c.setLike(k * n + i, c.n.input(src));
    }
}

void inferAdagrad(Ctx &c) {
  c.floatAttr("decay_factor", 0.0f);
  c.floatAttr("epsilon", 1e-6f);
  c.floatAttr("norm_coefficient", 0.0f);
  inferOptimizer(c, 3, 2);
}

void inferMomentum(Ctx &c) {
  for (const char *a : {"alpha", "beta", "norm_coefficient"})
    if (!c.n.hasAttr(a))
      fail([&] { errorAt(c.n) << "requires attribute '" << a << "'"; });
  c.floatAttr("alpha", 0.0f);
  c.floatAttr("beta", 0.0f);
  c.floatAttr("norm_coefficient", 0.0f);
  if (!c.n.hasAttr("mode"))
    fail([&] { errorAt(c.n) << "requires attribute 'mode'"; });
  std::string mode = c.stringAttr("mode", "standard");
  if (mode != "standard" && mode != "nesterov")
    fail([&] {
      errorAt(c.n) << "attribute 'mode' must be \"standard\" or \"nesterov\", "
                      "got \""
                   << mode << "\"";
    });
  inferOptimizer(c, 3, 2);
}

void inferAdam(Ctx &c) {
  c.floatAttr("alpha", 0.9f);
  c.floatAttr("beta", 0.999f);
  c.floatAttr("epsilon", 1e-6f);
  c.floatAttr("norm_coefficient", 0.0f);
  c.floatAttr("norm_coefficient_post", 0.0f);
  inferOptimizer(c, 4, 3);
}

} // namespace preview

const OpRule kRules[] = {
    {kOnnxPreviewTrainingDomain, "Adagrad", 5, kAny, 1, kAny,
     preview::inferAdagrad},
    {kOnnxPreviewTrainingDomain, "Adam", 6, kAny, 1, kAny, preview::inferAdam},
    {kOnnxPreviewTrainingDomain, "Momentum", 5, kAny, 1, kAny,
     preview::inferMomentum},
    {kMpcDomain, "Adam", 6, 8, 3, 4, inferAdam},
    {kMpcDomain, "ClipGradNorm", 1, kAny, 2, kAny, inferClipGradNorm},
    {kMpcDomain, "IncrementStep", 1, 2, 1, 1, inferIncrementStep},
    {kMpcDomain, "LearningRate", 1, 1, 1, 1, inferLearningRate},
    {kMpcDomain, "SGD", 4, 7, 1, 3, inferSGD},
    {kMpcDomain, "UnscaleGradients", 1, kAny, 1, kAny, inferUnscaleGradients},
    {kMpcDomain, "AllReduce", 1, kAny, 1, kAny, inferAllReduce},
    {kMpcDomain, "UpdateLossScale", 3, 3, 2, 2, inferUpdateLossScale},
};

} // namespace

RuleRows optimizerRules() { return RuleRows(kRules); }

} // namespace mpc::shape_rules
