// The shared MPC_HD math (kernels/common/) compiled by nvcc.
//
// The kernel below calls every per-element function in device code: this
// file building is the check that the headers compile for the GPU (for
// every architecture of the build). The host wrappers expose nvcc's own
// host compilation of the same functions, which shared_math_test.cpp
// compares with the host compiler's on the CPU.
#include "kernels/common/half.h"
#include "kernels/common/loss_scale_math.h"
#include "kernels/common/optimizer_math.h"
#include "shared_math_nvcc.h"

namespace mpc {
namespace nvcc {

__global__ void everySharedFunction(const float *x, uint16_t *h, float *y,
                                    int64_t *t, int n, AdamScalars as,
                                    SgdScalars ss) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n)
    return;
  h[i] = floatToHalf(x[i]) ^ floatToBf16(x[i]);
  float v = halfToFloat(h[i]) + bf16ToFloat(h[i]) + roundToHalf(x[i]) +
            roundToBf16(x[i]) + inverseLossScale(x[i]);
  float u;
  if (unscaleElement(x[i], 0.5f, u) && isFiniteFloat(u))
    v += u;
  float scale = x[i];
  updateLossScale(scale, t[i], v > 0, 2.0, 0.5, 2000);
  float p = x[i], m = 0, s = 0, buf = 0;
  adamUpdate(p, v, m, s, as);
  sgdUpdate(p, v, buf, ss);
  y[i] = p + m + s + buf + scale + torchLerp(v, p, 0.3f) +
         sqrtRn(divRn(subRn(addRn(v, 1.0f), mulRn(v, v)), 3.0f));
}

uint16_t floatToHalfHost(float f) { return floatToHalf(f); }
float halfToFloatHost(uint16_t h) { return halfToFloat(h); }
uint16_t floatToBf16Host(float f) { return floatToBf16(f); }
float bf16ToFloatHost(uint16_t b) { return bf16ToFloat(b); }
bool unscaleHost(float g, float inv, float &out) {
  return unscaleElement(g, inv, out);
}
void updateLossScaleHost(float &scale, int64_t &tracker, bool foundInf) {
  updateLossScale(scale, tracker, foundInf, 2.0, 0.5, 3);
}
void adamHost(float &p, float g, float &m, float &v, const AdamScalars &s) {
  adamUpdate(p, g, m, v, s);
}
void sgdHost(float &p, float g, float &buf, const SgdScalars &s) {
  sgdUpdate(p, g, buf, s);
}

} // namespace nvcc
} // namespace mpc
