// A .npy file mapped read-only, for data sets bigger than memory: the
// header is checked when it is opened (dtype, shape, the data's size against
// the file's), and samples are copied out of the mapping a batch at a time.
//
// The mapping is watched (support/mapped_input_guard.h): a file truncated
// while a run reads it (np.save rewriting it) ends the run with one line
// naming it and exit code 1, not a SIGBUS.
//
// Pages a copy touched are handed back to the kernel after it
// (madvise(MADV_DONTNEED) on a read-only shared mapping: the file's pages
// stay in the page cache, not in the process), so reading a 10 GB array
// leaves the resident set at the batch, not at the file.
#pragma once

#include "ir/tensor.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace mpc {

class MappedNpy {
public:
  /// Maps `path` and validates its header and size; throws Error
  /// ("PATH: ...") when it cannot be opened, is not a regular file or is
  /// not a valid .npy (runtime/data/npy.h's dtypes).
  explicit MappedNpy(const std::string &path);
  ~MappedNpy();
  MappedNpy(const MappedNpy &) = delete;
  MappedNpy &operator=(const MappedNpy &) = delete;

  const std::string &path() const { return path_; }
  DType dtype() const { return dtype_; }
  const std::vector<int64_t> &dims() const { return dims_; }

  /// Copies bytes [offset, offset + n) of the array data to `dst`.
  void copy(uint64_t offset, size_t n, uint8_t *dst) const;
  /// Hands the pages of array bytes [offset, offset + n) back to the kernel
  /// (a later copy reads them from the page cache again).
  void release(uint64_t offset, size_t n) const;

private:
  std::string path_;
  DType dtype_ = DType::Undefined;
  std::vector<int64_t> dims_;
  uint8_t *base_ = nullptr; ///< the mapping (nullptr for an empty array)
  size_t size_ = 0;         ///< the file's size
  size_t dataOffset_ = 0;
  int watchSlot_ = -1; ///< support/mapped_input_guard.h's
};

} // namespace mpc
