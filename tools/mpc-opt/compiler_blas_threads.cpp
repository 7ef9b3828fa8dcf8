// mpc-opt runs OpenBLAS on one thread.
//
// mpc-opt holds the CPU kernels: fold-constants and a training_info
// initialization graph (run at import) evaluate with them, and a matrix
// product among them loads OpenBLAS (kernels/cpu/blas.h). Its pthread
// build starts a worker per core (or per OPENBLAS_NUM_THREADS) when it is
// loaded, and those workers spin in sched_yield for about 0.1 s waiting for
// work a compile never gives them: when OpenBLAS was linked, that was ~80 ms
// of system time and a second core held busy on a 64-layer compile. The
// library now loads after main starts, if at all, so setting its thread
// count in the environment first is enough. A compile's few small products
// gain nothing from more threads, so a count set for other programs is not
// followed. mpc-run, whose training steps do their products with OpenBLAS,
// keeps its threads.
#include "tools/mpc-opt/compiler_blas_threads.h"

#include <cstdlib>

namespace mpc {

void useOneBlasThread() {
  // OpenBLAS's pthread and OpenMP builds read one or the other.
  ::setenv("OPENBLAS_NUM_THREADS", "1", 1);
  ::setenv("OMP_NUM_THREADS", "1", 1);
}

} // namespace mpc
