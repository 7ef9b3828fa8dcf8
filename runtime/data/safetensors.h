// The safetensors format (Hugging Face's;
// https://huggingface.co/docs/safetensors), written: what torch's
// safetensors.torch.load_file and transformers read.
//
// A file is an 8-byte little-endian header length N, N bytes of JSON
//   {"__metadata__": {"KEY": "VALUE", ...},
//    "NAME": {"dtype": "F32", "shape": [2, 3], "data_offsets": [BEGIN, END]},
//    ...}
// padded with spaces so that the data starts at a multiple of 8 bytes, then
// every tensor's bytes (C order, little-endian) back to back, offsets counted
// from the end of the header. The tensors are written in the order given;
// readers index them by name.
#pragma once

#include "ir/tensor.h"

#include <string>
#include <utility>
#include <vector>

namespace mpc {

/// One tensor of a safetensors file (the value is not owned).
struct SafetensorsTensor {
  std::string name;
  const Tensor *value = nullptr;
};

/// String metadata (the header's "__metadata__"), in order.
using SafetensorsMetadata = std::vector<std::pair<std::string, std::string>>;

/// The format's dtype tag ("F32", "F16", "BF16", "F64", "I64", "I32", "I8",
/// "U8", "BOOL"); nullptr for Undefined.
const char *safetensorsDType(DType t);

/// `s` as a JSON string literal, quotes included: '"', '\\' and control
/// characters escaped, every other byte (UTF-8) as it is.
std::string jsonQuote(const std::string &s);

/// Everything before the tensor data: the length, the JSON header and its
/// padding. Throws Error on an empty, repeated or reserved ("__metadata__")
/// name, a tensor without a dtype, or bytes that do not match its shape.
std::string safetensorsHeader(const std::vector<SafetensorsTensor> &tensors,
                              const SafetensorsMetadata &metadata);

/// Writes the file atomically (a temporary file renamed over `path`, fsynced:
/// support/file_io.h), streaming each tensor's bytes; throws Error
/// (one line naming `path`) and leaves `path` as it was on failure.
void writeSafetensors(const std::string &path,
                      const std::vector<SafetensorsTensor> &tensors,
                      const SafetensorsMetadata &metadata);

} // namespace mpc
