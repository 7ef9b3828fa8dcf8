// Dataset: validation of npz data against the step's inputs, batching,
// shuffling and synthetic data.
#include "runtime/data/dataset.h"

#include "runtime/data/npz.h"
#include "runtime/data/sample_check.h"
#include "support/diagnostics.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <random>

namespace mpc {

namespace {

bool isLossOp(const Node &n) {
  return n.domain().empty() && (n.opType() == "SoftmaxCrossEntropyLoss" ||
                                n.opType() == "NegativeLogLikelihoodLoss");
}

/// Deterministic per-epoch permutation of [0, n).
std::vector<int64_t> permutation(int64_t n, uint64_t seed, int64_t epoch) {
  std::vector<int64_t> p(static_cast<size_t>(n));
  std::iota(p.begin(), p.end(), 0);
  std::mt19937_64 rng(seed * 0x9e3779b97f4a7c15ull + uint64_t(epoch));
  for (int64_t i = n - 1; i > 0; --i) {
    int64_t j = int64_t(rng() % uint64_t(i + 1));
    std::swap(p[size_t(i)], p[size_t(j)]);
  }
  return p;
}

} // namespace

std::vector<DataInputSpec> describeDataInputs(const Graph &step,
                                              int64_t &batch) {
  std::vector<DataInputSpec> specs;
  int64_t graphBatch = -1;
  for (const Value *in : step.inputs()) {
    DataInputSpec s;
    s.name = in->name();
    s.dtype = in->dtype;
    if (!in->hasShape || in->dims.empty())
      throw Error("data input '" + in->name() +
                  "' has no batch dimension (its shape is " + in->typeString() +
                  ")");
    for (size_t i = 1; i < in->dims.size(); ++i) {
      if (!in->dims[i].isKnown())
        throw Error("data input '" + in->name() + "' has a dynamic dimension " +
                    std::to_string(i) + " (" + in->typeString() +
                    "); compile with mpc-opt --input-shape");
      s.sampleDims.push_back(in->dims[i].value);
    }
    if (in->dims[0].isKnown()) {
      if (graphBatch >= 0 && graphBatch != in->dims[0].value)
        throw Error("data inputs disagree on the batch size (" +
                    std::to_string(graphBatch) + " vs " +
                    std::to_string(in->dims[0].value) + " of '" + in->name() +
                    "')");
      graphBatch = in->dims[0].value;
    }
    // Labels: the second input of a classification loss.
    for (const Use &u : in->uses()) {
      if (!isLossOp(*u.user) || u.index != 1)
        continue;
      const Value *logits = u.user->input(0);
      if (logits && logits->hasShape && logits->dims.size() >= 2 &&
          logits->dims[1].isKnown())
        s.numClasses = logits->dims[1].value;
      if (u.user->hasAttr("ignore_index"))
        s.ignoreIndex = u.user->attrInt("ignore_index", 0);
    }
    specs.push_back(s);
  }
  if (graphBatch >= 0) {
    if (batch > 0 && batch != graphBatch)
      throw Error("--batch=" + std::to_string(batch) +
                  " but the step was compiled for batch " +
                  std::to_string(graphBatch) +
                  " (recompile with mpc-opt --batch or --input-shape)");
    batch = graphBatch;
  }
  if (batch <= 0)
    throw Error("the batch size is symbolic in the model: give --batch=B");
  return specs;
}

Dataset Dataset::fromNpz(const std::string &path,
                         const std::vector<DataInputSpec> &specs,
                         uint64_t limitBytes, const std::string &limitSource) {
  // Only the arrays the step reads are inflated, and only once their sizes
  // together fit the memory: an unused member of any size costs nothing.
  NpzSelection selection;
  for (const DataInputSpec &s : specs)
    selection.only.push_back(s.name);
  selection.limitBytes = limitBytes;
  selection.limitSource = limitSource;
  std::vector<std::pair<std::string, Tensor>> arrays;
  std::vector<std::string> present;
  std::string err;
  if (!readNpz(path, selection, arrays, &present, err))
    throw Error(err);
  Dataset d;
  d.source_ = path;
  d.specs_ = specs;
  d.numSamples_ = -1;
  for (const DataInputSpec &s : specs) {
    Tensor *found = nullptr;
    for (auto &kv : arrays)
      if (kv.first == s.name)
        found = &kv.second;
    if (!found) {
      std::string names;
      for (const std::string &name : present)
        names += (names.empty() ? "" : ", ") + name;
      throw Error(path + ": no array named '" + s.name +
                  "' (the model's data input); the file has: " + names);
    }
    Tensor &t = *found;
    std::string where = path + ": array '" + s.name + "'";
    checkSamples(t, s, where);
    if (d.numSamples_ >= 0 && t.dims[0] != d.numSamples_)
      throw Error(where + ": has " + std::to_string(t.dims[0]) +
                  " samples, other arrays have " +
                  std::to_string(d.numSamples_));
    d.numSamples_ = t.dims[0];
    d.arrays_.push_back(std::move(t));
  }
  if (d.numSamples_ <= 0)
    throw Error(path + ": holds no samples");
  return d;
}

size_t Dataset::syntheticBytes(const std::vector<DataInputSpec> &specs,
                               int64_t numSamples) {
  size_t total = 0;
  for (const DataInputSpec &s : specs) {
    std::vector<int64_t> dims = {numSamples};
    dims.insert(dims.end(), s.sampleDims.begin(), s.sampleDims.end());
    int64_t n = elementCount(dims);
    size_t element = dtypeSize(s.dtype);
    if (n < 0 || (element && uint64_t(n) > (SIZE_MAX - total) / element))
      return SIZE_MAX;
    total += size_t(n) * element;
  }
  return total;
}

Dataset Dataset::synthetic(const std::vector<DataInputSpec> &specs,
                           int64_t numSamples, uint64_t seed) {
  // Nothing is made here: batch() draws each sample it cuts from (seed,
  // input, sample index), so the data takes one batch of memory however
  // many samples (K micro-batches of a --grad-accum window) it holds.
  Dataset d;
  d.source_ = "--synthetic";
  d.specs_ = specs;
  d.numSamples_ = numSamples;
  d.synthetic_ = true;
  d.syntheticSeed_ = seed;
  return d;
}

namespace {

/// splitmix64: a small, fast generator whose state is one word, so each
/// sample seeds its own stream for free.
uint64_t splitmix64(uint64_t &state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/// A uniform double in (0, 1].
double uniform(uint64_t &state) {
  return double((splitmix64(state) >> 11) + 1) * 0x1.0p-53;
}

} // namespace

void Dataset::drawSample(size_t input, int64_t sample, Tensor &out,
                         int64_t at) const {
  const DataInputSpec &s = specs_[input];
  const int64_t n = elementCount(s.sampleDims);
  uint64_t state = syntheticSeed_ * 0x9e3779b97f4a7c15ull ^
                   (uint64_t(input) << 56) ^ uint64_t(sample);
  splitmix64(state);
  for (int64_t i = 0; i < n; ++i) {
    double v;
    if (isFloating(s.dtype)) // N(0, 1), Box-Muller
      v = std::sqrt(-2.0 * std::log(uniform(state))) *
          std::cos(6.283185307179586 * uniform(state));
    else if (s.numClasses > 0)
      v = double(splitmix64(state) % uint64_t(s.numClasses));
    else
      v = double(splitmix64(state) & 1);
    out.setFromDouble(at + i, v);
  }
}

std::vector<std::pair<std::string, Tensor>>
Dataset::batch(int64_t index, int64_t batchSize, bool shuffle, uint64_t seed,
               int64_t batchesPerEpoch) const {
  int64_t perEpoch =
      batchesPerEpoch > 0 ? batchesPerEpoch : numSamples_ / batchSize;
  if (perEpoch <= 0)
    throw Error(source_ + ": holds " + std::to_string(numSamples_) +
                " samples, fewer than one batch of " +
                std::to_string(batchSize));
  if (perEpoch > numSamples_ / batchSize)
    throw Error(source_ + ": holds " + std::to_string(numSamples_) +
                " samples, fewer than an epoch of " + std::to_string(perEpoch) +
                " batches of " + std::to_string(batchSize) + " takes");
  const int64_t epoch = index / perEpoch;
  const int64_t first = (index % perEpoch) * batchSize;
  if (shuffle && (epoch != orderEpoch_ || seed != orderSeed_)) {
    order_ = permutation(numSamples_, seed, epoch);
    orderEpoch_ = epoch;
    orderSeed_ = seed;
  }
  std::vector<std::pair<std::string, Tensor>> out;
  for (size_t a = 0; a < specs_.size(); ++a) {
    const DataInputSpec &spec = specs_[a];
    std::vector<int64_t> dims = {batchSize};
    dims.insert(dims.end(), spec.sampleDims.begin(), spec.sampleDims.end());
    Tensor t(spec.dtype, dims);
    const int64_t perSample = elementCount(spec.sampleDims);
    const size_t sampleBytes = size_t(perSample) * dtypeSize(spec.dtype);
    for (int64_t i = 0; i < batchSize; ++i) {
      int64_t sample = shuffle ? order_[size_t(first + i)] : first + i;
      if (synthetic_)
        drawSample(a, sample, t, i * perSample);
      else
        std::memcpy(t.bytes.data() + size_t(i) * sampleBytes,
                    arrays_[a].bytes.data() + size_t(sample) * sampleBytes,
                    sampleBytes);
    }
    out.emplace_back(specs_[a].name, std::move(t));
  }
  return out;
}

} // namespace mpc
