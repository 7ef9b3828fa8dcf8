// foreignFileKind (passes/onnx/foreign_file.h).
#include "passes/onnx/foreign_file.h"

#include <cstdint>

namespace mpc {

namespace {

bool startsWith(std::string_view bytes, std::string_view magic) {
  return bytes.substr(0, magic.size()) == magic;
}

/// A safetensors file: an 8-byte little-endian header length, then a JSON
/// object of that many bytes within the file.
bool isSafetensors(std::string_view bytes) {
  if (bytes.size() < 10 || bytes[8] != '{')
    return false;
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i)
    n = (n << 8) | uint8_t(bytes[size_t(i)]);
  return n >= 2 && n <= bytes.size() - 8;
}

} // namespace

std::string foreignFileKind(std::string_view bytes, const std::string &path) {
  const std::string give = ": give the model exported with torch.onnx.export "
                           "(or compiled by mpc-opt)";
  if (startsWith(bytes, std::string_view("PK\x03\x04", 4)) ||
      startsWith(bytes, std::string_view("PK\x05\x06", 4)))
    return path +
           ": a zip archive (numpy .npz data, or a torch.save .pt/.pth), not "
           "an ONNX model" +
           give + "; data goes in --data=FILE.npz";
  if (startsWith(bytes, "\x93NUMPY"))
    return path + ": a numpy .npy array, not an ONNX model" + give;
  // Protocol 2+ pickles begin with PROTO (0x80) and the protocol number;
  // torch.save's legacy format is a pickle.
  if (bytes.size() >= 2 && uint8_t(bytes[0]) == 0x80 && bytes[1] >= 2 &&
      bytes[1] <= 5)
    return path +
           ": a Python pickle (torch.save's legacy format), not an "
           "ONNX model" +
           give;
  if (isSafetensors(bytes))
    return path + ": a safetensors file (weights only), not an ONNX model" +
           give;
  return {};
}

} // namespace mpc
