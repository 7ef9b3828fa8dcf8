// Adafactor (mpc-opt --optimizer=adafactor): torch.optim.Adafactor's update
// (torch/optim/_adafactor.py, _single_tensor_adafactor), written by the
// optimizer pass in standard ONNX ops, so both backends run it with the
// kernels they have and other runtimes read it.
//
// Its point is memory: a parameter of two or more dimensions [..., R, C]
// keeps a row and a column factor of its second moment ([..., R, 1] and
// [..., 1, C]) instead of Adam's two [..., R, C] moments; a vector keeps one
// moment of its size. Per step, t the updates applied plus one:
//   beta_t = t ^ beta2_decay                 (lerp weight of the factors)
//   rho = min(lr, 1 / sqrt(t))
//   alpha = max(eps2, rms(P)) * rho
//   P *= 1 - lr * weight_decay               (decoupled, when not 0)
//   R.lerp_(mean over the last axis of g^2, beta_t)   [as norm(g)^2 / C]
//   C.lerp_(mean over the next-to-last axis of g^2, beta_t)
//   V = (R @ C) / max(eps1, mean over the next-to-last axis of R)
//     (a vector: V = v.lerp_(g^2, beta_t))
//   U = g / sqrt(max(V, eps1^2))
//   P -= alpha / max(1, rms(U) / d) * U
// with ATen's two lerp formulas chosen by |beta_t| < 0.5, eps1 fp32's
// epsilon unless given. torch computes the scalars (beta_t, rho, alpha, the
// clipping denominator) in double on the host from fp32 norms; here they
// are fp32 graph values, within a few ulps of torch's. A skipped step
// (found_inf, or inside a --grad-accum window) leaves P and its factors as
// they were.
#pragma once

#include "passes/pass.h"

#include <string>
#include <vector>

namespace mpc {

struct AdafactorConfig {
  double lr = 1e-2;
  double beta2Decay = -0.8;
  double eps1 = -1; ///< < 0: fp32's epsilon (torch's eps=(None, ...))
  double eps2 = 1e-3;
  double d = 1.0; ///< the update's RMS clipping threshold
  double weightDecay = 0;
};

/// The values every parameter's update shares: built once per step.
struct AdafactorStep {
  Value *skip = nullptr; ///< nullptr: never skip
  Value *betaT = nullptr, *smallBeta = nullptr, *rho = nullptr;
  Value *oneMinusBeta = nullptr; ///< 1 - beta_t (lerp's other formula)
  Value *decayFactor = nullptr;  ///< 1 - lr * weight_decay (nullptr: none)
  /// The fp32 constants every update reads: 1, eps1, eps1^2, eps2, d.
  Value *one = nullptr, *eps1 = nullptr, *eps1Sq = nullptr, *eps2 = nullptr,
        *d = nullptr;
};

/// `step`: the optimizer's counter (int64, updates applied); `lr`: the
/// scheduled rate (fp64 [], nullptr: config.lr).
AdafactorStep adafactorStep(Model &model, Graph &g, Value *step, Value *lr,
                            Value *skip, const AdafactorConfig &config);

/// The update of parameter `p` (fp32 master weight) by `grad`: adds its
/// factors (or moment) as state bound to their new values, names them in
/// `moments`, and returns p's new value.
Value *addAdafactorUpdate(Model &model, Graph &g, Value *p, Value *grad,
                          const AdafactorStep &step,
                          const AdafactorConfig &config,
                          std::vector<std::string> &moments);

} // namespace mpc
