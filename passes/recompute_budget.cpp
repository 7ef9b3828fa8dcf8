// recompute to a memory budget: which forward values the backward computes
// again so that the step's planned peak fits --memory-budget.
//
// The backward keeps a set of forward values (the "kept" set) and drops
// every other value it reads; a dropped value is computed again once, right
// before the first backward node that needs it (directly or through another
// recomputed value), from kept values, parameters and constants; forward
// values that are neither kept nor saved but that a recomputation reads are
// recomputed with it. This is torch.utils.checkpoint's rule, with the
// checkpoints anywhere in the step, not only at module boundaries.
//
// Which set to keep is searched, as Chen et al. ("Training deep nets with
// sublinear memory cost") and torch.compile's activation_memory_budget do,
// and judged by the real planner (passes/memory_plan.h), since the peak
// depends on where the copies land and how the planner packs them:
//  1. cuts: boundaries of the forward where little data crosses (a
//     transformer's residual stream between blocks); the values crossing a
//     chosen cut are kept, which bounds every recomputation chain to a
//     segment (checkpointing per block, or every few blocks);
//  2. costs: a value whose producer costs many FLOPs per byte (a matrix
//     product's output) may be kept while cheap ones (elementwise ops,
//     softmax, norms, casts) are dropped;
// Candidate sets (segment counts x cost thresholds) are ranked by their
// recompute FLOPs (passes/flop_count.h), cheapest first, and the first one
// the planner fits is refined: the dropped values that cost the most FLOPs
// per byte are kept back, as many as still fit (a binary search, the
// knapsack's greedy order). The search plans the step a few dozen times at
// most, so compile time stays linear in the step's size times that.
//
// Random ops (Dropout, Random*, Bernoulli) are never recomputed (their copy
// would draw other numbers): their outputs are kept. Copies are the same ops
// with the same attributes on the same inputs, so the numbers are the same
// bits.
#include "passes/recompute_budget.h"

#include "ir/mpc_ops.h"
#include "ir/step_metadata.h"
#include "passes/flop_count.h"
#include "passes/fold_widening_casts.h"
#include "passes/memory_report.h"
#include "support/diagnostics.h"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <set>
#include <unordered_map>
#include <unordered_set>

namespace mpc {
namespace {

constexpr int64_t kNever = std::numeric_limits<int64_t>::max();

/// A forward op whose copy computes the same bits from the same inputs.
bool isRecomputable(const Node &n) {
  if (n.numInputs() == 0 || n.numOutputs() == 0)
    return false; // constants are read as they are; generators are random
  if (n.domain().empty()) {
    static const std::unordered_set<std::string> random = {
        "Dropout",          "RandomNormal",      "RandomUniform",
        "RandomNormalLike", "RandomUniformLike", "Bernoulli",
        "Multinomial"};
    return !random.count(n.opType());
  }
  // mpc's pure forward ops; its other ops are gradients, optimizer updates
  // and collectives, which have no place in a forward recomputation. The
  // norms' To forms (fold-widening-casts) are the standard LayerNormalization
  // and mpc.RMSNormalization with their Cast down folded in.
  static const std::unordered_set<std::string> pure = {"Gelu",
                                                       "GeluTanh",
                                                       "FusedMatMul",
                                                       "SoftmaxTo",
                                                       "DivSoftmaxTo",
                                                       "LogSigmoid",
                                                       "SumToShape",
                                                       "AddTo",
                                                       "RMSNormalization",
                                                       "RMSNormalizationTo",
                                                       "LayerNormalizationTo"};
  return n.domain() == kMpcDomain && pure.count(n.opType());
}

/// mpc.LayerNormalizationTo / RMSNormalizationTo (fold-widening-casts).
bool isNormTo(const Node &n) {
  return n.domain() == kMpcDomain && (n.opType() == "LayerNormalizationTo" ||
                                      n.opType() == "RMSNormalizationTo");
}

bool isConstantNode(const Node &n) {
  return n.domain().empty() && n.opType() == "Constant";
}

size_t byteSize(const Value &v) {
  size_t bytes = 0;
  return valueByteSize(v, bytes) ? bytes : 0;
}

/// "145.5 MiB (152536350 bytes)"; KiB below 10 MiB.
std::string showBytes(size_t bytes) {
  char text[64];
  bool small = bytes < (size_t(10) << 20);
  std::snprintf(text, sizeof text, "%.1f %s (%zu bytes)",
                double(bytes) / (small ? 1024.0 : 1024.0 * 1024.0),
                small ? "KiB" : "MiB", bytes);
  return text;
}

/// The step as this search sees it: forward values by id, with where they
/// are used, whether the backward reads them, and whether they carry data
/// (rather than being made from parameters and constants alone).
struct StepAnalysis {
  std::vector<Node *> nodes;
  std::unordered_map<const Node *, int64_t> index;
  int64_t loss = -1;
  size_t numIds = 0;
  std::vector<int64_t> producerAt, firstBackward, lastForward;
  std::vector<size_t> bytes;
  std::vector<double> flopsPerByte;
  std::vector<char> forward, saved, dataFlow, recomputable, droppable;
  /// The forward's values, in schedule order.
  std::vector<const Value *> values;

