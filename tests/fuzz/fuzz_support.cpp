// Scratch files, error-shape checks and the mpc-opt front half for the fuzz
// targets (see fuzz_support.h).
#include "tests/fuzz/fuzz_support.h"

#include "passes/onnx/onnx_io.h"
#include "passes/pipeline.h"
#include "support/diagnostics.h"

#include "onnx/onnx_pb.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <unistd.h>

namespace mpc::fuzz {

namespace {

std::string makeScratchDir() {
  std::string base = "/dev/shm";
  if (access(base.c_str(), W_OK) != 0) {
    const char *tmp = std::getenv("TMPDIR");
    base = tmp && *tmp ? tmp : "/tmp";
  }
  std::string templ = base + "/mpc-fuzz-XXXXXX";
  if (!mkdtemp(templ.data())) {
    std::perror("mpc-fuzz: cannot create a scratch folder");
    std::abort();
  }
  return templ;
}

} // namespace

const std::string &scratchDir() {
  static const std::string dir = [] {
    std::string d = makeScratchDir();
    static std::string toRemove;
    toRemove = d;
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(toRemove, ec);
    });
    return d;
  }();
  return dir;
}

std::string writeScratchFile(const std::string &name, const uint8_t *data,
                             size_t size) {
  std::string path = scratchDir() + "/" + name;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char *>(data), std::streamsize(size));
  out.close();
  if (!out) {
    std::fprintf(stderr, "mpc-fuzz: cannot write %s\n", path.c_str());
    std::abort();
  }
  return path;
}

void checkErrorMessage(const std::string &message, const std::string &prefix) {
  bool ok = !message.empty() && message.find('\n') == std::string::npos &&
            message.compare(0, prefix.size(), prefix) == 0;
  if (!ok) {
    std::fprintf(stderr,
                 "mpc-fuzz: error message is not one line starting with "
                 "'%s':\n%s\n",
                 prefix.c_str(), message.c_str());
    std::abort();
  }
}

void require(bool ok, const char *what) {
  if (!ok) {
    std::fprintf(stderr, "mpc-fuzz: invariant broken: %s\n", what);
    std::abort();
  }
}

bool sameTensor(const Tensor &a, const Tensor &b) {
  return a.dtype == b.dtype && a.dims == b.dims &&
         a.bytes.size() == b.bytes.size() &&
         std::equal(a.bytes.begin(), a.bytes.end(), b.bytes.begin());
}

void verifyInferAndExport(Model &model) {
  CompileOptions options;
  PipelineConfig config; // verifies after every pass, as mpc-opt does
  Statistics stats;
  runPipeline(model, parsePipeline("verify,infer-shapes"), options, config,
              stats);
  onnx::ModelProto proto;
  exportModel(model, proto);
  std::string bytes;
  proto.SerializeToString(&bytes);
  (void)printModelText(model);
  (void)printValueTypes(model);
  if (model.training) {
    onnx::ModelProto step;
    exportStepModel(model, step);
  }
}

} // namespace mpc::fuzz
