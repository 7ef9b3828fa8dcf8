// writeModelFile: a compiled model written from the IR straight into its
// file, in exactly the bytes SerializeToString gives for exportModel's
// ModelProto.
//
// exportModel builds a message for every node, value type and tensor of the
// model and then serializes them, copying each tensor's bytes into the proto
// first. For a large step that cost more than most passes. The writer instead
// builds the few small messages (the header, opsets, metadata, functions) as
// exportModel does, and writes each graph as it goes: every NodeProto,
// ValueInfoProto, initializer header and update binding is written by hand
// from the IR in protobuf's wire format (namespace wire), each mpc node is
// completed for its function as it is written (MpcNodeCompleter, reading the
// graph's types and names from the IR; a node with a tensor attribute, or
// whose completion makes nodes or names, still goes through a NodeProto),
// and each initializer's raw_data goes from the IR's tensor into the file
// without a copy (FileSink, which leaves holes for zero blocks). Protobuf
// writes a message's known fields in field-number order, nested messages as
// tag, length and bytes; the writer writes and joins the pieces in that order,
// so the result is the same bytes.
//
// A model that would pass 2 GiB (or any, when asked) keeps its initializers'
// bytes in a data file beside it instead (ONNX external data,
// external_data_writer.h): each such initializer is written as the
// TensorProto writeModelAtomically leaves it as, with external_data entries
// and data_location EXTERNAL in place of raw_data, and the bytes go from the
// IR's tensor into the data file, written first as one pair with the model.
#include "passes/onnx/onnx_io.h"

#include "ir/mpc_ops.h"
#include "passes/onnx/external_data_writer.h"
#include "passes/onnx/mpc_functions.h"
#include "passes/onnx/onnx_export_parts.h"
#include "support/diagnostics.h"
#include "support/file_io.h"
#include "support/file_sink.h"

#include "onnx/onnx_pb.h"

#include <google/protobuf/io/coded_stream.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <memory>
#include <optional>
#include <unordered_map>
#include <unordered_set>

