// Dataset: validation of npz and mapped .npy data against the step's
// inputs, batching across sources, shuffling and synthetic data.
#include "runtime/data/dataset.h"

#include "runtime/data/mapped_npy.h"
#include "runtime/data/npz.h"
#include "runtime/data/sample_check.h"
#include "support/diagnostics.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <random>

#include <dirent.h>
#include <sys/stat.h>

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

namespace {

/// The .npy files of a directory, sorted, for an error that lists them.
std::string npyFilesIn(const std::string &dir) {
  std::vector<std::string> names;
  if (DIR *d = ::opendir(dir.c_str())) {
    while (const dirent *e = ::readdir(d)) {
      std::string name = e->d_name;
      if (name.size() > 4 && name.compare(name.size() - 4, 4, ".npy") == 0)
        names.push_back(name);
    }
    ::closedir(d);
  }
  std::sort(names.begin(), names.end());
  std::string list;
  for (const std::string &name : names)
    list += (list.empty() ? "" : ", ") + name;
  return list.empty() ? "no .npy files" : list;
}

bool isDirectory(const std::string &path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

} // namespace

Dataset Dataset::fromNpz(const std::string &path,
                         const std::vector<DataInputSpec> &specs,
                         uint64_t limitBytes, const std::string &limitSource) {
  return fromSources({path}, specs, limitBytes, limitSource);
}

std::string Dataset::sourcesName(const std::vector<std::string> &paths) {
  if (paths.size() <= 1)
    return paths.empty() ? std::string() : paths[0];
  return paths[0] + " and " + std::to_string(paths.size() - 1) + " more " +
         (paths.size() == 2 ? "source" : "sources");
}

Dataset Dataset::fromSources(const std::vector<std::string> &paths,
                             const std::vector<DataInputSpec> &specs,
                             uint64_t limitBytes,
                             const std::string &limitSource) {
  Dataset d;
  d.source_ = sourcesName(paths);
  d.specs_ = specs;
  // Each array's dtype as the first source stores it: the others must
  // store the same (an int32 label shard after int64 ones is a different
  // export, not the same data).
  std::vector<DType> firstDtypes;
  uint64_t used = 0; // bytes the .npz sources read so far take
  for (const std::string &path : paths) {
    Shard shard;
    shard.path = path;
    shard.first = d.numSamples_;
    shard.count = -1;
    std::vector<DType> dtypes;
    std::string countedIn; // the array whose count the others must match
    if (isDirectory(path)) {
      for (const DataInputSpec &s : specs) {
        const std::string file = path + "/" + s.name + ".npy";
        struct stat st;
        if (::stat(file.c_str(), &st) != 0 && errno == ENOENT)
          throw Error(path + ": no " + s.name +
                      ".npy for the model's data input '" + s.name +
                      "'; the directory has: " + npyFilesIn(path));
        auto m = std::make_shared<const MappedNpy>(file);
        const std::string where = file + ": array '" + s.name + "'";
        if (m->dims().empty())
          throw Error(where + ": is a scalar; expected samples along axis 0");
        std::vector<int64_t> sample(m->dims().begin() + 1, m->dims().end());
        if (sample != s.sampleDims)
          throw Error(where + ": samples have shape " + dimsToString(sample) +
                      ", the model expects " + dimsToString(s.sampleDims));
        if (!samplesConvert(m->dtype(), s.dtype))
          throw Error(dtypeMismatch(where, m->dtype(), s.dtype));
        if (shard.count >= 0 && m->dims()[0] != shard.count)
          throw Error(where + ": has " + std::to_string(m->dims()[0]) +
                      " samples, " + countedIn + " has " +
                      std::to_string(shard.count));
        shard.count = m->dims()[0];
        countedIn = s.name + ".npy";
        dtypes.push_back(m->dtype());
        shard.mapped.push_back(std::move(m));
      }
    } else {
      // Only the arrays the step reads are inflated, and only once their
      // sizes together fit the memory: an unused member of any size costs
      // nothing.
      NpzSelection selection;
      for (const DataInputSpec &s : specs)
        selection.only.push_back(s.name);
      if (limitBytes)
        selection.limitBytes = limitBytes > used ? limitBytes - used : 1;
      selection.limitSource = limitSource;
      std::vector<std::pair<std::string, Tensor>> arrays;
      std::vector<std::string> present;
      std::string err;
      if (!readNpz(path, selection, arrays, &present, err))
        throw Error(err);
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
        dtypes.push_back(t.dtype);
        checkSamples(t, s, where);
        if (shard.count >= 0 && t.dims[0] != shard.count)
          throw Error(where + ": has " + std::to_string(t.dims[0]) +
                      " samples, other arrays have " +
                      std::to_string(shard.count));
        shard.count = t.dims[0];
        used += t.bytes.size();
        shard.arrays.push_back(std::move(t));
      }
    }
    if (shard.count <= 0)
      throw Error(path + ": holds no samples");
    if (firstDtypes.empty())
      firstDtypes = dtypes;
    for (size_t a = 0; a < specs.size(); ++a)
      if (dtypes[a] != firstDtypes[a])
        throw Error(path + ": array '" + specs[a].name + "': dtype " +
                    dtypeName(dtypes[a]) + ", the first source (" + paths[0] +
                    ") has " + dtypeName(firstDtypes[a]) +
                    "; every source must store the same dtypes");
    if (__builtin_add_overflow(d.numSamples_, shard.count, &d.numSamples_))
      throw Error(path + ": the sources hold more samples than 64 bits count");
    d.shards_.push_back(std::move(shard));
  }
  if (d.numSamples_ <= 0)
    throw Error(d.source_ + ": holds no samples");
  return d;
}

