// parseModelLeavingWeights: protobuf parses the model in pieces, around the
// main graph's large raw_data fields (see weights_in_file.h).
#include "passes/onnx/weights_in_file.h"

#include "onnx/onnx_pb.h"

#include <google/protobuf/io/coded_stream.h>

namespace mpc {
namespace {

namespace io = google::protobuf::io;

// Field numbers (onnx.proto) and wire types the walk looks at.
constexpr uint32_t kModelGraph = 7;       // ModelProto.graph
constexpr uint32_t kGraphInitializer = 5; // GraphProto.initializer
constexpr uint32_t kTensorRawData = 9;    // TensorProto.raw_data
constexpr uint32_t kLengthDelimited = 2;

/// One field of a message's wire bytes.
struct Field {
  uint32_t number = 0;
  uint32_t wireType = 0;
  const uint8_t *begin = nullptr; ///< its tag
  const uint8_t *value = nullptr; ///< a length-delimited field's payload
  const uint8_t *end = nullptr;   ///< one past the field
};

bool readVarint(const uint8_t *&p, const uint8_t *end, uint64_t &v) {
  v = 0;
  for (int shift = 0; shift < 64 && p < end; shift += 7) {
    uint8_t b = *p++;
    v |= uint64_t(b & 0x7f) << shift;
    if (!(b & 0x80))
      return true;
  }
  return false;
}

/// Reads the field at `p` (before `end`). False for what the walk does not
/// follow: malformed bytes, a group, a wire type protobuf does not know.
bool readField(const uint8_t *p, const uint8_t *end, Field &f) {
  f.begin = p;
  uint64_t tag = 0, n = 0;
  if (!readVarint(p, end, tag) || tag > UINT32_MAX || (tag >> 3) == 0)
    return false;
  f.number = uint32_t(tag >> 3);
  f.wireType = uint32_t(tag & 7);
  switch (f.wireType) {
  case 0: // varint
    if (!readVarint(p, end, n))
      return false;
    break;
  case 1: // fixed64
    if (end - p < 8)
      return false;
    p += 8;
    break;
  case kLengthDelimited:
    if (!readVarint(p, end, n) || n > uint64_t(end - p))
      return false;
    f.value = p;
    p += n;
    break;
  case 5: // fixed32
    if (end - p < 4)
      return false;
    p += 4;
    break;
  default: // groups (3, 4) and the unused wire types 6 and 7
    return false;
  }
  f.end = p;
  return true;
}

/// Parses the fields in [begin, end) into `m`, merging, as the whole parse
/// would have at `depth` messages below the model (its recursion budget).
bool merge(google::protobuf::MessageLite &m, const uint8_t *begin,
           const uint8_t *end, int depth) {
  if (begin == end)
    return true;
  io::CodedInputStream in(begin, int(end - begin));
  in.SetRecursionLimit(io::CodedInputStream::GetDefaultRecursionLimit() -
                       depth);
  return m.MergeFromCodedStream(&in) && in.ConsumedEntireMessage();
}

class Walk {
public:
  Walk(size_t minBytes, std::vector<WeightInFile> &weights)
      : minBytes_(minBytes), weights_(weights) {}

  bool model(const uint8_t *p, const uint8_t *end, onnx::ModelProto &m) {
    const uint8_t *run = p; // fields not yet handed to protobuf
    Field f;
    for (; p < end; p = f.end) {
      if (!readField(p, end, f))
        return false;
      if (f.number == kModelGraph && f.wireType == kLengthDelimited) {
        // A second graph field merges into the first, as in the whole parse.
        if (!merge(m, run, f.begin, 0) ||
            !graph(f.value, f.end, *m.mutable_graph()))
          return false;
        run = f.end;
      }
    }
    return merge(m, run, end, 0);
  }

private:
  bool graph(const uint8_t *p, const uint8_t *end, onnx::GraphProto &g) {
    const uint8_t *run = p;
    Field f, raw;
    for (; p < end; p = f.end) {
      if (!readField(p, end, f))
        return false;
      if (f.number != kGraphInitializer || f.wireType != kLengthDelimited)
        continue;
      int found = rawData(f.value, f.end, raw);
      if (found < 0)
        return false;
      if (found == 0)
        continue; // small, or none: protobuf parses it with the rest
      if (!merge(g, run, f.begin, 1))
        return false;
      onnx::TensorProto &t = *g.add_initializer();
      if (!merge(t, f.value, raw.begin, 2) || !merge(t, raw.end, f.end, 2))
        return false;
      weights_.push_back(
          {g.initializer_size() - 1, raw.value, size_t(raw.end - raw.value)});
      run = f.end;
    }
    return merge(g, run, end, 1);
  }

  /// Finds a tensor's raw_data field: 1 when it has one of at least
  /// minBytes_ (in `raw`), 0 when not, -1 when the walk does not follow
  /// the tensor (malformed, or more than one raw_data field).
  int rawData(const uint8_t *p, const uint8_t *end, Field &raw) const {
    int count = 0;
    Field f;
    for (; p < end; p = f.end) {
      if (!readField(p, end, f))
        return -1;
      if (f.number == kTensorRawData && f.wireType == kLengthDelimited) {
        raw = f;
        ++count;
      }
    }
    if (count > 1)
      return -1;
    return count == 1 && size_t(raw.end - raw.value) >= minBytes_;
  }

  const size_t minBytes_;
  std::vector<WeightInFile> &weights_;
};

} // namespace

bool parseModelLeavingWeights(std::string_view bytes, size_t minBytes,
                              onnx::ModelProto &proto,
                              std::vector<WeightInFile> &weights) {
  proto.Clear();
  weights.clear();
  if (bytes.size() > size_t(INT32_MAX))
    return false;
  const auto *begin = reinterpret_cast<const uint8_t *>(bytes.data());
  if (Walk(minBytes, weights).model(begin, begin + bytes.size(), proto))
    return true;
  weights.clear();
  return false;
}

} // namespace mpc