namespace mpc {
namespace {

using google::protobuf::io::CodedOutputStream;

/// Most sizes written are under 128 (names, small messages): one byte, told
/// without the bit scan VarintSize64 does.
size_t varintSize(uint64_t v) {
  return v < 128 ? 1 : CodedOutputStream::VarintSize64(v);
}

/// Bytes of a protobuf message serialized (a fragment of its parent when it
/// holds only some of the parent's fields).
std::string serialized(const google::protobuf::MessageLite &m) {
  std::string bytes;
  if (!m.SerializeToString(&bytes))
    throw Error("cannot serialize the output model (over 2 GiB?)");
  return bytes;
}

// Wire-format tags (field number << 3 | 2, length-delimited) of the fields
// written piece by piece; the rest is serialized by protobuf in fragments.
constexpr uint8_t kModelGraphTag = 7 << 3 | 2;            // ModelProto.graph
constexpr uint8_t kModelTrainingInfoTag = 0xA2;           // field 20: 2 bytes
constexpr uint8_t kModelTrainingInfoTag2 = 0x01;          //   (varint 162)
constexpr uint8_t kTrainingAlgorithmTag = 2 << 3 | 2;     // .algorithm
constexpr uint8_t kTrainingUpdateBindingTag = 4 << 3 | 2; // .update_binding
constexpr uint8_t kGraphNodeTag = 1 << 3 | 2;             // GraphProto.node
constexpr uint8_t kGraphNameTag = 2 << 3 | 2;             // .name
constexpr uint8_t kGraphInitializerTag = 5 << 3 | 2;      // .initializer
constexpr uint8_t kGraphInputTag = 11 << 3 | 2;           // .input
constexpr uint8_t kGraphOutputTag = 12 << 3 | 2;          // .output
constexpr uint8_t kGraphValueInfoTag = 13 << 3 | 2;       // .value_info
constexpr uint8_t kTensorRawDataTag = 9 << 3 | 2; // TensorProto.raw_data

// --- Nodes and value types, written by hand
// -----------------------------------
//
// Nodes and value_infos are most of a graph's messages (a 64-block step has
// about 10,000 of each). Filling a NodeProto copies every name into it, and
// protobuf then walks the message twice (ByteSizeLong, serialize); that cost
// more than the rest of the export. Their fields are plain (strings, varints,
// fixed32 floats, nested messages), so they are written here straight from
// the IR, in the bytes protobuf gives for exportNode's and exportValueInfo's
// messages: fields in field-number order, every field proto2 holds as set
// written even when empty or zero, a nested message as tag, length, bytes
// (its size is computed first). Repeated scalars of these messages are not
// packed in ONNX's proto2 schema: one tag per element. Every field number
// here is below 16, so each tag is one byte (AttributeProto.type, field 20,
// has two).
namespace wire {

using Attr = onnx::AttributeProto;

// NodeProto
constexpr uint8_t kNodeInput = 1 << 3 | 2;
constexpr uint8_t kNodeOutput = 2 << 3 | 2;
constexpr uint8_t kNodeName = 3 << 3 | 2;
constexpr uint8_t kNodeOpType = 4 << 3 | 2;
constexpr uint8_t kNodeAttribute = 5 << 3 | 2;
constexpr uint8_t kNodeDomain = 7 << 3 | 2;
// AttributeProto
constexpr uint8_t kAttrName = 1 << 3 | 2;
constexpr uint8_t kAttrF = 2 << 3 | 5; // fixed32
constexpr uint8_t kAttrI = 3 << 3 | 0;
constexpr uint8_t kAttrS = 4 << 3 | 2;
constexpr uint8_t kAttrFloats = 7 << 3 | 5;
constexpr uint8_t kAttrInts = 8 << 3 | 0;
constexpr uint8_t kAttrStrings = 9 << 3 | 2;
constexpr uint8_t kAttrType[2] = {0xA0, 0x01}; // 20 << 3 | 0 as a varint
// ValueInfoProto, TypeProto, TypeProto.Tensor, TensorShapeProto(.Dimension)
constexpr uint8_t kInfoName = 1 << 3 | 2;
constexpr uint8_t kInfoType = 2 << 3 | 2;
constexpr uint8_t kTypeTensor = 1 << 3 | 2;
constexpr uint8_t kTensorElemType = 1 << 3 | 0;
constexpr uint8_t kTensorShape = 2 << 3 | 2;
constexpr uint8_t kShapeDim = 1 << 3 | 2;
constexpr uint8_t kDimValue = 1 << 3 | 0;
constexpr uint8_t kDimParam = 2 << 3 | 2;
// TensorProto (an initializer's header)
constexpr uint8_t kTensorDims = 1 << 3 | 0;
constexpr uint8_t kTensorDataType = 2 << 3 | 0;
constexpr uint8_t kTensorName = 8 << 3 | 2;
constexpr uint8_t kTensorExternalData = 13 << 3 | 2;
constexpr uint8_t kTensorDataLocation = 14 << 3 | 0;
constexpr int64_t kExternal = 1; // TensorProto.DataLocation.EXTERNAL
// StringStringEntryProto
constexpr uint8_t kEntryKey = 1 << 3 | 2;
constexpr uint8_t kEntryValue = 2 << 3 | 2;

/// Bytes of a length-delimited field of `size` bytes (one-byte tag).
size_t field(size_t size) { return 1 + varintSize(size) + size; }
/// Bytes of a varint field (one-byte tag); int32 and int64 values are
/// written as their 64-bit two's complement, as protobuf does.
size_t varintField(int64_t v) { return 1 + varintSize(uint64_t(v)); }

uint8_t *varint(uint8_t *p, uint64_t v) {
  return CodedOutputStream::WriteVarint64ToArray(v, p);
}
uint8_t *varintField(uint8_t *p, uint8_t tag, int64_t v) {
  *p++ = tag;
  return varint(p, uint64_t(v));
}
/// Tag and length of a nested message or string of `size` bytes.
uint8_t *header(uint8_t *p, uint8_t tag, size_t size) {
  *p++ = tag;
  return varint(p, size);
}
uint8_t *bytes(uint8_t *p, const void *data, size_t size) {
  std::memcpy(p, data, size);
  return p + size;
}
uint8_t *stringField(uint8_t *p, uint8_t tag, const std::string &s) {
  return bytes(header(p, tag, s.size()), s.data(), s.size());
}
uint8_t *floatField(uint8_t *p, uint8_t tag, float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  *p++ = tag;
  return CodedOutputStream::WriteLittleEndian32ToArray(bits, p);
}

/// Bytes written by hand, in blocks that never move: each message gets
/// room in the last block (a new one when it does not fit), and the blocks
/// go to the file as they are (FileSink::putStable). Growing one string
/// instead (resize per message, or copying it as it doubles) cost more than
/// writing the messages.
class Bytes {
public:
  /// `size` more bytes, to be written through the pointer; they stay where
  /// they are.
  uint8_t *grow(size_t size) {
    if (blocks_.empty() || blocks_.back().capacity - blocks_.back().size < size)
      blocks_.push_back(
          {std::unique_ptr<uint8_t[]>(new uint8_t[std::max(size, kBlock)]), 0,
           std::max(size, kBlock)});
    Block &b = blocks_.back();
    uint8_t *p = b.bytes.get() + b.size;
    b.size += size;
    size_ += size;
    return p;
  }
  size_t size() const { return size_; }
  /// Writes the bytes; they must stay as they are until `out` is flushed.
  void write(FileSink &out) const {
    for (const Block &b : blocks_)
      out.putStable(b.bytes.get(), b.size);
  }

private:
  static constexpr size_t kBlock = size_t(256) << 10;
  struct Block {
    std::unique_ptr<uint8_t[]> bytes;
    size_t size, capacity;
  };
  std::vector<Block> blocks_;
  size_t size_ = 0;
};

/// Whether node() can write the node: every attribute but a tensor (a
/// Constant's value: rare, and a TensorProto of its own) can be.
bool writable(const Node &n) {
  for (const auto &kv : n.attributes())
    if (kv.second.kind == Attribute::Kind::Tensor)
      return false;
  return true;
}

/// Size of the AttributeProto exportAttribute makes (not a tensor).
size_t attributeSize(const std::string &name, const Attribute &a) {
  size_t size = field(name.size()) + sizeof kAttrType + 1; // type < 128
  switch (a.kind) {
  case Attribute::Kind::Float:
    return size + 5;
  case Attribute::Kind::Int:
    return size + varintField(a.i);
  case Attribute::Kind::String:
    return size + field(a.s.size());
  case Attribute::Kind::Floats:
    return size + 5 * a.floats.size();
  case Attribute::Kind::Ints:
    for (int64_t i : a.ints)
      size += varintField(i);
    return size;
  case Attribute::Kind::Strings:
    for (const std::string &s : a.strings)
      size += field(s.size());
    return size;
  case Attribute::Kind::Tensor:
    break;
  }
  throw Error("internal: a tensor attribute is not written by hand");
}

uint8_t *attribute(uint8_t *p, const std::string &name, const Attribute &a) {
  p = stringField(p, kAttrName, name);
  Attr::AttributeType type = Attr::UNDEFINED;
  switch (a.kind) {
  case Attribute::Kind::Float:
    p = floatField(p, kAttrF, a.f);
    type = Attr::FLOAT;
    break;
  case Attribute::Kind::Int:
    p = varintField(p, kAttrI, a.i);
    type = Attr::INT;
    break;
  case Attribute::Kind::String:
    p = stringField(p, kAttrS, a.s);
    type = Attr::STRING;
    break;
  case Attribute::Kind::Floats:
    for (float f : a.floats)
      p = floatField(p, kAttrFloats, f);
    type = Attr::FLOATS;
    break;
  case Attribute::Kind::Ints:
    for (int64_t i : a.ints)
      p = varintField(p, kAttrInts, i);
    type = Attr::INTS;
    break;
  case Attribute::Kind::Strings:
    for (const std::string &s : a.strings)
      p = stringField(p, kAttrStrings, s);
    type = Attr::STRINGS;
    break;
  case Attribute::Kind::Tensor:
    break;
  }
  p = bytes(p, kAttrType, sizeof kAttrType);
  *p++ = uint8_t(type);
  return p;
}

const std::string kOmitted; ///< the name of an omitted input or output

const std::string &nameOf(const Value *v) { return v ? v->name() : kOmitted; }

/// The inputs exportNode writes for `n`: trailing omitted ones dropped,
/// inner ones "".
void nodeInputs(const Node &n, std::vector<const std::string *> &inputs) {
  size_t last = n.numInputs();
  while (last > 0 && !n.input(last - 1))
    --last;
  inputs.clear();
  for (size_t i = 0; i < last; ++i)
    inputs.push_back(&nameOf(n.input(i)));
}

/// Size of the NodeProto.attribute fields of `n`'s attributes (ones
/// writable() accepts).
size_t attributesSize(const Node &n) {
  size_t size = 0;
  for (const auto &kv : n.attributes())
    size += field(attributeSize(kv.first, kv.second));
  return size;
}

/// Writes those fields at p (where attributesSize(n) bytes are free).
/// Each attribute is written after room for a one-byte length, which it
/// fits in but for long lists; one that does not is moved up after.
/// (Sizing each attribute for its header cost as much as writing it.)
uint8_t *attributes(uint8_t *p, const Node &n) {
  for (const auto &kv : n.attributes()) {
    uint8_t *body = p + 2;
    uint8_t *end = attribute(body, kv.first, kv.second);
    size_t size = size_t(end - body);
    if (size < 128) {
      p[0] = kNodeAttribute;
      p[1] = uint8_t(size);
      p = end;
      continue;
    }
    size_t more = varintSize(size) - 1;
    std::memmove(body + more, body, size);
    p = header(p, kNodeAttribute, size) + size;
  }
  return p;
}

/// Appends field `tag` holding the NodeProto exportNode makes of `n` (a
/// node writable() accepts), but with inputs `inputs` and, when
/// `completed` is given, the attribute fields it holds instead of the
/// node's (an mpc node as MpcNodeCompleter completes it).
void node(Bytes &out, uint8_t tag, const Node &n,
          const std::vector<const std::string *> &inputs,
          const std::string *completed = nullptr) {
  size_t size = field(n.name().size()) + field(n.opType().size()) +
                (completed ? completed->size() : attributesSize(n));
  for (const std::string *in : inputs)
    size += field(in->size());
  for (const Value *o : n.outputs())
    size += field(nameOf(o).size());
  if (!n.domain().empty())
    size += field(n.domain().size());

  uint8_t *p = header(out.grow(field(size)), tag, size);
  for (const std::string *in : inputs)
    p = stringField(p, kNodeInput, *in);
  for (const Value *o : n.outputs())
    p = stringField(p, kNodeOutput, nameOf(o));
  p = stringField(p, kNodeName, n.name());
  p = stringField(p, kNodeOpType, n.opType());
  p = completed ? bytes(p, completed->data(), completed->size())
                : attributes(p, n);
  if (!n.domain().empty())
    stringField(p, kNodeDomain, n.domain());
}

/// The op and attribute fields of `n` (one writable() accepts): what the
/// attributes MpcNodeCompleter completes a node with depend on (when they
/// depend on nothing else).
void signature(std::string &key, const Node &n) {
  key = n.opType();
  key += '\0';
  size_t at = key.size();
  key.resize(at + attributesSize(n));
  attributes(reinterpret_cast<uint8_t *>(&key[at]), n);
}

/// Whether `a` and `b` are serialized to the same bytes (the same kind and
/// value, floats compared by their bits: -0 is not 0, a NaN is itself).
bool sameBytes(const Attribute &a, const Attribute &b) {
  if (a.kind != b.kind)
    return false;
  auto sameFloats = [](const float *x, const float *y, size_t n) {
    return n == 0 || std::memcmp(x, y, n * sizeof(float)) == 0;
  };
  switch (a.kind) {
  case Attribute::Kind::Float:
    return sameFloats(&a.f, &b.f, 1);
  case Attribute::Kind::Int:
    return a.i == b.i;
  case Attribute::Kind::String:
    return a.s == b.s;
  case Attribute::Kind::Floats:
    return a.floats.size() == b.floats.size() &&
           sameFloats(a.floats.data(), b.floats.data(), a.floats.size());
  case Attribute::Kind::Ints:
    return a.ints == b.ints;
  case Attribute::Kind::Strings:
    return a.strings == b.strings;
  case Attribute::Kind::Tensor:
    break;
  }
  return false; // not written by hand
}

/// Whether `a` and `b` (nodes writable() accepts) have the same signature()
/// without making it: the same op and attributes, in the same order.
bool sameSignature(const Node &a, const Node &b) {
  const auto &x = a.attributes(), &y = b.attributes();
  if (a.opType() != b.opType() || x.size() != y.size())
    return false;
  for (size_t i = 0; i < x.size(); ++i)
    if (x[i].first != y[i].first || !sameBytes(x[i].second, y[i].second))
      return false;
  return true;
}

/// The attribute fields of `np`, serialized by protobuf.
std::string attributeFields(const onnx::NodeProto &np) {
  std::string fields;
  for (const onnx::AttributeProto &a : np.attribute()) {
    size_t size = a.ByteSizeLong();
    size_t at = fields.size();
    fields.resize(at + field(size));
    uint8_t *p =
        header(reinterpret_cast<uint8_t *>(&fields[at]), kNodeAttribute, size);
    a.SerializeWithCachedSizesToArray(p);
  }
  return fields;
}

/// Size of a dimension's TensorShapeProto.Dimension.
size_t dimSize(const Dim &d) {
  if (d.isKnown())
    return varintField(d.value);
  return d.symbol.empty() ? 0 : field(d.symbol.str().size());
}

/// Rank up to which knownDims() writes a shape.
constexpr size_t kStackDims = 8;
/// Bytes of a dim field knownDims() writes: tag, length, tag, varint.
constexpr size_t kKnownDimBytes = 3 + 10;

/// Writes the TensorShapeProto.dim fields of `dims` at p (room for
/// kKnownDimBytes each) and returns their end; null when a dim is
/// symbolic. A dim with a value is its field's tag, its length (under
/// 128), the value's tag and varint, so its length is known once the
/// varint is written: one pass, where sizing the dims first and writing
/// them after walked them twice.
uint8_t *knownDims(uint8_t *p, const Dims &dims) {
  for (const Dim &d : dims) {
    p[0] = kShapeDim;
    if (d.isKnown()) {
      p[2] = kDimValue;
      uint8_t *end = varint(p + 3, uint64_t(d.value));
      p[1] = uint8_t(end - (p + 2));
      p = end;
    } else if (d.symbol.empty()) {
      p[1] = 0;
      p += 2;
    } else {
      return nullptr;
    }
  }
  return p;
}

/// Appends field `tag` holding the ValueInfoProto exportValueInfo makes of
/// `v`.
void valueInfo(Bytes &out, uint8_t tag, const Value &v) {
  const std::string &name = v.name();
  if (v.dtype == DType::Undefined) {
    size_t size = field(name.size());
    stringField(header(out.grow(field(size)), tag, size), kInfoName, name);
    return;
  }
  // The shape's dims, written first when they fit on the stack.
  uint8_t stackDims[kStackDims * kKnownDimBytes];
  const uint8_t *dimsEnd = nullptr;
  size_t shapeSize = 0;
  if (v.hasShape) {
    if (v.dims.size() <= kStackDims)
      dimsEnd = knownDims(stackDims, v.dims);
    if (dimsEnd) {
      shapeSize = size_t(dimsEnd - stackDims);
    } else {
      for (const Dim &d : v.dims)
        shapeSize += field(dimSize(d));
    }
  }
  int elemType = toOnnxDataType(v.dtype);
  size_t tensorSize =
      varintField(elemType) + (v.hasShape ? field(shapeSize) : 0);
  size_t size = field(name.size()) + field(field(tensorSize));
  uint8_t *p = header(out.grow(field(size)), tag, size);
  p = stringField(p, kInfoName, name);
  p = header(p, kInfoType, field(tensorSize)); // type { tensor_type { ... } }
  p = header(p, kTypeTensor, tensorSize);
  p = varintField(p, kTensorElemType, elemType);
  if (!v.hasShape)
    return;
  p = header(p, kTensorShape, shapeSize);
  if (dimsEnd) {
    bytes(p, stackDims, shapeSize);
    return;
  }
  for (const Dim &d : v.dims) {
    p = header(p, kShapeDim, dimSize(d));
    if (d.isKnown())
      p = varintField(p, kDimValue, d.value);
    else if (!d.symbol.empty())
      p = stringField(p, kDimParam, d.symbol.str());
  }
}

/// Size of the fields tensorToProto writes for `t` named `name`, but
/// raw_data: dims (1), data_type (2), name (8).
size_t tensorHeaderSize(const std::string &name, const Tensor &t) {
  size_t size = varintField(toOnnxDataType(t.dtype)) + field(name.size());
  for (int64_t d : t.dims)
    size += varintField(d);
  return size;
}

/// Writes those fields at p; returns their end.
uint8_t *tensorHeader(uint8_t *p, const std::string &name, const Tensor &t) {
  for (int64_t d : t.dims)
    p = varintField(p, kTensorDims, d);
  p = varintField(p, kTensorDataType, toOnnxDataType(t.dtype));
  return stringField(p, kTensorName, name);
}

/// Size of the fields setExternalData gives a tensor after its header:
/// external_data (13), one entry per key, and data_location (14).
size_t externalFieldsSize(const ExternalDataEntries &e) {
  size_t size = varintField(kExternal);
  for (int i = 0; i < 3; ++i)
    size += field(field(std::strlen(ExternalDataEntries::kKeys[i])) +
                  field(e.values[i].size()));
  return size;
}

/// Writes those fields at p; returns their end.
uint8_t *externalFields(uint8_t *p, const ExternalDataEntries &e) {
  for (int i = 0; i < 3; ++i) {
    const char *key = ExternalDataEntries::kKeys[i];
    size_t keySize = std::strlen(key);
    p = header(p, kTensorExternalData,
               field(keySize) + field(e.values[i].size()));
    p = bytes(header(p, kEntryKey, keySize), key, keySize);
    p = stringField(p, kEntryValue, e.values[i]);
  }
  return varintField(p, kTensorDataLocation, kExternal);
}

/// Appends field `tag` holding the StringStringEntryProto of `key` (1) and
/// `value` (2).
void stringPair(Bytes &out, uint8_t tag, const std::string &key,
                const std::string &value) {
  size_t size = field(key.size()) + field(value.size());
  uint8_t *p = header(out.grow(field(size)), tag, size);
  p = stringField(p, kEntryKey, key);
  stringField(p, kEntryValue, value);
}

/// Appends field `tag` holding message `m`, serialized by protobuf.
void message(Bytes &out, uint8_t tag, const google::protobuf::MessageLite &m) {
  size_t size = m.ByteSizeLong();
  if (size > size_t(INT_MAX))
    throw Error("cannot serialize the output model (over 2 GiB?)");
  uint8_t *p = header(out.grow(field(size)), tag, size);
  m.SerializeWithCachedSizesToArray(p);
}

} // namespace wire

/// A graph of the IR as exportGraph writes it, as WrittenGraph: the
/// value_info, inputs and outputs describe the graph's inputs, outputs and
/// node outputs with their IR types; the initializers are the graph's (only
/// those not state unless `withState`) and `extraInits`.
class IrGraph : public WrittenGraph {
public:
  IrGraph(const Graph &g, bool withState,
          std::vector<const Value *> extraInits = {})
      : graph_(g), withState_(withState), extraInits_(std::move(extraInits)) {}

