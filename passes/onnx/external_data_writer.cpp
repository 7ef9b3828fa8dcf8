// ONNX external data on write: the data file's layout and bytes, the pair
// of files written atomically, writeModelAtomically with external data (a
// ModelProto's tensors moved out), and the input files an output must not
// replace.
//
// A model over 2 GiB cannot be one protobuf: mpc's readers, protobuf and
// onnx.load all refuse it. Its tensors' bytes go to PATH.data instead, each
// tensor pointing into it as onnx.save_model(..., save_as_external_data=True)
// does: data_location EXTERNAL, external_data {location: the data file's base
// name, relative to the model's folder; offset, a multiple of 4096; length}.
// The importer (onnx_import.cpp) reads them back from beside the model.
#include "passes/onnx/external_data_writer.h"

#include "passes/onnx/weights_in_file.h"
#include "support/diagnostics.h"
#include "support/file_bytes.h"
#include "support/file_io.h"
#include "support/file_sink.h"

#include "onnx/onnx_pb.h"

#include <google/protobuf/io/zero_copy_stream_impl.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <sys/stat.h>

namespace mpc {
namespace {

/// Whether `path` names an existing file; `st` is filled.
bool statFile(const std::string &path, struct stat &st) {
  return ::stat(path.c_str(), &st) == 0;
}

bool sameFile(const struct stat &a, const struct stat &b) {
  return a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

std::string folderOf(const std::string &path) {
  size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

/// Calls `f` on every initializer of `graph` and of the graphs inside its
/// nodes' attributes, and on every tensor attribute.
void forEachGraphTensor(
    const onnx::GraphProto &graph,
    const std::function<void(const onnx::TensorProto &)> &f) {
  for (const onnx::TensorProto &t : graph.initializer())
    f(t);
  for (const onnx::NodeProto &n : graph.node())
    for (const onnx::AttributeProto &a : n.attribute()) {
      if (a.has_t())
        f(a.t());
      for (const onnx::TensorProto &t : a.tensors())
        f(t);
      if (a.has_g())
        forEachGraphTensor(a.g(), f);
      for (const onnx::GraphProto &g : a.graphs())
        forEachGraphTensor(g, f);
    }
}

/// The initializers a model writer moves to external data, in the order
/// the model is serialized: the main graph's, then each training_info's
/// initialization and algorithm.
std::vector<onnx::TensorProto *> initializersInOrder(onnx::ModelProto &proto) {
  std::vector<onnx::TensorProto *> tensors;
  auto add = [&](onnx::GraphProto &g) {
    for (onnx::TensorProto &t : *g.mutable_initializer())
      tensors.push_back(&t);
  };
  if (proto.has_graph())
    add(*proto.mutable_graph());
  for (onnx::TrainingInfoProto &info : *proto.mutable_training_info()) {
    if (info.has_initialization())
      add(*info.mutable_initialization());
    if (info.has_algorithm())
      add(*info.mutable_algorithm());
  }
  return tensors;
}

} // namespace

std::string externalDataPath(const std::string &path) { return path + ".data"; }

ExternalDataLayout::ExternalDataLayout(const std::string &modelPath)
    : dataPath_(externalDataPath(modelPath)) {
  size_t slash = dataPath_.find_last_of('/');
  location_ =
      slash == std::string::npos ? dataPath_ : dataPath_.substr(slash + 1);
}

uint64_t ExternalDataLayout::add(const uint8_t *data, size_t size) {
  uint64_t offset = (end_ + kExternalDataAlignment - 1) /
                    kExternalDataAlignment * kExternalDataAlignment;
  pieces_.push_back({data, size, offset});
  end_ = offset + size;
  return offset;
}

bool ExternalDataLayout::fill(int fd, std::string &error) const {
  static const uint8_t kZeros[kExternalDataAlignment] = {};
  FileSink out(fd, dataPath_);
  uint64_t at = 0;
  for (const Piece &p : pieces_) {
    // The padding is data like the rest: whole zero blocks of it (none
    // here, it is under one) would become holes, the rest is written.
    if (p.offset > at)
      out.putData(kZeros, size_t(p.offset - at));
    out.putData(p.data, p.size);
    at = p.offset + p.size;
  }
  if (!out.flush()) {
    error = out.error();
    return false;
  }
  return true;
}

void setExternalData(onnx::TensorProto &t, const std::string &location,
                     uint64_t offset, size_t length) {
  ExternalDataEntries entries(location, offset, length);
  t.clear_raw_data();
  t.clear_external_data();
  for (int i = 0; i < 3; ++i) {
    onnx::StringStringEntryProto *e = t.add_external_data();
    e->set_key(ExternalDataEntries::kKeys[i]);
    e->set_value(entries.values[i]);
  }
  t.set_data_location(onnx::TensorProto::EXTERNAL);
}

void checkOutputSparesInputs(const std::string &path, bool withData,
                             const ModelWriteOptions &options) {
  if (options.inputFiles.empty())
    return;
  std::vector<std::string> targets = {path};
  if (withData)
    targets.push_back(externalDataPath(path));
  for (const std::string &target : targets) {
    struct stat out {};
    if (!statFile(target, out))
      continue;
    for (const std::string &input : options.inputFiles) {
      struct stat in {};
      if (statFile(input, in) && sameFile(in, out))
        throw Error(target + ": is " +
                    (input == target ? std::string() : input + ", ") +
                    "a file the input model reads; choose another output "
                    "path");
    }
  }
}

void writeModelWithData(
    const std::string &path, const ExternalDataLayout &layout,
    const std::function<bool(int fd, std::string &error)> &fillModel,
    const ModelWriteOptions &options) {
  // onnx's checker (and mpc's importer) take ".." anywhere in a location
  // for a way out of the model's folder.
  if (layout.location().find("..") != std::string::npos)
    throw Error(path + ": cannot name a data file " + layout.location() +
                " (onnx refuses external data whose location holds '..'); "
                "choose an output name without '..'");
  checkOutputSparesInputs(path, true, options);
  std::string error;
  if (!writeFilePairAtomically(
          layout.dataPath(),
          [&](int fd, std::string &err) { return layout.fill(fd, err); }, path,
          fillModel, error, options.fsync))
    throw Error(error);
}

void writeModelAtomically(const std::string &path, onnx::ModelProto &proto,
                          const ModelWriteOptions &options) {
  bool external = options.externalData == ExternalData::Always ||
                  proto.ByteSizeLong() > kExternalDataAutoBytes;
  ExternalDataLayout layout(path);
  struct Moved {
    onnx::TensorProto *tensor;
    uint64_t offset;
    size_t size;
  };
  std::vector<Moved> moved;
  size_t movedBytes = 0;
  if (external)
    for (onnx::TensorProto *t : initializersInOrder(proto))
      if (t->data_location() != onnx::TensorProto::EXTERNAL &&
          t->raw_data().size() >= kExternalDataMinBytes) {
        const std::string &raw = t->raw_data();
        moved.push_back(
            {t,
             layout.add(reinterpret_cast<const uint8_t *>(raw.data()),
                        raw.size()),
             raw.size()});
        movedBytes += raw.size();
      }
  if (layout.empty()) {
    checkOutputSparesInputs(path, false, options);
    writeModelAtomically(path, static_cast<const onnx::ModelProto &>(proto),
                         options.fsync);
    return;
  }
  // What stays in the model must fit one protobuf; told before gigabytes of
  // data are written for nothing (each moved tensor gains its entries).
  size_t entries = moved.size() * (64 + layout.location().size());
  if (proto.ByteSizeLong() - movedBytes + entries > size_t(INT_MAX))
    throw Error(path + ": the model is over 2 GiB even with its tensors in "
                       "external data");
  writeModelWithData(
      path, layout,
      [&](int fd, std::string &err) {
        // The data file is written: the tensors let go of their bytes and
        // point into it.
        for (const Moved &m : moved)
          setExternalData(*m.tensor, layout.location(), m.offset, m.size);
        google::protobuf::io::FileOutputStream out(fd, 1 << 20);
        if (!proto.SerializeToZeroCopyStream(&out) || !out.Flush()) {
          err = path + ": write error: " +
                (out.GetErrno() ? std::strerror(out.GetErrno())
                                : "cannot serialize the model");
          return false;
        }
        return true;
      },
      options);
}

std::vector<std::string> externalDataFiles(const std::string &path) {
  FileBytes file;
  std::string error;
  if (!file.open(path, error) || file.size() > size_t(INT_MAX))
    return {};
  auto endsWith = [&](const char *suffix) {
    size_t n = std::strlen(suffix);
    return path.size() >= n && path.compare(path.size() - n, n, suffix) == 0;
  };
  if (endsWith(".onnxtext") || endsWith(".txt"))
    return {};
  // Only the external_data entries are read: the weights the file holds
  // itself are left where they lie, not copied.
  onnx::ModelProto proto;
  std::vector<WeightInFile> weights;
  if (!parseModelLeavingWeights(file.view(), kExternalDataMinBytes, proto,
                                weights) &&
      !proto.ParseFromArray(file.data(), int(file.size())))
    return {};
  std::vector<std::string> files;
  std::string folder = folderOf(path);
  auto note = [&](const onnx::TensorProto &t) {
    if (t.data_location() != onnx::TensorProto::EXTERNAL)
      return;
    for (const auto &kv : t.external_data())
      if (kv.key() == "location" && !kv.value().empty()) {
        std::string file = folder + "/" + kv.value();
        if (std::find(files.begin(), files.end(), file) == files.end())
          files.push_back(file);
      }
  };
  forEachGraphTensor(proto.graph(), note);
  for (const onnx::TrainingInfoProto &info : proto.training_info()) {
    forEachGraphTensor(info.initialization(), note);
    forEachGraphTensor(info.algorithm(), note);
  }
  return files;
}

std::vector<std::string> inputFilesToKeep(const std::string &input,
                                          const std::string &output) {
  struct stat in {
  }, out{}, data{};
  bool outputThere = statFile(output, out);
  if (outputThere && statFile(input, in) && sameFile(in, out))
    return {};
  if (!outputThere && !statFile(externalDataPath(output), data))
    return {};
  std::vector<std::string> files = {input};
  for (std::string &f : externalDataFiles(input))
    files.push_back(std::move(f));
  return files;
}

} // namespace mpc
