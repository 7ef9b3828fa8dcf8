// The runtime's side of mpc-opt --shard-optimizer
// (passes/optimizer/shard_optimizer.h): each rank holds chunk r of every
// sharded optimizer state (its flattened elements r*c .. r*c+c-1, c =
// ceil(numel / N), zeros past the end), while checkpoints hold every state
// whole, in the format an unsharded run writes and reads. So a checkpoint
// resumes sharded or not, on any number of ranks the model was compiled
// for, and a model file whose state is whole (a checkpoint run as a model)
// is cut on loading.
#pragma once

#include "ir/graph.h"
#include "kernels/collective.h"

#include <string>
#include <vector>

namespace mpc {

/// A model's sharded state (mpc.sharded_state, mpc.shard_world_size).
struct ShardedState {
  int64_t worldSize = 0; ///< 0: the model's state is not sharded
  struct Entry {
    std::string state;         ///< the chunk each rank holds (a moment)
    std::string param;         ///< the parameter whose shape its whole form has
    std::vector<int64_t> dims; ///< that shape (the file's, before any cut)
    /// An fp32 master weight (state == param): its chunk lives only in the
    /// training step; the main graph (evaluation, exports) keeps the whole
    /// tensor, gathered when it is read.
    bool master() const { return state == param; }
  };
  std::vector<Entry> entries;
  bool sharded() const { return worldSize > 0; }
};

/// The model's sharded state; an Error for metadata that does not parse
/// or names no state of the training algorithm.
ShardedState shardedStateOf(const Model &model);

/// An Error (one line) when a model sharded for N ranks runs on another
/// number of them.
void checkShardedWorld(const ShardedState &s, int ranks);

/// Rank `rank`'s chunk of `whole` over `worldSize` ranks: 1-D, zero padded.
Tensor chunkOf(const Tensor &whole, int64_t worldSize, int rank);

/// What gatherWholeMany gathers in one collective at most: fewer
/// collectives than one per tensor (each a round trip between the ranks),
/// and a bounded staging buffer beside the whole tensors.
constexpr size_t kGatherBucketBytes = size_t(64) << 20;

/// The whole tensors (of dims[i]) from every rank's chunks[i], gathered in
/// one collective per `bucketBytes` of chunks (a larger chunk alone); every
/// rank calls it with its own chunks of the same list.
std::vector<Tensor>
gatherWholeMany(Collective *world, const std::vector<const Tensor *> &chunks,
                const std::vector<std::vector<int64_t>> &dims,
                int64_t worldSize, size_t bucketBytes = kGatherBucketBytes);

/// Cuts every sharded state of the training algorithm that holds the whole
/// tensor (a checkpoint's) into this rank's chunk; keeps one that already
/// is a chunk. An Error naming the state for any other shape. `where`
/// prefixes the message (a file, or "").
void cutWholeState(Model &model, const ShardedState &s, int rank,
                   const std::string &where);

/// Makes state `name` hold `t` (its type follows) in the training algorithm
/// and, unless `stepOnly`, in the main graph, which share a loaded model's
/// state. A master's chunk is the step's only (`stepOnly`): the main graph
/// keeps the whole weight, which evaluation and the exports read.
void setShardedState(Model &model, const std::string &name, TensorPtr t,
                     bool stepOnly = false);

} // namespace mpc
