// TrainingLog (see training_log.h).
#include "runtime/training_log.h"

#include "support/diagnostics.h"
#include "support/file_io.h"

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace mpc {
namespace {

/// Rows are written once this many bytes are buffered.
constexpr size_t kBufferBytes = 64 << 10;
/// ... or once the last write is this old.
constexpr std::chrono::seconds kWriteInterval(1);

/// The step a row starts with; false when it does not start with one.
bool leadingStep(const std::string &text, size_t at, size_t end,
                 int64_t &step) {
  step = 0;
  size_t i = at;
  for (; i < end && text[i] >= '0' && text[i] <= '9'; ++i) {
    if (step > (INT64_MAX - (text[i] - '0')) / 10)
      return false;
    step = step * 10 + (text[i] - '0');
  }
  return i > at;
}

} // namespace

TrainingLog::~TrainingLog() {
  if (fd_ < 0)
    return;
  // A run that failed keeps the rows it logged (what can be written).
  std::string error;
  if (!buffer_.empty())
    writeAll(fd_, buffer_.data(), buffer_.size(), path_, error);
  ::close(fd_);
}

void TrainingLog::fail(const char *doing) {
  std::string msg =
      path_ + ": cannot " + doing + " " + what_ + ": " + std::strerror(errno);
  if (fd_ >= 0)
    ::close(fd_);
  fd_ = -1;
  buffer_.clear();
  throw Error(msg);
}

size_t TrainingLog::keptBytes(const std::string &text, int64_t step) {
  size_t at = 0;
  while (at < text.size()) {
    size_t nl = text.find('\n', at);
    if (nl == std::string::npos)
      return at; // a row the kill cut short
    // The header (a line that starts with no step) is kept.
    int64_t rowStep = 0;
    if (leadingStep(text, at, nl, rowStep) && rowStep > step)
      return at;
    at = nl + 1;
  }
  return at;
}

void TrainingLog::open(const std::string &path, const std::string &what,
                       const std::string &header,
                       std::optional<int64_t> resumedAt) {
  path_ = path;
  what_ = what;
  buffer_.clear();
  struct stat st {};
  bool exists = ::stat(path.c_str(), &st) == 0;
  if (exists && S_ISDIR(st.st_mode)) {
    errno = EISDIR;
    fail("write");
  }
  regular_ = !exists || S_ISREG(st.st_mode);
  // A new run starts the file afresh; a resumed one keeps its rows.
  int flags = O_WRONLY | O_CREAT | O_CLOEXEC;
  if (regular_ && !resumedAt)
    flags |= O_TRUNC;
  // A FIFO nobody reads is refused (ENXIO), not waited on forever; the
  // writes themselves block as usual.
  if (!regular_)
    flags |= O_APPEND | O_NONBLOCK;
  fd_ = ::open(path.c_str(), flags, 0644);
  if (fd_ < 0)
    fail("write");
  if (!regular_ &&
      ::fcntl(fd_, F_SETFL, ::fcntl(fd_, F_GETFL) & ~O_NONBLOCK) != 0)
    fail("write");
  lastWrite_ = std::chrono::steady_clock::now();
  bool empty = true;
  if (regular_ && resumedAt) {
    std::string text, error;
    if (!readWholeFile(path, text, error))
      fail("read");
    size_t keep = keptBytes(text, *resumedAt);
    if (keep < text.size() && ::ftruncate(fd_, off_t(keep)) != 0)
      fail("truncate");
    if (::lseek(fd_, off_t(keep), SEEK_SET) < 0)
      fail("seek in");
    empty = keep == 0;
  }
  if (!resumedAt || empty)
    buffer_ = header + "\n";
  // The header (and the cut) reach the file now: a log that cannot be
  // written fails before the first step, not at its end.
  sync();
}

void TrainingLog::row(const std::string &line) {
  buffer_ += line;
  buffer_ += '\n';
  if (buffer_.size() >= kBufferBytes ||
      std::chrono::steady_clock::now() - lastWrite_ >= kWriteInterval)
    flush();
}

void TrainingLog::flush() {
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

void TrainingLog::sync() {
  flush();
  // Only a file has blocks to wait for (a pipe's fsync fails, EINVAL).
  if (fd_ >= 0 && regular_ && ::fsync(fd_) != 0)
    fail("write");
}

void TrainingLog::close() {
  if (fd_ < 0)
    return;
  sync();
  int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0)
    fail("write");
}

} // namespace mpc