  const Graph &graph() const { return graph_; }
  bool withState() const { return withState_; }
  const std::vector<const Value *> &extraInits() const { return extraInits_; }

  /// Whether every input and output the graph lists is the graph's value
  /// of that name, as the name lookups below assume (node outputs and
  /// initializers are the graph's own values).
  bool namesAreConsistent() const {
    // The graph keeps isLive() as findValue(name()) == this for its own
    // values: no lookup per listed value (a step lists thousands).
    for (const auto *list : {&graph_.inputs(), &graph_.outputs()})
      for (const Value *v : *list)
        if (!v || v->owner() != &graph_ || !v->isLive())
          return false;
    return true;
  }

  int elemType(const std::string &name) const override {
    const Value *v = graph_.findValue(name);
    if (v && described(*v) && v->dtype != DType::Undefined)
      return toOnnxDataType(v->dtype);
    if (v && v->isInitializer() && (withState_ || !v->isState))
      return toOnnxDataType(v->initializer()->dtype);
    if (const Value *extra = findExtra(name))
      return toOnnxDataType(extra->initializer()->dtype);
    return 0;
  }

  std::vector<int64_t> dims(const std::string &name) const override {
    const Value *v = graph_.findValue(name);
    if (!v || !described(*v) || v->dtype == DType::Undefined || !v->hasShape)
      return {};
    std::vector<int64_t> dims;
    dims.reserve(v->dims.size());
    for (const Dim &d : v->dims)
      dims.push_back(d.isKnown() ? d.value : -1);
    return dims;
  }

