// --shard-optimizer: the sharded form of the optimizer's update
// (passes/optimizer/shard_optimizer.h).
#include "passes/optimizer/shard_optimizer.h"

#include "ir/mpc_ops.h"
#include "ir/step_metadata.h"
#include "kernels/common/shard_rule.h"
#include "passes/training_support.h"
#include "support/diagnostics.h"

#include <unordered_map>

namespace mpc {
namespace {

constexpr const char *kFlag = "--shard-optimizer";

bool isMpcOp(const Node &n, const char *op) {
  return n.domain() == kMpcDomain && n.opType() == op;
}

/// The element count of a value whose shape is known.
int64_t numelOf(const Value &v, const std::string &pass) {
  int64_t n = 1;
  for (const Dim &d : v.dims) {
    if (!d.isKnown())
      throw Error(pass + ": " + kFlag + ": parameter '" + v.name() +
                  "' has no static shape (" + dimsToString(v.dims) + ")");
    n *= d.value;
  }
  return n;
}

/// The update node (mpc.Adam or mpc.SGD) of parameter p: the one that
/// reads it as its parameter (input 2).
Node *updateOf(const Value &p, const std::string &pass) {
  for (const Use &u : p.uses())
    if ((isMpcOp(*u.user, "Adam") || isMpcOp(*u.user, "SGD")) && u.index == 2)
      return u.user;
  throw Error(pass + ": " + kFlag + ": parameter '" + p.name() +
              "' has no mpc.Adam or mpc.SGD update to shard");
}

/// The node after n (nullptr: n is last).
Node *nodeAfter(const Graph &g, const Node *n) {
  bool seen = false;
  for (const auto &m : g.nodes()) {
    if (seen)
      return m.get();
    seen = m.get() == n;
  }
  return nullptr;
}

/// v as a graph output: its index, or -1.
int outputIndex(const Graph &g, const Value *v) {
  for (size_t i = 0; i < g.outputs().size(); ++i)
    if (g.outputs()[i] == v)
      return int(i);
  return -1;
}

} // namespace

void checkShardOptions(const CompileOptions &o, const std::string &pass) {
  if (o.worldSize != 0 && !o.shardOptimizer)
    throw Error(pass + ": --world-size only applies to --shard-optimizer (a "
                       "--data-parallel step without it runs on any number of "
                       "ranks)");
  if (!o.shardOptimizer)
    return;
  if (!o.dataParallel)
    throw Error(pass + ": " + kFlag +
                " needs --data-parallel (it shards the optimizer state "
                "across the data-parallel ranks)");
  if (o.worldSize < 1 || o.worldSize > kMaxShardWorldSize)
    throw Error(pass + ": " + kFlag +
                " needs --world-size=N, the number of ranks the step will "
                "run on (from 1 to " +
                std::to_string(kMaxShardWorldSize) + ")");
  if (o.optimizer == "adafactor")
    throw Error(pass + ": " + kFlag +
                ": --optimizer=adafactor's factored statistics are per row "
                "and column, not per element (shard adam, adamw or sgd)");
}

void shardOptimizerState(Model &model, const CompileOptions &o,
                         Statistics &stats) {
  const std::string pass = "optimizer";
  checkShardOptions(o, pass);
  const int64_t world = o.worldSize;
  TrainingValues tv = requireGradients(model, pass);
  Graph &g = *tv.algorithm;
  const size_t n = tv.params.size();
  if (n == 0)
    return;

  // The data-parallel mean of the gradients: one AllReduce, mpc.grads its
  // outputs.
  Node *mean = tv.grads[0]->producer();
  if (!mean || !isMpcOp(*mean, "AllReduce"))
    throw Error(pass + ": " + kFlag + ": gradient '" + tv.grads[0]->name() +
                "' is not an output of the data-parallel mpc.AllReduce");
  for (size_t i = 0; i < n; ++i)
    if (tv.grads[i]->producer() != mean)
      throw Error(pass + ": " + kFlag + ": gradient '" + tv.grads[i]->name() +
                  "' is not an output of '" + mean->name() + "'");
  std::vector<int64_t> chunks;
  std::vector<Node *> updates;
  for (size_t i = 0; i < n; ++i) {
    chunks.push_back(shardChunk(numelOf(*tv.params[i], pass), world));
    updates.push_back(updateOf(*tv.params[i], pass));
  }
  auto chunkType = [&](Value *v, DType t, size_t i) {
    v->setType(t, {Dim(chunks[i])});
  };

  // ReduceScatter in the AllReduce's place, with its inputs and attributes.
  std::vector<std::string> hints;
  for (size_t i = 0; i < n; ++i)
    hints.push_back(tv.params[i]->name() + "_grad_chunk");
  std::vector<Value *> reduceInputs(mean->inputs().begin(),
                                    mean->inputs().end());
  Node *scatter = createNamedNode(g, "ReduceScatter", kMpcDomain, reduceInputs,
                                  hints, "reduce_scatter_gradients", mean);
  for (const char *attr : {"reduction", "gated", "wire_dtype"})
    if (const Attribute *a = mean->attr(attr))
      scatter->setAttr(attr, *a);
  scatter->setAttr("world_size", Attribute::ofInt(world));
  std::vector<Value *> gradChunks;
  for (size_t i = 0; i < n; ++i) {
    chunkType(scatter->output(i), tv.grads[i]->dtype, i);
    gradChunks.push_back(scatter->output(i));
  }

  // What the updates read as gradients: the chunks, or their clipped form.
  std::vector<Value *> updateGrads = gradChunks;
  std::unordered_map<Node *, bool> clips;
  for (size_t i = 0; i < n; ++i)
    for (const Use &u : tv.grads[i]->uses()) {
      if (u.user == updates[i] && u.index == 3)
        continue;
      if (isMpcOp(*u.user, "ClipGradNorm")) {
        clips[u.user] = true;
        continue;
      }
      throw Error(pass + ": " + kFlag + ": gradient '" + tv.grads[i]->name() +
                  "' is read by '" + u.user->name() + "' (" + u.user->opType() +
                  "), which the sharded update has no whole gradient for");
    }
  if (clips.size() > 1)
    throw Error(pass + ": " + kFlag + ": the gradients are clipped twice");
  Node *oldClip = nullptr;
  if (!clips.empty()) {
    oldClip = clips.begin()->first;
    if (oldClip->numInputs() != n)
      throw Error(pass + ": " + kFlag + ": '" + oldClip->name() + "' clips " +
                  std::to_string(oldClip->numInputs()) +
                  " gradients, not the " + std::to_string(n) + " parameters'");
    std::vector<std::string> clipHints;
    for (size_t i = 0; i < n; ++i) {
      if (oldClip->input(i) != tv.grads[i])
        throw Error(pass + ": " + kFlag + ": '" + oldClip->name() + "' input " +
                    std::to_string(i) + " is not gradient '" +
                    tv.grads[i]->name() + "'");
      clipHints.push_back(tv.params[i]->name() + "_grad_chunk_clipped");
    }
    clipHints.push_back("grad_total_norm");
    Node *clip =
        createNamedNode(g, "ShardedClipGradNorm", kMpcDomain, gradChunks,
                        clipHints, "clip_grad_norm_sharded", oldClip);
    clip->setAttr("max_norm", *oldClip->attr("max_norm"));
    clip->setAttr("world_size", Attribute::ofInt(world));
    for (size_t i = 0; i < n; ++i) {
      clip->output(i)->copyTypeFrom(*gradChunks[i]);
      updateGrads[i] = clip->output(i);
    }
    Value *norm = clip->output(n);
    norm->setType(DType::F32, {});
    Value *oldNorm = oldClip->output(n);
    g.replaceAllUsesWith(oldNorm, norm);
    if (const std::string *named = readMeta(model, meta::kGradNorm))
      if (*named == oldNorm->name())
        writeMeta(model, meta::kGradNorm, norm->name());
  }

  // Each rank's chunk of the parameters, before the first update.
  Node *firstUpdate = nullptr;
  for (const auto &node : g.nodes())
    for (Node *u : updates)
      if (!firstUpdate && node.get() == u)
        firstUpdate = u;
  hints.clear();
  for (size_t i = 0; i < n; ++i)
    hints.push_back(tv.params[i]->name() + "_chunk");
  Node *slice = createNamedNode(g, "RankShard", kMpcDomain, tv.params, hints,
                                "rank_shard_parameters", firstUpdate);
  slice->setAttr("world_size", Attribute::ofInt(world));
  for (size_t i = 0; i < n; ++i)
    chunkType(slice->output(i), tv.params[i]->dtype, i);

  // The updates on chunks: the moments become this rank's chunk.
  std::string pairs;
  int64_t shardedBuffers = 0, savedElements = 0;
  for (size_t i = 0; i < n; ++i) {
    Node *u = updates[i];
    u->setInput(2, slice->output(i));
    u->setInput(3, updateGrads[i]);
    const int64_t numel = numelOf(*tv.params[i], pass);
    for (size_t k = 4; k < u->numInputs(); ++k) {
      Value *m = u->input(k);
      if (!m || !m->isState || !m->isInitializer())
        continue; // the rate
      const DType t = m->initializer()->dtype;
      m->setInitializer(
          std::make_shared<Tensor>(Tensor::zeros(t, {chunks[i]})));
      chunkType(m, t, i);
      pairs +=
          (pairs.empty() ? "" : ",") + m->name() + "=" + tv.params[i]->name();
      ++shardedBuffers;
      savedElements += numel - chunks[i];
    }
    for (size_t k = 0; k < u->numOutputs(); ++k)
      if (Value *out = u->output(k))
        chunkType(out, out->dtype, i);
  }

  // The updated chunks gathered into whole parameters after the last
  // update; every reader of an updated parameter (its state binding, the
  // moving average) reads the gathered one.
  Node *lastUpdate = nullptr;
  for (const auto &node : g.nodes())
    for (Node *u : updates)
      if (node.get() == u)
        lastUpdate = u;
  std::vector<Value *> gatherInputs, updated;
  for (size_t i = 0; i < n; ++i) {
    Value *chunk = updates[i]->output(0);
    updated.push_back(chunk);
    gatherInputs.push_back(chunk);
  }
  gatherInputs.insert(gatherInputs.end(), tv.params.begin(), tv.params.end());
  hints.clear();
  for (size_t i = 0; i < n; ++i) {
    hints.push_back(updated[i]->name());
    g.renameValue(updated[i],
                  g.uniqueValueName(tv.params[i]->name() + "_chunk_new"));
  }
  Node *gather =
      createNamedNode(g, "AllGather", kMpcDomain, gatherInputs, hints,
                      "all_gather_parameters", nodeAfter(g, lastUpdate));
  gather->setAttr("world_size", Attribute::ofInt(world));
  auto &binding = model.training->updateBinding;
  for (size_t i = 0; i < n; ++i) {
    Value *whole = gather->output(i);
    whole->copyTypeFrom(*tv.params[i]);
    std::vector<Use> uses = updated[i]->uses();
    for (const Use &use : uses)
      if (use.user != gather)
        use.user->setInput(size_t(use.index), whole);
    int at = outputIndex(g, updated[i]);
    if (at >= 0)
      g.setOutput(size_t(at), whole);
    for (auto &[state, value] : binding)
      if (state == tv.params[i]->name() && value == hints[i])
        value = whole->name();
  }

  std::vector<std::string> gradNames;
  for (Value *v : gradChunks)
    gradNames.push_back(v->name());
  if (oldClip) {
    // The norm keeps the unsharded step's name (grad_total_norm).
    const std::string oldName = oldClip->output(n)->name();
    Value *norm = g.findValue(*readMeta(model, meta::kGradNorm));
    g.removeNode(oldClip);
    if (norm && !g.findValue(oldName)) {
      g.renameValue(norm, oldName);
      writeMeta(model, meta::kGradNorm, oldName);
    }
  }
  g.removeNode(mean);
  writeMeta(model, meta::kGrads, gradNames);
  writeMeta(model, meta::kShardedState, pairs);
  writeMeta(model, meta::kShardWorldSize, std::to_string(world));
  stats["sharded-state-buffers"] += shardedBuffers;
  stats["sharded-state-elements-saved-per-rank"] += savedElements;
}

} // namespace mpc
