// fold-unscale: the updates unscale the gradients they read.
//
// Dynamic loss scaling ends the backward with
//
//   found_inf, g1', ..., gn' = mpc.UnscaleGradients(scale, g1, ..., gn)
//   p1' = mpc.Adam(found_inf, step, p1, g1', m1, v1) ...
//
// UnscaleGradients writes an fp32 copy of every gradient (gi * 1/scale), all
// at once, beside the fp16 gradients the backward left: at the end of a
// small model's fp16 step that is the peak (more than its fp32 step's), and
// on any model 4 bytes written and read again per parameter. PyTorch's
// GradScaler unscales its fp32 gradients in place. Here the update does the
// multiply itself as it reads gi (mpc.SGD's and mpc.Adam's optional
// `grad_scale` input, the loss scale), and UnscaleGradients only checks:
//
//   found_inf = mpc.UnscaleGradients(scale, g1, ..., gn)   (outputs omitted)
//   p1' = mpc.Adam(found_inf, step, p1, g1, m1, v1, lr, scale) ...
//
// for each gi' whose only reader is an SGD/Adam update's gradient (not
// clipped, accumulated, reduced or read by any other optimizer), of an fp32
// master, fp32/fp16/bf16. The bits are UnscaleGradients': the update takes
// float(gi) * float(1 / double(scale)), its multiply (none when the scale is
// 1), and found_inf is still computed over every gradient before any update
// runs. mpc.grads then names the (scaled) gradients the updates read.
#pragma once

#include "passes/pass.h"

namespace mpc {

void runFoldUnscale(Model &model, PassContext &ctx);

} // namespace mpc