  bool uses(const std::string &name) const override {
    if (const Value *v = graph_.findValue(name))
      if (described(*v) || (v->isInitializer() && (withState_ || !v->isState)))
        return true;
    if (findExtra(name))
      return true;
    // Node names: a graph needs a few fresh names at most (a found_inf
    // `false`, unused outputs of SGD without momentum), so the first
    // questions scan the nodes; hashing every name costs more than that.
    if (nodeNameQuestions_ < kScansBeforeHashing) {
      ++nodeNameQuestions_;
      for (const auto &n : graph_.nodes())
        if (n->name() == name)
          return true;
      return false;
    }
    if (nodeNames_.empty())
      for (const auto &n : graph_.nodes())
        nodeNames_.insert(n->name());
    return nodeNames_.count(name) > 0;
  }

  void forEachMpcNode(const std::function<void(const MpcNode &)> &f) override {
    // The node's proto, made on the first question. The lambdas capture
    // one pointer each: std::function keeps that in place, where a lambda
    // capturing the node, the proto and the flag was allocated per node.
    struct LazyProto {
      const Node *node = nullptr;
      bool exported = false;
      onnx::NodeProto proto;
      const onnx::NodeProto &get() {
        if (!exported) {
          proto.Clear();
          exportNode(*node, proto);
          exported = true;
        }
        return proto;
      }
    } lazy;
    for (const auto &owned : graph_.nodes()) {
      const Node *n = owned.get();
      if (!isMpcDomain(n->domain()))
        continue;
      lazy.node = n;
      lazy.exported = false;
      f({n->opType(), n->numInputs(),
         [n](size_t i) { return n->input(i) != nullptr; },
         [&lazy]() -> const onnx::NodeProto & { return lazy.get(); }});
    }
  }

