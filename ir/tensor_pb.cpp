// ONNX TensorProto conversion (raw_data and typed fields) and .pb file I/O.
#include "ir/tensor_pb.h"

#include "support/diagnostics.h"
#include "support/file_io.h"

#include <climits>
#include <cstring>
#include <sys/stat.h>

namespace mpc {
namespace {

std::string describe(const onnx::TensorProto &p) {
  // The name comes from the file: oneLine keeps a line break in it from
  // splitting the error line.
  return p.name().empty() ? std::string("tensor")
                          : "tensor '" + oneLine(p.name()) + "'";
}

std::string typeName(int t) {
  if (onnx::TensorProto_DataType_IsValid(t))
    return onnx::TensorProto_DataType_Name(
               static_cast<onnx::TensorProto_DataType>(t)) +
           " (" + std::to_string(t) + ")";
  return std::to_string(t);
}

/// What a TensorProto's header says, once checked.
struct ProtoHeader {
  DType dtype = DType::Undefined;
  std::vector<int64_t> dims;
  int64_t count = 0;
  uint64_t nbytes = 0;
};

/// A raw_data length that says the tensor has none.
constexpr uint64_t kNoRawData = ~uint64_t(0);

/// p's raw_data length, or kNoRawData.
uint64_t rawDataSize(const onnx::TensorProto &p) {
  return p.has_raw_data() ? p.raw_data().size() : kNoRawData;
}

/// Checks the data type, data location (unless `externalToo`), dims and
/// size of `p`, and the length of its raw_data (`rawSize`, kNoRawData when
/// it has none).
bool readHeader(const onnx::TensorProto &p, uint64_t rawSize, ProtoHeader &h,
                std::string &error, bool externalToo = false) {
  std::optional<DType> dt = fromOnnxDataType(p.data_type());
  if (!dt) {
    error = describe(p) + ": unsupported data type " + typeName(p.data_type());
    return false;
  }
  if (!externalToo &&
      p.data_location() == onnx::TensorProto_DataLocation_EXTERNAL) {
    error = describe(p) + ": external data is not supported here";
    return false;
  }
  if (p.has_segment()) {
    error = describe(p) + ": segmented tensors are not supported";
    return false;
  }
  std::vector<int64_t> dims(p.dims().begin(), p.dims().end());
  for (int64_t d : dims) {
    if (d < 0) {
      error = describe(p) + ": negative dimension " + std::to_string(d);
      return false;
    }
  }
  int64_t n = elementCount(dims);
  size_t es = dtypeSize(*dt);
  if (n < 0 || uint64_t(n) > kMaxTensorProtoBytes / es) {
    error = describe(p) + ": shape " + dimsToString(dims) +
            " is too large (limit " +
            std::to_string(kMaxTensorProtoBytes >> 30) + " GiB)";
    return false;
  }
  uint64_t nbytes = uint64_t(n) * es;
  if (rawSize != kNoRawData && rawSize != nbytes) {
    error = describe(p) + ": raw_data has " + std::to_string(rawSize) +
            " bytes, expected " + std::to_string(nbytes) + " for " +
            dtypeName(*dt) + "[" + dimsToString(dims) + "]";
    return false;
  }
  h.nbytes = nbytes;
  h.dtype = *dt;
  h.dims = std::move(dims);
  h.count = n;
  return true;
}

/// ONNX keeps a bool in a byte; any nonzero byte is true, stored as 1.
void normaliseBools(uint8_t *bytes, size_t size) {
  for (size_t i = 0; i < size; ++i)
    bytes[i] = bytes[i] != 0;
}

} // namespace

bool tensorProtoBytes(const onnx::TensorProto &p, uint64_t &bytes,
                      std::string &error) {
  ProtoHeader h;
  if (!readHeader(p, kNoRawData, h, error, /*externalToo=*/true))
    return false;
  bytes = h.nbytes;
  return true;
}

bool tensorFromProto(const onnx::TensorProto &p, Tensor &out,
                     std::string &error) {
  try {
    ProtoHeader h;
    if (!readHeader(p, rawDataSize(p), h, error))
      return false;
    const int64_t n = h.count;
    const uint64_t nbytes = h.nbytes;
    Tensor t;
    t.dtype = h.dtype;
    t.dims = h.dims;

    if (p.has_raw_data()) {
      const std::string &raw = p.raw_data();
      t.bytes.assign(raw.begin(), raw.end());
      if (t.dtype == DType::Bool)
        normaliseBools(t.bytes.data(), t.bytes.size());
      out = std::move(t);
      return true;
    }

    // Check the typed field's length before allocating anything.
    int64_t have;
    const char *field;
    switch (t.dtype) {
    case DType::F32:
      have = p.float_data_size(), field = "float_data";
      break;
    case DType::F64:
      have = p.double_data_size(), field = "double_data";
      break;
    case DType::I64:
      have = p.int64_data_size(), field = "int64_data";
      break;
    default: // int32, int8, uint8, bool and fp16/bf16 bit patterns
      have = p.int32_data_size(), field = "int32_data";
      break;
    }
    if (have != n) {
      error = describe(p) + ": " + std::to_string(have) + " values in " +
              field + ", expected " + std::to_string(n) + " for shape " +
              dimsToString(h.dims);
      return false;
    }
    t.bytes.assign(size_t(nbytes), 0);
    switch (t.dtype) {
    case DType::F32:
      if (n)
        std::memcpy(t.bytes.data(), p.float_data().data(), size_t(nbytes));
      break;
    case DType::F64:
      if (n)
        std::memcpy(t.bytes.data(), p.double_data().data(), size_t(nbytes));
      break;
    case DType::I64:
      if (n)
        std::memcpy(t.bytes.data(), p.int64_data().data(), size_t(nbytes));
      break;
    case DType::I32:
      if (n)
        std::memcpy(t.bytes.data(), p.int32_data().data(), size_t(nbytes));
      break;
    case DType::F16:
    case DType::BF16: {
      uint16_t *dst = t.data<uint16_t>();
      for (int64_t i = 0; i < n; ++i)
        dst[i] = uint16_t(uint32_t(p.int32_data(int(i))) & 0xffffu);
      break;
    }
    case DType::I8:
    case DType::U8:
    case DType::Bool: {
      uint8_t *dst = t.data<uint8_t>();
      for (int64_t i = 0; i < n; ++i) {
        int32_t v = p.int32_data(int(i));
        dst[i] = t.dtype == DType::Bool ? uint8_t(v != 0) : uint8_t(v);
      }
      break;
    }
    case DType::Undefined:
      error = describe(p) + ": undefined data type";
      return false;
    }
    out = std::move(t);
    return true;
  } catch (const std::exception &e) {
    error = describe(p) + ": " + e.what();
    return false;
  }
}

namespace {

/// The tensor p's header describes, holding the bytes makeBytes(dtype)
/// gives for its raw_data of `rawSize` bytes; false with `error` on a bad
/// header or what the making throws.
template <class MakeBytes>
bool tensorOfRawData(const onnx::TensorProto &p, uint64_t rawSize, Tensor &out,
                     std::string &error, MakeBytes makeBytes) {
  try {
    ProtoHeader h;
    if (!readHeader(p, rawSize, h, error))
      return false;
    Tensor t;
    t.dtype = h.dtype;
    t.dims = std::move(h.dims);
    t.bytes = makeBytes(h.dtype);
    out = std::move(t);
    return true;
  } catch (const std::exception &e) {
    error = describe(p) + ": " + e.what();
    return false;
  }
}

} // namespace

bool tensorFromProto(onnx::TensorProto &&p, Tensor &out, std::string &error) {
  if (!p.has_raw_data() || p.raw_data().size() < kHeldRawDataBytes)
    return tensorFromProto(p, out, error);
  return tensorOfRawData(p, rawDataSize(p), out, error, [&](DType t) {
    // The message's string itself becomes the tensor's storage (the heap
    // buffer protobuf parsed into; on an arena, release moves that buffer
    // into a heap string, so the tensor does not keep the arena alive).
    std::shared_ptr<std::string> raw(p.release_raw_data());
    auto *bytes = reinterpret_cast<uint8_t *>(raw->data());
    size_t size = raw->size();
    if (t == DType::Bool)
      normaliseBools(bytes, size);
    return ByteBuffer::held(bytes, size, std::move(raw));
  });
}

bool tensorFromProtoInPlace(const onnx::TensorProto &p, const uint8_t *raw,
                            size_t size, std::shared_ptr<const void> keeper,
                            Tensor &out, std::string &error) {
  return tensorOfRawData(p, size, out, error, [&](DType t) {
    if (t != DType::Bool)
      return ByteBuffer::inPlace(raw, size, std::move(keeper));
    ByteBuffer normalised; // normalised, so in memory of its own
    normalised.assign(raw, raw + size);
    normaliseBools(normalised.data(), size);
    return normalised;
  });
}

void tensorToProto(const Tensor &t, const std::string &name,
                   onnx::TensorProto &p) {
  p.Clear();
  p.set_name(name);
  p.set_data_type(toOnnxDataType(t.dtype));
  for (int64_t d : t.dims)
    p.add_dims(d);
  p.set_raw_data(t.bytes.unalignedData(), t.bytes.size());
}

bool readTensorProtoFile(const std::string &path, Tensor &out,
                         std::string *name, std::string &error) {
  try {
    // Reject a file over protobuf's 2 GiB limit before reading it; only a
    // regular file's size is known up front (an unopenable path or a
    // directory is reported by readWholeFile below).
    const char *tooLarge =
        ": file is too large for a protobuf message (over 2 GiB)";
    struct stat st;
    if (::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
        st.st_size > off_t(INT_MAX)) {
      error = path + tooLarge;
      return false;
    }
    std::string buf;
    if (!readWholeFile(path, buf, error))
      return false;
    if (buf.size() > size_t(INT_MAX)) {
      error = path + tooLarge;
      return false;
    }
    onnx::TensorProto p;
    if (!p.ParseFromArray(buf.data(), int(buf.size()))) {
      error = path + ": not a valid serialized TensorProto";
      return false;
    }
    buf.clear();
    buf.shrink_to_fit();
    std::string err;
    if (!tensorFromProto(p, out, err)) {
      error = path + ": " + err;
      return false;
    }
    if (name)
      *name = p.name();
    return true;
  } catch (const std::exception &e) {
    error = path + ": " + e.what();
    return false;
  }
}

bool writeTensorProtoFile(const std::string &path, const Tensor &t,
                          const std::string &name, std::string &error) {
  try {
    onnx::TensorProto p;
    tensorToProto(t, name, p);
    std::string buf;
    if (!p.SerializeToString(&buf)) {
      error = path + ": cannot serialize TensorProto (over 2 GiB?)";
      return false;
    }
    return writeFileAtomically(
        path, reinterpret_cast<const uint8_t *>(buf.data()), buf.size(), error);
  } catch (const std::exception &e) {
    error = path + ": " + e.what();
    return false;
  }
}

} // namespace mpc
