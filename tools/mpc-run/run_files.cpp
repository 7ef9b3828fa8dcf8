// checkRunFiles (see run_files.h).
#include "tools/mpc-run/run_files.h"

#include "passes/onnx/onnx_io.h"
#include "support/path_identity.h"
#include "support/regular_input.h"

#include <sys/stat.h>

namespace mpc {
namespace {

bool isDirectory(const std::string &path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

/// A model file and the external data files its tensors point into.
void addModelFiles(std::vector<FileRole> &to, const std::string &role,
                   const std::string &path) {
  if (path.empty())
    return;
  to.push_back({role, path});
  for (const std::string &data : externalDataFiles(path))
    to.push_back({role + "'s external data", data});
}

/// A model the run writes and the data file beside it that external data
/// (--external-data, or a model past 2 GiB) puts its tensors in.
void addModelOutput(std::vector<FileRole> &to, const std::string &flag,
                    const std::string &path) {
  if (path.empty())
    return;
  to.push_back({flag, path});
  to.push_back({flag + "'s data file", externalDataPath(path)});
}

} // namespace

void checkRunFiles(const RunFlags &f) {
  requireRegularFile(f.model, "");
  // The data sets: .npz files, or directories of .npy files (each of
  // which the reader maps only once it has checked it is a regular file).
  std::vector<FileRole> dataSets = {{"--data", f.data},
                                    {"--eval-data", f.evalData}};
  for (const std::string &path : f.moreData)
    dataSets.push_back({"--data", path});
  for (const std::string &path : f.moreEvalData)
    dataSets.push_back({"--eval-data", path});
  for (const FileRole &in : dataSets)
    if (!in.path.empty() && !isDirectory(in.path))
      requireRegularFile(in.path, in.role);
  if (!f.resume.empty())
    requireRegularFile(f.resume, "--resume");
  std::vector<FileRole> inputs, resumed, outputs, checkpoints;
  addModelFiles(inputs, "the model", f.model);
  inputs.insert(inputs.end(), dataSets.begin(), dataSets.end());
  addModelFiles(resumed, "--resume", f.resume);
  outputs.push_back({"--log", f.log});
  outputs.push_back({"--eval-log", f.evalLog});
  addModelOutput(outputs, "--export-inference", f.exportInference);
  outputs.push_back({"--export-safetensors", f.exportSafetensors});
  addModelOutput(checkpoints, "--save", f.save);
  addModelOutput(checkpoints, "--save-best", f.saveBest);
  std::vector<FileRole> allInputs = inputs;
  allInputs.insert(allInputs.end(), resumed.begin(), resumed.end());
  refuseOutputsOverInputs(allInputs, outputs);
  refuseOutputsOverInputs(inputs, checkpoints);
  outputs.insert(outputs.end(), checkpoints.begin(), checkpoints.end());
  refuseSharedOutputs(outputs);
}

} // namespace mpc
