// How much more memory this process can get: the bound the readers check a
// size against before they allocate it.
//
// mimalloc, the tools' heap, maps memory with MAP_NORESERVE, so an
// allocation far beyond the machine (a data file claiming a terabyte) does
// not fail: it succeeds, and the OOM killer ends the process when the pages
// are touched, with no message. A size is therefore checked here first, and
// refused with the numbers when it cannot fit.
#pragma once

#include <cstdint>
#include <string>

namespace mpc {

/// What `availableMemory` found: the bytes, and where the bound comes from.
struct AvailableMemory {
  /// 0 when nothing is known (no check can be made).
  uint64_t bytes = 0;
  /// "available physical memory", "the cgroup's memory limit",
  /// "the address-space limit (ulimit -v)".
  std::string source;
};

/// The least of: MemAvailable of /proc/meminfo (what the kernel can give
/// without swapping; sysconf's free pages where there is no meminfo), what
/// the process's memory cgroup (v2 or v1) has left, and what the
/// address-space limit (RLIMIT_AS, `ulimit -v`) leaves above the process's
/// current size.
AvailableMemory availableMemory();

/// "1.5 GiB", "12.0 MiB", "512 bytes": a size in a message.
std::string formatMemorySize(uint64_t bytes);

} // namespace mpc
