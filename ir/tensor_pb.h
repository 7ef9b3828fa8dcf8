// ONNX TensorProto <-> Tensor conversion; TensorProto .pb file I/O.
//
// The .pb files are single serialized TensorProto messages, the format of
// ONNX's backend test data (test_data_set_0/input_0.pb). tensorFromProto
// accepts raw_data (little-endian) and the typed fields: float_data,
// double_data, int64_data and int32_data (which also carries int32, int8,
// uint8, bool and the fp16/bf16 bit patterns). It validates everything
// (dtype, non-negative dims, element count overflow, data size, a 16 GiB cap)
// and returns a one-line error instead of throwing or over-allocating.
// External data (data_location: EXTERNAL) and segments are rejected.
#pragma once

#include "ir/tensor.h"

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <memory>
#include <string>

namespace mpc {

/// Largest tensor tensorFromProto accepts (16 GiB).
constexpr uint64_t kMaxTensorProtoBytes = uint64_t(16) << 30;

/// The bytes `p`'s data type and dims take, after the checks
/// tensorFromProto makes of them (a supported data type, dims >= 0, the
/// 16 GiB cap), whatever its data location: a reader of external data
/// sizes the read with it before reading anything.
bool tensorProtoBytes(const onnx::TensorProto &p, uint64_t &bytes,
                      std::string &error);

/// Converts a TensorProto; errors read "tensor 'name': what is wrong".
bool tensorFromProto(const onnx::TensorProto &p, Tensor &out,
                     std::string &error);

/// The same, taking over `p`'s raw_data instead of copying it when it holds
/// at least kHeldRawDataBytes (the tensor holds the string: no second copy
/// of a model's weights). `p` is left without its raw_data.
bool tensorFromProto(onnx::TensorProto &&p, Tensor &out, std::string &error);
constexpr size_t kHeldRawDataBytes = 4096;

/// The same for a TensorProto whose raw_data, `size` bytes at `raw`, was
/// left where it lies (passes/onnx/weights_in_file.h): the checks and
/// errors are those of `p` with that raw_data, and the tensor's bytes stay
/// there, in place (ByteBuffer::inPlace, kept valid by `keeper`), but for a
/// bool tensor's, which are normalised into a copy.
bool tensorFromProtoInPlace(const onnx::TensorProto &p, const uint8_t *raw,
                            size_t size, std::shared_ptr<const void> keeper,
                            Tensor &out, std::string &error);

/// Fills `p` (cleared first) with name, data_type, dims and raw_data.
void tensorToProto(const Tensor &t, const std::string &name,
                   onnx::TensorProto &p);

/// Reads a serialized TensorProto file; `name` (if non-null) receives the
/// tensor's name. Errors start with the path.
bool readTensorProtoFile(const std::string &path, Tensor &out,
                         std::string *name, std::string &error);

/// Writes `t` as a serialized TensorProto via `path + ".tmp"` and a rename.
bool writeTensorProtoFile(const std::string &path, const Tensor &t,
                          const std::string &name, std::string &error);

} // namespace mpc
