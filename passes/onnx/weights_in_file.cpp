// parseModelLeavingWeights: protobuf parses the model in pieces, around the
// main graph's large raw_data fields (see weights_in_file.h).
#include "passes/onnx/weights_in_file.h"

#include "onnx/onnx_pb.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/wire_format_lite.h>

#include <climits>

namespace mpc {
namespace {

namespace io = google::protobuf::io;

using google::protobuf::internal::WireFormatLite;

// The fields the walk looks at (onnx.proto's numbers, as generated).
constexpr uint32_t kModelGraph = onnx::ModelProto::kGraphFieldNumber;
constexpr uint32_t kGraphInitializer =
    onnx::GraphProto::kInitializerFieldNumber;
constexpr uint32_t kTensorRawData = onnx::TensorProto::kRawDataFieldNumber;
constexpr uint32_t kLengthDelimited = WireFormatLite::WIRETYPE_LENGTH_DELIMITED;

/// One field of a message's wire bytes.
struct Field {
  uint32_t number = 0;
  uint32_t wireType = 0;
  const uint8_t *begin = nullptr; ///< its tag
  const uint8_t *value = nullptr; ///< a length-delimited field's payload
  const uint8_t *end = nullptr;   ///< one past the field
};

/// Reads the field at `p` (before `end`) with protobuf's own reader. False
/// for what the walk does not follow: malformed bytes, a group, a wire type
/// protobuf does not know, a range past its 2 GiB limit.
bool readField(const uint8_t *p, const uint8_t *end, Field &f) {
  if (end - p > INT_MAX)
    return false;
  io::CodedInputStream in(p, int(end - p));
  uint32_t tag = in.ReadTag();
  f.begin = p;
  f.number = WireFormatLite::GetTagFieldNumber(tag);
  f.wireType = uint32_t(WireFormatLite::GetTagWireType(tag));
  if (f.number == 0)
    return false; // the end, or a malformed tag
  switch (f.wireType) {
  case WireFormatLite::WIRETYPE_VARINT:
  case WireFormatLite::WIRETYPE_FIXED64:
  case WireFormatLite::WIRETYPE_FIXED32:
    if (!WireFormatLite::SkipField(&in, tag))
      return false;
    break;
  case kLengthDelimited: {
    uint32_t n = 0;
    if (!in.ReadVarint32(&n))
      return false;
    f.value = p + in.CurrentPosition();
    if (n > uint32_t(INT_MAX) || !in.Skip(int(n)))
      return false;
    break;
  }
  default: // groups (3, 4) and the unused wire types 6 and 7
    return false;
  }
  f.end = p + in.CurrentPosition();
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
