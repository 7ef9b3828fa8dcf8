// mpc-run's OpenMP spin (see openmp_spin.h).
#include "tools/mpc-run/openmp_spin.h"

#include <cstdlib>
#include <unistd.h>

namespace mpc {

void boundOpenMpSpin(char **argv) {
  if (std::getenv("OMP_WAIT_POLICY") || std::getenv("GOMP_SPINCOUNT"))
    return;
  // Set before the exec: the new image finds it and does not exec again.
  if (::setenv("GOMP_SPINCOUNT", "10000", 1) != 0)
    return;
  ::execv("/proc/self/exe", argv);
  // The exec failed (no /proc): go on with libgomp's default spin.
}

} // namespace mpc
