// BufferedLogFile (see buffered_log_file.h).
#include "runtime/buffered_log_file.h"

#include "support/diagnostics.h"
#include "support/file_io.h"

#include <cerrno>
#include <cstring>
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
  std::string error;
  if (!buffer_.empty())
    writeAll(fd_, buffer_.data(), buffer_.size(), path_, error);
  ::close(fd_);
}

void BufferedLogFile::name(const std::string &path, const std::string &what,
                           const std::string &prefix) {
  path_ = path;
  what_ = what;
  prefix_ = prefix;
  buffer_.clear();
}

void BufferedLogFile::attach(int fd, bool regular) {
  fd_ = fd;
  regular_ = regular;
  buffer_.clear();
  lastWrite_ = std::chrono::steady_clock::now();
}

void BufferedLogFile::fail(const char *doing) {
  std::string msg = prefix_ + path_ + ": cannot " + doing + " " + what_ + ": " +
                    std::strerror(errno);
  if (fd_ >= 0)
    ::close(fd_);
  fd_ = -1;
  buffer_.clear();
  throw Error(msg);
}

void BufferedLogFile::append(std::string_view bytes) {
  buffer_ += bytes;
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
  std::string error;
  if (!writeAll(fd_, buffer_.data(), buffer_.size(), path_, error))
    fail("write");
  buffer_.clear();
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
