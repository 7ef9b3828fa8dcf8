// ExternalDataReader: location resolution inside the model's folder, range
// and size checks against the file and the memory, then the read.
#include "passes/onnx/external_data_reader.h"

#include "ir/tensor_pb.h"
#include "support/available_memory.h"
#include "support/diagnostics.h"

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <new>
#include <sys/stat.h>
#include <unistd.h>

namespace mpc {
namespace {

/// realpath(3) into a string; false (errno set) when it fails.
bool realPath(const std::string &path, std::string &out) {
  char *resolved = ::realpath(path.c_str(), nullptr);
  if (!resolved)
    return false;
  out = resolved;
  std::free(resolved);
  return true;
}

/// A descriptor closed when it goes out of scope.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0)
      ::close(fd);
  }
};

} // namespace

ExternalDataReader::ExternalDataReader(std::string modelDir, uint64_t byteLimit)
    : dir_(modelDir.empty() ? "/" : std::move(modelDir)), byteLimit_(byteLimit),
      budget_(byteLimit) {}

std::string ExternalDataReader::resolve(const std::string &location,
                                        const std::string &what) {
  if (location.empty())
    throw Error(what + ": external data without a location");
  // ONNX's loader refuses '..' anywhere in the location, not just as a
  // folder of its own; so does this reader, so a model mpc reads onnx does.
  if (location.find('\0') != std::string::npos ||
      location.find("..") != std::string::npos || location[0] == '/')
    throw Error(what + ": external data location '" + location +
                "' must be a relative path inside the model's folder");
  std::string path = dir_ + (dir_.back() == '/' ? "" : "/") + location;
  if (realDir_.empty() && !realPath(dir_, realDir_))
    throw Error(what + ": cannot open external data file '" + path +
                "': the model's folder '" + dir_ +
                "': " + std::strerror(errno));
  std::string real;
  if (!realPath(path, real))
    throw Error(what + ": cannot open external data file '" + path +
                "': " + std::strerror(errno));
  // Symlinks are followed (a data file may be one), but only to what lies
  // inside the folder: a link to /etc/passwd, or a folder linking out,
  // would copy a file the model has no business with into its output.
  std::string inside = realDir_ == "/" ? realDir_ : realDir_ + "/";
  if (real.compare(0, inside.size(), inside) != 0)
    throw Error(what + ": external data location '" + location +
                "' resolves to '" + real + "', outside the model's folder '" +
                realDir_ + "'");
  return real;
}

void ExternalDataReader::reserve(uint64_t bytes, const std::string &what,
                                 const std::string &path) {
  if (bytes <= budget_) {
    budget_ -= bytes;
    return;
  }
  AvailableMemory memory;
  if (byteLimit_) { // a fixed limit: what is left of it is all there is
    memory.bytes = budget_;
    memory.source = "what is left of the reader's limit of " +
                    std::to_string(byteLimit_) + " bytes";
  } else {
    memory = availableMemory();
  }
  if (memory.bytes == 0 && !byteLimit_) { // unknown: no check
    budget_ = 0;
    return;
  }
  if (bytes > memory.bytes)
    throw Error(what + ": external data of " + std::to_string(bytes) +
                " bytes (" + formatMemorySize(bytes) + ") in '" + path +
                "' does not fit in memory: " + memory.source + " is " +
                formatMemorySize(memory.bytes));
  budget_ = memory.bytes - bytes;
}

void ExternalDataReader::read(onnx::TensorProto &tp, const std::string &what) {
  std::string location;
  int64_t offset = 0, length = -1;
  bool hasLength = false;
  // The whole value must be a number ("8junk" is not 8).
  auto number = [&](const onnx::StringStringEntryProto &kv) -> int64_t {
    size_t used = 0;
    int64_t v = 0;
    try {
      v = std::stoll(kv.value(), &used);
    } catch (const std::exception &) {
      used = 0;
    }
    if (used == 0 || used != kv.value().size())
      throw Error(what + ": external data '" + kv.key() +
                  "' is not a number: '" + kv.value() + "'");
    return v;
  };
  for (const auto &kv : tp.external_data()) {
    if (kv.key() == "location")
      location = kv.value();
    else if (kv.key() == "offset")
      offset = number(kv);
    else if (kv.key() == "length") {
      length = number(kv);
      hasLength = true;
    }
  }
  if (hasLength && length < 0)
    throw Error(what + ": external data length " + std::to_string(length) +
                " is negative");
  // The bytes the data type and dims take, checked (a supported type, the
  // 16 GiB cap) before the file is even opened: a wrong header is refused
  // without reading whatever its range would have been.
  uint64_t needed = 0;
  std::string err;
  if (!tensorProtoBytes(tp, needed, err))
    throw Error(what + ": " + err);
  std::string path = resolve(location, what);
  Fd file;
  // O_NONBLOCK: opening a FIFO that slipped in after resolve() must not
  // wait for a writer; it is refused below as not a regular file.
  file.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (file.fd < 0)
    throw Error(what + ": cannot open external data file '" + path +
                "': " + std::strerror(errno));
  struct stat st;
  if (::fstat(file.fd, &st) != 0)
    throw Error(what + ": cannot open external data file '" + path +
                "': " + std::strerror(errno));
  if (!S_ISREG(st.st_mode))
    throw Error(what + ": external data file '" + path + "' is " +
                (S_ISDIR(st.st_mode) ? "a directory" : "not a regular file"));
  const int64_t fileSize = int64_t(st.st_size);
  if (offset < 0 || offset > fileSize)
    throw Error(what + ": external data offset " + std::to_string(offset) +
                " is outside '" + path + "' (" + std::to_string(fileSize) +
                " bytes)");
  if (length < 0) {
    length = fileSize - offset;
    if (uint64_t(length) != needed)
      throw Error(what + ": external data without a length runs from offset " +
                  std::to_string(offset) + " to the end of '" + path + "', " +
                  std::to_string(length) + " bytes; its dtype and dims need " +
                  std::to_string(needed));
  }
  if (length > fileSize - offset)
    throw Error(what + ": external data range [" + std::to_string(offset) +
                ", +" + std::to_string(length) + ") is past the end of '" +
                path + "' (" + std::to_string(fileSize) + " bytes)");
  if (uint64_t(length) != needed)
    throw Error(what + ": external data length " + std::to_string(length) +
                " does not match the " + std::to_string(needed) +
                " bytes its dtype and dims need");
  reserve(needed, what, path);
  std::string bytes;
  try {
    bytes.resize(size_t(needed));
  } catch (const std::bad_alloc &) {
    throw Error(what + ": out of memory reading " + std::to_string(needed) +
                " bytes (" + formatMemorySize(needed) +
                ") of external data from '" + path + "'");
  }
  size_t done = 0;
  while (done < bytes.size()) {
    size_t chunk = std::min<size_t>(bytes.size() - done, size_t(1) << 30);
    ssize_t n = ::pread(file.fd, bytes.data() + done, chunk,
                        off_t(offset) + off_t(done));
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      throw Error(what + ": cannot read external data from '" + path +
                  "': " + (n < 0 ? std::strerror(errno) : "file shrank"));
    done += size_t(n);
  }
  tp.set_raw_data(std::move(bytes));
  tp.clear_external_data();
  tp.set_data_location(onnx::TensorProto::DEFAULT);
}

} // namespace mpc
