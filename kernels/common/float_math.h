// exp, log, sqrt, tanh and erf for MPC_HD code: glibc's on the host, CUDA's
// math library on the device.
//
// The shared row and activation formulas (softmax_math.h, layer_norm_math.h,
// gelu_math.h) are templates over float and double, called by the CPU
// kernels with either and by the CUDA kernels with float. Spelling the
// function once here keeps those formulas identical text on both sides;
// only these calls differ in their last ulp between the CPU and the GPU
// (sqrt is IEEE-exact on both, nvcc's default -prec-sqrt=true).
#pragma once

#include "ir/host_device.h"

#include <cmath>

namespace mpc {

#if defined(__CUDA_ARCH__)
MPC_HD float expOf(float x) { return ::expf(x); }
MPC_HD double expOf(double x) { return ::exp(x); }
MPC_HD float logOf(float x) { return ::logf(x); }
MPC_HD double logOf(double x) { return ::log(x); }
MPC_HD float sqrtOf(float x) { return ::sqrtf(x); }
MPC_HD double sqrtOf(double x) { return ::sqrt(x); }
MPC_HD float tanhOf(float x) { return ::tanhf(x); }
MPC_HD double tanhOf(double x) { return ::tanh(x); }
MPC_HD float erfOf(float x) { return ::erff(x); }
MPC_HD double erfOf(double x) { return ::erf(x); }
#else
MPC_HD float expOf(float x) { return std::exp(x); }
MPC_HD double expOf(double x) { return std::exp(x); }
MPC_HD float logOf(float x) { return std::log(x); }
MPC_HD double logOf(double x) { return std::log(x); }
MPC_HD float sqrtOf(float x) { return std::sqrt(x); }
MPC_HD double sqrtOf(double x) { return std::sqrt(x); }
MPC_HD float tanhOf(float x) { return std::tanh(x); }
MPC_HD double tanhOf(double x) { return std::tanh(x); }
MPC_HD float erfOf(float x) { return std::erf(x); }
MPC_HD double erfOf(double x) { return std::erf(x); }
#endif

} // namespace mpc
