// The SIGBUS handler of mapped_input_guard.h and its fixed-size tables.
#include "support/mapped_input_guard.h"

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <mutex>
#include <unistd.h>

namespace mpc {
namespace {

// Model files, and a data set's arrays (runtime/data/mapped_npy.h: one per
// input and shard); the table is static storage, untouched until used.
constexpr size_t kSlots = 1024;
constexpr size_t kPathBytes = 1024;

/// A watched mapping. `start` is set last (and cleared first), so the
/// handler never sees a half-written slot as live.
struct Slot {
  std::atomic<const char *> start{nullptr};
  size_t size = 0;
  char path[kPathBytes] = {};
};

Slot slots[kSlots];
std::mutex slotsLock; // between watchers; the handler does not take it
char pendingTemp[kPendingTempFiles][kPathBytes] = {};
std::atomic<bool> pendingSet[kPendingTempFiles] = {};

void copyPath(char (&dst)[kPathBytes], const std::string &src) {
  size_t n = std::min(src.size(), kPathBytes - 1);
  std::memcpy(dst, src.data(), n);
  dst[n] = '\0';
}

void say(const char *s) {
  size_t n = std::strlen(s);
  while (n > 0) {
    ssize_t w = ::write(STDERR_FILENO, s, n);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0)
      return;
    s += w;
    n -= size_t(w);
  }
}

void onSigbus(int sig, siginfo_t *info, void *) {
  const char *addr = static_cast<const char *>(info->si_addr);
  for (Slot &s : slots) {
    const char *start = s.start.load(std::memory_order_acquire);
    if (!start || addr < start || addr >= start + s.size)
      continue;
    for (int i = 0; i < kPendingTempFiles; ++i)
      if (pendingSet[i].load(std::memory_order_acquire))
        ::unlink(pendingTemp[i]);
    say(program_invocation_short_name);
    say(": ");
    say(s.path);
    say(": the file changed while it was being read (truncated by another "
        "process?)\n");
    ::_exit(1);
  }
  // Not a watched mapping: the default action, as if no handler were here.
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

void installHandler() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction sa {};
    sa.sa_sigaction = onSigbus;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    ::sigaction(SIGBUS, &sa, nullptr);
  });
}

} // namespace

int watchMappedFile(const void *data, size_t size, const std::string &path) {
  installHandler();
  std::lock_guard<std::mutex> lock(slotsLock);
  for (size_t i = 0; i < kSlots; ++i) {
    Slot &s = slots[i];
    if (s.start.load(std::memory_order_relaxed))
      continue;
    s.size = size;
    copyPath(s.path, path);
    s.start.store(static_cast<const char *>(data), std::memory_order_release);
    return int(i);
  }
  return -1;
}

void unwatchMappedFile(int slot) {
  if (slot < 0 || size_t(slot) >= kSlots)
    return;
  std::lock_guard<std::mutex> lock(slotsLock);
  slots[slot].start.store(nullptr, std::memory_order_release);
}

void setPendingTempFile(const std::string &path, int slot) {
  if (slot < 0 || slot >= kPendingTempFiles)
    return;
  pendingSet[slot].store(false, std::memory_order_release);
  if (path.empty())
    return;
  copyPath(pendingTemp[slot], path);
  pendingSet[slot].store(true, std::memory_order_release);
}

} // namespace mpc
