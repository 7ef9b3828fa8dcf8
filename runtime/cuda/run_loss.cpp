// CUDA runners of SoftmaxCrossEntropyLoss and its mpc gradient.
//
// The labels are validated on the host with the CPU backend's lossSetup
// (a label out of range is the same error, naming the same position) and
// go to the device as one int64 per position (-1 where ignored) with the
// position's fp32 weight. In this staged increment the labels are on the
// host anyway; on device-resident buffers the check becomes a device flag.
#include "kernels/cpu/cpu_util.h"
#include "kernels/cuda/loss.h"
#include "passes/ir/mpc_ops.h"
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

void runSoftmaxCrossEntropyLoss(NodeStaging &s) {
  const Node &node = s.node();
  const Tensor &scores = s.in(0, "scores"), &labels = s.in(1, "target");
  const Tensor *weights = s.optionalIn(2);
  cpu::LossSetup setup = cpu::lossSetup(s.ctx(), scores, labels, weights);
  requireDeviceFloat(node, scores, "scores");
  DeviceLabels d = uploadLabels(s, setup);
  std::vector<int64_t> lossDims;
  if (d.reduction == LossReduction::None)
    lossDims = setup.perPosition;
  void *loss = s.out(0, scores.dtype, lossDims);
  void *logProb = s.optionalOut(1, scores.dtype, scores.dims);
  auto *posLoss = static_cast<float *>(
      s.scratch(size_t(d.shape.positions()) * sizeof(float)));
  launchSoftmaxCrossEntropy(scores.dtype, s.device(0), d.labels, d.weights,
                            d.shape, d.reduction, logProb, posLoss, loss,
                            s.stream());
}

void runSoftmaxCrossEntropyLossGrad(NodeStaging &s) {
  const Node &node = s.node();
  const Tensor &dl = s.in(0, "dL"), &lp = s.in(1, "log_prob"),
               &labels = s.in(2, "labels");
  if (!isFloating(dl.dtype))
    fail(node, "dL must be floating point, got ", dtypeName(dl.dtype));
  cpu::LossSetup setup = cpu::lossSetup(s.ctx(), lp, labels, s.optionalIn(3));
  requireDeviceFloat(node, lp, "log_prob");
  requireDeviceFloat(node, dl, "dL");
  if (setup.reduction == cpu::LossSetup::None) {
    if (dl.dims != setup.perPosition)
      fail(node, "dL must have shape ", cpu::shapeString(setup.perPosition),
           " for reduction 'none', got ", cpu::shapeString(dl.dims));
  } else if (dl.numel() != 1) {
    fail(node, "dL must be a scalar, got shape ", cpu::shapeString(dl.dims));
  }
  DeviceLabels d = uploadLabels(s, setup);
  void *dx = s.out(0, lp.dtype, lp.dims);
  auto *scale = static_cast<float *>(s.scratch(sizeof(float)));
  launchSoftmaxCrossEntropyGrad(lp.dtype, s.deviceF32(0), s.device(1), d.labels,
                                d.weights, d.shape, d.reduction, scale, dx,
                                s.stream());
}

} // namespace

std::vector<CudaOpEntry> lossOps() {
  return {
      {"", "SoftmaxCrossEntropyLoss", runSoftmaxCrossEntropyLoss,
       [](const Node &n) { return requireDeviceFloat(n, {0}); }},
      {kMpcDomain, "SoftmaxCrossEntropyLossGrad",
       runSoftmaxCrossEntropyLossGrad,
       [](const Node &n) {
         return requireDeviceFloat(n, {0, 1});
       }},
  };
}

} // namespace cuda
} // namespace mpc
