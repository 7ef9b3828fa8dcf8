// FileBytes: a whole input file's bytes, read-only, without a copy.
//
// A model file is parsed once and dropped (or, with loadModel's
// WeightBytes::InFile, kept mapped for the weights left in it, by the
// tensors that hold them). Reading it into a std::string
// zero-fills a buffer of its size and then copies the page cache into it;
// mapping it (as LLVM's MemoryBuffer maps large files) gives the parser the
// page cache's own pages. On a 64-layer stack's 13 MB input that was 13M
// instructions of zeroing (callgrind: loadModel 57.9M -> 44.6M) plus the
// kernel's copy. A file that cannot be
// mapped (a pipe, an empty file) is read as before.
//
// A mapped file that another process truncates while it is mapped raises
// SIGBUS when a page past its new end is read; the mapping is watched
// (mapped_input_guard.h), so that ends the tool with a one-line error naming
// the file and exit code 1. mpc's own writers never truncate in place (they
// rename a new file over the old one, support/file_io.h), so a model
// compiled onto its own path is safe.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace mpc {

class FileBytes {
public:
  FileBytes() = default;
  FileBytes(FileBytes &&o) noexcept { *this = std::move(o); }
  FileBytes &operator=(FileBytes &&o) noexcept;
  FileBytes(const FileBytes &) = delete;
  FileBytes &operator=(const FileBytes &) = delete;
  ~FileBytes();

  /// Maps or reads `path`. On failure sets `error` as readWholeFile does
  /// ("PATH: cannot open: ...", "PATH: is a directory") and returns false.
  bool open(const std::string &path, std::string &error);

  const char *data() const { return mapped_ ? mapped_ : read_.data(); }
  size_t size() const { return mapped_ ? mappedSize_ : read_.size(); }
  std::string_view view() const { return {data(), size()}; }

private:
  void unmap();

  const char *mapped_ = nullptr;
  size_t mappedSize_ = 0;
  int watchSlot_ = -1; ///< mapped_input_guard.h's slot for the mapping
  std::string read_;   // when not mapped
};

} // namespace mpc
