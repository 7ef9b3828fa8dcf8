// weight-copies: each master weight's fp16/bf16 working copy is state of the
// step, written by the update that writes the master.
//
// autocast reads a master P through Cast<to = fp16|bf16>(P), and
// shrink-saved casts it again in the backward rather than keep the copy
// alive in between: two conversions of every weight per step (4 bytes read,
// 2 written per element each), half the Cast launches of a transformer
// step. Here the copy becomes state instead, as Apex's O2 and DeepSpeed keep
// 16-bit model weights beside fp32 masters: `P_fp16` (P's shape, the Cast's
// type), initially the Cast of P's value. The forward and the backward read
// it where they read the Cast, and the step writes it after P's update:
// mpc.SGD / mpc.Adam write it themselves beside P' (their `low` output, one
// pass over the weight), any other update (Adafactor's standard ops, a
// model's own optimizer) through a Cast of P'. The bits are the Cast's:
// the copy is always the Cast of the master the step starts from (a skipped
// step leaves both as they were).
//
// It costs 2 bytes per parameter between steps; PyTorch's autocast keeps
// the same copies from the forward to the backward. Left as they are:
// parameters read through Casts to two 16-bit types; every parameter under
// --shard-optimizer (each rank gathers its masters' 16-bit chunks; a whole
// copy per rank would be the memory sharding saves) and under
// --memory-budget (memory first: the copies would raise the floor).
//
// mpc.weight_copies records the master=copy pairs. The copies are derived
// state: mpc-run computes each from its master whenever it loads a model or
// a checkpoint (refreshWeightCopies), so a checkpoint written without them
// resumes, and a master edited in the file is never read through a stale
// copy.
#pragma once

#include "passes/pass.h"

#include <string>
#include <utility>
#include <vector>

namespace mpc {

void runWeightCopies(Model &model, PassContext &ctx);

/// mpc.weight_copies' (master, copy) state names; empty without copies.
std::vector<std::pair<std::string, std::string>>
weightCopyPairs(const Model &model);

/// Throws Error (one line naming the pair) unless every pair names a
/// master and a copy that are both state of the training step, each in one
/// pair only, the copy fp16 or bf16 of the master's shape, and the copy's
/// new value the Cast of the master's new value (the update's `low` output
/// or a Cast of it): what mpc-run relies on to recompute copies from their
/// masters. A model edited into anything else would train on stale copies.
void checkWeightCopies(const Model &model);

} // namespace mpc
