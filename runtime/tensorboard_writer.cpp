// TensorBoardWriter (runtime/tensorboard_writer.h).
#include "runtime/tensorboard_writer.h"

#include "runtime/tensorboard_event.pb.h"
#include "support/crc32c.h"
#include "support/diagnostics.h"
#include "support/file_io.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <sys/stat.h>
#include <unistd.h>

namespace mpc {
namespace {

/// Events are written once this many bytes are buffered ...
constexpr size_t kBufferBytes = 64 << 10;
/// ... or once the last write is this old (TensorBoard follows the run).
constexpr std::chrono::seconds kWriteInterval(1);

double wallTime() {
  return std::chrono::duration<double>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void putLittleEndian(std::string &out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i)
    out += char((v >> (8 * i)) & 0xffu);
}

std::string hostName() {
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0 || !host[0])
    return "localhost";
  return host;
}

} // namespace

TensorBoardWriter::~TensorBoardWriter() {
  if (fd_ < 0)
    return;
  std::string error;
  if (!buffer_.empty())
    writeAll(fd_, buffer_.data(), buffer_.size(), path_, error);
  ::close(fd_);
}

void TensorBoardWriter::fail(const char *doing) {
  // "--tensorboard: PATH: ...": mpc-run shows it as it is.
  std::string msg = "--tensorboard: " + path_ + ": cannot " + doing +
                    " the event file: " + std::strerror(errno);
  if (fd_ >= 0)
    ::close(fd_);
  fd_ = -1;
  buffer_.clear();
  throw Error(msg);
}

std::string TensorBoardWriter::record(const std::string &data) {
  std::string out;
  out.reserve(data.size() + 16);
  putLittleEndian(out, data.size(), 8);
  putLittleEndian(out, maskCrc32c(crc32c(out.data(), 8)), 4);
  out += data;
  putLittleEndian(out, maskCrc32c(crc32c(data.data(), data.size())), 4);
  return out;
}

void TensorBoardWriter::open(const std::string &dir) {
  const std::string what = "--tensorboard=" + dir + ": ";
  if (dir.empty())
    throw Error("--tensorboard: expected a directory");
  std::error_code ec;
  std::filesystem::file_status st = std::filesystem::status(dir, ec);
  if (std::filesystem::exists(st) && !std::filesystem::is_directory(st))
    throw Error(what + "is not a directory");
  if (!std::filesystem::exists(st)) {
    std::filesystem::create_directories(dir, ec);
    if (ec)
      throw Error(what + "cannot create the directory: " + ec.message());
  }
  // TensorFlow's name; a second file of the same second and host (two runs
  // at once) gets a suffix rather than being written over.
  std::string base = dir + "/events.out.tfevents." +
                     std::to_string(int64_t(wallTime())) + "." + hostName();
  path_ = base;
  for (int n = 2;; ++n) {
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd_ >= 0 || errno != EEXIST || n > 1000)
      break;
    path_ = base + "." + std::to_string(n);
  }
  if (fd_ < 0)
    fail("write");
  buffer_.clear();
  lastWrite_ = std::chrono::steady_clock::now();
  tensorboard::Event event;
  event.set_wall_time(wallTime());
  event.set_file_version("brain.Event:2");
  append(event.SerializeAsString());
  sync();
}

void TensorBoardWriter::append(const std::string &event) {
  buffer_ += record(event);
  if (buffer_.size() >= kBufferBytes ||
      std::chrono::steady_clock::now() - lastWrite_ >= kWriteInterval)
    flush();
}

void TensorBoardWriter::scalars(
    int64_t step, const std::vector<std::pair<std::string, double>> &values) {
  if (fd_ < 0)
    return;
  tensorboard::Event event;
  event.set_wall_time(wallTime());
  event.set_step(step);
  tensorboard::Summary *summary = event.mutable_summary();
  for (const auto &[tag, value] : values) {
    tensorboard::Summary::Value *v = summary->add_value();
    v->set_tag(tag);
    v->set_simple_value(float(value));
  }
  append(event.SerializeAsString());
}

void TensorBoardWriter::flush() {
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

void TensorBoardWriter::sync() {
  flush();
  if (fd_ >= 0 && ::fsync(fd_) != 0)
    fail("write");
}

void TensorBoardWriter::close() {
  if (fd_ < 0)
    return;
  sync();
  int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0)
    fail("write");
}

} // namespace mpc
