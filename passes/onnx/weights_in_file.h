// Parsing a binary model while leaving its weights where they lie.
//
// protobuf copies every bytes field it parses into a string of its own; for
// a model's weights that is most of the file (12.8 of a 64-layer stack's
// 13 MB: 15.9M instructions and ~3,100 freshly touched pages, a third of a
// compile's). parseModelLeavingWeights parses the same message but walks the
// wire format of the main graph's initializers itself, and a large raw_data
// field is not handed to protobuf: where it lies in the input is listed
// instead, for the importer to make the tensor's bytes of
// (ByteBuffer::inPlace, passes/onnx/onnx_import.cpp). mpc-opt writes the
// weights out as they came in, so most never get copied at all.
//
// Every other field, before, between and after those, goes to protobuf as
// it is: fields parsed piece after piece merge into a message exactly as
// the same fields parsed in one piece do (protobuf's rule for concatenated
// messages), and each piece is parsed with the recursion budget it has at
// its depth in the whole, so the message is the one ParseFromArray makes,
// less those raw_data fields.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace onnx {
class ModelProto;
} // namespace onnx

namespace mpc {

/// A main-graph initializer's raw_data left in the parsed bytes.
struct WeightInFile {
  int initializer;     ///< its index in the graph's initializer list
  const uint8_t *data; ///< within the bytes given to the parse
  size_t size;
};

/// Parses `bytes` into `proto` (cleared first) as ParseFromArray does, but
/// leaves out the raw_data of the main graph's initializers that have at
/// least `minBytes` of it and lists each in `weights` (in initializer
/// order). Returns false when the bytes do not parse, or when they take a
/// form the walk does not follow (a group, a tensor with two raw_data
/// fields), with `weights` empty: the caller then parses them with protobuf
/// as usual, which tells the two apart.
bool parseModelLeavingWeights(std::string_view bytes, size_t minBytes,
                              onnx::ModelProto &proto,
                              std::vector<WeightInFile> &weights);

} // namespace mpc