  bool usesDefaultOp(const std::string &op) const override {
    for (const auto &n : graph_.nodes())
      if ((n->domain().empty() || n->domain() == "ai.onnx") &&
          n->opType() == op)
        return true;
    return false;
  }

private:
  /// Whether the graph's inputs, outputs or value_info list the value.
  static bool described(const Value &v) {
    return v.isGraphInput() || v.isGraphOutput() || v.producer();
  }

  /// The extra initializer named `name`, or null. The map is made on the
  /// first question: most graphs get none (a step's thousands of moments
  /// were hashed for nothing).
  const Value *findExtra(const std::string &name) const {
    if (extraByName_.empty())
      for (const Value *v : extraInits_)
        extraByName_.emplace(v->name(), v);
    auto found = extraByName_.find(name);
    return found == extraByName_.end() ? nullptr : found->second;
  }

  const Graph &graph_;
  bool withState_;
  std::vector<const Value *> extraInits_;
  mutable std::unordered_map<std::string, const Value *> extraByName_;
  static constexpr int kScansBeforeHashing = 8;
  mutable int nodeNameQuestions_ = 0;
  mutable std::unordered_set<std::string> nodeNames_;
};

/// A graph as a list of pieces: serialized fields, and initializers whose
/// raw_data comes from the IR. Its size is known before any of it is written.
struct GraphPieces {
  wire::Bytes before; ///< node (1), name (2)
  /// Each initializer's field up to its raw_data's bytes (the tag and
  /// length of the field and of raw_data, the TensorProto's fields 1-8
  /// between them), one after the other.
  wire::Bytes initHeaders;
  struct Init {
    const uint8_t *header; ///< in initHeaders
    size_t headerSize;
    const Tensor *bytes; ///< null: the tensor's bytes are external data
    size_t size() const {
      return headerSize + (bytes ? bytes->bytes.size() : 0);
    }
  };
  std::vector<Init> inits;
  wire::Bytes inputsOutputs; ///< input (11), output (12)
  wire::Bytes valueInfos;    ///< value_info (13)

