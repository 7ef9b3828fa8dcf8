// FileSink (see file_sink.h).
#include "support/file_sink.h"

#include "support/all_zero.h"

#include <google/protobuf/io/coded_stream.h>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace mpc {

FileSink::FileSink(int fd, const std::string &path) : fd_(fd), path_(path) {
  buffer_.reserve(kBlock);
  // Holes only in a regular file written from its start into nothing:
  // bytes left unwritten must read back as zeros.
  struct stat st {};
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size == 0 &&
      ::lseek(fd, 0, SEEK_CUR) == 0) {
    holeBlock_ = st.st_blksize > 0 ? size_t(st.st_blksize) : 4096;
    holes_ = true;
  }
}

void FileSink::put(const void *data, size_t size) {
  if (buffer_.size() + size > kBlock)
    flush();
  if (pieces_.empty() || pieces_.back().kind != Piece::Buffered)
    pieces_.push_back({nullptr, buffer_.size(), 0, Piece::Buffered});
  const char *p = static_cast<const char *>(data);
  buffer_.insert(buffer_.end(), p, p + size);
  pieces_.back().size += size;
  queued_ += size;
}

void FileSink::putStable(const void *data, size_t size) {
  if (size < kSmall) {
    put(data, size); // a copy costs less than an entry of the iovec
    return;
  }
  if (pieces_.size() >= kMaxPieces)
    flush();
  pieces_.push_back(
      {static_cast<const char *>(data), 0, size, Piece::Referenced});
  queued_ += size;
}

void FileSink::putHole(size_t size) {
  if (pieces_.size() >= kMaxPieces)
    flush();
  pieces_.push_back({nullptr, 0, size, Piece::Hole});
  queued_ += size;
  counts_.bytesSkipped += size;
}

void FileSink::putData(const uint8_t *data, size_t size) {
  if (!holes_ || size < holeBlock_) {
    putStable(data, size);
    return;
  }
  const size_t block = holeBlock_;
  size_t pending = 0; // start of the bytes not yet queued
  // The first block boundary of the file within the data.
  size_t b = (block - queued_ % block) % block;
  while (b + block <= size) {
    if (!allZero(data + b, block)) {
      b += block;
      continue;
    }
    // The run's whole blocks: the zero steps after its first block, then
    // the blocks after them one by one (the step that stopped the count
    // may end in a zero block, and a block need not be a whole number of
    // steps).
    size_t e = b + block;
    e += zeroSteps(data + e, size - e) / block * block;
    while (e + block <= size && allZero(data + e, block))
      e += block;
    // The run's zeros in the partial blocks at its edges: those since the
    // last queued byte when they are less than a block, those after the
    // last whole block to the end of the data.
    size_t start = b, end = e;
    if (b - pending < block && allZero(data + pending, b - pending))
      start = pending;
    bool atEnd = e + block > size;
    if (atEnd && allZero(data + e, size - e))
      end = size;
    if (start > pending)
      putStable(data + pending, start - pending);
    putHole(end - start);
    pending = end;
    // The block at e (when whole) is not zero: the next may be.
    b = atEnd ? e : e + block;
  }
  if (size > pending)
    putStable(data + pending, size - pending);
}

void FileSink::varint(uint64_t v) {
  uint8_t b[10];
  uint8_t *end =
      google::protobuf::io::CodedOutputStream::WriteVarint64ToArray(v, b);
  put(b, size_t(end - b));
}

bool FileSink::flush() {
  if (ok_ && !pieces_.empty())
    ok_ = writePieces();
  pieces_.clear();
  buffer_.clear();
  return ok_;
}

bool FileSink::fail() {
  error_ = path_ + ": write error: " + std::strerror(errno);
  return false;
}

bool FileSink::writePieces() {
  iov_.clear();
  bool endsInHole = false;
  for (const Piece &p : pieces_) {
    if (p.kind == Piece::Hole) {
      // What follows goes to its offset (pwritev): no lseek over the hole.
      if (!writeIov())
        return false;
      fileOffset_ += p.size;
      endsInHole = true;
      continue;
    }
    if (p.size) {
      iov_.push_back({const_cast<char *>(p.kind == Piece::Buffered
                                             ? buffer_.data() + p.offset
                                             : p.data),
                      p.size});
      endsInHole = false;
    }
  }
  if (!writeIov())
    return false;
  // A hole at the end of what is written so far: the file must still be
  // as long as what was queued (what follows, if anything, is written
  // after it).
  if (endsInHole) {
    ++counts_.writeCalls;
    if (::ftruncate(fd_, off_t(fileOffset_)) != 0)
      return fail();
  }
  return true;
}

bool FileSink::writeIov() {
  size_t at = 0;
  while (at < iov_.size()) {
    int count = int(std::min(iov_.size() - at, kMaxPieces));
    ssize_t n =
        holes_ ? ::pwritev(fd_, iov_.data() + at, count, off_t(fileOffset_))
               : ::writev(fd_, iov_.data() + at, count);
    ++counts_.writeCalls;
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return fail();
    counts_.bytesWritten += size_t(n);
    fileOffset_ += size_t(n);
    // A short write: skip what went, resume in the middle of a piece.
    size_t done = size_t(n);
    while (at < iov_.size() && done >= iov_[at].iov_len)
      done -= iov_[at++].iov_len;
    if (done) {
      iov_[at].iov_base = static_cast<char *>(iov_[at].iov_base) + done;
      iov_[at].iov_len -= done;
    }
  }
  iov_.clear();
  return true;
}

} // namespace mpc
