// Per-element updates of ONNX's training operators (domain
// ai.onnx.preview.training, opset 1): Adagrad, Momentum and Adam.
//
// The formulas are the ONNX operator specification's (onnx/defs/training/
// defs.cc and its reference implementation). The step's scalars come from
// R (the learning rate), T (the update count) and the attributes, in double;
// the per-element update runs in the tensors' own precision C (fp32 or
// fp64), each multiply and add one rounded IEEE operation (the *Rn helpers
// of optimizer_math.h, which nvcc cannot fuse into an FMA), so the CPU
// kernels (kernels/cpu/optimizer.cpp) and the CUDA kernels
// (kernels/cuda/preview_training.cu), which both call these functions,
// compute the same bits. The one exception is Adam's bias correction, whose
// pow is the device's on the GPU (within 2 ulp of the host's in double).
#pragma once

#include "kernels/common/optimizer_math.h"

#include <cstdint>

namespace mpc {

enum class PreviewOptimizer { Adagrad, Momentum, Adam };

/// The attributes of one optimizer node (the ONNX defaults where absent).
struct PreviewHyper {
  PreviewOptimizer kind = PreviewOptimizer::Adagrad;
  double alpha = 0, beta = 0; ///< Momentum's and Adam's coefficients
  double epsilon = 0;         ///< Adagrad, Adam
  double decayFactor = 0;     ///< Adagrad
  double norm = 0;            ///< norm_coefficient: g += norm * x
  double normPost = 0;        ///< Adam's norm_coefficient_post
  bool nesterov = false;      ///< Momentum's mode
};

/// Input runs (X, G, state...) and output runs (X_new, state_new...).
MPC_HD int previewInputRuns(PreviewOptimizer k) {
  return k == PreviewOptimizer::Adam ? 4 : 3;
}
MPC_HD int previewOutputRuns(PreviewOptimizer k) {
  return k == PreviewOptimizer::Adam ? 3 : 2;
}

/// The step's scalars, in double, from R and T.
struct PreviewStep {
  double rate = 0; ///< the learning rate the update applies
  double beta = 1; ///< Momentum's gradient coefficient
};

MPC_HD double previewPow(double a, double b) {
#if defined(__CUDA_ARCH__)
  return ::pow(a, b);
#else
  return std::pow(a, b);
#endif
}

MPC_HD PreviewStep previewStep(const PreviewHyper &h, double r, int64_t t) {
  PreviewStep s;
  s.rate = r;
  switch (h.kind) {
  case PreviewOptimizer::Adagrad:
    // r = R / (1 + T * decay_factor)
    s.rate = divRn(r, addRn(1.0, mulRn(double(t), h.decayFactor)));
    break;
  case PreviewOptimizer::Momentum:
    // The first update (T == 0) does not scale the gradient by beta.
    s.beta = t > 0 ? h.beta : 1.0;
    break;
  case PreviewOptimizer::Adam:
    // Bias correction of the learning rate (none on the first update).
    if (t > 0) {
      double td = double(t);
      s.rate = divRn(mulRn(r, sqrtRn(subRn(1.0, previewPow(h.beta, td)))),
                     subRn(1.0, previewPow(h.alpha, td)));
    }
    break;
  }
  return s;
}

/// One element: in = {X, G, state...} (previewInputRuns values), out =
/// {X_new, state_new...} (previewOutputRuns values).
template <typename C>
MPC_HD void previewUpdate(const PreviewHyper &h, const PreviewStep &s,
                          const C *in, C *out) {
  C r = C(s.rate), x = in[0], g = in[1];
  C gReg = addRn(mulRn(C(h.norm), x), g);
  switch (h.kind) {
  case PreviewOptimizer::Adagrad: {
    C hNew = addRn(in[2], mulRn(gReg, gReg));
    C hAdaptive = addRn(sqrtRn(hNew), C(h.epsilon));
    out[0] = subRn(x, divRn(mulRn(r, gReg), hAdaptive));
    out[1] = hNew;
    break;
  }
  case PreviewOptimizer::Momentum: {
    C alpha = C(h.alpha);
    C vNew = addRn(mulRn(alpha, in[2]), mulRn(C(s.beta), gReg));
    out[0] = h.nesterov ? subRn(x, mulRn(r, addRn(gReg, mulRn(alpha, vNew))))
                        : subRn(x, mulRn(r, vNew));
    out[1] = vNew;
    break;
  }
  case PreviewOptimizer::Adam: {
    C vNew = addRn(mulRn(C(h.alpha), in[2]), mulRn(C(1.0 - h.alpha), gReg));
    C hNew = addRn(mulRn(C(h.beta), in[3]),
                   mulRn(C(1.0 - h.beta), mulRn(gReg, gReg)));
    C hSqrt = addRn(sqrtRn(hNew), C(h.epsilon));
    C xNew = subRn(x, mulRn(r, divRn(vNew, hSqrt)));
    out[0] = mulRn(C(1.0 - h.normPost), xNew);
    out[1] = vNew;
    out[2] = hNew;
    break;
  }
  }
}

} // namespace mpc
