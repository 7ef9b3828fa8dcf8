// The tools' process heap (tools/common/process_allocator.h): once configured,
// the memory that small allocations come from may be backed by 2 MiB pages,
// including the mimalloc segment mapped before main. Its own executable, as
// it links the tools' allocator, which the other test binaries do not.
#include "tools/common/process_allocator.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <sys/stat.h>

namespace {

/// The VmFlags line of the /proc/self/smaps entry holding `address`; empty
/// when there is none.
std::string vmFlagsOf(const void *address) {
  auto at = reinterpret_cast<std::uintptr_t>(address);
  std::ifstream smaps("/proc/self/smaps");
  bool inside = false;
  for (std::string line; std::getline(smaps, line);) {
    std::size_t dash = line.find('-');
    std::size_t space = line.find(' ');
    bool header = dash != std::string::npos && space != std::string::npos &&
                  dash < space &&
                  line.find_first_not_of("0123456789abcdef") == dash;
    if (header) {
      auto from = std::stoull(line.substr(0, dash), nullptr, 16);
      auto to =
          std::stoull(line.substr(dash + 1, space - dash - 1), nullptr, 16);
      inside = at >= from && at < to;
    } else if (inside && line.rfind("VmFlags:", 0) == 0) {
      return line;
    }
  }
  return {};
}

TEST(ProcessAllocator, TheHeapMappedBeforeMainIsAdvisedForHugePages) {
#ifndef MPC_WITH_MIMALLOC
  GTEST_SKIP()
      << "built without mimalloc (MPC_MIMALLOC=OFF or a sanitizer build)";
#else
  struct stat thp;
  if (stat("/sys/kernel/mm/transparent_hugepage", &thp) != 0)
    GTEST_SKIP() << "this kernel has no transparent huge pages";
  // GoogleTest and the shared libraries allocated before main, as they do in
  // mpc-opt: this block comes from the segment mapped then.
  void *early = std::malloc(64);
  ASSERT_NE(early, nullptr);
  EXPECT_EQ(vmFlagsOf(early).find(" hg"), std::string::npos)
      << "the heap was advised before configureProcessAllocator ran";
  mpc::configureProcessAllocator();
  std::string flags = vmFlagsOf(early);
  EXPECT_NE(flags.find(" hg"), std::string::npos) << flags;
  // Memory from segments mapped afterwards is advised too (mimalloc's own
  // large_os_pages option).
  void *later = std::malloc(48 << 20);
  ASSERT_NE(later, nullptr);
  EXPECT_NE(vmFlagsOf(later).find(" hg"), std::string::npos)
      << vmFlagsOf(later);
  std::free(later);
  std::free(early);
#endif
}

} // namespace
