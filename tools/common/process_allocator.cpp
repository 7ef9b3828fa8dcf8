// The tools' heap: mimalloc's options when the build links it (see the header).
#include "tools/common/process_allocator.h"

#ifdef MPC_WITH_MIMALLOC
#include <mimalloc.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <string_view>
#endif

namespace mpc {

#ifdef MPC_WITH_MIMALLOC
namespace {

/// Parses the hexadecimal number at the front of `text` and drops it.
std::uintptr_t takeHex(std::string_view &text) {
  std::uintptr_t value = 0;
  std::size_t used = 0;
  for (; used < text.size(); ++used) {
    char c = text[used];
    unsigned digit;
    if (c >= '0' && c <= '9')
      digit = static_cast<unsigned>(c - '0');
    else if (c >= 'a' && c <= 'f')
      digit = static_cast<unsigned>(c - 'a' + 10);
    else
      break;
    value = value * 16 + digit;
  }
  text.remove_prefix(used);
  return value;
}

/// Finds the anonymous mapping of /proc/self/maps that holds `address`;
/// false when there is none (or the file cannot be read).
bool findAnonymousMapping(std::uintptr_t address, std::uintptr_t &start,
                          std::uintptr_t &end) {
  int fd = ::open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return false;
  // A tool's maps are ~70 lines of ~100 bytes; a bigger table just means the
  // heap's line was not among the first 64 KiB and nothing is advised.
  static char text[1 << 16];
  std::size_t size = 0;
  for (ssize_t got; size < sizeof(text) &&
                    (got = ::read(fd, text + size, sizeof(text) - size)) > 0;)
    size += static_cast<std::size_t>(got);
  ::close(fd);
  std::string_view rest(text, size);
  while (!rest.empty()) {
    std::size_t eol = rest.find('\n');
    std::string_view line = rest.substr(0, eol);
    rest.remove_prefix(eol == std::string_view::npos ? rest.size() : eol + 1);
    std::uintptr_t from = takeHex(line);
    if (line.empty() || line.front() != '-')
      continue;
    line.remove_prefix(1);
    std::uintptr_t to = takeHex(line);
    if (address < from || address >= to)
      continue;
    // "rw-p 00000000 00:00 0" and no path: anonymous memory.
    std::size_t inode = line.find(" 00:00 0");
    if (inode == std::string_view::npos ||
        line.find('/', inode) != std::string_view::npos ||
        line.find('[', inode) != std::string_view::npos)
      return false;
    start = from;
    end = to;
    return true;
  }
  return false;
}

} // namespace
#endif

void configureProcessAllocator() {
#ifdef MPC_WITH_MIMALLOC
  // 2 MiB pages for the heap's segments (transparent huge pages where the
  // kernel has no reserved ones): a 64-layer compile touches ~100 MB in small
  // objects, and 4 KiB pages cost it tens of thousands of page faults.
  mi_option_enable(mi_option_large_os_pages);
  // The option only reaches segments mapped from now on. The shared
  // libraries' static constructors allocate before main, so mimalloc already
  // mapped its first 32 MiB segment without the advice, and a compile fills
  // that segment first: 7,000 of the 64-layer compile's 7,500 page faults
  // were there. Advise the mapping that holds the heap so far; the pages
  // touched already stay small, the rest fault in as 2 MiB pages.
  void *probe = std::malloc(1);
  std::uintptr_t start = 0, end = 0;
  if (probe &&
      findAnonymousMapping(reinterpret_cast<std::uintptr_t>(probe), start, end))
    ::madvise(reinterpret_cast<void *>(start), end - start, MADV_HUGEPAGE);
  std::free(probe);
#endif
}

} // namespace mpc
