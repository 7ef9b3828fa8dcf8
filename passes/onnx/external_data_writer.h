// Writing a model's tensors as ONNX external data: where each tensor goes in
// the data file beside the model (PATH.data), that file's bytes, and the
// model and its data file written as one pair.
//
// Shared by the model file writer (model_file_writer.cpp, from the IR) and
// writeModelAtomically (external_data_writer.cpp, from a ModelProto), so
// that both lay out the same tensors at the same offsets and name them with
// the same external_data entries: the two write the same bytes.
#pragma once

#include "passes/onnx/onnx_io.h"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace onnx {
class TensorProto;
} // namespace onnx

namespace mpc {

/// The external data of one model file: its tensors' bytes in the order
/// the model lists them, each at the next multiple of kExternalDataAlignment.
class ExternalDataLayout {
public:
  /// For the model file `modelPath`: the data file is
  /// externalDataPath(modelPath), named in the model by its base name.
  explicit ExternalDataLayout(const std::string &modelPath);

  /// Places `size` bytes (which must stay where they are until the data
  /// file is written) after the last; returns their offset.
  uint64_t add(const uint8_t *data, size_t size);
  bool empty() const { return pieces_.empty(); }
  /// The data file's path, and the location the model names it by.
  const std::string &dataPath() const { return dataPath_; }
  const std::string &location() const { return location_; }

  /// Writes the data file's bytes to `fd`, a new empty file: zero blocks
  /// (optimizer moments, the padding between tensors) become holes
  /// (FileSink). False with `error` ("DATAPATH: write error: ...") on failure.
  bool fill(int fd, std::string &error) const;

private:
  struct Piece {
    const uint8_t *data;
    size_t size;
    uint64_t offset;
  };
  std::string dataPath_, location_;
  std::vector<Piece> pieces_;
  uint64_t end_ = 0;
};

/// The values of a tensor's external_data entries, in the order onnx's
/// set_external_data writes them: location, offset, length.
struct ExternalDataEntries {
  static constexpr const char *kKeys[3] = {"location", "offset", "length"};
  std::string values[3];
  ExternalDataEntries(const std::string &location, uint64_t offset,
                      size_t length)
      : values{location, std::to_string(offset), std::to_string(length)} {}
};

/// Points `t` at its bytes in the data file: external_data entries,
/// data_location EXTERNAL, no raw_data.
void setExternalData(onnx::TensorProto &t, const std::string &location,
                     uint64_t offset, size_t length);

/// Throws Error when writing the model file `path` (and, with `withData`,
/// its data file) would replace one of `options.inputFiles`.
void checkOutputSparesInputs(const std::string &path, bool withData,
                             const ModelWriteOptions &options);

/// Writes the data file of `layout` and the model file `path` (what
/// `fillModel` writes, called once the data file is written) as one pair
/// (writeFilePairAtomically), after checkOutputSparesInputs. Throws Error
/// naming the file on failure.
void writeModelWithData(
    const std::string &path, const ExternalDataLayout &layout,
    const std::function<bool(int fd, std::string &error)> &fillModel,
    const ModelWriteOptions &options);

} // namespace mpc
