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
  // "--tensorboard: PATH: ...": mpc-run shows it as it is.
  std::string path = base;
  int fd = -1;
  for (int n = 2;; ++n) {
    fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd >= 0 || errno != EEXIST || n > 1000)
      break;
    path = base + "." + std::to_string(n);
  }
  file_.name(path, "the event file", "--tensorboard: ");
  if (fd < 0)
    file_.fail("write");
  file_.attach(fd, /*regular=*/true);
  tensorboard::Event event;
  event.set_wall_time(wallTime());
  event.set_file_version("brain.Event:2");
  file_.append(record(event.SerializeAsString()));
  file_.sync();
}

void TensorBoardWriter::scalars(
    int64_t step, const std::vector<std::pair<std::string, double>> &values) {
  if (!file_.isOpen())
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
  file_.append(record(event.SerializeAsString()));
}

} // namespace mpc
