// MappedNpy (runtime/data/mapped_npy.h).
#include "runtime/data/mapped_npy.h"

#include "runtime/data/npy.h"
#include "support/diagnostics.h"
#include "support/mapped_input_guard.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace mpc {

namespace {

/// Closes a descriptor on every path out of the constructor.
struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0)
      ::close(fd);
  }
};

size_t pageSize() {
  static const size_t page = size_t(::sysconf(_SC_PAGESIZE));
  return page;
}

} // namespace

MappedNpy::MappedNpy(const std::string &path) : path_(path) {
  // O_NONBLOCK: a FIFO named NAME.npy is refused by the fstat below, not
  // waited on.
  Fd f{::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK)};
  if (f.fd < 0)
    throw Error(path + ": cannot open: " + std::strerror(errno));
  struct stat st;
  if (::fstat(f.fd, &st) != 0)
    throw Error(path + ": cannot stat: " + std::strerror(errno));
  if (!S_ISREG(st.st_mode))
    throw Error(path + ": not a regular file");
  size_ = size_t(st.st_size);
  // An empty file still gets its header checked ("too short").
  static const uint8_t kNothing = 0;
  const uint8_t *image = &kNothing;
  if (size_ > 0) {
    void *p = ::mmap(nullptr, size_, PROT_READ, MAP_SHARED, f.fd, 0);
    if (p == MAP_FAILED)
      throw Error(path + ": cannot map: " + std::strerror(errno));
    base_ = static_cast<uint8_t *>(p);
    image = base_;
    watchSlot_ = watchMappedFile(base_, size_, path);
  }
  NpyLayout layout;
  std::string err;
  bool ok = parseNpyLayout(image, size_, path, layout, err);
  // The header's pages are not needed again.
  if (base_)
    ::madvise(base_, std::min(size_, pageSize()), MADV_DONTNEED);
  if (!ok) {
    unwatchMappedFile(watchSlot_);
    if (base_)
      ::munmap(base_, size_);
    base_ = nullptr;
    throw Error(err);
  }
  dtype_ = layout.dtype;
  dims_ = layout.dims;
  dataOffset_ = layout.dataOffset;
}

MappedNpy::~MappedNpy() {
  unwatchMappedFile(watchSlot_);
  if (base_)
    ::munmap(base_, size_);
}

void MappedNpy::copy(uint64_t offset, size_t n, uint8_t *dst) const {
  if (n)
    std::memcpy(dst, base_ + dataOffset_ + offset, n);
}

void MappedNpy::release(uint64_t offset, size_t n) const {
  if (!n)
    return;
  const size_t page = pageSize();
  size_t begin = dataOffset_ + size_t(offset);
  size_t end = begin + n;
  begin -= begin % page;
  end = std::min(size_, (end + page - 1) / page * page);
  // Advice only: a failure leaves the pages resident, nothing else.
  ::madvise(base_ + begin, end - begin, MADV_DONTNEED);
}

} // namespace mpc
