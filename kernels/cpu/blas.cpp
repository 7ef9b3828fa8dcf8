// BLAS loaded on first use (see blas.h).
#include "kernels/cpu/blas.h"

#include "support/diagnostics.h"

#include <cblas.h> // the enums and the functions' types; nothing is linked

#include <atomic>
#include <dlfcn.h>
#include <string>
#include <type_traits>

namespace mpc {
namespace {

/// The library the build found (CMake's FindBLAS), then its run-time name.
constexpr const char *kCandidates[] = {MPC_BLAS_LIBRARY, "libopenblas.so.0"};

struct BlasFunctions {
  decltype(&cblas_sgemm) sgemm = nullptr;
  decltype(&cblas_dgemm) dgemm = nullptr;
  int (*threads)() = nullptr;        // OpenBLAS's openblas_get_num_threads
  void (*setThreads)(int) = nullptr; // openblas_set_num_threads
  const char *library = nullptr;
};

std::atomic<bool> loaded{false};
/// setBlasThreadCount's count (0: the library's own choice).
std::atomic<int> requestedThreads{0};

BlasFunctions load() {
  std::string tried;
  for (const char *name : kCandidates) {
    void *handle = ::dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      const char *why = ::dlerror();
      tried += std::string(tried.empty() ? "" : "; ") + (why ? why : name);
      continue;
    }
    BlasFunctions f;
    f.sgemm =
        reinterpret_cast<decltype(f.sgemm)>(::dlsym(handle, "cblas_sgemm"));
    f.dgemm =
        reinterpret_cast<decltype(f.dgemm)>(::dlsym(handle, "cblas_dgemm"));
    f.threads = reinterpret_cast<int (*)()>(
        ::dlsym(handle, "openblas_get_num_threads"));
    f.setThreads = reinterpret_cast<void (*)(int)>(
        ::dlsym(handle, "openblas_set_num_threads"));
    if (!f.sgemm || !f.dgemm) {
      tried += std::string(tried.empty() ? "" : "; ") + name +
               ": no cblas_sgemm/cblas_dgemm";
      ::dlclose(handle);
      continue;
    }
    // Never closed: the functions are used until the process ends.
    f.library = name;
    if (int n = requestedThreads.load(); n > 0 && f.setThreads)
      f.setThreads(n);
    loaded = true;
    return f;
  }
  throw Error("cannot load the BLAS library for the CPU's matrix products (" +
              tried + ")");
}

/// Loaded once; a failed load throws and is tried again next time.
const BlasFunctions &blas() {
  static const BlasFunctions functions = load();
  return functions;
}

} // namespace

template <typename T>
void blasGemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k,
              T alpha, const T *a, const T *b, T beta, T *c) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>);
  if (m == 0 || n == 0)
    return;
  if (k == 0) {
    for (int64_t i = 0; i < m * n; ++i)
      c[i] = beta == T(0) ? T(0) : beta * c[i];
    return;
  }
  int lda = int(transA ? m : k), ldb = int(transB ? k : n);
  CBLAS_TRANSPOSE ta = transA ? CblasTrans : CblasNoTrans;
  CBLAS_TRANSPOSE tb = transB ? CblasTrans : CblasNoTrans;
  if constexpr (std::is_same_v<T, float>)
    blas().sgemm(CblasRowMajor, ta, tb, int(m), int(n), int(k), alpha, a, lda,
                 b, ldb, beta, c, int(n));
  else
    blas().dgemm(CblasRowMajor, ta, tb, int(m), int(n), int(k), alpha, a, lda,
                 b, ldb, beta, c, int(n));
}

template void blasGemm<float>(bool, bool, int64_t, int64_t, int64_t, float,
                              const float *, const float *, float, float *);
template void blasGemm<double>(bool, bool, int64_t, int64_t, int64_t, double,
                               const double *, const double *, double,
                               double *);

const char *loadedBlasLibrary() { return blas().library; }

bool blasIsLoaded() { return loaded; }

int blasThreadCount() {
  const BlasFunctions &f = blas();
  return f.threads ? f.threads() : 0;
}

void setBlasThreadCount(int n) {
  requestedThreads.store(n);
  if (loaded) {
    const BlasFunctions &f = blas();
    if (f.setThreads)
      f.setThreads(n);
  }
}

} // namespace mpc
