// mpc-opt runs OpenBLAS on one thread.
//
// mpc-opt links the CPU kernels (fold-constants evaluates constant subgraphs
// with them) and with them OpenBLAS, whose pthread build starts a worker per
// core (or per OPENBLAS_NUM_THREADS) in its library constructor, before main.
// Those workers spin in sched_yield for about 0.1 s waiting for work a
// compile never gives them: on a 64-layer compile that was ~80 ms of system
// time and a second core held busy. Setting OPENBLAS_NUM_THREADS from the
// executable's pre-initialisers does not work (glibc resets the environment
// after them), so main asks for one thread and stops the workers already
// started. Constant folding's few small products gain nothing from more, so
// a thread count set for other programs is not followed. mpc-run, whose
// training steps do their products with OpenBLAS, keeps its threads.
#include "tools/mpc-opt/compiler_blas_threads.h"

#include <cblas.h>
#include <dlfcn.h>

namespace mpc {

void useOneBlasThread() {
  openblas_set_num_threads(1);
  // blas_thread_shutdown_ joins the pthread build's workers; a later call
  // that needs threads would start them again, and one thread never does.
  // Looked up at run time: the OpenMP and serial builds of OpenBLAS (which
  // Debian's alternatives may put behind libopenblas.so.0) differ here.
  using Shutdown = int (*)();
  if (auto shutdown = reinterpret_cast<Shutdown>(
          dlsym(RTLD_DEFAULT, "blas_thread_shutdown_")))
    shutdown();
}

} // namespace mpc
