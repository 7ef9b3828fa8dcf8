// Element type helpers: sizes, names and the ONNX data type mapping.
#include "ir/types.h"

namespace mpc {

size_t dtypeSize(DType t) {
  switch (t) {
  case DType::F32:
  case DType::I32:
    return 4;
  case DType::F16:
  case DType::BF16:
    return 2;
  case DType::F64:
  case DType::I64:
    return 8;
  case DType::I8:
  case DType::U8:
  case DType::Bool:
    return 1;
  case DType::Undefined:
    break;
  }
  return 0;
}

const char *dtypeName(DType t) {
  switch (t) {
  case DType::F32:
    return "fp32";
  case DType::F16:
    return "fp16";
  case DType::BF16:
    return "bf16";
  case DType::F64:
    return "fp64";
  case DType::I64:
    return "int64";
  case DType::I32:
    return "int32";
  case DType::I8:
    return "int8";
  case DType::U8:
    return "uint8";
  case DType::Bool:
    return "bool";
  case DType::Undefined:
    break;
  }
  return "undefined";
}

const char *onnxTypeName(DType t) {
  switch (t) {
  case DType::F32:
    return "float";
  case DType::F16:
    return "float16";
  case DType::BF16:
    return "bfloat16";
  case DType::F64:
    return "double";
  case DType::I64:
    return "int64";
  case DType::I32:
    return "int32";
  case DType::I8:
    return "int8";
  case DType::U8:
    return "uint8";
  case DType::Bool:
    return "bool";
  case DType::Undefined:
    break;
  }
  return "undefined";
}

bool isFloating(DType t) {
  return t == DType::F32 || t == DType::F16 || t == DType::BF16 ||
         t == DType::F64;
}

bool widensExactly(DType from, DType to) {
  if (from == DType::F16 || from == DType::BF16)
    return to == DType::F32 || to == DType::F64;
  return from == DType::F32 && to == DType::F64;
}

// Values from onnx.proto's TensorProto.DataType; kept here so that code which
// only needs the mapping does not pull in the protobuf headers.
int toOnnxDataType(DType t) {
  switch (t) {
  case DType::F32:
    return 1;
  case DType::U8:
    return 2;
  case DType::I8:
    return 3;
  case DType::I32:
    return 6;
  case DType::I64:
    return 7;
  case DType::Bool:
    return 9;
  case DType::F16:
    return 10;
  case DType::F64:
    return 11;
  case DType::BF16:
    return 16;
  case DType::Undefined:
    break;
  }
  return 0;
}

std::optional<DType> fromOnnxDataType(int onnxType) {
  switch (onnxType) {
  case 1:
    return DType::F32;
  case 2:
    return DType::U8;
  case 3:
    return DType::I8;
  case 6:
    return DType::I32;
  case 7:
    return DType::I64;
  case 9:
    return DType::Bool;
  case 10:
    return DType::F16;
  case 11:
    return DType::F64;
  case 16:
    return DType::BF16;
  default:
    return std::nullopt;
  }
}

std::optional<DType> parseDType(const std::string &name) {
  if (name == "fp32" || name == "float" || name == "float32")
    return DType::F32;
  if (name == "fp16" || name == "float16" || name == "half")
    return DType::F16;
  if (name == "bf16" || name == "bfloat16")
    return DType::BF16;
  if (name == "fp64" || name == "double" || name == "float64")
    return DType::F64;
  return std::nullopt;
}

} // namespace mpc
