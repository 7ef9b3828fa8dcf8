// Inference: input binding and checks, the forward pipeline, output files.
#include "runtime/inference.h"

#include "passes/inference_mode.h"

#include "ir/tensor_pb.h"
#include "passes/pipeline.h"
#include "passes/shape_inference.h"
#include "runtime/data/npy.h"
#include "runtime/executor.h"
#include "support/diagnostics.h"
#include "support/path_identity.h"
#include "support/regular_input.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <unistd.h>

namespace mpc {
namespace {

std::string tensorTypeText(const Tensor &t) {
  return std::string(dtypeName(t.dtype)) + "[" + dimsToString(t.dims) + "]";
}

std::string inputList(const Graph &g) {
  std::string s;
  for (const Value *in : g.inputs())
    s += (s.empty() ? "'" : ", '") + in->name() + "'";
  return s.empty() ? "none" : s;
}

/// "input 'x' (from x.npy)" or "input 'x'".
std::string describeInput(const Value &v, const InferenceInput &in) {
  std::string s = "input '" + v.name() + "'";
  if (!in.source.empty())
    s += " (from " + in.source + ")";
  return s;
}

/// Inference needs only the main graph: a compiled model's training step
/// and the metadata naming its values go, so verify checks what runs.
void dropTrainingStep(Model &model) {
  if (!model.training)
    return;
  model.training.reset();
  // The main graph is the training forward: normalise with running stats.
  switchToInferenceMode(*model.graph);
  std::vector<std::pair<std::string, std::string>> kept;
  for (auto &kv : model.metadata)
    if (kv.first.rfind("mpc.", 0) != 0)
      kept.push_back(std::move(kv));
  model.metadata = std::move(kept);
}

/// Reports the first unsupported op before any pass runs, so the message
/// names the node rather than listing every supported op.
void checkOpsSupported(const Graph &g) {
  for (const auto &n : g.nodes())
    if (!isSupportedOp(n->domain(), n->opType()))
      errorAt(*n) << "op '"
                  << (n->domain().empty() ? n->opType()
                                          : n->domain() + "." + n->opType())
                  << "' is not supported by mpc";
}

/// For each graph input (in order), the index into `inputs` bound to it.
std::vector<size_t> bindInputs(const Graph &g,
                               const std::vector<InferenceInput> &inputs) {
  const size_t kUnbound = size_t(-1);
  std::vector<size_t> bound(g.inputs().size(), kUnbound);
  std::map<std::string, size_t> indexOf;
  for (size_t i = 0; i < g.inputs().size(); ++i)
    indexOf[g.inputs()[i]->name()] = i;
  for (size_t k = 0; k < inputs.size(); ++k) {
    const InferenceInput &in = inputs[k];
    if (in.name.empty())
      continue;
    auto it = indexOf.find(in.name);
    if (it == indexOf.end()) {
      std::string why =
          g.findValue(in.name) && g.findValue(in.name)->isInitializer()
              ? " (it is an initializer, not a graph input)"
              : "";
      error() << "no graph input named '" << in.name << "'" << why
              << "; the inputs are: " << inputList(g);
    }
    if (bound[it->second] != kUnbound)
      error() << "input '" << in.name << "' is given twice";
    bound[it->second] = k;
  }
  size_t next = 0;
  for (size_t k = 0; k < inputs.size(); ++k) {
    if (!inputs[k].name.empty())
      continue;
    while (next < bound.size() && bound[next] != kUnbound)
      ++next;
    if (next == bound.size())
      error() << "too many inputs: the graph has " << g.inputs().size() << " ("
              << inputList(g) << ") and "
              << (inputs[k].source.empty() ? "an extra one"
                                           : "'" + inputs[k].source + "'")
              << " is left over";
    bound[next++] = k;
  }
  std::string missing;
  for (size_t i = 0; i < bound.size(); ++i)
    if (bound[i] == kUnbound)
      missing += (missing.empty() ? "'" : ", '") + g.inputs()[i]->name() + "'";
  if (!missing.empty())
    error() << "missing input"
            << (missing.find(',') != std::string::npos ? "s" : "") << " "
            << missing << " (give NAME=FILE, or files in graph input order)";
  return bound;
}

/// The tensor must have the declared dtype and every static dim; a symbolic
/// dim ("N") must take the same size wherever it appears.
void checkInput(const Value &v, const InferenceInput &in,
                std::map<std::string, int64_t> &symbols) {
  const Tensor &t = in.value;
  if (t.dtype == DType::Undefined)
    error() << describeInput(v, in) << ": holds no tensor";
  if (v.dtype != DType::Undefined && v.dtype != t.dtype)
    error() << describeInput(v, in) << ": expected " << v.typeString()
            << ", got " << tensorTypeText(t);
  if (!v.hasShape)
    return;
  bool ok = v.rank() == int64_t(t.dims.size());
  std::string symbolClash;
  for (size_t i = 0; ok && i < t.dims.size(); ++i) {
    const Dim &d = v.dims[i];
    if (d.isKnown()) {
      ok = d.value == t.dims[i];
    } else if (!d.symbol.empty()) {
      auto [it, fresh] = symbols.emplace(d.symbol, t.dims[i]);
      if (!fresh && it->second != t.dims[i])
        symbolClash = "dim '" + d.symbol + "' is " + std::to_string(t.dims[i]) +
                      " here but " + std::to_string(it->second) +
                      " in an earlier input";
    }
  }
  if (!ok)
    error() << describeInput(v, in) << ": expected " << v.typeString()
            << ", got " << tensorTypeText(t);
  if (!symbolClash.empty())
    error() << describeInput(v, in) << ": " << symbolClash;
}

bool isDirectory(const std::string &path) {
  std::error_code ec;
  return std::filesystem::is_directory(path, ec);
}

} // namespace

Tensor readTensorFile(const std::string &path) {
  // A FIFO would wait for a writer and a device (/dev/zero) never end.
  requireRegularFile(path, "--input");
  std::FILE *f = std::fopen(path.c_str(), "rb");
  if (!f)
    throw Error(path + ": cannot open: " + std::strerror(errno));
  unsigned char magic[6] = {0};
  size_t got = std::fread(magic, 1, sizeof magic, f);
  std::fclose(f);
  static const unsigned char kNpyMagic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
  Tensor t;
  std::string err;
  bool isNpy = got == sizeof magic && std::memcmp(magic, kNpyMagic, 6) == 0;
  bool ok = isNpy ? readNpy(path, t, err)
                  : readTensorProtoFile(path, t, nullptr, err);
  if (!ok && !isNpy &&
      (got == 0 || err.find("not a valid serialized") != std::string::npos ||
       err.find("data type UNDEFINED") != std::string::npos))
    throw Error(path + ": neither a .npy file nor a serialized ONNX "
                       "TensorProto");
  if (!ok)
    throw Error(err);
  return t;
}

std::vector<InferenceOutput> runInference(Model &model,
                                          std::vector<InferenceInput> inputs,
                                          Backend &backend) {
  dropTrainingStep(model);
  Graph &g = *model.graph;
  checkOpsSupported(g);
  std::vector<size_t> bound = bindInputs(g, inputs);

  CompileOptions options;
  std::map<std::string, int64_t> symbols;
  for (size_t i = 0; i < bound.size(); ++i) {
    Value &v = *g.inputs()[i];
    const InferenceInput &in = inputs[bound[i]];
    checkInput(v, in, symbols);
    if (v.dtype == DType::Undefined)
      v.dtype = in.value.dtype;
    // The actual shapes make the model's shape arithmetic static, so
    // fold-constants can fold it as mpc-opt would with --input-shape.
    options.inputShapes.emplace_back(v.name(), in.value.dims);
  }

  Statistics stats;
  runPipeline(model, parsePipeline("verify,infer-shapes,fold-constants"),
              options, PipelineConfig{}, stats);

  Executor exec(g, backend);
  for (size_t i = 0; i < bound.size(); ++i)
    exec.setInput(g.inputs()[i]->name(), std::move(inputs[bound[i]].value));
  exec.run();

  std::vector<InferenceOutput> outputs;
  for (size_t i = 0; i < exec.numOutputs(); ++i)
    outputs.push_back({g.outputs()[i]->name(), exec.output(i)});
  return outputs;
}

std::string outputFileName(const std::string &valueName) {
  std::string s;
  for (char c : valueName) {
    bool safe = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                (c >= '0' && c <= '9') || c == '.' || c == '-' || c == '_';
    s += safe ? c : '_';
  }
  if (s.empty() || s == "." || s == "..")
    s = "_" + s;
  return s;
}

void checkOutputDir(const std::string &dir) {
  if (dir.empty())
    throw Error("--output-dir: expects a directory");
  // The folder itself, or the nearest existing folder above it, which the
  // write will create the rest in.
  std::filesystem::path at = std::filesystem::absolute(dir);
  std::error_code ec;
  while (!std::filesystem::exists(at, ec) && at.has_parent_path() &&
         at.parent_path() != at)
    at = at.parent_path();
  if (!isDirectory(at.string()))
    throw Error(dir + ": " +
                (at == std::filesystem::absolute(dir)
                     ? std::string("is not a directory")
                     : "cannot create the output directory: " + at.string() +
                           " is not a directory"));
  if (access(at.c_str(), W_OK | X_OK) != 0)
    throw Error(
        dir + ": the output directory is not writable: " +
        (at == std::filesystem::absolute(dir) ? "" : at.string() + ": ") +
        std::strerror(errno));
}

void prepareOutputDir(const std::string &dir) {
  checkOutputDir(dir);
  std::error_code ec;
  if (!std::filesystem::exists(dir, ec)) {
    std::filesystem::create_directories(dir, ec);
    if (ec)
      throw Error(dir +
                  ": cannot create the output directory: " + ec.message());
  }
  if (!isDirectory(dir))
    throw Error(dir + ": is not a directory");
  if (access(dir.c_str(), W_OK | X_OK) != 0)
    throw Error(dir + ": the output directory is not writable: " +
                std::strerror(errno));
}

std::vector<std::string>
writeInferenceOutputs(const std::string &dir,
                      const std::vector<InferenceOutput> &outputs,
                      const std::vector<FileRole> &inputs) {
  // Every path first: none may be one of the files read (an --input, the
  // model), checked before the first is written.
  std::set<std::string> taken;
  std::vector<std::string> paths;
  std::vector<FileRole> roles;
  for (const InferenceOutput &out : outputs) {
    std::string base = outputFileName(out.name), file = base;
    for (int k = 2; taken.count(file); ++k)
      file = base + "_" + std::to_string(k);
    taken.insert(file);
    paths.push_back((std::filesystem::path(dir) / (file + ".npy")).string());
    roles.push_back({"output '" + out.name + "'", paths.back()});
  }
  refuseOutputsOverInputs(inputs, roles);
  prepareOutputDir(dir);
  for (size_t i = 0; i < outputs.size(); ++i) {
    std::string err;
    if (!writeNpy(paths[i], outputs[i].value, err))
      throw Error("output '" + outputs[i].name + "': " + err);
  }
  return paths;
}

} // namespace mpc
