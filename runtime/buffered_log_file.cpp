// BufferedLogFile (see buffered_log_file.h).
#include "runtime/buffered_log_file.h"

#include "support/diagnostics.h"
#include "support/file_io.h"

#include <cerrno>
#include <cstring>
#include <sys/stat.h>
#include <unistd.h>

namespace mpc {
namespace {

/// The buffer is written once this many bytes are in it ...
constexpr size_t kBufferBytes = 64 << 10;
/// ... or once the last write is this old.
constexpr std::chrono::seconds kWriteInterval(1);

} // namespace

BufferedLogFile::~BufferedLogFile() {
  if (fd_ < 0)
    return;
  // A run that failed keeps what it logged (what can be written).
  if (!buffer_.empty())
    writeBuffer();
  ::close(fd_);
}

bool BufferedLogFile::writeBuffer() {
  // The buffer holds whole records (CSV rows, event records): a write that
  // fails part-way (a full disk, a file size limit) is cut back to the end
  // of the last record it wrote whole, so that the file never ends inside a
  // row a reader would take for data, and keeps every row that fitted.
  struct stat st;
  const off_t before = regular_ && ::fstat(fd_, &st) == 0 ? st.st_size : -1;
  std::string error;
  if (writeAll(fd_, buffer_.data(), buffer_.size(), path_, error))
    return true;
  const int err = errno;
  if (before >= 0 && ::fstat(fd_, &st) == 0 && st.st_size > before) {
    const size_t written = size_t(st.st_size - before);
    size_t keep = 0;
    for (size_t end : recordEnds_)
      if (end <= written)
        keep = end;
    if (::ftruncate(fd_, before + off_t(keep)) == 0)
      (void)::lseek(fd_, before + off_t(keep), SEEK_SET);
  }
  errno = err;
  return false;
}

void BufferedLogFile::name(const std::string &path, const std::string &what,
                           const std::string &prefix) {
  path_ = path;
  what_ = what;
  prefix_ = prefix;
  buffer_.clear();
  recordEnds_.clear();
}

void BufferedLogFile::attach(int fd, bool regular) {
  fd_ = fd;
  regular_ = regular;
  buffer_.clear();
  recordEnds_.clear();
  lastWrite_ = std::chrono::steady_clock::now();
}

void BufferedLogFile::fail(const char *doing) {
  std::string msg = prefix_ + path_ + ": cannot " + doing + " " + what_ + ": " +
                    std::strerror(errno);
  if (fd_ >= 0)
    ::close(fd_);
  fd_ = -1;
  buffer_.clear();
  recordEnds_.clear();
  throw Error(msg);
}

void BufferedLogFile::append(std::string_view bytes) {
  buffer_ += bytes;
  recordEnds_.push_back(buffer_.size());
  if (buffer_.size() >= kBufferBytes ||
      std::chrono::steady_clock::now() - lastWrite_ >= kWriteInterval)
    flush();
}

void BufferedLogFile::flush() {
  if (fd_ < 0)
    return;
  lastWrite_ = std::chrono::steady_clock::now();
  if (buffer_.empty())
    return;
  if (!writeBuffer())
    fail("write");
  buffer_.clear();
  recordEnds_.clear();
}

void BufferedLogFile::sync() {
  flush();
  // Only a file has blocks to wait for (a pipe's fsync fails, EINVAL).
  if (fd_ >= 0 && regular_ && ::fsync(fd_) != 0)
    fail("write");
}

void BufferedLogFile::close() {
  if (fd_ < 0)
    return;
  sync();
  int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0)
    fail("write");
}

} // namespace mpc
