// The run's memory limit: parsing --memory-limit, reading the free memory.
#include "runtime/memory_limit.h"

#include "passes/support/available_memory.h"
#include "passes/support/diagnostics.h"

#include <cctype>
#include <cmath>
#include <cstdlib>

namespace mpc {

size_t parseByteSize(const std::string &flag, const std::string &text) {
  const char *s = text.c_str();
  char *end = nullptr;
  double n = text.empty() || !std::isdigit((unsigned char)text[0])
                 ? -1
                 : std::strtod(s, &end);
  // Plain decimals only: strtod would also take hex, exponents, "inf".
  for (const char *p = s; n >= 0 && p < end; ++p)
    if (!std::isdigit((unsigned char)*p) && *p != '.')
      n = -1;
  double unit = -1;
  if (n >= 0 && std::isfinite(n)) {
    std::string suffix(end);
    static const struct {
      const char *letter;
      double unit;
    } kUnits[] = {{"", 1},
                  {"K", 1024.0},
                  {"M", 1024.0 * 1024},
                  {"G", 1024.0 * 1024 * 1024}};
    for (const auto &u : kUnits)
      for (const char *tail : {"", "B", "iB"})
        if ((*u.letter || *tail != 'i') &&
            suffix == std::string(u.letter) + tail)
          unit = u.unit;
  }
  double bytes = n * unit;
  // 2^63: far above any memory, and exactly representable in a double.
  if (unit < 0 || !(bytes < 9223372036854775808.0))
    throw Error(flag +
                ": expected a byte count with an optional K, M or G "
                "suffix (e.g. 256M), got '" +
                text + "'");
  return size_t(bytes);
}

size_t cpuAvailableBytes() { return size_t(availableMemory().bytes); }

MemoryLimit memoryLimitFor(const Backend &backend, bool given,
                           size_t explicitBytes) {
  MemoryLimit limit;
  std::string device = backend.name();
  if (given) {
    limit.bytes = explicitBytes;
    limit.source = device + ", --memory-limit";
    return limit;
  }
  size_t freeBytes = 0, totalBytes = 0;
  if (backend.deviceMemory(freeBytes, totalBytes)) {
    limit.bytes = freeBytes;
    limit.source =
        device + ", free device memory of " + formatByteSize(totalBytes);
    return limit;
  }
  if (device != "cpu")
    return limit; // unknown: no check
  AvailableMemory memory = availableMemory();
  limit.bytes = size_t(memory.bytes);
  limit.source = device + ", " + memory.source;
  return limit;
}

} // namespace mpc
