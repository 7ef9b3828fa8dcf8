// CUDA runners of the mpc training-step ops: UnscaleGradients,
// UpdateLossScale, ClipGradNorm, SGD, Adam/AdamW, IncrementStep,
// LearningRate, and AllReduce (NCCL across ranks).
//
// Operands are validated as the CPU kernels validate them (kernels/cpu/
// optimizer.cpp). found_inf goes to the kernels as a device byte and is
// read there: nothing here looks at its value. The optimizer's per-step
// scalars (bias corrections, -lr) are computed on the host from the step
// counter by the shared sgdScalars/adamScalars, exactly as the CPU does,
// when staged; in a device-resident step the step counter is state on the
// device, so the kernels read it there (launch*DeviceStep) and nothing in
// this file reads a value on the host.
//
// CUDA runners of ONNX's training operators (ai.onnx.preview.training
// opset 1): Adagrad, Momentum and Adam, variadic over n tensors of fp32 or
// fp64 (the dtypes the operator and the CPU kernel take).
//
// The operands are checked by the CPU kernel's own previewOperands (counts,
// R, T, every run against X) and the attributes read by its previewHyper,
// so both backends refuse the same nodes with the same messages. R and T
// are read on the device by the kernel (kernels/cuda/preview_training.h),
// never on the host, so the op needs no host mirror in a device-resident
// step: T can be state the step itself counts.
#include "ir/mpc_ops.h"
#include "kernels/common/all_reduce_rule.h"
#include "kernels/cpu/cpu_util.h"
#include "kernels/cpu/optimizer_operands.h"
#include "kernels/cpu/preview_training.h"
#include "kernels/cuda/cast.h"
#include "kernels/cuda/clip_grad_norm.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/optimizer.h"
#include "kernels/cuda/preview_training.h"
#include "kernels/lr_schedule_attrs.h"
#include "runtime/cuda/cuda_ops.h"
#include "runtime/cuda/nccl_world.h"
#include "runtime/cuda/node_staging.h"

#include <cuda_runtime_api.h>

