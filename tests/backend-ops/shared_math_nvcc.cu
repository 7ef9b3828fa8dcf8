// The shared MPC_HD math (kernels/common/) compiled by nvcc.
//
// The kernel below calls every per-element function in device code: this
// file building is the check that the headers compile for the GPU (for
// every architecture of the build). The host wrappers expose nvcc's own
// host compilation of the same functions, which shared_math_test.cpp
// compares with the host compiler's on the CPU.
#include "ir/half.h"
#include "kernels/common/clip_grad_norm_math.h"
#include "kernels/common/dropout_rng.h"
#include "kernels/common/gelu_math.h"
#include "kernels/common/layer_norm_math.h"
#include "kernels/common/loss_scale_math.h"
#include "kernels/common/optimizer_math.h"
#include "kernels/common/preview_optimizer_math.h"
#include "kernels/common/softmax_math.h"
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

/// ONNX's training operators (preview_optimizer_math.h) in device code, in
/// fp32 and fp64.
__global__ void everyPreviewFunction(const float *x, double *y, int n,
                                     PreviewHyper h) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n)
    return;
  PreviewStep s = previewStep(h, 0.01, i);
  float in[4] = {x[i], x[i], 0.5f, 0.25f}, out[3];
  double ind[4] = {x[i], x[i], 0.5, 0.25}, outd[3];
  previewUpdate<float>(h, s, in, out);
  previewUpdate<double>(h, s, ind, outd);
  y[i] = out[0] + out[1] + outd[0] + outd[1];
}

/// The row and activation math (softmax_math.h, layer_norm_math.h,
/// gelu_math.h, dropout_rng.h, clip_grad_norm_math.h) in device code.
__global__ void everyRowFunction(const float *x, float *y, uint8_t *keep,
                                 int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n)
    return;
  float v = x[i], m = softmaxMax(v, 0.5f);
  float s = softmaxExpTerm(v, m) + softmaxValue(v, m, 2.0f) +
            logSoftmaxValue(v, m, 0.3f) + softmaxGradTerm<false>(v, m) +
            softmaxGradValue<true>(v, m, 0.1f);
  float l = layerNormMean(v, 7) + layerNormSquaredDeviation(v, m) +
            layerNormInvStd(v * v, 7, 1e-5) +
            layerNormValue(v, m, 0.9f, 1.1f, 0.1f) + layerNormXhat(v, m, 2.0f) +
            layerNormGradInput(1.5f, v, m, 0.2f, 0.3f);
  float g = geluForward(v, false) + geluForward(v, true) +
            geluDerivative(v, false) + geluDerivative(v, true) +
            erfGradValue(v, m);
  float total = 0;
  clipAddTensorNorm(total, v * v);
  y[i] = s + l + g + clipGradNormCoefficient(total, 1.0f);
  keep[i] = dropoutKeep(splitmix64(uint64_t(i)), i, 1u << 23);
}

__global__ void everyPiecewiseFunction(const float *x, float *y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i + 2 < n)
    y[i] = piecewiseCombination(x[i], x[i + 1], x[i + 2], i % 2 == 0);
}

float piecewiseHost(float a, float b, float c, bool flag) {
  return piecewiseCombination(a, b, c, flag);
}

float softmaxValueHost(float x, float max, float sum) {
  return softmaxValue(x, max, sum);
}
float softmaxGradValueHost(bool log, float g, float y, float sum) {
  return log ? softmaxGradValue<true>(g, y, sum)
             : softmaxGradValue<false>(g, y, sum);
}
float layerNormInvStdHost(float squares, int64_t n, double epsilon) {
  return layerNormInvStd(squares, n, epsilon);
}
float layerNormValueHost(float x, float mean, float inv, float scale,
                         float bias) {
  return layerNormValue(x, mean, inv, scale, bias);
}
float layerNormGradInputHost(float inv, float g, float meanG, float xhat,
                             float meanGX) {
  return layerNormGradInput(inv, g, meanG, xhat, meanGX);
}
float geluForwardHost(float x, bool tanhForm) {
  return geluForward(x, tanhForm);
}
float geluDerivativeHost(float x, bool tanhForm) {
  return geluDerivative(x, tanhForm);
}
float erfGradHost(float g, float x) { return erfGradValue(g, x); }
bool dropoutKeepHost(uint64_t base, int64_t i, uint32_t threshold) {
  return dropoutKeep(base, i, threshold);
}
float clipCoefficientHost(float total, float maxNorm) {
  return clipGradNormCoefficient(total, maxNorm);
}
PreviewStep previewStepHost(const PreviewHyper &h, double r, int64_t t) {
  return previewStep(h, r, t);
}
void previewUpdateHost(const PreviewHyper &h, const PreviewStep &s,
                       const float *in, float *out) {
  previewUpdate<float>(h, s, in, out);
}
void previewUpdateHost(const PreviewHyper &h, const PreviewStep &s,
                       const double *in, double *out) {
  previewUpdate<double>(h, s, in, out);
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
