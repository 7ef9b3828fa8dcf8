// Whole-file reads and atomic (temp + optional fsync + rename) writes.
#include "support/file_io.h"

#include "support/mapped_input_guard.h"
#include "support/stale_temp_files.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace mpc {

bool writeAll(int fd, const void *data, size_t size, const std::string &path,
              std::string &error) {
  const char *p = static_cast<const char *>(data);
  size_t left = size;
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      error = path + ": write error: " + std::strerror(errno);
      return false;
    }
    p += n;
    left -= size_t(n);
  }
  return true;
}

namespace {

bool writeInPlace(const std::string &path,
                  const std::function<bool(int fd, std::string &error)> &fill,
                  std::string &error) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) {
    error = path + ": cannot open for writing: " + std::strerror(errno);
    return false;
  }
  bool ok = fill(fd, error);
  if (::close(fd) != 0 && ok) {
    error = path + ": write error: " + std::strerror(errno);
    ok = false;
  }
  return ok;
}

/// Runs `fill`; an exception it throws (a serializer's Error) is a
/// failure with its message, so the temporary file is still removed.
bool runFill(const std::function<bool(int fd, std::string &error)> &fill,
             int fd, const std::string &path, std::string &error) {
  try {
    return fill(fd, error);
  } catch (const std::exception &e) {
    std::string what = e.what();
    error = what.rfind(path, 0) == 0 ? what : path + ": " + what;
    return false;
  }
}

/// Creates `tmp` (the temporary file of `path`) and fills it; fsyncs and
/// closes it. On failure removes it and sets `error`. The temp is pending
/// in mapped_input_guard.h's slot `slot` until the caller clears it.
bool fillTempFile(const std::string &path, const std::string &tmp,
                  const std::function<bool(int fd, std::string &error)> &fill,
                  Fsync fsync, int slot, std::string &error) {
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    error = path + ": cannot create " + tmp + ": " + std::strerror(errno);
    return false;
  }
  // Removed by mapped_input_guard.h's handler if a mapped input is
  // truncated while `fill` reads it.
  setPendingTempFile(tmp, slot);
  if (!runFill(fill, fd, path, error)) {
    ::close(fd);
    std::remove(tmp.c_str());
    return false;
  }
  if ((fsync == Fsync::Yes && ::fsync(fd) != 0) || ::close(fd) != 0) {
    error = path + ": write error: " + std::strerror(errno);
    std::remove(tmp.c_str());
    return false;
  }
  return true;
}

/// Whether `path` exists (as anything, a dangling link included).
bool exists(const std::string &path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0;
}

/// Whether `path` exists and is not a regular file (a folder, a device).
bool existsAndIsNotRegular(const std::string &path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode);
}

} // namespace

