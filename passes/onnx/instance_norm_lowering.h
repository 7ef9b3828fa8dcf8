// ONNX's InstanceNormalization, lowered at import to the ops mpc trains.
//
// InstanceNormalization(X [N, C, D...], scale [C], B [C]) normalises each
// (n, c) over the spatial dims: what torch exports for GroupNorm (over
// [N, G, -1]) and InstanceNorm2d. It is LayerNormalization over axis 2 of
// X seen as [N, C, L] (same mean, biased variance and epsilon), with a unit
// scale, then the per-channel affine:
//
//   x3 = Reshape(X, [0, 0, -1])
//   n3 = LayerNormalization<axis = 2>(x3, ConstantOfShape(L, 1))
//   Y  = Reshape(Add(Mul(n3, Reshape(scale, [-1, 1])), Reshape(B, [-1, 1])),
//                Shape(X))
//
// so the normalisation takes LayerNormalization's fused kernels, fp32
// statistics and gradient on both backends, and the affine its own
// gradients. Below opset 17, where ONNX has no LayerNormalization, the
// normalisation is written out instead: (x3 - mean) / sqrt(var + epsilon)
// with ReduceMean over axis 2 (autocast keeps the means and Sqrt in fp32).
// With static shapes fold-constants turns the shape arithmetic into
// constants. A scale of ones and a bias of zeros given as Constant nodes
// (torch's GroupNorm export) add no Mul or Add. The lowered nodes are named
// after the InstanceNormalization node, and its output keeps its name.
#pragma once

#include "ir/graph.h"

#include <vector>

namespace mpc {

/// Replaces n, an InstanceNormalization node of a graph of a model that
/// imports `opset`, by its lowering; returns the nodes it inserted, in
/// order. X's element type should be known (the unit scale takes it).
std::vector<Node *> lowerInstanceNormalization(Graph &g, Node *n,
                                               int64_t opset);

} // namespace mpc
