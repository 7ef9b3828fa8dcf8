// Fuzz target: ONNX text syntax (`//` comments allowed), as mpc-opt reads a
// .onnxtext file: parseModelText, then verify, infer-shapes and export like
// `mpc-opt --passes=verify,infer-shapes`. Rejections are one-line
// mpc::Errors starting with the source name.
#include "passes/onnx/onnx_io.h"
#include "support/diagnostics.h"
#include "tests/fuzz/fuzz_support.h"

using namespace mpc;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const std::string text(reinterpret_cast<const char *>(data), size);
  try {
    std::unique_ptr<Model> model = parseModelText(text, "fuzz.onnxtext");
    try {
      fuzz::verifyInferAndExport(*model);
    } catch (const Error &e) {
      fuzz::checkErrorMessage(e.what(), "");
    }
  } catch (const Error &e) {
    fuzz::checkErrorMessage(e.what(), "fuzz.onnxtext: ");
  }
  return 0;
}
