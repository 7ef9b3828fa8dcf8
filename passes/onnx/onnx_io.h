// Reading and writing models: binary ONNX (external data too) and ONNX text.
//
// Import converts protobuf into the IR (passes never see protobuf); export
// converts back. Both are strict about bad input: every problem is an
// mpc::Error naming the node or tensor and what is wrong.
#pragma once

#include "ir/graph.h"
#include "support/file_io.h"

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace onnx {
class ModelProto;
class AttributeProto;
} // namespace onnx

namespace mpc {

/// Highest default-domain opset the importer accepts (our own inference covers
/// the supported ops up to it, beyond what ONNX 1.12's checker knows).
constexpr int64_t kMaxSupportedOpset = 23;

/// Where loadModel keeps the bytes of a binary model's large weights (the
/// main graph's initializers with at least kHeldRawDataBytes of raw_data).
enum class WeightBytes {
  /// In memory of their own: what a trainer, which runs on them long after
  /// the load, needs.
  Own,
  /// Where they lie in the mapped file, in place (ByteBuffer::inPlace),
  /// copied only if something asks for them as typed data: for mpc-opt,
  /// which reads the file once and writes the weights out as they came in.
  /// The file must not be truncated while the model is alive (SIGBUS; mpc's
  /// own writers replace files by rename, support/file_io.h).
  InFile,
};

/// What the importer does beyond converting the model.
struct ImportOptions {
  /// Lower the main graph's ONNX-only ops (the lower-onnx pass,
  /// passes/onnx/import_lowering.h) as part of the import: what mpc-run, the
  /// tests and the fuzz targets read. mpc-opt turns it off and runs
  /// lower-onnx as its pipeline's first pass. A main graph with Gradient
  /// nodes, or a model with training_info, is lowered at import either way:
  /// the rest of the import reads the lowered graph.
  bool lower = true;
};

/// Loads a model from a file: binary ONNX, or ONNX text when the file name
/// ends in .onnxtext/.txt or the content does not parse as protobuf.
std::unique_ptr<Model> loadModel(const std::string &path,
                                 WeightBytes weightBytes = WeightBytes::Own,
                                 const ImportOptions &options = {});
/// Parses ONNX text (`//` comments allowed) into a model.
std::unique_ptr<Model> parseModelText(const std::string &text,
                                      const std::string &sourceName,
                                      const ImportOptions &options = {});
/// Converts a ModelProto (baseDir resolves external data).
std::unique_ptr<Model> importModel(const onnx::ModelProto &proto,
                                   const std::string &sourceName,
                                   const std::string &baseDir,
                                   const ImportOptions &options = {});
/// The same, taking the initializers' bytes over from `proto` instead of
/// copying them (the model's weights are not held twice); `proto` is left
/// without them.
std::unique_ptr<Model> importModel(onnx::ModelProto &&proto,
                                   const std::string &sourceName,
                                   const std::string &baseDir,
                                   const ImportOptions &options = {});

/// Builds a ModelProto. Training state lives in the main graph's initializers.
void exportModel(const Model &model, onnx::ModelProto &proto);
/// The model as --emit=step writes it: one functional graph
/// (state..., batch...) -> (loss, state'...), no training_info.
void exportStepModel(const Model &model, onnx::ModelProto &proto);

/// Writes one IR attribute as an AttributeProto (every kind).
void exportAttribute(const std::string &name, const Attribute &a,
                     onnx::AttributeProto &p);

/// The value of an AttributeProto of a plain kind (float, int, string and
/// their lists); nullopt for a tensor or any other kind, which each caller
/// reads its own way (external data, the error's context).
std::optional<Attribute> plainAttributeFromProto(const onnx::AttributeProto &a);

/// Deterministic text: model header, main graph, training algorithm, update
/// bindings, local functions (ONNX text syntax, `//` comments between).
std::string printModelText(const Model &model);

/// Whether a written model keeps its large tensors' bytes in a data file
/// beside it (ONNX external data: PATH.data next to PATH, the tensors
/// pointing into it by location, offset and length) instead of in the file.
enum class ExternalData {
  /// Only when the model would otherwise pass kExternalDataAutoBytes:
  /// protobuf, mpc's readers and onnx.load cannot read a file of 2 GiB.
  Auto,
  /// Always (mpc-opt --external-data, mpc-run --external-data).
  Always,
};

/// With ExternalData::Auto, a model whose serialized bytes would pass this
/// is written with external data: 1.8 GiB, a margin under protobuf's 2 GiB
/// for what is added around the graphs (header, functions, bindings).
constexpr size_t kExternalDataAutoBytes = size_t(1843) << 20;
/// Tensors of fewer bytes stay in the model file (onnx's size_threshold).
constexpr size_t kExternalDataMinBytes = 1024;
/// Where each tensor starts in the data file: a multiple of the page size,
/// as onnx.save_model aligns large tensors, so a reader can map them.
constexpr size_t kExternalDataAlignment = 4096;

/// How writeModelFile and writeModelAtomically write a model file.
struct ModelWriteOptions {
  ExternalData externalData = ExternalData::Auto;
  Fsync fsync = Fsync::Yes;
  /// Files the write must not replace, by identity (not by name): the input
  /// model's files (inputFilesToKeep). A write whose model or data file is
  /// one of them fails before anything is written.
  std::vector<std::string> inputFiles;
};

/// The data file a model written to `path` with external data keeps its
/// tensors in: PATH.data (named in the model by its base name, relative to
/// the model's folder).
std::string externalDataPath(const std::string &path);
/// The data files model `path`'s tensors keep their bytes in (its external
/// data locations, resolved against its folder), each once; none for text
/// or a file that does not parse.
std::vector<std::string> externalDataFiles(const std::string &path);
/// The files of model `input` (the model and its external data files) that
/// writing a model to `output` (and PATH.data beside it) could replace, for
/// ModelWriteOptions::inputFiles: empty when `output` is `input` itself (a
/// model compiled onto its own path replaces it whole; the old one's
/// tensors were read before the write) or when neither output file exists
/// yet (nothing there to replace).
std::vector<std::string> inputFilesToKeep(const std::string &input,
                                          const std::string &output);

/// Writes bytes to path atomically (temp file + rename, fsynced unless
/// `fsync` says not: support/file_io.h); "-" is stdout.
void writeFileAtomically(const std::string &path, const std::string &bytes,
                         Fsync fsync = Fsync::Yes);
/// Serializes `proto` straight into `path` (temp file + rename, as above; not
/// "-"): the same bytes as SerializeToString, without the whole model held
/// in memory a second time. Throws Error naming the file on failure (a
/// model of 2 GiB or more is one: the overload below writes it with
/// external data).
void writeModelAtomically(const std::string &path,
                          const onnx::ModelProto &proto,
                          Fsync fsync = Fsync::Yes);
/// The same with `options`: with external data (always, or when the model
/// would pass kExternalDataAutoBytes) the raw_data of every initializer of
/// at least kExternalDataMinBytes (main graph, training_info graphs) goes
/// to externalDataPath(path), and `proto` is left pointing there (its
/// tensors' bytes released). Model and data file are written as one pair
/// (writeFilePairAtomically). Throws Error naming the file on failure.
void writeModelAtomically(const std::string &path, onnx::ModelProto &proto,
                          const ModelWriteOptions &options);
/// Writes `path` atomically with what `fill` writes to the temporary file's
/// descriptor (support/file_io.h); throws Error with the one-line
/// reason on failure.
void writeFileStreamed(
    const std::string &path,
    const std::function<bool(int fd, std::string &error)> &fill,
    Fsync fsync = Fsync::Yes);
/// exportModel + writeModelAtomically in one: the same bytes, written from
/// the IR without building the model's ModelProto (each tensor's data goes
/// from the IR straight into the file). Throws Error naming the file on
/// failure (passes/onnx/model_file_writer.cpp).
void writeModelFile(const Model &model, const std::string &path,
                    Fsync fsync = Fsync::Yes);
/// The same with `options`: ExternalData::Auto (the default) writes a
/// model that would pass kExternalDataAutoBytes with external data,
/// ExternalData::Always any model; then the bytes of every initializer of
/// at least kExternalDataMinBytes (the main graph's, the training step's)
/// go to externalDataPath(path), each at a multiple of
/// kExternalDataAlignment (zero blocks left as holes), and the model and its
/// data file are written as one pair (writeFilePairAtomically): the same
/// two files writeModelAtomically(path, proto, options) writes for
/// exportModel's proto. Throws Error naming the file on failure, leaving no
/// file behind and any previous pair as it was.
void writeModelFile(const Model &model, const std::string &path,
                    const ModelWriteOptions &options);
/// Reads a whole file; throws Error naming the file if it cannot.
std::string readFile(const std::string &path);

} // namespace mpc
