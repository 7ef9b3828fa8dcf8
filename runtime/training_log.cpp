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
  file_.name(path, what);
  struct stat st {};
  bool exists = ::stat(path.c_str(), &st) == 0;
  if (exists && S_ISDIR(st.st_mode)) {
    errno = EISDIR;
    file_.fail("write");
  }
  const bool regular = !exists || S_ISREG(st.st_mode);
  // A new run starts the file afresh; a resumed one keeps its rows.
  int flags = O_WRONLY | O_CREAT | O_CLOEXEC;
  if (regular && !resumedAt)
    flags |= O_TRUNC;
  // A FIFO nobody reads is refused (ENXIO), not waited on forever; the
  // writes themselves block as usual.
  if (!regular)
    flags |= O_APPEND | O_NONBLOCK;
  int fd = ::open(path.c_str(), flags, 0644);
  if (fd < 0)
    file_.fail("write");
  file_.attach(fd, regular);
  if (!regular && ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK) != 0)
    file_.fail("write");
  bool empty = true;
  if (regular && resumedAt) {
    std::string text, error;
    if (!readWholeFile(path, text, error))
      file_.fail("read");
    size_t keep = keptBytes(text, *resumedAt);
    if (keep < text.size() && ::ftruncate(fd, off_t(keep)) != 0)
      file_.fail("truncate");
    if (::lseek(fd, off_t(keep), SEEK_SET) < 0)
      file_.fail("seek in");
    empty = keep == 0;
  }
  if (!resumedAt || empty)
    file_.append(header + "\n");
  // The header (and the cut) reach the file now: a log that cannot be
  // written fails before the first step, not at its end.
  sync();
}

void TrainingLog::row(const std::string &line) {
  std::string text;
  text.reserve(line.size() + 1);
  text += line;
  text += '\n';
  file_.append(text);
}

} // namespace mpc
