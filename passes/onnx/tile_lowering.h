// ONNX's Tile, lowered at import to Reshape, Expand and Reshape.
//
// Tile(X, repeats) repeats X repeats[i] times along each axis i: output
// index k * d_i + m reads X's index m. That is X seen with a unit axis in
// front of every repeated axis, broadcast to the repeats, and merged:
//
//   Y = Reshape(Expand(Reshape(X, [.., 1, d_i, ..]), [.., r_i, d_i, ..]),
//               [.., r_i * d_i, ..])
//
// (axes repeated once get no unit axis), so the gradient is Expand's sum
// over the copies. Tensor.repeat exports as Tile (BLOOM's ALiBi slopes
// through the dynamo exporter). repeats must be computable at import
// (import_constants.h) and X's dims known at compile time.
#pragma once

#include "ir/graph.h"

#include <vector>

namespace mpc {

/// Replaces n, a Tile node whose input types are known, in a graph of a
/// model that imports `opset`, by its lowering; returns the nodes it
/// inserted, in order.
std::vector<Node *> lowerTile(Graph &g, Node *n, int64_t opset);

} // namespace mpc
