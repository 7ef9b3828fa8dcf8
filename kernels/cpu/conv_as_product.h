// Convolutions with tiny output maps as one oneDNN matrix product.
//
// oneDNN 2.6's direct convolution kernels run maps of a few positions (a
// ResNet-18's last two stages at 64x64 images: 4x4 and 2x2, 512 channels)
// at 17-35 GFLOP/s on one thread, fp32 and bf16 AMX alike: their blocking
// is over the spatial positions, of which there are 4. The same work as
// one product over im2col's columns runs at the matmul's speed:
//   forward          Y^T[N*P, M]  = im2col(X)[N*P, C*K] x W^T
//   data gradient    dCol[N*P, C*K] = dY^T x W[M, C*K], added back (col2im)
//   weight gradient  dW[M, C*K]   = dY[M, N*P] x im2col(X)
// with P the output positions, K the window, groups 1. The numerics are the
// convolution's (fp32 accumulation, one rounding to the dtype); the
// summation order is the product's, then col2im's fixed (position, window
// offset) order for the data gradient.
#pragma once

#include "kernels/cpu/onednn.h"

namespace mpc {
namespace cpu {
namespace onednn {

/// convForward, convBackwardData and convBackwardWeights (onednn.h) as one
/// product; false (nothing written) unless `p` takes the product form
/// (groups 1, output maps of at most 16 positions, fp32 or bf16, im2col's
/// columns at most 16M elements) and oneDNN's matmul runs it.
bool convForwardAsProduct(const ConvProblem &p, const void *x, const void *w,
                          const void *bias, void *y);
bool convBackwardDataAsProduct(const ConvProblem &p, const void *dy,
                               const void *w, void *dx);
bool convBackwardWeightsAsProduct(const ConvProblem &p, const void *dy,
                                  const void *x, void *dw);

} // namespace onednn
} // namespace cpu
} // namespace mpc
