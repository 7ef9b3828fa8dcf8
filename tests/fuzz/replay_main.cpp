// Replays files through a fuzz target without libFuzzer: the regression
// tests `fuzz-replay-<target>` of make test (g++, no clang needed).
//
// Usage: fuzz-replay-TARGET PATH... where each PATH is a file or a folder
// (every regular file in it, in name order; a missing folder is skipped, as
// git keeps no empty regressions/<target>/). Each file is passed to
// LLVMFuzzerTestOneInput as libFuzzer would; a crash, an escaping exception
// or a sanitizer report fails the test. Outside AddressSanitizer the
// address space is capped so that an absurd allocation fails too instead of
// swapping the machine.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <sys/resource.h>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
extern "C" int LLVMFuzzerInitialize(int *argc, char ***argv)
    __attribute__((weak));

namespace {

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kAddressSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kAddressSanitizer = true;
#else
constexpr bool kAddressSanitizer = false;
#endif
#else
constexpr bool kAddressSanitizer = false;
#endif

// libFuzzer's -rss_limit_mb in make fuzz is 2048; allow some headroom.
constexpr rlim_t kAddressSpaceCap = rlim_t(8) << 30;

std::vector<std::string> inputsUnder(const std::string &path) {
  namespace fs = std::filesystem;
  std::vector<std::string> files;
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    for (const auto &e : fs::directory_iterator(path))
      if (e.is_regular_file())
        files.push_back(e.path().string());
    std::sort(files.begin(), files.end());
  } else if (fs::is_regular_file(path, ec)) {
    files.push_back(path);
  } else {
    std::fprintf(stderr, "replay: %s does not exist, skipped\n", path.c_str());
  }
  return files;
}

} // namespace

int main(int argc, char **argv) {
  if (!kAddressSanitizer) {
    rlimit cap{kAddressSpaceCap, kAddressSpaceCap};
    setrlimit(RLIMIT_AS, &cap);
  }
  if (LLVMFuzzerInitialize)
    LLVMFuzzerInitialize(&argc, &argv);
  size_t replayed = 0;
  for (int i = 1; i < argc; ++i) {
    for (const std::string &file : inputsUnder(argv[i])) {
      std::ifstream in(file, std::ios::binary);
      std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)),
                                 std::istreambuf_iterator<char>());
      // Named before it runs, so a crash says which input caused it.
      std::fprintf(stderr, "replay: %s (%zu bytes)\n", file.c_str(),
                   bytes.size());
      // libFuzzer never passes a null pointer, even for an empty input.
      static const uint8_t kEmpty = 0;
      LLVMFuzzerTestOneInput(bytes.empty() ? &kEmpty : bytes.data(),
                             bytes.size());
      ++replayed;
    }
  }
  if (replayed == 0) {
    std::fprintf(stderr, "replay: no inputs found\n");
    return 1;
  }
  std::printf("replay: %zu inputs, no finding\n", replayed);
  return 0;
}