namespace mpc {
namespace cuda {
namespace {

using cpu::dispatchMoment;
using cpu::fail;
using cpu::requireGradient;
using cpu::requireLikeParam;
using cpu::requireMoment;

/// Device pointer of the found_inf input at i (a one-element bool), or
/// nullptr when omitted.
const uint8_t *foundInf(NodeStaging &s, size_t i) {
  const Tensor *t = s.optionalIn(i);
  if (!t)
    return nullptr;
  if (t->numel() != 1)
    fail(s.node(), "found_inf must hold one element, got shape ",
         cpu::shapeString(t->dims));
  if (t->dtype != DType::Bool)
    fail(s.node(), "found_inf must be bool on the cuda backend, got ",
         dtypeName(t->dtype));
  return static_cast<const uint8_t *>(s.device(i));
}

/// The step counter, read on the host (see the file comment).
int64_t readStep(const Node &node, const Tensor &t) {
  if (t.numel() != 1)
    fail(node, "step must be a scalar, got shape ", cpu::shapeString(t.dims));
  int64_t step =
      isFloating(t.dtype) ? int64_t(cpu::loadDouble(t, 0)) : cpu::loadInt(t, 0);
  if (step < 0)
    fail(node, "step must be >= 0, got ", step);
  return step;
}

/// The step counter (input i) where it lives on the device.
DeviceStep deviceStep(NodeStaging &s, size_t i) {
  const Tensor &t = s.in(i, "step");
  if (t.numel() != 1)
    fail(s.node(), "step must be a scalar, got shape ",
         cpu::shapeString(t.dims));
  if (t.dtype != DType::I64 && t.dtype != DType::I32 && t.dtype != DType::F32 &&
      t.dtype != DType::F64)
    fail(s.node(), "step must be int64, int32, fp32 or fp64, got ",
         dtypeName(t.dtype));
  return {s.device(i), t.dtype};
}

/// The optimizer's optional `lr` input i (mpc.LearningRate's rate): checked,
/// and where it lives on the device (value nullptr: the node has none).
DeviceScalar deviceLr(NodeStaging &s, size_t i) {
  const Tensor *t = s.optionalIn(i);
  if (!t)
    return {};
  if (t->numel() != 1 || (t->dtype != DType::F64 && t->dtype != DType::F32))
    fail(s.node(), "lr must be an fp64 or fp32 scalar, got ",
         dtypeName(t->dtype), " ", cpu::shapeString(t->dims));
  return {s.device(i), t->dtype};
}

/// The learning rate a staged update uses: its `lr` input read on the host,
/// else the attribute.
double hostLr(NodeStaging &s, size_t i) {
  const Tensor *t = s.optionalIn(i);
  return t ? cpu::loadDouble(*t, 0) : s.node().attrFloat("lr", 1e-3f);
}

const float *f32(NodeStaging &s, size_t i) {
  return static_cast<const float *>(s.device(i));
}

// --- loss scaling
// ----------------------------------------------------------------

void runUnscaleGradients(NodeStaging &s) {
  const Node &node = s.node();
  const Tensor &scale = s.in(0, "scale");
  if (scale.numel() != 1 || !isFloating(scale.dtype))
    fail(node, "scale must be a floating-point scalar");
  std::vector<UnscaleTensor> tensors;
  for (size_t i = 1; i < s.ctx().inputs.size(); ++i) {
    const Tensor &g = s.in(i, "gradient");
    requireDeviceFloat(node, g, "gradient");
    UnscaleTensor t;
    t.src = s.device(i);
    t.dst = static_cast<float *>(s.optionalOut(i, DType::F32, g.dims));
    t.n = g.numel();
    t.dtype = g.dtype;
    tensors.push_back(t);
  }
  auto *found = static_cast<uint8_t *>(s.out(0, DType::Bool, {}));
  std::vector<UnscaleChunk> chunks = unscaleChunks(tensors);
  launchUnscaleGradients(s.deviceF32(0), s.upload(tensors), s.upload(chunks),
                         int64_t(chunks.size()), found, s.stream());
}

void runUpdateLossScale(NodeStaging &s) {
  const Node &node = s.node();
  const Tensor &scale = s.in(0, "scale");
  const Tensor &tracker = s.in(1, "growth_tracker");
  if (scale.dtype != DType::F32 || scale.numel() != 1)
    fail(node, "scale must be an fp32 scalar");
  if (tracker.numel() != 1 || isFloating(tracker.dtype))
    fail(node, "growth_tracker must be an integer scalar");
  if (tracker.dtype != DType::I64 && tracker.dtype != DType::I32)
    fail(node,
         "growth_tracker must be int64 or int32 on the cuda backend, "
         "got ",
         dtypeName(tracker.dtype));
  const uint8_t *found = foundInf(s, 2);
  auto *scaleOut = static_cast<float *>(s.out(0, DType::F32, scale.dims));
  void *trackerOut = s.optionalOut(1, tracker.dtype, tracker.dims);
  launchUpdateLossScale(f32(s, 0), s.device(1), tracker.dtype == DType::I64,
                        found, scaleOut, trackerOut,
                        node.attrFloat("growth_factor", 2.0f),
                        node.attrFloat("backoff_factor", 0.5f),
                        node.attrInt("growth_interval", 2000), s.stream());
}

// --- gradient clipping
// -------------------------------------------------------------

/// ClipGradNorm(g1..gn) -> (g1'..gn', total_norm): the norm, the
/// coefficient and the scaling all on the device (clip_grad_norm.h).
void runClipGradNorm(NodeStaging &s) {
  const Node &node = s.node();
  size_t n = s.ctx().inputs.size();
  if (n == 0)
    fail(node, "expects at least one gradient");
  std::vector<ClipTensor> tensors;
  for (size_t i = 0; i < n; ++i) {
    const Tensor &g = s.in(i, "gradient");
    requireDeviceFloat(node, g, "gradient");
    ClipTensor t;
    t.src = s.device(i);
    t.dst = s.optionalOut(i, g.dtype, g.dims);
    t.n = g.numel();
    t.dtype = g.dtype;
    tensors.push_back(t);
  }
  ClipPlan plan = clipPlan(tensors);
  ClipLaunch l;
  l.tensors = s.upload(tensors);
  l.numTensors = int32_t(tensors.size());
  l.chunks = s.upload(plan.chunks);
  l.numChunks = int64_t(plan.chunks.size());
  l.firstChunk = s.upload(plan.firstChunk);
  l.scratch =
      static_cast<float *>(s.scratch((plan.chunks.size() + 1) * sizeof(float)));
  l.totalNorm = static_cast<float *>(s.out(n, DType::F32, {}));
  l.maxNorm = node.attrFloat("max_norm", 1.0f);
  launchClipGradNorm(l, s.stream());
}

// --- optimizers
// --------------------------------------------------------------------

/// The update's 16-bit working copy of the new master (output
/// lowCopyOutput, passes/weight_copies.h), or none.
WorkingCopyOut workingCopy(NodeStaging &s, const Tensor &p) {
  const Node &node = s.node();
  const int at = lowCopyOutput(node.domain(), node.opType());
  if (at < 0 || !s.ctx().hasOutput(size_t(at)))
    return {};
  DType low = cpu::floatTypeAttr(node, "low", DType::F16);
  if (low != DType::F16 && low != DType::BF16)
    fail(node, "attribute 'low' must be fp16 or bf16, got ", dtypeName(low));
  return {s.out(size_t(at), low, p.dims), low};
}

/// The device's loss scale an update unscales its gradient by (its
/// grad_scale input, gradScaleInput), or nullptr.
const float *gradScale(NodeStaging &s) {
  const Node &node = s.node();
  const int at = gradScaleInput(node.domain(), node.opType());
  const Tensor *t = at < 0 ? nullptr : s.optionalIn(size_t(at));
  if (!t)
    return nullptr;
  if (t->numel() != 1 || t->dtype != DType::F32)
    fail(node, "grad_scale must be an fp32 scalar, got ", dtypeName(t->dtype),
         " ", cpu::shapeString(t->dims));
  return f32(s, size_t(at));
}

void runSgd(NodeStaging &s) {
  const Node &node = s.node();
  const Tensor &stepT = s.in(1, "step"), &p = s.in(2, "param"),
               &g = s.in(3, "gradient");
  const Tensor *buf = s.optionalIn(4);
  requireLikeParam(node, p, p, "param");
  requireGradient(node, g, p);
  double momentum = node.attrFloat("momentum", 0.0f);
  if (buf)
    requireMoment(node, *buf, p, "momentum buffer");
  else if (momentum != 0.0)
    fail(node, "momentum ", momentum, " needs a momentum buffer (input 4)");
  if (s.ctx().hasOutput(1) && !buf)
    fail(node, "has a momentum buffer output but no buffer input");
  bool resident = s.resident();
  DeviceScalar lr = deviceLr(s, 5);
  SgdScalars scalars = sgdScalars(
      resident ? node.attrFloat("lr", 1e-3f) : hostLr(s, 5), momentum,
      node.attrFloat("dampening", 0.0f), node.attrFloat("weight_decay", 0.0f),
      node.attrInt("nesterov", 0) != 0, resident ? 0 : readStep(node, stepT));
  const uint8_t *found = foundInf(s, 0);
  auto *pOut = static_cast<float *>(s.out(0, DType::F32, p.dims));
  const DType bufType = buf ? buf->dtype : DType::F32;
  void *bufOut = buf ? s.optionalOut(1, bufType, p.dims) : nullptr;
  const void *bufIn = buf ? s.device(4) : nullptr;
  const GradientIn grad(s.device(3), g.dtype, gradScale(s));
  const WorkingCopyOut copy = workingCopy(s, p);
  dispatchMoment(bufType, [&](auto stored) {
    using M = decltype(stored);
    const M *b = static_cast<const M *>(bufIn);
    M *bOut = static_cast<M *>(bufOut);
    if (resident)
      launchSgdDeviceStep(found, deviceStep(s, 1), lr, f32(s, 2), grad, b, pOut,
                          bOut, p.numel(), scalars, s.stream(), copy);
    else
      launchSgd(found, f32(s, 2), grad, b, pOut, bOut, p.numel(), scalars,
                s.stream(), copy);
  });
}

void runAdam(NodeStaging &s) {
  const Node &node = s.node();
  const Tensor &stepT = s.in(1, "step"), &p = s.in(2, "param"),
               &g = s.in(3, "gradient"), &m = s.in(4, "exp_avg"),
               &v = s.in(5, "exp_avg_sq");
  requireLikeParam(node, p, p, "param");
  requireGradient(node, g, p);
  requireMoment(node, m, p, "exp_avg");
  requireMoment(node, v, p, "exp_avg_sq");
  if (m.dtype != v.dtype)
    fail(node, "exp_avg is ", dtypeName(m.dtype), " but exp_avg_sq is ",
         dtypeName(v.dtype), " (both moments are stored in one dtype)");
  AdamHyper h;
  h.lr = node.attrFloat("lr", 1e-3f);
  h.beta1 = node.attrFloat("beta1", 0.9f);
  h.beta2 = node.attrFloat("beta2", 0.999f);
  h.eps = node.attrFloat("epsilon", 1e-8f);
  h.weightDecay = node.attrFloat("weight_decay", 0.0f);
  h.decoupled = node.attrInt("decoupled", 0) != 0;
  const uint8_t *found = foundInf(s, 0);
  auto *pOut = static_cast<float *>(s.out(0, DType::F32, p.dims));
  void *mOut = s.optionalOut(1, m.dtype, p.dims);
  void *vOut = s.optionalOut(2, v.dtype, p.dims);
  DeviceScalar lr = deviceLr(s, 6);
  const bool resident = s.resident();
  AdamScalars scalars;
  if (!resident)
    scalars = adamScalars(hostLr(s, 6), h.beta1, h.beta2, h.eps, h.weightDecay,
                          h.decoupled, readStep(node, stepT));
  const GradientIn grad(s.device(3), g.dtype, gradScale(s));
  const WorkingCopyOut copy = workingCopy(s, p);
  dispatchMoment(m.dtype, [&](auto stored) {
    using M = decltype(stored);
    const M *mIn = static_cast<const M *>(s.device(4));
    const M *vIn = static_cast<const M *>(s.device(5));
    if (resident)
      launchAdamDeviceStep(found, deviceStep(s, 1), lr, f32(s, 2), grad, mIn,
                           vIn, pOut, static_cast<M *>(mOut),
                           static_cast<M *>(vOut), p.numel(), h, s.stream(),
                           copy);
    else
      launchAdam(found, f32(s, 2), grad, mIn, vIn, pOut, static_cast<M *>(mOut),
                 static_cast<M *>(vOut), p.numel(), scalars, s.stream(), copy);
  });
}

void runIncrementStep(NodeStaging &s) {
  const Tensor &step = s.in(0, "step");
  if (step.numel() != 1)
    fail(s.node(), "step must be a scalar, got shape ",
         cpu::shapeString(step.dims));
  const uint8_t *found = foundInf(s, 1);
  void *out = s.out(0, step.dtype, step.dims);
  launchIncrementStep(step.dtype, s.device(0), found, out, s.stream());
}

/// mpc.LearningRate: computed on the device from the device's step counter
/// (staged too: one thread, no host read of the counter).
void runLearningRate(NodeStaging &s) {
  LrSchedule schedule = lrScheduleOf(s.node());
  DeviceStep step = deviceStep(s, 0);
  auto *out = static_cast<double *>(s.out(0, DType::F64, {}));
  launchLearningRate(schedule, step, out, s.stream());
}

/// mpc.AllReduce: on one rank each output is its input (a device copy);
/// across ranks, one NCCL group over all the inputs (nccl_world.h).
void runAllReduce(NodeStaging &s) {
  KernelContext &ctx = s.ctx();
  const Node &node = s.node();
  // A gated node (--grad-accum) reduces in every micro-batch here: a
  // resident step's gate is on the device and its CUDA graph cannot
  // branch; outside the boundary the outputs are not read.
  const size_t first =
      allReduceFirstValue(node, ctx.inputs.size(), ctx.outputs.size());
  const AllReduceOp op = allReduceOpOf(node);
  const DType wire = allReduceWireOf(node);
  const bool ranks = ctx.collective && ctx.collective->size() > 1;
  std::vector<DeviceReduction> reductions, widen;
  for (size_t i = first; i < node.numInputs(); ++i) {
    const Tensor &x = s.in(i, "value");
    checkAllReduceType(node, i, x.dtype, op);
    const void *src = s.device(i);
    void *dst = s.out(i - first, x.dtype, x.dims);
    const size_t n = size_t(x.numel());
    const DType onWire = allReduceWireTypeFor(x.dtype, wire);
    if (ranks && onWire != x.dtype) {
      // --grad-comm-dtype: NCCL reduces a narrowed copy, widened after.
      if (x.dtype != DType::F32)
        fail(node, "the cuda backend sends fp32 values as ", dtypeName(onWire),
             ", not ", dtypeName(x.dtype));
      void *narrow = s.scratch(n * dtypeSize(onWire));
      launchCast(DType::F32, onWire, src, narrow, int64_t(n), s.stream());
      reductions.push_back({narrow, narrow, onWire, n});
      widen.push_back({narrow, dst, onWire, n});
    } else if (ranks) {
      reductions.push_back({src, dst, x.dtype, n});
    } else if (x.byteSize() && dst != src) {
      MPC_CUDA_CHECK(cudaMemcpyAsync(dst, src, x.byteSize(),
                                     cudaMemcpyDeviceToDevice, s.stream()));
    }
  }
  if (!ranks)
    return;
  ncclAllReduce(s.cudaDevice(), *ctx.collective, node, int(op), reductions);
  for (const DeviceReduction &r : widen)
    launchCast(r.dtype, DType::F32, r.in, r.out, int64_t(r.count), s.stream());
}

std::string checkIncrementStep(const Node &node) {
  const Value *v = node.input(0);
  if (v && v->dtype != DType::Undefined && v->dtype != DType::I64 &&
      v->dtype != DType::I32 && v->dtype != DType::F32)
    return std::string("its step must be int64, int32 or fp32, got ") +
           dtypeName(v->dtype);
  return "";
}

// --- ONNX preview training
// --------------------------------------------------------------------------

template <PreviewOptimizer Kind> void runPreview(NodeStaging &s) {
  PreviewHyper h = cpu::previewHyper(s.node(), Kind);
  cpu::PreviewOperands o = cpu::previewOperands(s.ctx(), Kind);
  size_t groups = size_t(previewInputRuns(Kind));
  size_t outGroups = size_t(previewOutputRuns(Kind));
  const Tensor &r = s.in(0, "R");
  const void *rate = s.device(0);
  const auto *step = static_cast<const int64_t *>(s.device(1));
  for (size_t i = 0; i < o.n; ++i) {
    const Tensor &x = s.in(2 + i, "X");
    PreviewTensor t;
    t.n = x.numel();
    for (size_t g = 0; g < groups; ++g)
      t.in[g] = s.device(2 + g * o.n + i);
    for (size_t g = 0; g < outGroups; ++g)
      t.out[g] = s.optionalOut(g * o.n + i, o.dtype, x.dims);
    launchPreviewOptimizer(h, o.dtype, rate, r.dtype, step, t, s.stream());
  }
}

/// The tensors (input 2 on) must be fp32 or fp64, as the operator's.
std::string checkPreview(const Node &node) {
  for (size_t i = 2; i < node.numInputs(); ++i) {
    const Value *v = node.input(i);
    if (v && v->dtype != DType::Undefined && v->dtype != DType::F32 &&
        v->dtype != DType::F64)
      return std::string("its tensors must be fp32 or fp64, input ") +
             std::to_string(i) + " is " + dtypeName(v->dtype);
  }
  return "";
}

} // namespace

std::vector<CudaOpEntry> optimizerOps() {
  return {
      {kMpcDomain, "UnscaleGradients", runUnscaleGradients,
       [](const Node &n) { return requireDeviceFloatFrom(n, 1); }},
      {kMpcDomain, "UpdateLossScale", runUpdateLossScale, noCheck},
      {kMpcDomain, "ClipGradNorm", runClipGradNorm,
       [](const Node &n) { return requireDeviceFloatFrom(n, 0); }},
      {kMpcDomain, "SGD", runSgd, noCheck},
      {kMpcDomain, "Adam", runAdam, noCheck},
      {kMpcDomain, "IncrementStep", runIncrementStep, checkIncrementStep},
      {kMpcDomain, "LearningRate", runLearningRate, noCheck},
      {kMpcDomain, "AllReduce", runAllReduce, noCheck},
      {kOnnxPreviewTrainingDomain, "Adagrad",
       runPreview<PreviewOptimizer::Adagrad>, checkPreview},
      {kOnnxPreviewTrainingDomain, "Momentum",
       runPreview<PreviewOptimizer::Momentum>, checkPreview},
      {kOnnxPreviewTrainingDomain, "Adam", runPreview<PreviewOptimizer::Adam>,
       checkPreview},
  };
}

} // namespace cuda
} // namespace mpc
