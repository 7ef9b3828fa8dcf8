// Fuzz target: a binary ONNX file as mpc-opt reads it.
//
// The input is written to model.onnx and loaded with loadModel (protobuf, the
// text fallback, external data relative to the model's folder, where
// weights.bin is a real 4 KiB file), then verified, shape-inferred and
// exported as `mpc-opt --passes=verify,infer-shapes` would. An mpc::Error is
// the expected outcome for bad input; it must be one line naming the file.
#include "passes/onnx/onnx_io.h"
#include "passes/support/diagnostics.h"
#include "tests/fuzz/fuzz_support.h"

#include <vector>

using namespace mpc;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const std::string weights = [] {
    std::vector<uint8_t> bytes(4096);
    for (size_t i = 0; i < bytes.size(); ++i)
      bytes[i] = uint8_t(i * 7 + 3);
    return fuzz::writeScratchFile("weights.bin", bytes.data(), bytes.size());
  }();
  (void)weights;
  const std::string path = fuzz::writeScratchFile("model.onnx", data, size);
  try {
    std::unique_ptr<Model> model = loadModel(path);
    try {
      fuzz::verifyInferAndExport(*model);
    } catch (const Error &e) {
      fuzz::checkErrorMessage(e.what(), "");
    }
  } catch (const Error &e) {
    fuzz::checkErrorMessage(e.what(), path + ": ");
  }
  return 0;
}
