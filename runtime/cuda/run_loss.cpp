// CUDA runners of SoftmaxCrossEntropyLoss, NegativeLogLikelihoodLoss and
// their mpc gradients.
//
// The labels are validated on the host with the CPU backend's lossSetup
// (a label out of range is the same error, naming the same position) and
// go to the device as one int64 per position (-1 where ignored) with the
// position's fp32 weight. In a device-resident step the labels stay on the
// device: the same per-position labels and weights are made there
// (resident.h), after the same shape checks (lossShapes, the shape half of
// lossSetup), and a label out of range sets the step's error word, reported
// naming the node after the step.
#include "ir/mpc_ops.h"
#include "kernels/cpu/cpu_util.h"
#include "kernels/cuda/loss.h"
#include "kernels/cuda/resident.h"
#include "runtime/cuda/cuda_ops.h"
#include "runtime/cuda/node_staging.h"

namespace mpc {
namespace cuda {
namespace {

using cpu::fail;

struct DeviceLabels {
  LossShape shape;
  LossReduction reduction = LossReduction::Mean;
  const int64_t *labels = nullptr;
  const float *weights = nullptr;
};

DeviceLabels uploadLabels(NodeStaging &s, const cpu::LossSetup &setup) {
  DeviceLabels d;
  d.shape = {setup.n, setup.c, setup.d};
  d.reduction = setup.reduction == cpu::LossSetup::None  ? LossReduction::None
                : setup.reduction == cpu::LossSetup::Sum ? LossReduction::Sum
                                                         : LossReduction::Mean;
  std::vector<int64_t> labels(setup.labels.size());
  std::vector<float> weights(setup.labels.size());
  for (size_t p = 0; p < labels.size(); ++p) {
    labels[p] = setup.ignored(p) ? -1 : setup.labels[p];
    weights[p] = float(setup.weight[p]); // C(s.weight[pos]) in the CPU kernel
  }
  d.labels = s.upload(labels);
  d.weights = s.upload(weights);
  return d;
}

/// lossSetup's checks of attributes and shapes, without reading a label.
cpu::LossSetup lossShapes(const Node &node, const Tensor &scores,
                          const Tensor &labels, const Tensor *weights) {
  cpu::LossSetup s;
  std::string red = node.attrString("reduction", "mean");
  if (red == "none")
    s.reduction = cpu::LossSetup::None;
  else if (red == "sum")
    s.reduction = cpu::LossSetup::Sum;
  else if (red == "mean")
    s.reduction = cpu::LossSetup::Mean;
  else
    fail(node, "unknown reduction '", red, "' (expects none, sum or mean)");
  s.hasIgnore = node.hasAttr("ignore_index");
  s.ignoreIndex = node.attrInt("ignore_index", 0);
  if (scores.dims.size() < 2)
    fail(node, "scores must be [N, C, ...], got ",
         cpu::shapeString(scores.dims));
  if (labels.dtype != DType::I64 && labels.dtype != DType::I32)
    fail(node, "labels must be int64 or int32, got ", dtypeName(labels.dtype));
  std::vector<int64_t> want = scores.dims;
  want.erase(want.begin() + 1);
  if (labels.dims != want)
    fail(node, "labels of shape ", cpu::shapeString(labels.dims),
         " do not match scores of shape ", cpu::shapeString(scores.dims),
         " (expects ", cpu::shapeString(want), ")");
  s.n = scores.dims[0];
  s.c = scores.dims[1];
  s.d = s.n ? labels.numel() / s.n : 0;
  s.perPosition = want;
  if (weights) {
    if (weights->dims != std::vector<int64_t>{s.c})
      fail(node, "weights must be [", s.c, "], got ",
           cpu::shapeString(weights->dims));
    if (!isDeviceFloat(weights->dtype))
      fail(node, "weights must be fp32, fp16 or bf16 on the cuda backend, got ",
           dtypeName(weights->dtype));
  }
  return s;
}

/// The resident step's labels and weights, made on the device from the
/// labels input (at) and the optional class weights (weightsAt).
DeviceLabels deviceLabels(NodeStaging &s, const cpu::LossSetup &setup,
                          size_t at, size_t weightsAt) {
  DeviceLabels d;
  d.shape = {setup.n, setup.c, setup.d};
  d.reduction = setup.reduction == cpu::LossSetup::None  ? LossReduction::None
                : setup.reduction == cpu::LossSetup::Sum ? LossReduction::Sum
                                                         : LossReduction::Mean;
  int64_t positions = d.shape.positions();
  const Tensor &labels = s.in(at, "labels");
  const Tensor *w = s.optionalIn(weightsAt);
  auto *l = static_cast<int64_t *>(
      s.scratch(size_t(std::max<int64_t>(positions, 1)) * sizeof(int64_t)));
  auto *wt = static_cast<float *>(
      s.scratch(size_t(std::max<int64_t>(positions, 1)) * sizeof(float)));
  launchLossLabels(s.device(at), labels.dtype == DType::I64, positions, setup.c,
                   setup.hasIgnore, setup.ignoreIndex,
                   w ? s.device(weightsAt) : nullptr, w ? w->dtype : DType::F32,
                   l, wt, s.errorWord(), s.errorCode(), s.stream());
  d.labels = l;
  d.weights = wt;
  return d;
}

/// A loss node's checked labels on the device: scores (or log-probabilities)
/// at input `scoresAt`, then the labels, then the optional class weights.
DeviceLabels lossLabels(NodeStaging &s, size_t scoresAt, const char *what,
                        cpu::LossSetup &setup) {
  const Tensor &scores = s.in(scoresAt, what),
               &labels = s.in(scoresAt + 1, "labels");
  const Tensor *weights = s.optionalIn(scoresAt + 2);
  setup = s.resident() ? lossShapes(s.node(), scores, labels, weights)
                       : cpu::lossSetup(s.ctx(), scores, labels, weights);
  requireDeviceFloat(s.node(), scores, what);
  return s.resident() ? deviceLabels(s, setup, scoresAt + 1, scoresAt + 2)
                      : uploadLabels(s, setup);
}

/// dL of a loss gradient (input 0), checked before the labels as the CPU
/// kernels check it.
void requireFloatingGradient(NodeStaging &s) {
  const Tensor &dl = s.in(0, "dL");
  if (!isFloating(dl.dtype))
    fail(s.node(), "dL must be floating point, got ", dtypeName(dl.dtype));
}

/// dL holds one element, or one per position for reduction 'none' (the CPU
/// kernels' lossGradScale checks).
void requireLossGradient(NodeStaging &s, const cpu::LossSetup &setup) {
  const Node &node = s.node();
  const Tensor &dl = s.in(0, "dL");
  requireDeviceFloat(node, dl, "dL");
  if (setup.reduction == cpu::LossSetup::None) {
    if (dl.dims != setup.perPosition)
      fail(node, "dL must have shape ", cpu::shapeString(setup.perPosition),
           " for reduction 'none', got ", cpu::shapeString(dl.dims));
  } else if (dl.numel() != 1) {
    fail(node, "dL must be a scalar, got shape ", cpu::shapeString(dl.dims));
  }
}

/// The loss output: per position for 'none', else a scalar.
void *lossOutput(NodeStaging &s, const cpu::LossSetup &setup, DType t) {
  std::vector<int64_t> dims;
  if (setup.reduction == cpu::LossSetup::None)
    dims = setup.perPosition;
  return s.out(0, t, dims);
}

/// SoftmaxCrossEntropyLoss (scores, labels [, weights]) -> (loss [,
/// log_prob]) and NegativeLogLikelihoodLoss (input, labels [, weights]) ->
/// loss.
template <bool Softmax> void runLoss(NodeStaging &s) {
  const char *what = Softmax ? "scores" : "input";
  cpu::LossSetup setup;
  DeviceLabels d = lossLabels(s, 0, what, setup);
  const Tensor &x = s.in(0, what);
  void *loss = lossOutput(s, setup, x.dtype);
  auto *posLoss = static_cast<float *>(
      s.scratch(size_t(d.shape.positions()) * sizeof(float)));
  if (Softmax)
    launchSoftmaxCrossEntropy(
        x.dtype, s.device(0), d.labels, d.weights, d.shape, d.reduction,
        s.optionalOut(1, x.dtype, x.dims), posLoss, loss, s.stream());
  else
    launchNegativeLogLikelihood(x.dtype, s.device(0), d.labels, d.weights,
                                d.shape, d.reduction, posLoss, loss,
                                s.stream());
}

/// Their gradients: (dL, log_prob or X, labels [, weights]) -> the
/// gradient of the forward tensor, in its dtype.
template <bool Softmax> void runLossGrad(NodeStaging &s) {
  const char *what = Softmax ? "log_prob" : "X";
  requireFloatingGradient(s);
  cpu::LossSetup setup;
  DeviceLabels d = lossLabels(s, 1, what, setup);
  requireLossGradient(s, setup);
  const Tensor &x = s.in(1, what);
  void *dx = s.out(0, x.dtype, x.dims);
  auto *scale = static_cast<float *>(s.scratch(sizeof(float)));
  if (Softmax)
    launchSoftmaxCrossEntropyGrad(x.dtype, s.deviceF32(0), s.device(1),
                                  d.labels, d.weights, d.shape, d.reduction,
                                  scale, dx, s.stream());
  else
    launchNegativeLogLikelihoodGrad(x.dtype, s.deviceF32(0), d.labels,
                                    d.weights, d.shape, d.reduction, scale, dx,
                                    s.stream());
}

} // namespace

std::vector<CudaOpEntry> lossOps() {
  auto forward = [](const Node &n) { return requireDeviceFloat(n, {0}); };
  auto backward = [](const Node &n) { return requireDeviceFloat(n, {0, 1}); };
  return {
      {"", "SoftmaxCrossEntropyLoss", runLoss<true>, forward},
      {kMpcDomain, "SoftmaxCrossEntropyLossGrad", runLossGrad<true>, backward},
      {"", "NegativeLogLikelihoodLoss", runLoss<false>, forward},
      {kMpcDomain, "NegativeLogLikelihoodLossGrad", runLossGrad<false>,
       backward},
  };
}

} // namespace cuda
} // namespace mpc
