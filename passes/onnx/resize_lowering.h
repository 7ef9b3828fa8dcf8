// ONNX's Resize (opset 11+), lowered at import to Gathers along the
// resized axes, the ops mpc has kernels and gradients for (GatherGrad
// scatter-adds, which is the gradient of both modes):
//
//   nearest: y = Gather(x, src, axis), src[i] the nearest source index of
//            output position i;
//   linear:  y = Gather(x, i0, axis) * w0 + Gather(x, i1, axis) * w1, the two
//            neighbours and their weights, one resized axis at a time from
//            the last (so 2-D bilinear groups its sums as PyTorch's does:
//            h0 * (w0 * x00 + w1 * x01) + h1 * (...)).
//
// src, i0, i1 and the weights are constants computed here in double from
// the coordinate_transformation_mode (half_pixel, pytorch_half_pixel,
// align_corners, asymmetric, tf_half_pixel_for_nn) and, for nearest,
// nearest_mode, exactly as ONNX defines them; the source coordinate is
// clamped to the input (PyTorch's and ONNX's edge behaviour). This is what
// F.interpolate / nn.Upsample export (nearest: asymmetric + floor; bilinear:
// half_pixel, or align_corners). The scales or sizes must be computable at
// import (import_constants.h) and the resized axes' dims known; cubic mode,
// antialias, tf_crop_and_resize, half_pixel_symmetric and
// keep_aspect_ratio_policy other than stretch are refused naming the node.
#pragma once

#include "passes/ir/graph.h"

#include <vector>

namespace mpc {

/// Replaces n, a Resize node whose input types are known, in a graph of a
/// model that imports `opset`, by its lowering; returns the nodes it
/// inserted, in order.
std::vector<Node *> lowerResize(Graph &g, Node *n, int64_t opset);

} // namespace mpc
