// noteMergedInputs: the note a training compile gives a forward one of whose
// inputs is read only for its shape while another input of the same dtype and
// shape is read in its place -- what torch.export makes of one tensor passed
// as two inputs (a causal LM's labels=input_ids): the exported graph reads
// the embedding from 'labels', so labels padded with -100 (or the inference
// model, which keeps the inputs its outputs need) silently go wrong.
#pragma once

#include "ir/graph.h"
#include "passes/pass.h"

namespace mpc {

/// Adds to ctx.notes one line per input of `g` whose every use is a Shape or
/// Size node and which has a twin input (same dtype and dims) whose values
/// are read, saying to export with a copy (fold-constants calls it before it
/// folds such a Shape away, autodiff for pipelines without it; the pipeline
/// says a note once).
/// Nothing is refused: an input passed only for its size is legitimate.
void noteMergedInputs(const Graph &g, PassContext &ctx);

} // namespace mpc
