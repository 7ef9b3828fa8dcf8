// ONNX's Resize (opset 11+), lowered at import to Gathers along the
// resized axes, the ops mpc has kernels and gradients for (GatherGrad
// scatter-adds, which is the gradient of every mode):
//
//   y = sum_k Gather(x, index_k, axis) * weight_k
//
// over the taps of each output position, one resized axis at a time from
// the last (so 2-D bilinear and bicubic group their sums as PyTorch's do:
// rows first, then the rows' weighted sum):
//
//   nearest: one tap, the nearest source index (nearest_mode), weight 1;
//   linear:  the two neighbours of the source coordinate, clamped to the
//            input first;
//   cubic:   the four around it, Keys' kernel with cubic_coeff_a (PyTorch's
//            bicubic: -0.75), taps past the edge reading the edge, or, with
//            exclude_outside, weighing 0 and the rest renormalised.
//
// The indices and weights are constants computed here in double from the
// coordinate_transformation_mode (half_pixel, pytorch_half_pixel,
// half_pixel_symmetric, align_corners, asymmetric, tf_half_pixel_for_nn)
// exactly as ONNX defines them; a tap that weighs 0 everywhere is left out.
// This is what F.interpolate / nn.Upsample export (nearest: asymmetric +
// floor; bilinear and bicubic: half_pixel, or align_corners). The scales
// or sizes must be computable at import (import_constants.h) and the
// resized axes' dims known; antialias, tf_crop_and_resize and
// keep_aspect_ratio_policy other than stretch are refused naming the node.
#pragma once

#include "ir/graph.h"

#include <vector>

namespace mpc {

/// Replaces n, a Resize node whose input types are known, in a graph of a
/// model that imports `opset`, by its lowering; returns the nodes it
/// inserted, in order.
std::vector<Node *> lowerResize(Graph &g, Node *n, int64_t opset);

} // namespace mpc
