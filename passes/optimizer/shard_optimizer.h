// --shard-optimizer: the optimizer state sharded across the data-parallel
// ranks (ZeRO stage 1 and 2, as DeepSpeed's and FSDP's SHARD_GRAD_OP).
//
// Each parameter's flattened elements are cut into N contiguous chunks of
// ceil(numel / N) (the last padded with zeros), N = --world-size; rank r
// keeps chunk r of every fp32 master weight and of every moment (Adam's
// exp_avg and exp_avg_sq, SGD's momentum buffer): the state is that chunk,
// so each rank holds 1/N of it (ZeRO stage 3's state, without its
// per-layer gathers). The step then
//   - gathers the whole masters first (one mpc.AllGather in its shape
//     form): the forward and backward read the gathered copies, step
//     values in the arena, as they read the masters unsharded. A gather
//     copies bits, so they see the unsharded step's weights exactly. A
//     master read only through casts to one 16-bit type is cast on its
//     chunk and gathered in that type (a cast is elementwise: the same
//     bits, half the bytes);
//   - reduces the gradients with one mpc.ReduceScatter instead of the
//     AllReduce: rank r receives only chunk r of every averaged gradient,
//     each element reduced as the AllReduce reduces it (the same bits); the
//     whole averaged gradients never exist (stage 2);
//   - clips with mpc.ShardedClipGradNorm (--max-grad-norm): each gradient's
//     fp32 sum of squares runs in element order across the ranks, so the
//     global norm has the unsharded clip's bits;
//   - updates its chunk of every master with the same mpc.Adam / mpc.SGD
//     node, on chunks: the updates are elementwise, with the unsharded
//     step's scalars (rate, clip coefficient, overflow flag), so each
//     element gets the unsharded update's bits. A moving average (--ema)
//     reads the updated masters gathered once more after the updates.
// The overflow flag stays one AllReduce<max> (global).
// The model file keeps every master whole in the main graph (one file
// serves every rank; the inference graph reads it); the step's own copy is
// a chunk. mpc.sharded_state records state=parameter pairs (a master pairs
// with itself), mpc.shard_world_size N: mpc-run refuses another number of
// ranks, cuts each rank's chunks on loading, gathers the masters whole for
// what reads whole weights (evaluation, exports), and its checkpoints
// gather every sharded state whole (the unsharded format) and cut it again
// on loading (runtime/sharded_state.h, runtime/trainer.cpp).
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

/// A model as one rank's step holds it: every sharded master whose tensor
/// in the step is whole (the file's, which the step shares with the main
/// graph) becomes a chunk of it in the step only (rank 0's; the runtime cuts
/// each rank's, runtime/sharded_state.h). What plans a loaded model's step
/// (the memory report) calls it; nothing to do for another model.
void cutShardedMastersForPlanning(Model &model);

} // namespace mpc
