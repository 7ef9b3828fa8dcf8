// The tools' operator new over mimalloc: an allocation that fails throws
// std::bad_alloc, as the C++ standard says, instead of aborting.
//
// libmimalloc's own operator new (mi_new) calls the new-handler when it runs
// out of memory, but it looks the handler up through a weak, library-local
// get_new_handler that always answers "none" (mimalloc 2.0's alloc.c, built
// as C), so it prints nothing and calls abort(): a model or data file
// claiming more memory than there is killed mpc-opt and mpc-run with SIGABRT
// and no message. These definitions in the executables take the place of
// the library's for the whole process (the plugins' allocations included):
// they allocate with mimalloc, call the real new-handler, and throw
// std::bad_alloc, which the tools report as one line ("out of memory while
// ..."). operator delete stays mimalloc's (mi_free frees both). Only linked
// where mimalloc is the heap (not under the sanitizers, whose runtimes
// replace operator new themselves).
//
// mimalloc maps its memory with MAP_NORESERVE, which skips the kernel's
// overcommit heuristic: a 1 TiB request on a 23 GiB machine succeeds, and
// the process is OOM-killed (SIGKILL, no message) as the pages are filled.
// glibc's malloc would have been refused. So a large request is first
// checked against the memory the process can still get
// (support/available_memory.h: MemAvailable, the cgroup, ulimit -v)
// and fails as std::bad_alloc when it cannot fit; small ones, nearly all,
// go straight to mimalloc.
#include "support/available_memory.h"

#include <mimalloc.h>

#include <cstddef>
#include <new>

namespace {

/// Requests from this size on are checked against the available memory
/// (a read of /proc/meminfo, some microseconds, next to the milliseconds
/// of filling 64 MiB).
constexpr std::size_t kCheckedBytes = std::size_t(64) << 20;

bool fits(std::size_t size) {
  if (size < kCheckedBytes)
    return true;
  uint64_t available = mpc::availableMemory().bytes;
  return available == 0 || size <= available; // 0: unknown
}

void *allocateOrThrow(std::size_t size, std::size_t alignment) {
  if (!fits(size))
    throw std::bad_alloc();
  for (;;) {
    void *p = alignment ? mi_malloc_aligned(size, alignment) : mi_malloc(size);
    if (p)
      return p;
    std::new_handler handler = std::get_new_handler();
    if (!handler)
      throw std::bad_alloc();
    handler();
  }
}

void *allocateOrNull(std::size_t size, std::size_t alignment) noexcept {
  try {
    return allocateOrThrow(size, alignment);
  } catch (...) {
    return nullptr;
  }
}

} // namespace

void *operator new(std::size_t size) { return allocateOrThrow(size, 0); }
void *operator new[](std::size_t size) { return allocateOrThrow(size, 0); }
void *operator new(std::size_t size, std::align_val_t alignment) {
  return allocateOrThrow(size, std::size_t(alignment));
}
void *operator new[](std::size_t size, std::align_val_t alignment) {
  return allocateOrThrow(size, std::size_t(alignment));
}
void *operator new(std::size_t size, const std::nothrow_t &) noexcept {
  return allocateOrNull(size, 0);
}
void *operator new[](std::size_t size, const std::nothrow_t &) noexcept {
  return allocateOrNull(size, 0);
}
void *operator new(std::size_t size, std::align_val_t alignment,
                   const std::nothrow_t &) noexcept {
  return allocateOrNull(size, std::size_t(alignment));
}
void *operator new[](std::size_t size, std::align_val_t alignment,
                     const std::nothrow_t &) noexcept {
  return allocateOrNull(size, std::size_t(alignment));
}
