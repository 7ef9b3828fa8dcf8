// The tools' heap: mimalloc's options when the build links it (see the header).
#include "tools/common/process_allocator.h"

#ifdef MPC_WITH_MIMALLOC
#include <mimalloc.h>
#endif

namespace mpc {

void configureProcessAllocator() {
#ifdef MPC_WITH_MIMALLOC
  // 2 MiB pages for the heap's segments (transparent huge pages where the
  // kernel has no reserved ones): a 64-layer compile touches ~100 MB in small
  // objects, and 4 KiB pages cost it tens of thousands of page faults.
  mi_option_enable(mi_option_large_os_pages);
#endif
}

} // namespace mpc
