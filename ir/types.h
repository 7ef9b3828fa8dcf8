// Element types of the IR and their mapping onto ONNX's TensorProto data types.
//
// The IR knows the floating types mpc trains in (fp32, fp16, bf16, fp64) and
// the integer/bool types that index, count and mask. Everything else is
// rejected at import.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace mpc {

/// Element type of a tensor value.
enum class DType : uint8_t {
  Undefined = 0,
  F32,
  F16,
  BF16,
  F64,
  I64,
  I32,
  I8,
  U8,
  Bool,
};

/// Bytes per element (0 for Undefined).
size_t dtypeSize(DType t);

/// Short lowercase name: "fp32", "fp16", "bf16", "fp64", "int64", ...
const char *dtypeName(DType t);

/// The ONNX text syntax keyword: "float", "float16", "bfloat16", "int64", ...
const char *onnxTypeName(DType t);

/// True for fp32/fp16/bf16/fp64.
bool isFloating(DType t);

/// True when every value of float type `from` is exactly a value of `to`, a
/// different float type: fp16/bf16 -> fp32/fp64, fp32 -> fp64 (so casting up
/// and back gives the original, and a kernel may widen instead of a Cast).
bool widensExactly(DType from, DType to);

/// ONNX TensorProto::DataType value for this dtype.
int toOnnxDataType(DType t);

/// Inverse of toOnnxDataType; nullopt for types the IR does not support.
std::optional<DType> fromOnnxDataType(int onnxType);

/// Parses "fp32", "fp16", "bf16" (and "float16", "bfloat16", "float").
std::optional<DType> parseDType(const std::string &name);

} // namespace mpc
