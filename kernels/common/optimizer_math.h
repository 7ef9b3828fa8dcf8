// Per-element SGD and Adam/AdamW updates with PyTorch's exact arithmetic.
//
// These follow torch 2.x's CPU single-tensor implementations
// (torch/optim/sgd.py `_single_tensor_sgd`, torch/optim/adam.py
// `_single_tensor_adam`) operation by operation, on fp32 master weights:
// the hyper-parameter scalars are computed in double on the host and used as
// float, as ATen does when a Python float meets a float32 tensor; each tensor
// op is one IEEE fp32 operation in the same order as ATen's scalar kernels:
//   add(x, alpha=a)       self + a * x
//   lerp_(end, w)         |w| < 0.5 ? self + w * (end - self)
//                                   : end - (end - self) * (1 - w)
//   addcmul_(t1, t2, v)   self + v * t1 * t2      (i.e. (v * t1) * t2)
//   addcdiv_(t1, t2, v)   self + v * t1 / t2      (i.e. (v * t1) / t2)
// Every multiply and add is written with the *Rn helpers so that neither
// nvcc (which fuses a * b + c into an FMA by default) nor a host compiler
// contracts them; ATen's scalar kernels round each operation separately.
// (ATen's AVX2 kernels fuse lerp and add-with-alpha, so PyTorch itself
// differs from this in the last ulp on some elements; this follows the
// unfused scalar path, which is the definition the tests pin down.)
// The CUDA optimizer kernels call the same functions.
//
// Moments stored in bf16 (--optimizer-state-dtype=bf16) go through the
// *Stored forms: widened to fp32, updated by the same fp32 arithmetic, and
// rounded to bf16 (nearest even) only when stored. The parameter's update
// reads the fp32 new moments, not their rounded copies, as torchao's
// low-precision AdamW does (its exp_avg.copy_(exp_avg_f32) comes after the
// update); the rounding reaches the parameters one step later.
#pragma once

#include "ir/half.h"
#include "ir/host_device.h"

#include <cmath>
#include <cstdint>

