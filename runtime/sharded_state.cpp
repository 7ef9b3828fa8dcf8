// Sharded optimizer state at run time (runtime/sharded_state.h).
#include "runtime/sharded_state.h"

#include "ir/step_metadata.h"
#include "kernels/common/shard_rule.h"
#include "support/diagnostics.h"

#include <algorithm>
#include <cstring>

namespace mpc {

namespace {

int64_t numelOf(const std::vector<int64_t> &dims) {
  int64_t n = 1;
  for (int64_t d : dims)
    n *= d;
  return n;
}

} // namespace

ShardedState shardedStateOf(const Model &model) {
  ShardedState s;
  const std::string *world = readMeta(model, meta::kShardWorldSize);
  const std::string *pairs = readMeta(model, meta::kShardedState);
  if (!world && !pairs)
    return s;
  const std::string key(meta::kShardWorldSize.name);
  char *end = nullptr;
  long long n = world ? std::strtoll(world->c_str(), &end, 10) : 0;
  if (!world || world->empty() || *end != '\0' || n < 1 ||
      n > kMaxShardWorldSize)
    throw Error(key + ": expected the number of ranks (1 to " +
                std::to_string(kMaxShardWorldSize) + "), got '" +
                (world ? *world : std::string()) + "'");
  s.worldSize = n;
  const Graph *alg = model.training ? model.training->algorithm.get() : nullptr;
  std::string text = pairs ? *pairs : std::string();
  size_t at = 0;
  while (at < text.size()) {
    size_t comma = text.find(',', at);
    std::string pair = text.substr(
        at, comma == std::string::npos ? std::string::npos : comma - at);
    at = comma == std::string::npos ? text.size() : comma + 1;
    size_t eq = pair.find('=');
    ShardedState::Entry e;
    if (eq != std::string::npos) {
      e.state = pair.substr(0, eq);
      e.param = pair.substr(eq + 1);
    }
    const Value *sv =
        alg && !e.state.empty() ? alg->findValue(e.state) : nullptr;
    const Value *pv =
        alg && !e.param.empty() ? alg->findValue(e.param) : nullptr;
    if (!sv || !sv->isState || !sv->isInitializer() || !pv ||
        !pv->isInitializer())
      throw Error(std::string(meta::kShardedState.name) + ": '" + pair +
                  "' is not a pair of a state and a parameter of the "
                  "training step");
    // The whole shape: the main graph's parameter (whole in a file and in
    // a model compiled in memory, whose step holds a chunk already).
    const Value *whole =
        model.graph ? model.graph->findValue(e.param) : nullptr;
    e.dims = whole && whole->isInitializer() ? whole->initializer()->dims
                                             : pv->initializer()->dims;
    s.entries.push_back(std::move(e));
  }
  return s;
}

void checkShardedWorld(const ShardedState &s, int ranks) {
  if (!s.sharded() || s.worldSize == ranks)
    return;
  throw Error("its optimizer state is sharded for " +
              std::to_string(s.worldSize) +
              " ranks (mpc-opt --world-size=" + std::to_string(s.worldSize) +
              ") but it runs on " + std::to_string(ranks) +
              (ranks == 1 ? " rank" : " ranks") + "; run it with " +
              std::to_string(s.worldSize) + " ranks or compile it again");
}

Tensor chunkOf(const Tensor &whole, int64_t worldSize, int rank) {
  const int64_t numel = whole.numel();
  const int64_t c = shardChunk(numel, worldSize);
  const int64_t fill =
      std::max<int64_t>(0, std::min(c, numel - int64_t(rank) * c));
  Tensor chunk = Tensor::zeros(whole.dtype, {c});
  const size_t size = dtypeSize(whole.dtype);
  if (fill)
    std::memcpy(chunk.bytes.data(),
                whole.bytes.data() + size_t(int64_t(rank) * c) * size,
                size_t(fill) * size);
  return chunk;
}

std::vector<Tensor>
gatherWholeMany(Collective *world, const std::vector<const Tensor *> &chunks,
                const std::vector<std::vector<int64_t>> &dims,
                int64_t worldSize, size_t bucketBytes) {
  // Chunk i's bytes, and where they sit in a rank's part of a bucket: every
  // rank's chunks have the same sizes, so every rank packs the same layout.
  std::vector<size_t> bytes(chunks.size());
  for (size_t i = 0; i < chunks.size(); ++i) {
    const int64_t c = shardChunk(numelOf(dims[i]), worldSize);
    if (chunks[i]->numel() != c)
      throw Error("a chunk of " + std::to_string(chunks[i]->numel()) +
                  " elements where " + std::to_string(c) + " were expected");
    bytes[i] = size_t(c) * dtypeSize(chunks[i]->dtype);
  }
  const bool gather = world && world->size() > 1;
  const size_t ranks = gather ? size_t(worldSize) : 1;
  std::vector<Tensor> wholes;
  wholes.reserve(chunks.size());
  std::vector<uint8_t> mine, all; // this rank's part, every rank's
  for (size_t first = 0; first < chunks.size();) {
    // A bucket: chunks [first, last), at least one, at most bucketBytes of
    // them past the first.
    size_t last = first, packed = 0;
    while (last < chunks.size() &&
           (last == first || packed + bytes[last] <= bucketBytes))
      packed += bytes[last++];
    mine.resize(packed);
    for (size_t i = first, at = 0; i < last; at += bytes[i++])
      if (bytes[i])
        std::memcpy(mine.data() + at, chunks[i]->bytes.data(), bytes[i]);
    const uint8_t *from = mine.data();
    if (gather) {
      all.resize(packed * ranks);
      world->allGather(mine.data(), packed, all.data());
      from = all.data();
    }
    // Whole tensor i: rank r's chunk after rank r-1's, cut to its elements.
    for (size_t i = first, at = 0; i < last; at += bytes[i++]) {
      Tensor whole = Tensor::zeros(chunks[i]->dtype, dims[i]);
      const size_t wanted = whole.bytes.size();
      for (size_t r = 0, done = 0; r < ranks && done < wanted; ++r) {
        const size_t n = std::min(bytes[i], wanted - done);
        std::memcpy(whole.bytes.data() + done, from + r * packed + at, n);
        done += n;
      }
      wholes.push_back(std::move(whole));
    }
    first = last;
  }
  return wholes;
}

void setShardedState(Model &model, const std::string &name, TensorPtr t,
                     bool stepOnly) {
  std::vector<Dim> dims(t->dims.begin(), t->dims.end());
  for (Graph *g : {model.training->algorithm.get(), model.graph.get()})
    if (Value *v = g && !(stepOnly && g == model.graph.get())
                       ? g->findValue(name)
                       : nullptr)
      if (v->isInitializer()) {
        v->setInitializer(t);
        v->setType(t->dtype, dims);
      }
}

void cutWholeState(Model &model, const ShardedState &s, int rank,
                   const std::string &where) {
  Graph &algorithm = *model.training->algorithm;
  for (const ShardedState::Entry &e : s.entries) {
    Value *state = algorithm.findValue(e.state);
    const Value *main = model.graph ? model.graph->findValue(e.state) : nullptr;
    const std::vector<int64_t> &full = e.dims;
    // A master is cut from the main graph's whole weight: the step's own
    // tensor may be another rank's chunk (a model compiled in memory holds
    // rank 0's).
    const Tensor &t = e.master() && main && main->isInitializer() &&
                              main->initializer()->dims == full
                          ? *main->initializer()
                          : *state->initializer();
    const int64_t c = shardChunk(numelOf(full), s.worldSize);
    if (t.dims == std::vector<int64_t>{c} && t.dims != full)
      continue;
    if (t.dims != full)
      throw Error((where.empty() ? "" : where + ": ") + "state '" + e.state +
                  "' is " + dtypeName(t.dtype) + "[" + dimsToString(t.dims) +
                  "], neither parameter '" + e.param + "''s shape [" +
                  dimsToString(full) + "] nor its chunk over " +
                  std::to_string(s.worldSize) + " ranks [" + std::to_string(c) +
                  "]");
    setShardedState(model, e.state,
                    std::make_shared<Tensor>(chunkOf(t, s.worldSize, rank)),
                    e.master());
  }
}

} // namespace mpc
