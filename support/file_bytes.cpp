// FileBytes: map a regular file read-only, or read what cannot be mapped.
#include "support/file_bytes.h"

#include "support/file_io.h"
#include "support/mapped_input_guard.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace mpc {

FileBytes &FileBytes::operator=(FileBytes &&o) noexcept {
  if (this == &o)
    return *this;
  unmap();
  mapped_ = o.mapped_;
  mappedSize_ = o.mappedSize_;
  watchSlot_ = o.watchSlot_;
  read_ = std::move(o.read_);
  o.mapped_ = nullptr;
  o.mappedSize_ = 0;
  o.watchSlot_ = -1;
  return *this;
}

FileBytes::~FileBytes() { unmap(); }

void FileBytes::unmap() {
  unwatchMappedFile(watchSlot_);
  watchSlot_ = -1;
  if (mapped_)
    ::munmap(const_cast<char *>(mapped_), mappedSize_);
  mapped_ = nullptr;
  mappedSize_ = 0;
}

bool FileBytes::open(const std::string &path, std::string &error) {
  unmap();
  read_.clear();
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    error = path + ": cannot open: " + std::strerror(errno);
    return false;
  }
  struct stat st {};
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0) {
    // MAP_POPULATE maps every page in one call instead of one fault per
    // 4 KiB page as the parser walks the file.
    void *p = ::mmap(nullptr, size_t(st.st_size), PROT_READ,
                     MAP_PRIVATE | MAP_POPULATE, fd, 0);
    if (p != MAP_FAILED) {
      ::close(fd);
      mapped_ = static_cast<const char *>(p);
      mappedSize_ = size_t(st.st_size);
      watchSlot_ = watchMappedFile(mapped_, mappedSize_, path);
      return true;
    }
  }
  ::close(fd);
  // Directories, pipes, empty files and whatever mmap refused.
  return readWholeFile(path, read_, error);
}

} // namespace mpc
