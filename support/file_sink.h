// FileSink: buffered writes of a large file made of many small pieces and a
// few large ones, with holes where the large ones hold zero blocks.
//
// The model file writer (passes/onnx/model_file_writer.cpp) writes a
// compiled model as tens of thousands of small messages and the tensors'
// bytes. Small pieces are copied into a buffer; large ones (tensor data,
// blocks of serialized nodes) are only referenced, and all go to the file
// together, one writev (pwritev) for up to IOV_MAX of them.
//
// In a regular file written from its start, zero bytes of tensor data that
// cover at least one whole block of the file (optimizer moments start at
// zero: most of an Adam step's bytes) are not written: the file gets a hole
// there, which reads back as zeros; the page cache gets no pages for it and
// the disk no blocks. The zeros of the same run in the partial blocks at its
// edges are not written either: the kernel fills the rest of a block it
// allocates for the bytes around them with zeros itself. The data after a
// hole goes to its offset with pwritev, so a hole costs no lseek. A 64-layer
// Adam step: 781 writev + 775 lseek calls writing 19.5 MB became 781
// pwritev calls writing 16.4 MB (the file, and the blocks it takes on
// disk, are the same).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <sys/uio.h>

namespace mpc {

class FileSink {
public:
  /// Writes to `fd` (the caller opens and closes it); `path` names the file
  /// in errors.
  FileSink(int fd, const std::string &path);
  /// Copies the bytes.
  void put(const void *data, size_t size);
  void put(const std::string &bytes) { put(bytes.data(), bytes.size()); }
  /// Writes the bytes in place: they must stay as they are until the next
  /// flush().
  void putStable(const void *data, size_t size);
  void putStable(const std::string &bytes) {
    putStable(bytes.data(), bytes.size());
  }
  /// putStable for tensor data: runs of zero bytes that cover a whole block
  /// of the file become holes where the file allows (see above).
  void putData(const uint8_t *data, size_t size);
  /// A protobuf varint (copied).
  void varint(uint64_t v);
  /// Writes what is pending; false (with error()) once any write failed.
  bool flush();
  const std::string &error() const { return error_; }

  /// What went to the kernel so far (for tests and measurements).
  struct Counts {
    size_t bytesWritten = 0; ///< bytes handed to write calls
    size_t bytesSkipped = 0; ///< zero bytes left to holes
    size_t writeCalls = 0;   ///< writev, pwritev and ftruncate calls
  };
  const Counts &counts() const { return counts_; }

private:
  static constexpr size_t kBlock = 1 << 20;
  static constexpr size_t kSmall = 256;
  /// Entries of one writev (IOV_MAX on Linux).
  static constexpr size_t kMaxPieces = 1024;

  struct Piece {
    enum Kind { Buffered, Referenced, Hole };
    const char *data; ///< Referenced: the bytes
    size_t offset;    ///< Buffered: where in buffer_
    size_t size;
    Kind kind;
  };

  void putHole(size_t size);
  bool writePieces();
  /// Writes iov_ (all of it, retrying short writes) and clears it.
  bool writeIov();
  bool fail();

  int fd_;
  const std::string &path_;
  std::vector<char> buffer_;
  std::vector<Piece> pieces_;
  std::vector<iovec> iov_;
  /// Bytes queued since the start of the file: the file's size once all
  /// pieces are written.
  size_t queued_ = 0;
  /// Where the next written byte goes (holes_ only: written with pwritev).
  size_t fileOffset_ = 0;
  bool holes_ = false;
  size_t holeBlock_ = 4096;
  bool ok_ = true;
  std::string error_;
  Counts counts_;
};

} // namespace mpc