  StepAnalysis(const Model &model, const Graph &g) {
    nodes = g.nodeList();
    for (size_t i = 0; i < nodes.size(); ++i)
      index[nodes[i]] = int64_t(i);
    if (const std::string *l = readMeta(model, meta::kLoss))
      if (const Value *v = g.findValue(*l); v && v->producer())
        loss = index.at(v->producer());
    numIds = g.numValueIds();
    producerAt.assign(numIds, -1);
    firstBackward.assign(numIds, -1);
    lastForward.assign(numIds, -1);
    bytes.assign(numIds, 0);
    flopsPerByte.assign(numIds, 0);
    for (auto *flags : {&forward, &saved, &dataFlow, &recomputable, &droppable})
      flags->assign(numIds, 0);
    // A graph input that is not state: the batch, where data flows from.
    auto isBatch = [&](const Value *v) {
      if (v->producer() || v->isInitializer() || v->isState)
        return false;
      const Value *m = model.graph->findValue(v->name());
      return !(m && (m->isInitializer() || m->isState));
    };
    for (int64_t i = 0; i <= loss; ++i) {
      const Node &n = *nodes[size_t(i)];
      bool data = false;
      for (const Value *in : n.inputs())
        if (in)
          data =
              data || (in->producer() ? dataFlow[in->id()] != 0 : isBatch(in));
      int64_t flops = nodeFlops(n);
      for (const Value *o : n.outputs()) {
        if (!o)
          continue;
        size_t id = o->id();
        values.push_back(o);
        forward[id] = 1;
        producerAt[id] = i;
        lastForward[id] = i;
        bytes[id] = byteSize(*o);
        dataFlow[id] = data && !isConstantNode(n);
        recomputable[id] =
            isRecomputable(n) && !o->isGraphOutput() && bytes[id] > 0;
        flopsPerByte[id] = bytes[id] ? double(flops) / double(bytes[id]) : 0;
        for (const Use &u : o->uses()) {
          int64_t at = index.at(u.user);
          if (at > loss && (firstBackward[id] < 0 || at < firstBackward[id]))
            firstBackward[id] = at;
          if (at <= loss)
            lastForward[id] = std::max(lastForward[id], at);
        }
        saved[id] = firstBackward[id] >= 0;
        droppable[id] = saved[id] && recomputable[id];
      }
    }
  }

  /// The values recomputed when the backward keeps `kept`: every droppable
  /// value not kept, and what their recomputation needs that is neither
  /// kept nor free to read.
  std::vector<char> recomputed(const std::vector<char> &kept) const {
    std::vector<char> in(numIds, 0);
    std::vector<const Value *> work;
    for (const Value *v : values)
      if (droppable[v->id()] && !kept[v->id()]) {
        in[v->id()] = 1;
        work.push_back(v);
      }
    while (!work.empty()) {
      const Value *v = work.back();
      work.pop_back();
      for (const Value *x : v->producer()->inputs()) {
        if (!x || !x->producer() || !forward[x->id()])
          continue;
        size_t id = x->id();
        if (in[id] || kept[id] || !recomputable[id])
          continue;
        in[id] = 1;
        work.push_back(x);
      }
    }
    return in;
  }

