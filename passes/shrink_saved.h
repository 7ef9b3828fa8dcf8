// shrink-saved: the step keeps each forward value the backward reads in the
// smallest of the forms that give the backward the same bits.
#pragma once

#include "passes/pass.h"

namespace mpc {

/// The shrink-saved pass (passes/shrink_saved.cpp): on the training step,
/// a value saved for the backward in two precisions keeps the wide one and
/// the backward casts it down again; an exact widening of a narrow value is
/// widened again in the backward instead of saved.
void runShrinkSaved(Model &model, PassContext &ctx);

} // namespace mpc
