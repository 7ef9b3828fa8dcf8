// Row-major GEMM for the CPU kernels, through a BLAS library (OpenBLAS)
// loaded the first time a product needs it.
//
// Linking OpenBLAS made every process that holds the CPU kernels load it
// (with libgfortran and libquadmath) and run its constructor, which starts a
// worker thread per core, before main: 4 ms of the 9 ms `mpc-opt --help`
// took (perf stat), paid by every compile and lit test, though a compile
// multiplies matrices only to run a training_info initialization graph that
// has a product. Loaded on first use, a process that multiplies no matrices
// never maps it, and one that does reads OPENBLAS_NUM_THREADS when it loads
// (mpc-opt sets it to 1 first thing: tools/mpc-opt/compiler_blas_threads.h).
#pragma once

#include <cstdint>

namespace mpc {

/// Row-major C = alpha * op(A) op(B) + beta * C, C m x n, op(A) m x k and
/// op(B) k x n, as cblas_sgemm / cblas_dgemm with packed leading dimensions.
/// K == 0 is handled here (BLAS rejects a zero leading dimension), and the
/// dims must fit an int (the callers check). T is float or double. Throws
/// Error when the BLAS library cannot be loaded.
template <typename T>
void blasGemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k,
              T alpha, const T *a, const T *b, T beta, T *c);

/// The BLAS library's path or name as it was loaded; loads it if it was not
/// (throws Error naming what was tried when it cannot be).
const char *loadedBlasLibrary();

/// True once a product (or loadedBlasLibrary) has loaded the library.
bool blasIsLoaded();

/// The threads the BLAS library runs a product on (OpenBLAS's own count,
/// from OPENBLAS_NUM_THREADS, OMP_NUM_THREADS or the cores); 0 when the
/// library does not say. Loads it.
int blasThreadCount();

/// Tells the BLAS library to run products on `n` threads (OpenBLAS's
/// openblas_set_num_threads), now if it is loaded, else when it loads.
/// Does not load it.
void setBlasThreadCount(int n);

} // namespace mpc
