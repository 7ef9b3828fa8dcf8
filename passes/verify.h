// What the last verify found, for passes that would otherwise infer again.
//
// runVerify (declared with the other passes in passes/pass.h) runs shape
// inference over every graph and remembers, per value, whether what it
// inferred differs from the declared type (passes/verify.cpp, VerifyMemo).
// plan-memory needs every type as inference gives it; where verify has just
// found them declared so, it need not infer the whole step again.
#pragma once

#include "ir/graph.h"

#include <cstdint>

namespace mpc {

/// True when the last verify of `model` checked `g` at `opset` and found
/// every node output of `g` declared as shape inference gives it, so that
/// inferGraph(g, opset) would change no type. It reads that verify's records
/// only and cannot see changes made since: trust it only where the model is
/// known to be as that verify left it (PassContext::unchangedSinceVerify).
bool lastVerifyFoundTypesAsInferred(const Model &model, const Graph &g,
                                    int64_t opset);

/// For tests of the wrap of the verify count: makes `count` the number of
/// verifies of `model` so far, keeping what they recorded. (Counts move
/// only forward in real use; a test sets one near the 32-bit limit.)
void setVerifyCountForTesting(Model &model, uint32_t count);

} // namespace mpc
