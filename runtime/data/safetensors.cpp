// safetensors writing: the JSON header and the streamed tensor data
// (safetensors.h).
#include "runtime/data/safetensors.h"

#include "passes/onnx/onnx_io.h"
#include "support/diagnostics.h"
#include "support/file_io.h"

#include <cstdint>
#include <cstdio>
#include <unordered_set>

namespace mpc {

const char *safetensorsDType(DType t) {
  switch (t) {
  case DType::F32:
    return "F32";
  case DType::F16:
    return "F16";
  case DType::BF16:
    return "BF16";
  case DType::F64:
    return "F64";
  case DType::I64:
    return "I64";
  case DType::I32:
    return "I32";
  case DType::I8:
    return "I8";
  case DType::U8:
    return "U8";
  case DType::Bool:
    return "BOOL";
  case DType::Undefined:
    break;
  }
  return nullptr;
}

std::string jsonQuote(const std::string &s) {
  std::string out = "\"";
  for (char c : s) {
    unsigned char u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (u < 0x20) {
      char esc[8];
      std::snprintf(esc, sizeof esc, "\\u%04x", u);
      out += esc;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string safetensorsHeader(const std::vector<SafetensorsTensor> &tensors,
                              const SafetensorsMetadata &metadata) {
  std::string json = "{";
  if (!metadata.empty()) {
    json += "\"__metadata__\":{";
    for (size_t i = 0; i < metadata.size(); ++i)
      json += (i ? "," : "") + jsonQuote(metadata[i].first) + ":" +
              jsonQuote(metadata[i].second);
    json += "}";
  }
  std::unordered_set<std::string> seen;
  uint64_t offset = 0;
  for (const SafetensorsTensor &t : tensors) {
    if (t.name.empty())
      throw Error("safetensors: a tensor has no name");
    if (t.name == "__metadata__")
      throw Error("safetensors: tensor name '__metadata__' is reserved for "
                  "the file's metadata");
    if (!seen.insert(t.name).second)
      throw Error("safetensors: tensor '" + t.name + "' is named twice");
    const char *dtype = safetensorsDType(t.value->dtype);
    int64_t n = t.value->numel();
    if (!dtype || n < 0 ||
        uint64_t(t.value->byteSize()) !=
            uint64_t(n) * dtypeSize(t.value->dtype))
      throw Error("safetensors: tensor '" + t.name + "' (" +
                  dtypeName(t.value->dtype) + "[" +
                  dimsToString(t.value->dims) + "], " +
                  std::to_string(t.value->byteSize()) +
                  " bytes) has no dtype or bytes that do not match its shape");
    uint64_t end = offset + t.value->byteSize();
    json += (json.size() > 1 ? "," : "") + jsonQuote(t.name) +
            ":{\"dtype\":\"" + dtype + "\",\"shape\":[";
    for (size_t i = 0; i < t.value->dims.size(); ++i)
      json += (i ? "," : "") + std::to_string(t.value->dims[i]);
    json += "],\"data_offsets\":[" + std::to_string(offset) + "," +
            std::to_string(end) + "]}";
    offset = end;
  }
  json += "}";
  // The data starts 8-aligned: readers may view it as typed arrays.
  json.append((8 - json.size() % 8) % 8, ' ');
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i)
    out[size_t(i)] = char(uint64_t(json.size()) >> (8 * i));
  return out + json;
}

void writeSafetensors(const std::string &path,
                      const std::vector<SafetensorsTensor> &tensors,
                      const SafetensorsMetadata &metadata) {
  std::string header;
  try {
    header = safetensorsHeader(tensors, metadata);
  } catch (const Error &e) {
    throw Error(path + ": " + e.what());
  }
  writeFileStreamed(path, [&](int fd, std::string &error) {
    if (!writeAll(fd, header.data(), header.size(), path, error))
      return false;
    // Each tensor's bytes where they lie (host order: little-endian, as
    // every target mpc builds for).
    for (const SafetensorsTensor &t : tensors)
      if (t.value->byteSize() && !writeAll(fd, t.value->bytes.unalignedData(),
                                           t.value->byteSize(), path, error))
        return false;
    return true;
  });
}

} // namespace mpc