namespace mpc {

// --- IEEE fp32 operations that are never fused -------------------------------

// The fp64 overloads serve the ONNX training operators on fp64 tensors
// (preview_optimizer_math.h).
#if defined(__CUDA_ARCH__)
MPC_HD float mulRn(float a, float b) { return __fmul_rn(a, b); }
MPC_HD float addRn(float a, float b) { return __fadd_rn(a, b); }
MPC_HD float subRn(float a, float b) { return __fsub_rn(a, b); }
MPC_HD float divRn(float a, float b) { return __fdiv_rn(a, b); }
MPC_HD float sqrtRn(float a) { return __fsqrt_rn(a); }
MPC_HD double mulRn(double a, double b) { return __dmul_rn(a, b); }
MPC_HD double addRn(double a, double b) { return __dadd_rn(a, b); }
MPC_HD double subRn(double a, double b) { return __dsub_rn(a, b); }
MPC_HD double divRn(double a, double b) { return __ddiv_rn(a, b); }
MPC_HD double sqrtRn(double a) { return __dsqrt_rn(a); }
#else
// The project's host flags enable no FMA instructions (no -mfma or
// -march=native), so plain operators are single IEEE operations.
MPC_HD float mulRn(float a, float b) { return a * b; }
MPC_HD float addRn(float a, float b) { return a + b; }
MPC_HD float subRn(float a, float b) { return a - b; }
MPC_HD float divRn(float a, float b) { return a / b; }
MPC_HD float sqrtRn(float a) { return std::sqrt(a); }
MPC_HD double mulRn(double a, double b) { return a * b; }
MPC_HD double addRn(double a, double b) { return a + b; }
MPC_HD double subRn(double a, double b) { return a - b; }
MPC_HD double divRn(double a, double b) { return a / b; }
MPC_HD double sqrtRn(double a) { return std::sqrt(a); }
#endif

// --- SGD ---------------------------------------------------------------------

/// SGD's scalars for one step, converted as torch converts them.
struct SgdScalars {
  float negLr = 0;             ///< -lr
  float momentum = 0;          ///< used when hasMomentum
  float oneMinusDampening = 1; ///< 1 - dampening, computed in double
  float weightDecay = 0;       ///< used when hasWeightDecay
  bool hasMomentum = false;    ///< momentum != 0 (tested in double)
  bool hasWeightDecay = false; ///< weight_decay != 0 (tested in double)
  bool nesterov = false;
  bool firstStep = true; ///< no momentum buffer yet: buf := d_p
};

/// `step` is the number of updates applied before this one.
inline SgdScalars sgdScalars(double lr, double momentum, double dampening,
                             double weightDecay, bool nesterov, int64_t step) {
  SgdScalars s;
  s.negLr = float(-lr);
  s.momentum = float(momentum);
  s.oneMinusDampening = float(1.0 - dampening);
  s.weightDecay = float(weightDecay);
  s.hasMomentum = momentum != 0.0;
  s.hasWeightDecay = weightDecay != 0.0;
  s.nesterov = nesterov;
  s.firstStep = step == 0;
  return s;
}

/// One element of `_single_tensor_sgd`: updates p and (with momentum) buf.
MPC_HD void sgdUpdate(float &p, float g, float &buf, const SgdScalars &s) {
  float d = g;
  if (s.hasWeightDecay)
    d = addRn(d, mulRn(s.weightDecay, p)); // grad.add(param, alpha=wd)
  if (s.hasMomentum) {
    if (s.firstStep)
      buf = d; // torch.clone(grad)
    else       // buf.mul_(momentum).add_(grad, alpha=1 - dampening)
      buf = addRn(mulRn(buf, s.momentum), mulRn(s.oneMinusDampening, d));
    // nesterov: grad.add(buf, alpha=momentum); else grad = buf
    d = s.nesterov ? addRn(d, mulRn(s.momentum, buf)) : buf;
  }
  p = addRn(p, mulRn(s.negLr, d)); // param.add_(grad, alpha=-lr)
}

// --- moment storage ---------------------------------------------------------

/// A stored moment as fp32: fp32 as is, bf16 (a bit pattern) widened.
MPC_HD float loadMoment(float m) { return m; }
MPC_HD float loadMoment(uint16_t m) { return bf16ToFloat(m); }

/// Stores an fp32 moment: fp32 as is, bf16 rounded to nearest even.
MPC_HD void storeMoment(float &dst, float v) { dst = v; }
MPC_HD void storeMoment(uint16_t &dst, float v) { dst = floatToBf16(v); }

/// sgdUpdate on a momentum buffer stored as M (float or bf16 bits).
template <typename M>
MPC_HD void sgdUpdateStored(float &p, float g, M &buf, const SgdScalars &s) {
  float b = loadMoment(buf);
  sgdUpdate(p, g, b, s);
  storeMoment(buf, b);
}

// --- Adam / AdamW ------------------------------------------------------------

/// Adam's scalars for one step (t = step + 1), as torch computes them.
struct AdamScalars {
  float weightDecay = 0;       ///< coupled decay: g += wd * p
  float decayFactor = 1;       ///< decoupled decay: p *= 1 - lr * wd
  bool hasWeightDecay = false; ///< weight_decay != 0 (tested in double)
  bool decoupled = false;      ///< AdamW
  float lerpWeight = 0;        ///< 1 - beta1
  float beta2 = 0;
  float oneMinusBeta2 = 0;       ///< 1 - beta2
  float negStepSize = 0;         ///< -(lr / (1 - beta1^t))
  float biasCorrection2Sqrt = 1; ///< sqrt(1 - beta2^t)
  float eps = 0;
};

/// `step` is the number of updates applied before this one.
inline AdamScalars adamScalars(double lr, double beta1, double beta2,
                               double eps, double weightDecay, bool decoupled,
                               int64_t step) {
  AdamScalars s;
  double t = double(step + 1);
  double bc1 = 1.0 - std::pow(beta1, t);
  double bc2 = 1.0 - std::pow(beta2, t);
  s.weightDecay = float(weightDecay);
  s.decayFactor = float(1.0 - lr * weightDecay);
  s.hasWeightDecay = weightDecay != 0.0;
  s.decoupled = decoupled;
  s.lerpWeight = float(1.0 - beta1);
  s.beta2 = float(beta2);
  s.oneMinusBeta2 = float(1.0 - beta2);
  s.negStepSize = float(-(lr / bc1));
  s.biasCorrection2Sqrt = float(std::sqrt(bc2));
  s.eps = float(eps);
  return s;
}

/// torch.lerp(start, end, weight) on fp32 (ATen's Lerp.h scalar formula).
MPC_HD float torchLerp(float start, float end, float weight) {
  float diff = subRn(end, start);
  bool small = (weight < 0 ? -weight : weight) < 0.5f;
  return small ? addRn(start, mulRn(weight, diff))
               : subRn(end, mulRn(diff, subRn(1.0f, weight)));
}

/// One element of `_single_tensor_adam` (amsgrad off, maximize off).
MPC_HD void adamUpdate(float &p, float g, float &m, float &v,
                       const AdamScalars &s) {
  if (s.hasWeightDecay) {
    if (s.decoupled)
      p = mulRn(p, s.decayFactor); // param.mul_(1 - lr * wd)
    else
      g = addRn(g, mulRn(s.weightDecay, p)); // grad.add(param, alpha=wd)
  }
  m = torchLerp(m, g, s.lerpWeight); // exp_avg.lerp_(grad, 1 - beta1)
  // exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
  v = addRn(mulRn(v, s.beta2), mulRn(mulRn(s.oneMinusBeta2, g), g));
  // denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(eps)
  float denom = addRn(divRn(sqrtRn(v), s.biasCorrection2Sqrt), s.eps);
  // param.addcdiv_(exp_avg, denom, value=-step_size)
  p = addRn(p, divRn(mulRn(s.negStepSize, m), denom));
}

/// adamUpdate on moments stored as M (float or bf16 bits): the parameter
/// moves by the fp32 new moments, which are then stored (rounded for bf16).
template <typename M>
MPC_HD void adamUpdateStored(float &p, float g, M &m, M &v,
                             const AdamScalars &s) {
  float mf = loadMoment(m), vf = loadMoment(v);
  adamUpdate(p, g, mf, vf, s);
  storeMoment(m, mf);
  storeMoment(v, vf);
}

} // namespace mpc
