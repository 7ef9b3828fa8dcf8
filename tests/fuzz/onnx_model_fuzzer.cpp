// Fuzz target: a binary ONNX file as mpc-opt reads it.
//
// The input is written to model.onnx and loaded with loadModel as mpc-opt
// loads it, the weights left in the file (protobuf, the text fallback,
// external data relative to the model's folder, where weights.bin is a real
// 4 KiB file), then verified, shape-inferred and exported as `mpc-opt
// --passes=verify,infer-shapes` would. An mpc::Error is the expected outcome
// for bad input; it must be one line naming the file. Loaded with weights of
// their own instead, the model must be the same, or fail the same way.
#include "passes/onnx/onnx_io.h"
#include "support/diagnostics.h"
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
  std::unique_ptr<Model> own;
  std::string ownError;
  try {
    own = loadModel(path, WeightBytes::Own);
  } catch (const Error &e) {
    ownError = e.what();
  }
  try {
    std::unique_ptr<Model> model = loadModel(path, WeightBytes::InFile);
    fuzz::require(own != nullptr, "loaded only with the weights in the file");
    try {
      fuzz::verifyInferAndExport(*model);
    } catch (const Error &e) {
      fuzz::checkErrorMessage(e.what(), "");
    }
    const auto &inits = model->graph->initializers();
    const auto &ownInits = own->graph->initializers();
    fuzz::require(inits.size() == ownInits.size(),
                  "a different initializer count with the weights in the file");
    for (size_t i = 0; i < inits.size(); ++i)
      fuzz::require(fuzz::sameTensor(*inits[i]->initializer(),
                                     *ownInits[i]->initializer()),
                    "a different initializer with the weights in the file");
  } catch (const Error &e) {
    fuzz::checkErrorMessage(e.what(), path + ": ");
    fuzz::require(own == nullptr && ownError == e.what(),
                  "a different error with the weights in the file");
  }
  return 0;
}
