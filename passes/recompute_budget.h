// --memory-budget: what the backward recomputes so that the step's planned
// peak fits a budget (passes/recompute_budget.cpp).
#pragma once

#include "passes/pass.h"

namespace mpc {

/// Chooses which forward values the backward recomputes (from matrix
/// products to whole blocks) so that the planned peak is at most
/// ctx.options.memoryBudget, with the fewest extra forward FLOPs it finds,
/// and rewrites the step. Throws Error naming the floor (the least peak
/// recomputation reaches) when the budget is below it.
void recomputeToBudget(Model &model, PassContext &ctx);

} // namespace mpc
