// SplitToSequence read by SequenceAt, lowered at import to Split.
//
// torch's dynamo exporter writes torch.split and Tensor.chunk (GPT-2's
// query/key/value split, for one) as a SplitToSequence whose sequence is
// read only by SequenceAt nodes at constant positions. mpc has no sequence
// type; that pattern is a Split: the SplitToSequence becomes one Split of
// the same pieces (a 1-D split as given; a scalar split s as pieces of s
// with a shorter last one; no split as pieces of 1, squeezed when
// keepdims = 0), and each SequenceAt becomes an Identity of its piece, so
// the names the rest of the graph reads stay. The pieces' sizes must be
// known at compile time (the split input computable at import,
// import_constants.h, and for a scalar or absent split the axis's dim);
// any other reader of the sequence is a one-line error naming it.
#pragma once

#include "ir/graph.h"

#include <vector>

namespace mpc {

/// Replaces n, a SplitToSequence node whose input types are known, in a
/// graph of a model that imports `opset`, and turns its SequenceAt readers
/// into Identity nodes; returns the nodes it inserted, in order.
std::vector<Node *> lowerSplitToSequence(Graph &g, Node *n, int64_t opset);

} // namespace mpc