  size_t size() const {
    size_t n = before.size() + inputsOutputs.size() + valueInfos.size();
    for (const Init &i : inits)
      n += i.size();
    return n;
  }
  /// Writes the pieces; they must stay as they are until `out` is flushed.
  void write(FileSink &out) const {
    before.write(out);
    for (const Init &i : inits) {
      out.put(i.header, i.headerSize);
      if (i.bytes)
        out.putData(i.bytes->bytes.unalignedData(), i.bytes->bytes.size());
    }
    inputsOutputs.write(out);
    valueInfos.write(out);
  }
};

/// Bytes of the initializer field tensorToProto gives `init`, raw_data's
/// included.
size_t inlineInitializerSize(const Value &init) {
  const Tensor &t = *init.initializer();
  size_t inner =
      wire::tensorHeaderSize(init.name(), t) + wire::field(t.bytes.size());
  return 1 + varintSize(inner) + inner;
}

/// Whether an initializer of `t` goes to the data file when the model is
/// written with external data.
bool goesExternal(const Tensor &t) {
  return t.bytes.size() >= kExternalDataMinBytes;
}

/// Adds the initializer `init` as tensorToProto writes it: its field's
/// bytes up to raw_data's (9, the highest field such a tensor sets, after
/// dims 1, data_type 2, name 8) go to `headers`, raw_data's stay where
/// they are. With `layout` and a large enough tensor, as setExternalData
/// leaves it instead: the header, then its external_data entries and
/// data_location (13, 14), its bytes placed in `layout`.
void addInitializer(const Value &init, wire::Bytes &headers,
                    std::vector<GraphPieces::Init> &inits,
                    ExternalDataLayout *layout) {
  const Tensor &t = *init.initializer();
  size_t fields = wire::tensorHeaderSize(init.name(), t);
  size_t data = t.bytes.size();
  if (layout && goesExternal(t)) {
    ExternalDataEntries entries(
        layout->location(), layout->add(t.bytes.unalignedData(), data), data);
    size_t inner = fields + wire::externalFieldsSize(entries);
    size_t size = 1 + varintSize(inner) + inner;
    uint8_t *start = headers.grow(size);
    uint8_t *p = wire::header(start, kGraphInitializerTag, inner);
    p = wire::tensorHeader(p, init.name(), t);
    wire::externalFields(p, entries);
    inits.push_back({start, size, nullptr});
    return;
  }
  size_t inner = fields + wire::field(data);
  size_t size = 1 + varintSize(inner) + fields + 1 + varintSize(data);
  uint8_t *start = headers.grow(size);
  uint8_t *p = wire::header(start, kGraphInitializerTag, inner);
  p = wire::tensorHeader(p, init.name(), t);
  wire::header(p, kTensorRawDataTag, data);
  inits.push_back({start, size, &t});
}

/// The initializers graph `g` writes (see IrGraph), in order.
std::vector<const Value *> writtenInitializers(const IrGraph &g) {
  std::vector<const Value *> inits;
  for (const Value *init : g.graph().initializers())
    if (g.withState() || !init->isState)
      inits.push_back(init);
  for (const Value *init : g.extraInits())
    inits.push_back(init);
  return inits;
}

/// Writes graph `g` as exportGraph does (see IrGraph), completing its mpc
/// nodes; all but the initializers (addInitializer, once the writer knows
/// whether they go to external data).
GraphPieces graphPieces(IrGraph &g, MpcNodeCompleter &completer) {
  const Graph &graph = g.graph();
  GraphPieces pieces;
  wire::Bytes &nodes = pieces.before;
  // Nodes are written by hand from the IR. A node with a tensor attribute,
  // and an mpc node the completer changes in ways the writer does not
  // repeat (see completesInPlace), is made as a NodeProto instead (and
  // completed), in one message cleared and filled again (protobuf keeps
  // the cleared strings and sub-messages for the next one).
  onnx::NodeProto np;
  auto writeBefore = [&nodes](const onnx::NodeProto &n) {
    wire::message(nodes, kGraphNodeTag, n);
  };
  // The attribute fields complete() gave the first node of each signature
  // (wire::signature) that it completes in place: the same for the others.
  // Most mpc nodes of a step are a few ops with the same attributes (an
  // Adam per parameter).
  std::unordered_map<std::string, std::string> completedAttributes;
  // The node whose signature was looked up last, and its entry: the nodes
  // of one signature mostly follow each other, and comparing a node with
  // the last costs less than making its signature and hashing it.
  const Node *lastSigned = nullptr;
  const std::string *lastCompleted = nullptr;
  std::string key;
  std::vector<const std::string *> inputs;
  for (const auto &owned : graph.nodes()) {
    const Node &n = *owned;
    bool complete =
        isMpcDomain(n.domain()) && completer.completes(n.domain(), n.opType());
    bool writable = wire::writable(n);
    if (writable)
      wire::nodeInputs(n, inputs);
    bool inPlace = false;
    if (complete && writable) {
      bool named = true;
      for (const Value *o : n.outputs())
        named = named && o && !o->name().empty();
      inPlace = completer.completesInPlace(n.opType(), g, inputs,
                                           n.numOutputs(), named);
    }
    const std::string *completed = nullptr;
    if (inPlace) {
      if (lastSigned && wire::sameSignature(n, *lastSigned)) {
        completed = lastCompleted;
      } else {
        wire::signature(key, n);
        auto known = completedAttributes.find(key);
        if (known != completedAttributes.end())
          completed = &known->second;
      }
    }
    if (!complete && writable) {
      wire::node(nodes, kGraphNodeTag, n, inputs);
    } else if (completed) {
      wire::node(nodes, kGraphNodeTag, n, inputs, completed);
    } else {
      np.Clear();
      exportNode(n, np);
      if (complete)
        completer.complete(np, g, writeBefore);
      wire::message(nodes, kGraphNodeTag, np);
      if (inPlace)
        completed = &completedAttributes.emplace(key, wire::attributeFields(np))
                         .first->second;
    }
    if (completed) {
      lastSigned = &n;
      lastCompleted = completed;
    }
    for (const Value *o : n.outputs())
      if (o && o->dtype != DType::Undefined && !o->isGraphOutput())
        wire::valueInfo(pieces.valueInfos, kGraphValueInfoTag, *o);
  }
  wire::stringField(nodes.grow(wire::field(graph.name().size())), kGraphNameTag,
                    graph.name());
  for (const Value *in : graph.inputs())
    wire::valueInfo(pieces.inputsOutputs, kGraphInputTag, *in);
  for (const Value *out : graph.outputs())
    wire::valueInfo(pieces.inputsOutputs, kGraphOutputTag, *out);
  return pieces;
}

/// Writes the model: `shell` holds exportModel's proto without its graphs
/// and training_info (header, opsets, metadata, functions).
void writeModelPieces(const Model &model, onnx::ModelProto &shell,
                      const GraphPieces &main, const GraphPieces *algorithm,
                      FileSink &out) {
  // ModelProto: 1-6 (header), 7 graph, 8 opset_import, 14 metadata_props,
  // 20 training_info, 25 functions.
  onnx::ModelProto head;
  if (shell.has_ir_version())
    head.set_ir_version(shell.ir_version());
  if (shell.has_producer_name())
    head.set_producer_name(shell.producer_name());
  if (shell.has_producer_version())
    head.set_producer_version(shell.producer_version());
  out.put(serialized(head));
  out.put(&kModelGraphTag, 1);
  out.varint(main.size());
  main.write(out);
  onnx::ModelProto mid;
  mid.mutable_opset_import()->Swap(shell.mutable_opset_import());
  mid.mutable_metadata_props()->Swap(shell.mutable_metadata_props());
  std::string opsetsAndMetadata = serialized(mid);
  mid.mutable_opset_import()->Swap(shell.mutable_opset_import());
  mid.mutable_metadata_props()->Swap(shell.mutable_metadata_props());
  out.putStable(opsetsAndMetadata);
  wire::Bytes bindings;
  if (algorithm) {
    // TrainingInfoProto: 2 algorithm, 4 update_binding (a few per
    // parameter, written by hand).
    for (const auto &kv : model.training->updateBinding)
      wire::stringPair(bindings, kTrainingUpdateBindingTag, kv.first,
                       kv.second);
    size_t size =
        1 + varintSize(algorithm->size()) + algorithm->size() + bindings.size();
    const uint8_t tag[2] = {kModelTrainingInfoTag, kModelTrainingInfoTag2};
    out.put(tag, 2);
    out.varint(size);
    out.put(&kTrainingAlgorithmTag, 1);
    out.varint(algorithm->size());
    algorithm->write(out);
    bindings.write(out);
  }
  onnx::ModelProto tail;
  tail.mutable_functions()->Swap(shell.mutable_functions());
  std::string functions = serialized(tail);
  tail.mutable_functions()->Swap(shell.mutable_functions());
  out.putStable(functions);
  // Everything referenced above is still alive here.
  out.flush();
}

/// exportModel + writeModelAtomically: the IR's names are not as the writer
/// reads them (a graph lists a value that is not the one of its name).
void writeThroughProto(const Model &model, const std::string &path,
                       const ModelWriteOptions &options) {
  onnx::ModelProto proto;
  exportModel(model, proto);
  writeModelAtomically(path, proto, options);
}

} // namespace

void writeModelFile(const Model &model, const std::string &path, Fsync fsync) {
  ModelWriteOptions options;
  options.fsync = fsync;
  writeModelFile(model, path, options);
}

void writeModelFile(const Model &model, const std::string &path,
                    const ModelWriteOptions &options) {
  const Graph *algorithm =
      model.training ? model.training->algorithm.get() : nullptr;
  // State that only the training step reads (optimizer moments, loss
  // scale, ...) is persistent too: it lives in the main graph.
  std::vector<const Value *> stepState;
  if (algorithm)
    for (const Value *init : algorithm->initializers())
      if (init->isState && !model.graph->findValue(init->name()))
        stepState.push_back(init);
  IrGraph main(*model.graph, true, std::move(stepState));
  std::optional<IrGraph> step;
  if (algorithm)
    step.emplace(*algorithm, false);
  if (!main.namesAreConsistent() || (step && !step->namesAreConsistent())) {
    writeThroughProto(model, path, options);
    return;
  }
  onnx::ModelProto shell;
  exportHeader(model, shell);
  std::vector<WrittenGraph *> graphs = {&main};
  if (step)
    graphs.push_back(&*step);
  MpcNodeCompleter completer(mpcOpsUsed(model), model, shell, graphs,
                             /*stepModel=*/!step);
  GraphPieces mainPieces = graphPieces(main, completer);
  std::optional<GraphPieces> stepPieces;
  if (step)
    stepPieces = graphPieces(*step, completer);
  // The graphs' bytes with every initializer inline decide: what lies
  // around them (header, functions, bindings) is far under the margin.
  std::vector<const Value *> mainInits = writtenInitializers(main), stepInits;
  if (step)
    stepInits = writtenInitializers(*step);
  size_t inlineBytes =
      mainPieces.size() + (stepPieces ? stepPieces->size() : 0);
  for (const auto *inits : {&mainInits, &stepInits})
    for (const Value *init : *inits)
      inlineBytes += inlineInitializerSize(*init);
  bool external = options.externalData == ExternalData::Always ||
                  inlineBytes > kExternalDataAutoBytes;
  std::optional<ExternalDataLayout> layout;
  if (external)
    layout.emplace(path);
  ExternalDataLayout *to = layout ? &*layout : nullptr;
  for (const Value *init : mainInits)
    addInitializer(*init, mainPieces.initHeaders, mainPieces.inits, to);
  if (stepPieces)
    for (const Value *init : stepInits)
      addInitializer(*init, stepPieces->initHeaders, stepPieces->inits, to);
  size_t modelBytes = mainPieces.size() + (stepPieces ? stepPieces->size() : 0);
  if (modelBytes > size_t(INT_MAX))
    throw Error(path + ": the model is over 2 GiB even with its tensors in "
                       "external data");
  auto fillModel = [&](int fd, std::string &err) {
    FileSink out(fd, path);
    writeModelPieces(model, shell, mainPieces,
                     stepPieces ? &*stepPieces : nullptr, out);
    if (!out.flush()) {
      err = out.error();
      return false;
    }
    return true;
  };
  if (layout && !layout->empty()) {
    writeModelWithData(path, *layout, fillModel, options);
    return;
  }
  checkOutputSparesInputs(path, false, options);
  writeFileStreamed(path, fillModel, options.fsync);
}

} // namespace mpc