bool writeFilePairAtomically(
    const std::string &dataPath,
    const std::function<bool(int fd, std::string &error)> &fillData,
    const std::string &path,
    const std::function<bool(int fd, std::string &error)> &fillModel,
    std::string &error, Fsync fsync) {
  // A device or FIFO has no folder of its own to hold a data file beside
  // it, and renaming over a folder fails only after everything is written:
  // both are refused before any byte is.
  for (const std::string *target : {&path, &dataPath})
    if (existsAndIsNotRegular(*target)) {
      error = *target +
              ": is not a regular file (a model with external data "
              "is written as two files, " +
              path + " and " + dataPath + ")";
      return false;
    }
  // Temp files of earlier writers of this pair that were killed.
  removeStaleTempFiles(path);
  removeStaleTempFiles(dataPath);
  std::string pid = std::to_string(getpid());
  std::string dataTmp = dataPath + ".tmp." + pid, tmp = path + ".tmp." + pid;
  if (!fillTempFile(dataPath, dataTmp, fillData, fsync, 1, error)) {
    setPendingTempFile("", 1);
    return false;
  }
  bool filled = fillTempFile(path, tmp, fillModel, fsync, 0, error);
  setPendingTempFile("", 0);
  setPendingTempFile("", 1);
  if (!filled) {
    std::remove(dataTmp.c_str());
    return false;
  }
  // The previous pair goes aside, not away, until the new one is in place:
  // a failed rename puts it back. The previous model goes first and the new
  // one comes last, so no moment shows a model over a data file that is
  // not its own.
  std::string prev = path + ".prev." + pid,
              dataPrev = dataPath + ".prev." + pid;
  bool hadModel = exists(path), hadData = exists(dataPath);
  auto fail = [&](const std::string &target, const std::string &from) {
    error = target + ": cannot rename " + from + ": " + std::strerror(errno);
    std::remove(tmp.c_str());
    std::remove(dataTmp.c_str());
    return false;
  };
  if (hadModel && std::rename(path.c_str(), prev.c_str()) != 0)
    return fail(path, path + " to " + prev);
  auto putBackModel = [&] {
    if (hadModel)
      std::rename(prev.c_str(), path.c_str());
  };
  if (hadData && std::rename(dataPath.c_str(), dataPrev.c_str()) != 0) {
    bool r = fail(dataPath, dataPath + " to " + dataPrev);
    putBackModel();
    return r;
  }
  auto putBackData = [&] {
    if (hadData)
      std::rename(dataPrev.c_str(), dataPath.c_str());
    else
      std::remove(dataPath.c_str());
  };
  if (std::rename(dataTmp.c_str(), dataPath.c_str()) != 0) {
    bool r = fail(dataPath, dataTmp);
    putBackData();
    putBackModel();
    return r;
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    bool r = fail(path, tmp);
    putBackData();
    putBackModel();
    return r;
  }
  if (hadModel)
    std::remove(prev.c_str());
  if (hadData)
    std::remove(dataPrev.c_str());
  return true;
}

bool writeFileAtomically(
    const std::string &path,
    const std::function<bool(int fd, std::string &error)> &fill,
    std::string &error, Fsync fsync) {
  // An existing target that is not a regular file (/dev/null, /dev/stdout, a
  // FIFO) is written where it is: renaming a temp over it would replace the
  // device or pipe with a plain file, and it has no previous contents to
  // protect.
  struct stat st {};
  bool found = ::stat(path.c_str(), &st) == 0;
  // A directory would fail only at the rename, after the whole file was
  // written beside it: say so first.
  if (found && S_ISDIR(st.st_mode)) {
    error = path + ": is a directory, not a file to write";
    return false;
  }
  if (found && !S_ISREG(st.st_mode))
    return writeInPlace(path, fill, error);
  // The pid keeps two processes writing the same target from sharing a
  // temp; those of earlier writers that were killed go first.
  removeStaleTempFiles(path);
  std::string tmp = path + ".tmp." + std::to_string(getpid());
  bool filled = fillTempFile(path, tmp, fill, fsync, 0, error);
  setPendingTempFile("");
  if (!filled)
    return false;
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    error = path + ": cannot rename " + tmp + ": " + std::strerror(errno);
    std::remove(tmp.c_str());
    return false;
  }
  return true;
}

bool writeFileAtomically(const std::string &path, const void *data, size_t size,
                         std::string &error, Fsync fsync) {
  return writeFileAtomically(
      path,
      [&](int fd, std::string &err) {
        return writeAll(fd, data, size, path, err);
      },
      error, fsync);
}

bool readWholeFile(const std::string &path, std::string &bytes,
                   std::string &error) {
  std::FILE *f = std::fopen(path.c_str(), "rb");
  if (!f) {
    error = path + ": cannot open: " + std::strerror(errno);
    return false;
  }
  struct stat st {};
  if (fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) {
    std::fclose(f);
    error = path + ": is a directory";
    return false;
  }
  // A regular file is read straight into a string of its size (one
  // allocation, no copy through a buffer); anything left after that (a
  // growing file, a pipe) is appended in blocks.
  size_t got = 0;
  if (S_ISREG(st.st_mode) && st.st_size > 0) {
    bytes.resize(size_t(st.st_size));
    got = std::fread(bytes.data(), 1, bytes.size(), f);
  }
  bytes.resize(got);
  char buf[1 << 16];
  size_t n;
  while (!std::ferror(f) && (n = std::fread(buf, 1, sizeof buf, f)) > 0)
    bytes.append(buf, n);
  bool bad = std::ferror(f);
  std::fclose(f);
  if (bad) {
    error = path + ": read error";
    return false;
  }
  return true;
}

} // namespace mpc
