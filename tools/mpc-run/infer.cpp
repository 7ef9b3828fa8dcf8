// mpc-run --infer (tools/mpc-run/infer.h).
#include "tools/mpc-run/infer.h"

#include "passes/onnx/onnx_io.h"
#include "runtime/inference.h"
#include "support/diagnostics.h"
#include "support/out_of_memory.h"
#include "support/regular_input.h"
#include "tools/mpc-run/backend_choice.h"
#include "tools/mpc-run/run_files.h"

#include <cstdio>

namespace mpc {

int runInfer(const RunFlags &f) {
  // One forward pass: the staged cuda backend (per-node copies cost little
  // here, and inference graphs often compute shapes from data, which the
  // device-resident step refuses).
  CudaBackendOptions staged;
  staged.resident = false;
  std::unique_ptr<Backend> backend = makeBackend(f.device, staged);
  // Fail on a bad output directory, or a model that is a FIFO or a device
  // (it would be waited on or read without end), before any work is done;
  // the directory is made only when the outputs are written.
  checkOutputDir(f.outputDir);
  requireRegularFile(f.model, "");
  std::vector<FileRole> read = {{"the model", f.model}};
  std::vector<InferenceInput> inputs;
  for (const std::string &spec : f.inputs) {
    InferenceInput in;
    size_t eq = spec.find('=');
    in.source = spec;
    if (eq != std::string::npos) {
      in.name = spec.substr(0, eq);
      in.source = spec.substr(eq + 1);
    }
    if (in.source.empty())
      throw Error("--input " + spec + ": expects a file (NAME=FILE or FILE)");
    in.value = readTensorFile(in.source);
    read.push_back({"--input", in.source});
    inputs.push_back(std::move(in));
  }
  std::unique_ptr<Model> model =
      whileAllocating("loading it", [&] { return loadModel(f.model); });
  std::vector<InferenceOutput> outputs =
      runInference(*model, std::move(inputs), *backend);
  std::vector<std::string> paths =
      writeInferenceOutputs(f.outputDir, outputs, read);
  if (!f.quiet)
    for (size_t i = 0; i < outputs.size(); ++i)
      std::printf("output '%s' %s[%s] -> %s\n", outputs[i].name.c_str(),
                  dtypeName(outputs[i].value.dtype),
                  dimsToString(outputs[i].value.dims).c_str(),
                  paths[i].c_str());
  return 0;
}

} // namespace mpc
