// Models that import a default-domain opset older than the oldest mpc
// implements (kMinSupportedOpset).
//
// Such a model is accepted when every op it uses is, at its opset, the same
// ONNX operator version as at kMinSupportedOpset: no op changed in between, so
// mpc's implementation of that version is the op the model means. The
// operator versions are ONNX's own (its schema registry's since_version), so
// the rule cannot drift from the spec. An op that changed (or did not exist
// yet) is a one-line error naming the node, the op and the opset.
#pragma once

#include "ir/graph.h"

#include <cstdint>

namespace mpc {

/// Oldest default-domain opset mpc implements its ops at.
constexpr int64_t kMinSupportedOpset = 7;

/// Checks that every default-domain node of `g` means at `opset` (older than
/// kMinSupportedOpset) what it means at kMinSupportedOpset; throws
/// mpc::Error naming the first node that does not.
void requireSemanticsUnchangedSince(const Graph &g, int64_t opset);

} // namespace mpc
