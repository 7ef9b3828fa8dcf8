// --shard-optimizer: the optimizer state sharded across the data-parallel
// ranks (ZeRO stage 1 and 2, as DeepSpeed's and FSDP's SHARD_GRAD_OP).
//
// Each parameter's flattened elements are cut into N contiguous chunks of
// ceil(numel / N) (the last padded with zeros), N = --world-size; rank r
// keeps chunk r of every moment (Adam's exp_avg and exp_avg_sq, SGD's
// momentum buffer): the state is that chunk, so each rank holds 1/N of it.
// The step then
//   - reduces the gradients with one mpc.ReduceScatter instead of the
//     AllReduce: rank r receives only chunk r of every averaged gradient,
//     each element reduced as the AllReduce reduces it (the same bits); the
//     whole averaged gradients never exist (stage 2);
//   - clips with mpc.ShardedClipGradNorm (--max-grad-norm): each gradient's
//     fp32 sum of squares runs in element order across the ranks, so the
//     global norm has the unsharded clip's bits;
//   - updates chunk r of every parameter (mpc.RankShard of the fp32
//     parameter) with the same mpc.Adam / mpc.SGD node, on chunks;
//   - all-gathers the updated chunks (mpc.AllGather) into the whole fp32
//     parameters, which every rank keeps for the next forward.
// The overflow flag stays one AllReduce<max> (global). The fp32 parameters
// stay whole on every rank: they are the weights the next forward reads
// (its fp16 copies are Casts within the step, not state).
// mpc.sharded_state records state=parameter pairs, mpc.shard_world_size N:
// mpc-run refuses another number of ranks, and its checkpoints gather
// every sharded state whole (the unsharded format) and cut it again on
// loading (runtime/trainer.cpp).
#pragma once

#include "passes/pass.h"

#include <string>

namespace mpc {

/// Throws a one-line error for --shard-optimizer / --world-size that do
/// not go together; `pass` names the caller. Called before the model
/// changes.
void checkShardOptions(const CompileOptions &o, const std::string &pass);

/// Rewrites the update the optimizer pass built (with --data-parallel's
/// AllReduce of the gradients) into its sharded form for
/// o.worldSize ranks, as above.
void shardOptimizerState(Model &model, const CompileOptions &o,
                         Statistics &stats);

} // namespace mpc
