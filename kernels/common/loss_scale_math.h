// Dynamic loss scaling math: gradient unscale and PyTorch's scale update.
//
// Bit-exact with torch.cuda.amp.GradScaler (torch 2.x): the inverse scale is
// `scale.double().reciprocal().float()`, each gradient element is checked
// for finiteness *before* it is multiplied (as
// _amp_foreach_non_finite_check_and_unscale_ does), and the scale/tracker
// update is _amp_update_scale_'s, with the float * double products rounded
// back to float. Shared by the CPU kernels and the CUDA kernels.
#pragma once

#include "ir/half.h"
#include "ir/host_device.h"

#include <cstdint>

namespace mpc {

/// float(1 / double(scale)).
MPC_HD float inverseLossScale(float scale) {
  return float(1.0 / double(scale));
}

/// True unless x is inf or NaN (a bit test, immune to fast-math flags).
MPC_HD bool isFiniteFloat(float x) {
  return (floatBits(x) & 0x7f800000u) != 0x7f800000u;
}

/// Unscales one gradient element: out = g * inv (g itself when inv == 1, as
/// torch skips the multiply). Returns whether g was finite.
MPC_HD bool unscaleElement(float g, float inv, float &out) {
#if defined(__CUDA_ARCH__)
  out = inv == 1.0f ? g : __fmul_rn(g, inv);
#else
  out = inv == 1.0f ? g : g * inv;
#endif
  return isFiniteFloat(g);
}

/// torch's _amp_update_scale_: on overflow, back off and reset the tracker;
/// otherwise count the clean step and, every growthInterval clean steps,
/// grow the scale unless that would make it infinite.
MPC_HD void updateLossScale(float &scale, int64_t &growthTracker, bool foundInf,
                            double growthFactor, double backoffFactor,
                            int64_t growthInterval) {
  if (foundInf) {
    scale = float(double(scale) * backoffFactor);
    growthTracker = 0;
    return;
  }
  int64_t successful = growthTracker + 1;
  if (successful == growthInterval) {
    float grown = float(double(scale) * growthFactor);
    if (isFiniteFloat(grown))
      scale = grown;
    growthTracker = 0;
  } else {
    growthTracker = successful;
  }
}

} // namespace mpc
