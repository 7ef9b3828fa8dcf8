// MappedNpy (runtime/data/mapped_npy.h).
#include "runtime/data/mapped_npy.h"

#include "runtime/data/npy.h"
#include "support/diagnostics.h"

#include <algorithm>
#include <cerrno>
#include <csetjmp>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <mutex>
#include <pthread.h>
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

// A file truncated after it was mapped (rewritten by np.save while a run
// reads it) makes a copy from its vanished pages raise SIGBUS. The copy
// guards itself: a SIGBUS on a thread inside copy() jumps back into it,
// which throws an Error naming the file; any other SIGBUS goes to whoever
// handled it before.
thread_local sigjmp_buf *tCopyJump = nullptr;
struct sigaction gPreviousSigbus;

void onSigbus(int sig, siginfo_t *info, void *context) {
  if (sigjmp_buf *jump = tCopyJump) {
    tCopyJump = nullptr;
    siglongjmp(*jump, 1);
  }
  if (gPreviousSigbus.sa_flags & SA_SIGINFO) {
    if (gPreviousSigbus.sa_sigaction) {
      gPreviousSigbus.sa_sigaction(sig, info, context);
      return;
    }
  } else if (gPreviousSigbus.sa_handler != SIG_DFL &&
             gPreviousSigbus.sa_handler != SIG_IGN) {
    gPreviousSigbus.sa_handler(sig);
    return;
  }
  // The default action: die of SIGBUS, as without this handler.
  ::signal(SIGBUS, SIG_DFL);
  ::raise(SIGBUS);
}

void guardAgainstTruncation() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction sa {};
    sa.sa_sigaction = onSigbus;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    ::sigaction(SIGBUS, &sa, &gPreviousSigbus);
  });
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
  }
  NpyLayout layout;
  std::string err;
  bool ok = parseNpyLayout(image, size_, path, layout, err);
  // The header's pages are not needed again.
  if (base_)
    ::madvise(base_, std::min(size_, pageSize()), MADV_DONTNEED);
  if (!ok) {
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
  if (base_)
    ::munmap(base_, size_);
}

void MappedNpy::copy(uint64_t offset, size_t n, uint8_t *dst) const {
  if (!n)
    return;
  guardAgainstTruncation();
  // No signal mask saved (a syscall per copy); the handler's SIGBUS block
  // is lifted below on the rare way out through it.
  sigjmp_buf jump;
  if (sigsetjmp(jump, 0) != 0) {
    sigset_t bus;
    sigemptyset(&bus);
    sigaddset(&bus, SIGBUS);
    ::pthread_sigmask(SIG_UNBLOCK, &bus, nullptr);
    throw Error(path_ + ": the file became shorter while it was being read "
                        "(was it rewritten during the run?)");
  }
  // The barriers keep the compiler from moving (or dropping) the stores
  // around the copy: the handler reads them when the copy faults.
  tCopyJump = &jump;
  asm volatile("" ::: "memory");
  std::memcpy(dst, base_ + dataOffset_ + offset, n);
  asm volatile("" ::: "memory");
  tCopyJump = nullptr;
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