  /// The FLOPs of recomputing `in` (each producer once).
  int64_t flops(const std::vector<char> &in) const {
    int64_t total = 0;
    const Node *last = nullptr;
    for (const Value *v : values)
      if (in[v->id()] && v->producer() != last) {
        last = v->producer();
        total = saturatingAdd(total, nodeFlops(*last));
      }
    return total;
  }

  /// Rewrites the step of `model` (the analysed one or a copy of it: its
  /// node list in the same order) so that the backward recomputes `in`, a
  /// copied softmax island writing the Cast down the backward reads of its
  /// Y. Returns the number of nodes copied.
  size_t apply(Model &model, const std::vector<char> &in) const {
    Graph &g = *model.training->algorithm;
    std::vector<Node *> made;
    std::vector<Node *> target = g.nodeList();
    // Producers of recomputed values, in forward order, and how early the
    // backward needs each: at its values' first backward use, or where a
    // recomputation that reads them is placed (consumers come later in the
    // forward, so a backward walk sees them first).
    std::vector<int64_t> order;
    for (const Value *v : values)
      if (in[v->id()] && (order.empty() || order.back() != producerAt[v->id()]))
        order.push_back(producerAt[v->id()]);
    std::unordered_map<int64_t, int64_t> need;
    std::unordered_map<const Node *, int64_t> at;
    for (int64_t i : order)
      at[nodes[size_t(i)]] = i;
    for (auto it = order.rbegin(); it != order.rend(); ++it) {
      int64_t first = kNever;
      for (const Value *o : nodes[size_t(*it)]->outputs()) {
        if (!o || !in[o->id()])
          continue;
        if (firstBackward[o->id()] >= 0)
          first = std::min(first, firstBackward[o->id()]);
        for (const Use &u : o->uses())
          if (auto c = at.find(u.user); c != at.end())
            first = std::min(first, need.at(c->second));
      }
      need[*it] = first;
    }
    // The backward's reads of recomputed values, listed before any copy
    // changes the use lists.
    struct Rewire {
      int64_t user;
      int input;
      const Value *value;
    };
    std::vector<Rewire> rewires;
    for (int64_t i : order)
      for (const Value *o : nodes[size_t(i)]->outputs())
        if (o && in[o->id()])
          for (const Use &u : o->uses())
            // Backward users only (forward ones keep the original).
            if (int64_t j = index.at(u.user); j > loss)
              rewires.push_back({j, u.index, o});
    std::unordered_map<const Value *, Value *> copyOf;
    for (int64_t i : order) {
      const Node &n = *nodes[size_t(i)];
      Node &t = *target[size_t(i)];
      std::vector<Value *> inputs;
      for (size_t k = 0; k < n.numInputs(); ++k) {
        const Value *x = n.input(k);
        inputs.push_back(x && in[x->id()] ? copyOf.at(x) : t.input(k));
      }
      int64_t before = need.at(i);
      // The same outputs, an omitted one omitted (an optional output may
      // change what an op computes).
      std::string name = g.uniqueNodeName(recomputeNodeName(n));
      std::vector<std::string> outs;
      for (size_t k = 0; k < n.numOutputs(); ++k)
        outs.push_back(
            n.output(k) ? g.uniqueValueName(name + "_out" + std::to_string(k))
                        : std::string());
      Node *c = g.createNodeWithOutputs(
          n.opType(), inputs, std::move(outs), std::move(name), n.domain(),
          before == kNever ? nullptr : target[size_t(before)]);
      for (const auto &kv : n.attributes())
        c->setAttr(kv.first, kv.second);
      for (size_t k = 0; k < n.numOutputs(); ++k)
        if (n.output(k)) {
          c->output(k)->copyTypeFrom(*n.output(k));
          copyOf[n.output(k)] = c->output(k);
        }
      made.push_back(c);
    }
    for (const Rewire &r : rewires)
      target[size_t(r.user)]->setInput(size_t(r.input), copyOf.at(r.value));
    foldCastsDownIntoSoftmaxes(model, g, made);
    return order.size();
  }
};

/// A copy of the model whose step can be rewritten and planned.
std::unique_ptr<Model> trialCopy(const Model &model) {
  auto trial = std::make_unique<Model>();
  trial->opsets = model.opsets;
  trial->metadata = model.metadata;
  trial->graph = model.graph->clone();
  trial->training.emplace();
  trial->training->algorithm = model.training->algorithm->clone();
  trial->training->updateBinding = model.training->updateBinding;
  return trial;
}

/// One candidate: the kept set, what it recomputes, and at what cost.
struct Candidate {
  std::vector<char> kept, in;
  int64_t flops = 0;
  size_t peak = 0;
};

} // namespace

void recomputeToBudget(Model &model, PassContext &ctx) {
  const size_t budget = size_t(ctx.options.memoryBudget);
  Graph &g = *model.training->algorithm;
  MemoryPlan before = planCompiledModel(model, /*asWritten=*/false);
  ctx.stats["planned_peak_before"] = int64_t(before.arenaBytes);
  if (before.arenaBytes <= budget) {
    ctx.changedNothing = true;
    return;
  }
  StepAnalysis s(model, g);
  const size_t n = s.numIds;

  // The data values crossing each forward boundary (after node i): made at
  // or before i and read by the forward after it. A boundary that few cross
  // (one value: a residual stream between blocks, a plain chain's link) is
  // where a segment can end.
  int64_t last = s.loss;
  std::vector<int64_t> crossing(size_t(std::max<int64_t>(last + 1, 1)), 0);
  for (const Value *v : s.values) {
    size_t id = v->id();
    if (!s.dataFlow[id] || s.lastForward[id] <= s.producerAt[id])
      continue;
    crossing[size_t(s.producerAt[id])] += 1;
    crossing[size_t(s.lastForward[id])] -= 1;
  }
  for (size_t i = 1; i < crossing.size(); ++i)
    crossing[i] += crossing[i - 1];
  int64_t least = 0;
  for (int64_t c : crossing)
    if (c > 0 && (least == 0 || c < least))
      least = c;
  // Bytes of droppable values made up to each node, to split segments.
  std::vector<int64_t> dropBytes(crossing.size(), 0);
  for (const Value *v : s.values)
    if (s.droppable[v->id()])
      dropBytes[size_t(s.producerAt[v->id()])] += int64_t(s.bytes[v->id()]);
  for (size_t i = 1; i < dropBytes.size(); ++i)
    dropBytes[i] += dropBytes[i - 1];
  const int64_t totalDrop = dropBytes.empty() ? 0 : dropBytes.back();

  // The candidates: segment counts over cut boundaries, by cost threshold.
  std::vector<Candidate> candidates;
  std::set<std::vector<char>> seen;
  auto addCandidate = [&](std::vector<char> kept) {
    if (!seen.insert(kept).second)
      return;
    Candidate c;
    c.in = s.recomputed(kept);
    c.flops = s.flops(c.in);
    c.kept = std::move(kept);
    if (std::find(c.in.begin(), c.in.end(), 1) != c.in.end())
      candidates.push_back(std::move(c));
  };
  const double kInf = std::numeric_limits<double>::infinity();
  for (int64_t loose : {0, 1}) {
    std::vector<int64_t> cuts;
    for (size_t i = 0; i + 1 < crossing.size(); ++i)
      if (crossing[i] > 0 && crossing[i] <= least + loose)
        cuts.push_back(int64_t(i));
    std::vector<size_t> segments = {1};
    for (size_t k = 2; k <= cuts.size() + 1; k = std::max(k + 1, k * 3 / 2))
      segments.push_back(k);
    segments.push_back(cuts.size() + 1);
    for (size_t k : segments) {
      // Cuts at every k-th of the droppable bytes (all of them when k
      // exceeds the cuts).
      std::vector<int64_t> chosen;
      size_t next = 1;
      for (int64_t c : cuts) {
        if (k > cuts.size() ||
            dropBytes[size_t(c)] * int64_t(k) >= int64_t(next) * totalDrop) {
          chosen.push_back(c);
          while (dropBytes[size_t(c)] * int64_t(k) >= int64_t(next) * totalDrop)
            ++next;
        }
      }
      // Each candidate also with the norms' To forms kept: recomputing one
      // may cost more than it frees (its statistics and both Ys at once),
      // and the candidates without them are the ones found before they
      // were recomputable, so no step's floor rises.
      for (bool keepNormsTo : {false, true})
        for (double costly : {kInf, 16.0, 1.0}) {
          std::vector<char> kept(n, 0);
          for (const Value *v : s.values) {
            size_t id = v->id();
            if (s.flopsPerByte[id] >= costly ||
                (keepNormsTo && isNormTo(*v->producer())))
              kept[id] = 1;
            if (!s.dataFlow[id])
              continue;
            auto cut = std::lower_bound(chosen.begin(), chosen.end(),
                                        s.producerAt[id]);
            if (cut != chosen.end() && *cut < s.lastForward[id])
              kept[id] = 1;
          }
          addCandidate(std::move(kept));
        }
    }
  }
  std::stable_sort(
      candidates.begin(), candidates.end(),
      [](const Candidate &a, const Candidate &b) { return a.flops < b.flops; });

  size_t trials = 0;
  auto planWith = [&](const std::vector<char> &in) {
    ++trials;
    std::unique_ptr<Model> trial = trialCopy(model);
    s.apply(*trial, in);
    return planCompiledModel(*trial, /*asWritten=*/false).arenaBytes;
  };
  Candidate *fit = nullptr;
  size_t floor = before.arenaBytes;
  for (Candidate &c : candidates) {
    c.peak = planWith(c.in);
    floor = std::min(floor, c.peak);
    if (c.peak <= budget) {
      fit = &c;
      break;
    }
  }
  if (!fit)
    throw Error("--memory-budget=" + showBytes(budget) +
                " is below this step's floor, " + showBytes(floor) +
                ": its state and batch take " +
                showBytes(before.persistentBytes) +
                ", the rest is the least working set recomputation leaves");

  // Keep back the dropped values that cost the most FLOPs per byte, as many
  // as still fit: the largest prefix of that order whose plan fits.
  std::vector<const Value *> back;
  for (const Value *v : s.values)
    if (fit->in[v->id()])
      back.push_back(v);
  std::stable_sort(back.begin(), back.end(),
                   [&](const Value *a, const Value *b) {
                     return s.flopsPerByte[a->id()] > s.flopsPerByte[b->id()];
                   });
  while (!back.empty() && s.flopsPerByte[back.back()->id()] <= 0)
    back.pop_back();
  std::vector<char> bestIn = fit->in;
  size_t bestPeak = fit->peak;
  for (size_t lo = 0, hi = back.size(); lo < hi;) {
    size_t mid = lo + (hi - lo + 1) / 2;
    std::vector<char> kept = fit->kept;
    for (size_t k = 0; k < mid; ++k)
      kept[back[k]->id()] = 1;
    std::vector<char> in = s.recomputed(kept);
    size_t peak = s.flops(in) < s.flops(bestIn) ? planWith(in) : budget + 1;
    if (peak <= budget) {
      lo = mid;
      bestIn = std::move(in);
      bestPeak = peak;
    } else {
      hi = mid - 1;
    }
  }

  size_t recomputedBytes = 0, values = 0;
  for (const Value *v : s.values)
    if (bestIn[v->id()]) {
      recomputedBytes += s.bytes[v->id()];
      ++values;
    }
  ctx.stats["recompute_flops"] = s.flops(bestIn);
  ctx.stats["recomputed_nodes"] = int64_t(s.apply(model, bestIn));
  ctx.stats["recomputed_values"] += int64_t(values);
  ctx.stats["recomputed_bytes"] += int64_t(recomputedBytes);
  ctx.stats["planned_peak_after"] = int64_t(bestPeak);
  ctx.stats["budget_trials"] = int64_t(trials);
}

} // namespace mpc
