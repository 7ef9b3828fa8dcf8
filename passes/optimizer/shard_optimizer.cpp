// --shard-optimizer: the sharded form of the optimizer's update
// (passes/optimizer/shard_optimizer.h).
#include "passes/optimizer/shard_optimizer.h"

#include "ir/mpc_ops.h"
#include "ir/step_metadata.h"
#include "kernels/common/shard_rule.h"
#include "passes/training_support.h"
#include "support/diagnostics.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
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

/// The step's own tensor for a master of `whole`'s: rank 0's chunk of it
/// over `world` ranks, zero padded.
TensorPtr firstChunkOf(const Tensor &whole, int64_t world) {
  Tensor chunk = Tensor::zeros(whole.dtype, {shardChunk(whole.numel(), world)});
  const size_t bytes = std::min(chunk.bytes.size(), whole.bytes.size());
  if (bytes)
    std::memcpy(chunk.bytes.data(), whole.bytes.data(), bytes);
  return std::make_shared<Tensor>(std::move(chunk));
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
    if (!tv.params[i]->isInitializer())
      throw Error(pass + ": " + kFlag + ": parameter '" + tv.params[i]->name() +
                  "' is not an initializer (its master weight is sharded)");
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

  // The fp32 masters are sharded too: parameter i is this rank's chunk
  // (the state; the file keeps it whole and the runtime cuts it on loading,
  // runtime/sharded_state.h). The step starts by gathering every master
  // whole (one mpc.AllGather in its shape form: the dims are constants),
  // and every reader but the update reads the gathered copy. A gather only
  // copies bits, so the forward and backward see the unsharded step's
  // weights bit for bit; the update is elementwise on chunks, with the
  // global scalars (rate, clip coefficient, overflow flag) of the
  // unsharded step. A master whose only other readers are casts to one
  // 16-bit type (the weights of autocast products) is cast on its chunk
  // and gathered in that type: a cast rounds each element alone, so the
  // gathered copy has the whole cast's bits, in half the bytes on the wire
  // and in the arena. The copies are step values, not state.
  // Each master's dims (shapes: the rank, then the dims, per parameter).
  std::vector<std::vector<int64_t>> wholeDims;
  for (size_t i = 0; i < n; ++i) {
    std::vector<int64_t> whole;
    for (const Dim &d : tv.params[i]->dims)
      whole.push_back(d.value);
    wholeDims.push_back(whole);
  }
  auto shapesOf = [&](const std::vector<size_t> &which) {
    std::vector<int64_t> v;
    for (size_t i : which) {
      v.push_back(int64_t(wholeDims[i].size()));
      v.insert(v.end(), wholeDims[i].begin(), wholeDims[i].end());
    }
    return Attribute::ofInts(v);
  };
  std::vector<size_t> all;
  for (size_t i = 0; i < n; ++i)
    all.push_back(i);
  Node *first = g.nodes().empty() ? nullptr : g.nodes().front().get();
  std::vector<std::vector<Node *>> casts(n);
  std::vector<Node *> chunkCasts(n, nullptr);
  std::vector<Value *> startInputs(tv.params.begin(), tv.params.end());
  for (size_t i = 0; i < n; ++i) {
    DType to = DType::Undefined;
    bool onlyCasts = true;
    for (const Use &u : tv.params[i]->uses()) {
      if (u.user == updates[i])
        continue;
      const Node &c = *u.user;
      const DType t = c.numOutputs() == 1 && c.output(0) ? c.output(0)->dtype
                                                         : DType::Undefined;
      if (c.domain().empty() && c.opType() == "Cast" && c.numInputs() == 1 &&
          (t == DType::F16 || t == DType::BF16) &&
          (to == DType::Undefined || to == t)) {
        to = t;
        if (std::find(casts[i].begin(), casts[i].end(), u.user) ==
            casts[i].end())
          casts[i].push_back(u.user);
        continue;
      }
      onlyCasts = false;
    }
    if (!onlyCasts || casts[i].empty()) {
      casts[i].clear();
      continue;
    }
    Node *cast =
        createNamedNode(g, "Cast", "", {tv.params[i]},
                        {tv.params[i]->name() + "_chunk_" + dtypeName(to)},
                        "cast_master_chunk_" + tv.params[i]->name(), first);
    cast->setAttr("to", Attribute::ofInt(toOnnxDataType(to)));
    cast->output(0)->setType(to, {Dim(chunks[i])});
    chunkCasts[i] = cast;
    startInputs[i] = cast->output(0);
  }
  hints.clear();
  for (size_t i = 0; i < n; ++i)
    hints.push_back(tv.params[i]->name() + "_gathered");
  Node *start = createNamedNode(g, "AllGather", kMpcDomain, startInputs, hints,
                                "all_gather_master_weights", first);
  start->setAttr("world_size", Attribute::ofInt(world));
  start->setAttr("shapes", shapesOf(all));
  for (size_t i = 0; i < n; ++i) {
    Value *whole = start->output(i);
    whole->copyTypeFrom(*tv.params[i]);
    if (chunkCasts[i]) {
      // The casts' readers read the gathered 16-bit copy; with one cast it
      // keeps that cast's name.
      whole->setType(chunkCasts[i]->output(0)->dtype, tv.params[i]->dims);
      std::string name;
      for (Node *c : casts[i]) {
        name = c->output(0)->name();
        g.replaceAllUsesWith(c->output(0), whole);
        g.removeNode(c);
      }
      if (casts[i].size() == 1 && !g.findValue(name))
        g.renameValue(whole, name);
    }
    std::vector<Use> uses = tv.params[i]->uses();
    for (const Use &use : uses)
      if (use.user != start && use.user != updates[i] &&
          use.user != chunkCasts[i])
        use.user->setInput(size_t(use.index), whole);
    // The step's own tensor: rank 0's chunk here (the runtime cuts each
    // rank's on loading). The main graph keeps the whole weight, which the
    // file holds (the step writes no state of its own) and the inference
    // graph reads.
    tv.params[i]->setInitializer(
        firstChunkOf(*tv.params[i]->initializer(), world));
    chunkType(tv.params[i], tv.params[i]->dtype, i);
  }

  // The updates on chunks: the masters and the moments are this rank's
  // chunk.
  std::string pairs;
  int64_t shardedBuffers = 0, savedElements = 0;
  for (size_t i = 0; i < n; ++i) {
    Node *u = updates[i];
    u->setInput(3, updateGrads[i]);
    const int64_t numel = numelOf(*start->output(i), pass);
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
    pairs += "," + tv.params[i]->name() + "=" + tv.params[i]->name();
    ++shardedBuffers;
    savedElements += numel - chunks[i];
    for (size_t k = 0; k < u->numOutputs(); ++k)
      if (Value *out = u->output(k))
        chunkType(out, out->dtype, i);
  }

  // An updated master read by more than its state binding (the moving
  // average, whose state stays whole) is gathered after the last update
  // for those readers.
  Node *lastUpdate = nullptr;
  for (const auto &node : g.nodes())
    for (Node *u : updates)
      if (node.get() == u)
        lastUpdate = u;
  std::vector<size_t> readAfter;
  for (size_t i = 0; i < n; ++i)
    if (!updates[i]->output(0)->uses().empty())
      readAfter.push_back(i);
  if (!readAfter.empty()) {
    std::vector<Value *> gatherInputs;
    hints.clear();
    for (size_t i : readAfter) {
      gatherInputs.push_back(updates[i]->output(0));
      hints.push_back(tv.params[i]->name() + "_updated_whole");
    }
    Node *gather = createNamedNode(g, "AllGather", kMpcDomain, gatherInputs,
                                   hints, "all_gather_updated_parameters",
                                   nodeAfter(g, lastUpdate));
    gather->setAttr("world_size", Attribute::ofInt(world));
    gather->setAttr("shapes", shapesOf(readAfter));
    for (size_t k = 0; k < readAfter.size(); ++k) {
      const size_t i = readAfter[k];
      Value *whole = gather->output(k);
      whole->setType(updates[i]->output(0)->dtype, start->output(i)->dims);
      std::vector<Use> uses = updates[i]->output(0)->uses();
      for (const Use &use : uses)
        if (use.user != gather)
          use.user->setInput(size_t(use.index), whole);
    }
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

void cutShardedMastersForPlanning(Model &model) {
  const std::string *pairs = readMeta(model, meta::kShardedState);
  const std::string *world = readMeta(model, meta::kShardWorldSize);
  if (!pairs || !world || !model.training)
    return;
  char *end = nullptr;
  const long long n = std::strtoll(world->c_str(), &end, 10);
  if (*end != '\0' || n < 1 || n > kMaxShardWorldSize)
    return; // mpc-run refuses it in one line
  Graph &g = *model.training->algorithm;
  size_t at = 0;
  while (at < pairs->size()) {
    size_t comma = pairs->find(',', at);
    if (comma == std::string::npos)
      comma = pairs->size();
    const std::string pair = pairs->substr(at, comma - at);
    at = comma + 1;
    const size_t eq = pair.find('=');
    if (eq == std::string::npos || pair.substr(0, eq) != pair.substr(eq + 1))
      continue; // a moment: a chunk in the file already
    Value *v = g.findValue(pair.substr(0, eq));
    if (!v || !v->isInitializer())
      continue;
    const Tensor &t = *v->initializer();
    const int64_t c = shardChunk(t.numel(), n);
    if (t.dims == std::vector<int64_t>{c})
      continue;
    const DType type = t.dtype;
    v->setInitializer(firstChunkOf(t, n)); // t may be gone after this
    v->setType(type, {Dim(c)});
  }
}

} // namespace mpc
