// Training data for mpc-run: npz arrays, directories of .npy files mapped
// from disk, or synthetic, cut into batches.
//
// A data set may be several sources read one after another (shards): each
// an .npz, read whole into memory, or a directory holding one NAME.npy per
// data input, mapped and read a batch at a time, so that it may be bigger
// than memory (runtime/data/mapped_npy.h). Samples are numbered across the
// sources in the order given. Arrays are named after the step's data inputs,
// first axis = samples. The data is read in epochs, as torch's
// DataLoader(drop_last=True) reads it: an epoch is the samples in order (or,
// with --shuffle --seed=S, in a seeded permutation of its own), cut into full
// batches; the samples a last partial batch would hold are left out of that
// epoch, never wrapped into the next. Batches are a pure function of (index,
// seed), so a resumed run sees exactly the data the uninterrupted run would
// have seen.
#pragma once

#include "ir/graph.h"

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace mpc {

class MappedNpy;

/// What a data input must look like: name, dtype, per-sample dims, and for
/// class labels the number of classes and the ignore_index (if any).
struct DataInputSpec {
  std::string name;
  DType dtype = DType::Undefined;
  std::vector<int64_t> sampleDims;
  int64_t numClasses = 0; ///< > 0 for labels of a classification loss
  int64_t ignoreIndex = INT64_MIN;
};

/// Reads the data inputs of a training step: its graph inputs with static
/// per-sample dims, the batch (first dim, or `batch` where it is symbolic) and
/// label ranges from the loss nodes that read them.
std::vector<DataInputSpec> describeDataInputs(const Graph &step,
                                              int64_t &batch);

class Dataset {
public:
  /// Loads and validates an npz (names, dtypes, shapes, label range, NaN/Inf
  /// with the sample index): throws Error naming the file and array. Only
  /// the arrays `specs` name are read, and only when they fit in
  /// `limitBytes` (0: the memory available; `limitSource` names the limit
  /// in the error, see NpzSelection).
  static Dataset fromNpz(const std::string &path,
                         const std::vector<DataInputSpec> &specs,
                         uint64_t limitBytes = 0,
                         const std::string &limitSource = "");
  /// The sources `paths` read one after another as one data set: each an
  /// .npz (read and checked whole, as fromNpz; the memory limit covers them
  /// together) or a directory of NAME.npy files, one per data input,
  /// mapped: their headers are checked now (dtype, sample shape, the same
  /// sample count in every array, naming the file), their values (finite,
  /// labels in range) as each batch is cut, the error naming the file,
  /// array and sample. The sources must agree on each array's dtype.
  /// Throws Error naming the source and array.
  static Dataset fromSources(const std::vector<std::string> &paths,
                             const std::vector<DataInputSpec> &specs,
                             uint64_t limitBytes = 0,
                             const std::string &limitSource = "");
  /// The name of a data set of `paths` in messages: the path, or the first
  /// and how many more ("a.npz and 2 more sources").
  static std::string sourcesName(const std::vector<std::string> &paths);
  /// Random data of the right shapes: N(0,1) floats, labels in range,
  /// other integers 0 or 1. Each sample is a function of (seed, input,
  /// sample index), drawn when a batch takes it: the data holds no memory,
  /// whatever numSamples is.
  static Dataset synthetic(const std::vector<DataInputSpec> &specs,
                           int64_t numSamples, uint64_t seed);
  /// The bytes `numSamples` samples of `specs` take (SIZE_MAX past 64
  /// bits): a batch's, for the memory check before one is made.
  static size_t syntheticBytes(const std::vector<DataInputSpec> &specs,
                               int64_t numSamples);

  int64_t numSamples() const { return numSamples_; }

  /// Batch `index` (0-based) of `batchSize` samples, as (input name, tensor)
  /// pairs: batch index % P of epoch index / P, where an epoch holds P =
  /// `batchesPerEpoch` batches (0: every full batch, numSamples /
  /// batchSize). A run whose optimizer step takes G batches (micro-batches
  /// times ranks) passes a multiple of G, so no step straddles two epochs.
  /// Throws Error (naming the data) when P batches need more samples than
  /// there are.
  std::vector<std::pair<std::string, Tensor>>
  batch(int64_t index, int64_t batchSize, bool shuffle, uint64_t seed,
        int64_t batchesPerEpoch = 0) const;

private:
  /// The data's name in errors: the file, or "--synthetic".
  std::string source_;
  std::vector<DataInputSpec> specs_;
  /// One source of samples [first, first + count) of the data set: arrays
  /// in memory (an .npz) or mapped files (a directory), one per spec.
  struct Shard {
    std::string path;
    int64_t first = 0, count = 0;
    std::vector<Tensor> arrays; ///< [count, sampleDims...], the spec's dtype
    std::vector<std::shared_ptr<const MappedNpy>> mapped;
  };
  std::vector<Shard> shards_;
  int64_t numSamples_ = 0;
  /// The shard holding sample `sample`.
  const Shard &shardOf(int64_t sample) const;
  /// synthetic(): no arrays; batch() draws each sample (drawSample).
  bool synthetic_ = false;
  uint64_t syntheticSeed_ = 0;
  /// Writes synthetic sample `sample` of input `input` into `out` from
  /// element `at` on.
  void drawSample(size_t input, int64_t sample, Tensor &out, int64_t at) const;
  /// The last epoch's shuffled order (its permutation takes O(numSamples)
  /// to draw; every batch of the epoch reads it). So batch() is not to be
  /// called from two threads at once.
  mutable int64_t orderEpoch_ = -1;
  mutable uint64_t orderSeed_ = 0;
  mutable std::vector<int64_t> order_;
};

} // namespace mpc
