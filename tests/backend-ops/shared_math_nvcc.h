// Host functions compiled by nvcc from the shared MPC_HD headers
// (shared_math_nvcc.cu), for shared_math_test.cpp to compare with the host
// compiler's build of the same headers.
#pragma once

#include "kernels/common/optimizer_math.h"
#include "kernels/common/piecewise_math.h"
#include "kernels/common/preview_optimizer_math.h"

#include <cstdint>

namespace mpc {
namespace nvcc {

uint16_t floatToHalfHost(float f);
float halfToFloatHost(uint16_t h);
uint16_t floatToBf16Host(float f);
float bf16ToFloatHost(uint16_t b);
bool unscaleHost(float g, float inv, float &out);
/// growth 2, backoff 0.5, interval 3.
void updateLossScaleHost(float &scale, int64_t &tracker, bool foundInf);
void adamHost(float &p, float g, float &m, float &v, const AdamScalars &s);
void sgdHost(float &p, float g, float &buf, const SgdScalars &s);
float softmaxValueHost(float x, float max, float sum);
float softmaxGradValueHost(bool log, float g, float y, float sum);
float layerNormInvStdHost(float squares, int64_t n, double epsilon);
float layerNormValueHost(float x, float mean, float inv, float scale,
                         float bias);
float layerNormGradInputHost(float inv, float g, float meanG, float xhat,
                             float meanGX);
float geluForwardHost(float x, bool tanhForm);
float geluDerivativeHost(float x, bool tanhForm);
float erfGradHost(float g, float x);
bool dropoutKeepHost(uint64_t base, int64_t i, uint32_t threshold);
float clipCoefficientHost(float total, float maxNorm);
PreviewStep previewStepHost(const PreviewHyper &h, double r, int64_t t);
void previewUpdateHost(const PreviewHyper &h, const PreviewStep &s,
                       const float *in, float *out);
void previewUpdateHost(const PreviewHyper &h, const PreviewStep &s,
                       const double *in, double *out);
/// piecewiseCombination as nvcc's host compilation computes it.
float piecewiseHost(float a, float b, float c, bool flag);

/// Every rule of piecewise_math.h (LeakyRelu, Clip, Max/Min and their
/// gradients) in one value: built by nvcc for the device and the host
/// (shared_math_nvcc.cu) and by the host compiler (shared_math_test.cpp).
MPC_HD float piecewiseCombination(float a, float b, float c, bool flag) {
  return leakyReluValue(a, c) + leakyReluGradValue(a, b, c) +
         clipValue(a, flag, b, !flag, c) + clipGradValue(a, b, -c, c) +
         extremumFold(flag, a, b) + extremumGradShare(a, flag, c) +
         sumFold(a, b) + float(sumFold(int8_t(100), int8_t(flag ? 100 : 27)));
}

} // namespace nvcc
} // namespace mpc