const Dataset::Shard &Dataset::shardOf(int64_t sample) const {
  if (shards_.size() == 1)
    return shards_[0];
  auto after = std::upper_bound(
      shards_.begin(), shards_.end(), sample,
      [](int64_t s, const Shard &shard) { return s < shard.first; });
  return *(after - 1);
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
    // The mapped bytes copied since the last release, as one range while
    // the samples run on in one file (in order: the whole batch).
    const MappedNpy *pending = nullptr;
    uint64_t pendingBegin = 0, pendingEnd = 0;
    auto flush = [&] {
      if (pending)
        pending->release(pendingBegin, size_t(pendingEnd - pendingBegin));
      pending = nullptr;
    };
    for (int64_t i = 0; i < batchSize; ++i) {
      int64_t sample = shuffle ? order_[size_t(first + i)] : first + i;
      uint8_t *row = t.bytes.data() + size_t(i) * sampleBytes;
      if (synthetic_) {
        drawSample(a, sample, t, i * perSample);
        continue;
      }
      const Shard &shard = shardOf(sample);
      const int64_t local = sample - shard.first;
      if (shard.mapped.empty()) {
        std::memcpy(row,
                    shard.arrays[a].bytes.data() + size_t(local) * sampleBytes,
                    sampleBytes);
        continue;
      }
      // A mapped sample: copied, then checked as the .npz arrays are when
      // read (naming its file and index), in the file's dtype.
      const MappedNpy &file = *shard.mapped[a];
      const size_t fileBytes = size_t(perSample) * dtypeSize(file.dtype());
      const uint64_t offset = uint64_t(local) * fileBytes;
      const std::string where = file.path() + ": array '" + spec.name + "'";
      if (file.dtype() == spec.dtype) {
        file.copy(offset, fileBytes, row);
        if (spec.dtype == DType::Bool)
          for (size_t b = 0; b < fileBytes; ++b)
            row[b] = row[b] != 0;
        checkSampleValues(t, spec, i, where, local);
      } else {
        std::vector<int64_t> oneDims = dims;
        oneDims[0] = 1;
        Tensor one(file.dtype(), oneDims);
        file.copy(offset, fileBytes, one.bytes.data());
        checkSampleValues(one, spec, 0, where, local);
        Tensor cast = one.castTo(spec.dtype);
        std::memcpy(row, cast.bytes.data(), sampleBytes);
      }
      if (pending == &file && offset == pendingEnd) {
        pendingEnd += fileBytes;
      } else {
        flush();
        pending = &file;
        pendingBegin = offset;
        pendingEnd = offset + fileBytes;
      }
    }
    flush();
    out.emplace_back(specs_[a].name, std::move(t));
  }
  return out;
}

} // namespace mpc
