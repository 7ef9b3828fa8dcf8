// writeModelFile: a compiled model written from the IR straight into its
// file, in exactly the bytes SerializeToString gives for exportModel's
// ModelProto.
//
// exportModel builds a message for every node, value type and tensor of the
// model and then serializes them, copying each tensor's bytes into the proto
// first. For a large step that cost more than most passes. The writer instead
// builds the few small messages (the header, opsets, metadata, functions) as
// exportModel does, and writes each graph as it goes: every NodeProto,
// ValueInfoProto and update binding is made in one reused message and
// serialized with protobuf's CodedOutputStream at once, each mpc node is
// completed for its function as it is written (MpcNodeCompleter, reading the
// graph's types and names from the IR), and each initializer's raw_data goes
// from the IR's tensor into the file without a copy (writev). Protobuf
// writes a message's known fields in field-number order, nested messages as
// tag, length and bytes; the writer cuts and joins the pieces in that order,
// so the result is the same bytes.
#include "passes/onnx/onnx_io.h"

#include "passes/ir/mpc_ops.h"
#include "passes/onnx/mpc_functions.h"
#include "passes/onnx/onnx_export_parts.h"
#include "passes/support/diagnostics.h"
#include "passes/support/file_io.h"

#include "onnx/onnx_pb.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <memory>
#include <optional>
#include <unordered_map>
#include <unordered_set>

namespace mpc {
namespace {

using google::protobuf::io::CodedOutputStream;
using google::protobuf::io::StringOutputStream;

/// True when all `size` bytes at p are zero.
bool allZero(const uint8_t *p, size_t size) {
  // Byte i equals byte i + 1 for all i, and the first is zero.
  return size == 0 || (p[0] == 0 && std::memcmp(p, p + 1, size - 1) == 0);
}

/// Buffered writes to a file descriptor. Small pieces are copied into a
/// buffer; large ones (the tensors' bytes, the serialized nodes) are only
/// referenced and go to the file with the buffered ones in one writev.
/// In a regular file, long runs of zero blocks in tensor data (optimizer
/// moments that start at zero: most of an Adam step's bytes) are skipped
/// with lseek instead of written, leaving holes that read back as zeros:
/// the page cache gets no pages for them and the disk no blocks.
class FileSink {
public:
  FileSink(int fd, const std::string &path) : fd_(fd), path_(path) {
    buffer_.reserve(kBlock);
    struct stat st {};
    if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
        ::lseek(fd, 0, SEEK_CUR) == 0) {
      holeBlock_ = st.st_blksize > 0 ? size_t(st.st_blksize) : 4096;
      holes_ = true;
    }
  }
  /// Copies the bytes.
  void put(const void *data, size_t size) {
    if (buffer_.size() + size > kBlock)
      flush();
    if (pieces_.empty() || pieces_.back().kind != Piece::Buffered)
      pieces_.push_back({nullptr, buffer_.size(), 0, Piece::Buffered});
    const char *p = static_cast<const char *>(data);
    buffer_.insert(buffer_.end(), p, p + size);
    pieces_.back().size += size;
    queued_ += size;
  }
  void put(const std::string &bytes) { put(bytes.data(), bytes.size()); }
  /// Writes the bytes in place: they must stay as they are until the next
  /// flush().
  void putStable(const void *data, size_t size) {
    if (size < kSmall) {
      put(data, size); // a copy costs less than an entry of the iovec
      return;
    }
    if (pieces_.size() >= kMaxPieces)
      flush();
    pieces_.push_back(
        {static_cast<const char *>(data), 0, size, Piece::Referenced});
    queued_ += size;
  }
  void putStable(const std::string &bytes) {
    putStable(bytes.data(), bytes.size());
  }
  /// putStable for tensor data: zero bytes that cover whole blocks of the
  /// file become holes where the file allows.
  void putData(const uint8_t *data, size_t size) {
    if (!holes_ || size < holeBlock_) {
      putStable(data, size);
      return;
    }
    size_t pending = 0; // start of the bytes not yet queued
    // The first block boundary of the file within the data.
    size_t b = (holeBlock_ - queued_ % holeBlock_) % holeBlock_;
    while (b + holeBlock_ <= size) {
      if (!allZero(data + b, holeBlock_)) {
        b += holeBlock_;
        continue;
      }
      size_t e = b + holeBlock_;
      while (e + holeBlock_ <= size && allZero(data + e, holeBlock_))
        e += holeBlock_;
      if (b > pending)
        putStable(data + pending, b - pending);
      if (pieces_.size() >= kMaxPieces)
        flush();
      pieces_.push_back({nullptr, 0, e - b, Piece::Hole});
      queued_ += e - b;
      pending = e;
      b = e;
    }
    if (size > pending)
      putStable(data + pending, size - pending);
  }
  void varint(uint64_t v) {
    uint8_t b[10];
    uint8_t *end = CodedOutputStream::WriteVarint64ToArray(v, b);
    put(b, size_t(end - b));
  }
  /// Writes what is pending; false (with error()) once any write failed.
  bool flush() {
    if (ok_ && !pieces_.empty())
      ok_ = writePieces();
    pieces_.clear();
    buffer_.clear();
    return ok_;
  }
  const std::string &error() const { return error_; }

private:
  static constexpr size_t kBlock = 1 << 20;
  static constexpr size_t kSmall = 256;
  /// Entries of one writev (IOV_MAX on Linux).
  static constexpr size_t kMaxPieces = 1024;

  struct Piece {
    enum Kind { Buffered, Referenced, Hole };
    const char *data; ///< Referenced: the bytes
    size_t offset;    ///< Buffered: where in buffer_
    size_t size;
    Kind kind;
  };

  bool writePieces() {
    std::vector<iovec> iov;
    iov.reserve(pieces_.size());
    bool endsInHole = false;
    for (const Piece &p : pieces_) {
      if (p.kind == Piece::Hole) {
        if (!writeIov(iov))
          return false;
        iov.clear();
        if (::lseek(fd_, off_t(p.size), SEEK_CUR) < 0) {
          error_ = path_ + ": write error: " + std::strerror(errno);
          return false;
        }
        endsInHole = true;
        continue;
      }
      if (p.size) {
        iov.push_back({const_cast<char *>(p.kind == Piece::Buffered
                                              ? buffer_.data() + p.offset
                                              : p.data),
                       p.size});
        endsInHole = false;
      }
    }
    if (!writeIov(iov))
      return false;
    // A hole at the end of what is written so far: the file must still be
    // as long as what was queued (what follows, if anything, is appended).
    if (endsInHole && ::ftruncate(fd_, off_t(queued_)) != 0) {
      error_ = path_ + ": write error: " + std::strerror(errno);
      return false;
    }
    return true;
  }

  bool writeIov(std::vector<iovec> &iov) {
    size_t at = 0;
    while (at < iov.size()) {
      ssize_t n = ::writev(fd_, iov.data() + at,
                           int(std::min(iov.size() - at, kMaxPieces)));
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0) {
        error_ = path_ + ": write error: " + std::strerror(errno);
        return false;
      }
      // A short write: skip what went, resume in the middle of a piece.
      size_t done = size_t(n);
      while (at < iov.size() && done >= iov[at].iov_len)
        done -= iov[at++].iov_len;
      if (done) {
        iov[at].iov_base = static_cast<char *>(iov[at].iov_base) + done;
        iov[at].iov_len -= done;
      }
    }
    return true;
  }

  int fd_;
  const std::string &path_;
  std::vector<char> buffer_;
  std::vector<Piece> pieces_;
  /// Bytes queued since the start of the file: the file offset once all
  /// pieces are written.
  size_t queued_ = 0;
  bool holes_ = false;
  size_t holeBlock_ = 4096;
  bool ok_ = true;
  std::string error_;
};

size_t varintSize(uint64_t v) { return CodedOutputStream::VarintSize64(v); }

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
constexpr uint8_t kModelGraphTag = 7 << 3 | 2;             // ModelProto.graph
constexpr uint8_t kModelTrainingInfoTag = 0xA2;            // field 20: 2 bytes
constexpr uint8_t kModelTrainingInfoTag2 = 0x01;           //   (varint 162)
constexpr uint8_t kTrainingAlgorithmTag = 2 << 3 | 2;      // .algorithm
constexpr uint32_t kTrainingUpdateBindingTag = 4 << 3 | 2; // .update_binding
constexpr uint32_t kGraphNodeTag = 1 << 3 | 2;             // GraphProto.node
constexpr uint8_t kGraphInitializerTag = 5 << 3 | 2;       // .initializer
constexpr uint32_t kGraphInputTag = 11 << 3 | 2;           // .input
constexpr uint32_t kGraphOutputTag = 12 << 3 | 2;          // .output
constexpr uint32_t kGraphValueInfoTag = 13 << 3 | 2;       // .value_info
constexpr uint8_t kTensorRawDataTag = 9 << 3 | 2; // TensorProto.raw_data

/// Repeated message fields serialized one message at a time into a string.
class MessageStream {
public:
  MessageStream()
      : strings_(&bytes_),
        out_(std::make_unique<CodedOutputStream>(&strings_)) {}
  /// Appends field `tag` holding `m`.
  void add(uint32_t tag, const google::protobuf::MessageLite &m) {
    size_t size = checkedSize(m);
    out_->WriteTag(tag);
    out_->WriteVarint32(uint32_t(size));
    m.SerializeWithCachedSizes(out_.get());
  }
  /// Appends the fields `m` sets (a fragment of the message being written).
  void addFields(const google::protobuf::MessageLite &m) {
    checkedSize(m);
    m.SerializeWithCachedSizes(out_.get());
  }
  /// Bytes written so far.
  size_t size() const { return size_t(out_->ByteCount()); }
  /// The bytes; the stream is done.
  std::string take() {
    out_.reset(); // gives back what it did not fill
    return std::move(bytes_);
  }

private:
  static size_t checkedSize(const google::protobuf::MessageLite &m) {
    size_t size = m.ByteSizeLong();
    if (size > size_t(INT_MAX))
      throw Error("cannot serialize the output model (over 2 GiB?)");
    return size;
  }

  std::string bytes_;
  StringOutputStream strings_;
  std::unique_ptr<CodedOutputStream> out_;
};

/// A graph of the IR as exportGraph writes it, as WrittenGraph: the
/// value_info, inputs and outputs describe the graph's inputs, outputs and
/// node outputs with their IR types; the initializers are the graph's (only
/// those not state unless `withState`) and `extraInits`.
class IrGraph : public WrittenGraph {
public:
  IrGraph(const Graph &g, bool withState,
          std::vector<const Value *> extraInits = {})
      : graph_(g), withState_(withState), extraInits_(std::move(extraInits)) {
    for (const Value *v : extraInits_)
      extraByName_.emplace(v->name(), v);
  }

  const Graph &graph() const { return graph_; }
  bool withState() const { return withState_; }
  const std::vector<const Value *> &extraInits() const { return extraInits_; }

  /// Whether every input and output the graph lists is the graph's value
  /// of that name, as the name lookups below assume (node outputs and
  /// initializers are the graph's own values).
  bool namesAreConsistent() const {
    for (const auto *list : {&graph_.inputs(), &graph_.outputs()})
      for (const Value *v : *list)
        if (!v || graph_.findValue(v->name()) != v)
          return false;
    return true;
  }

  int elemType(const std::string &name) const override {
    const Value *v = graph_.findValue(name);
    if (v && described(*v) && v->dtype != DType::Undefined)
      return toOnnxDataType(v->dtype);
    if (v && v->isInitializer() && (withState_ || !v->isState))
      return toOnnxDataType(v->initializer()->dtype);
    auto extra = extraByName_.find(name);
    if (extra != extraByName_.end())
      return toOnnxDataType(extra->second->initializer()->dtype);
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
    if (extraByName_.count(name))
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
    onnx::NodeProto np;
    for (const auto &owned : graph_.nodes()) {
      const Node *n = owned.get();
      if (n->domain() != kMpcDomain)
        continue;
      bool exported = false;
      f({n->opType(), n->numInputs(),
         [n](size_t i) { return n->input(i) != nullptr; },
         [&]() -> const onnx::NodeProto & {
           if (!exported) {
             np.Clear();
             exportNode(*n, np);
             exported = true;
           }
           return np;
         }});
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

  const Graph &graph_;
  bool withState_;
  std::vector<const Value *> extraInits_;
  std::unordered_map<std::string, const Value *> extraByName_;
  static constexpr int kScansBeforeHashing = 8;
  mutable int nodeNameQuestions_ = 0;
  mutable std::unordered_set<std::string> nodeNames_;
};

/// A graph as a list of pieces: serialized fields, and initializers whose
/// raw_data comes from the IR. Its size is known before any of it is written.
struct GraphPieces {
  std::string before; ///< node (1), name (2)
  /// The initializers' TensorProtos without raw_data (fields 1-8), one
  /// after the other.
  std::string initHeaders;
  struct Init {
    size_t headerAt, headerSize; ///< in initHeaders
    const Tensor *bytes;
    size_t inner() const {
      return headerSize + 1 + varintSize(bytes->bytes.size()) +
             bytes->bytes.size();
    }
    size_t size() const { return 1 + varintSize(inner()) + inner(); }
  };
  std::vector<Init> inits;
  std::string inputsOutputs; ///< input (11), output (12)
  std::string valueInfos;    ///< value_info (13)

  size_t size() const {
    size_t n = before.size() + inputsOutputs.size() + valueInfos.size();
    for (const Init &i : inits)
      n += i.size();
    return n;
  }
  /// Writes the pieces; they must stay as they are until `out` is flushed.
  void write(FileSink &out) const {
    out.putStable(before);
    for (const Init &i : inits) {
      out.put(&kGraphInitializerTag, 1);
      out.varint(i.inner());
      out.put(initHeaders.data() + i.headerAt, i.headerSize);
      out.put(&kTensorRawDataTag, 1);
      out.varint(i.bytes->bytes.size());
      out.putData(i.bytes->bytes.data(), i.bytes->bytes.size());
    }
    out.putStable(inputsOutputs);
    out.putStable(valueInfos);
  }
};

/// Adds the initializer `init` as tensorToProto writes it, without
/// raw_data (9), the highest field such a tensor sets (dims 1, data_type 2,
/// name 8): the entry is the header, then raw_data.
void addInitializer(const Value &init, onnx::TensorProto &p,
                    MessageStream &headers,
                    std::vector<GraphPieces::Init> &inits) {
  const Tensor &t = *init.initializer();
  p.Clear();
  p.set_name(init.name());
  p.set_data_type(toOnnxDataType(t.dtype));
  for (int64_t d : t.dims)
    p.add_dims(d);
  size_t at = headers.size();
  headers.addFields(p);
  inits.push_back({at, headers.size() - at, &t});
}

/// Writes graph `g` as exportGraph does (see IrGraph), completing its mpc
/// nodes.
GraphPieces graphPieces(IrGraph &g, MpcNodeCompleter &completer) {
  const Graph &graph = g.graph();
  GraphPieces pieces;
  MessageStream infos;
  {
    MessageStream nodes;
    // One message of each kind, cleared and filled again: protobuf keeps
    // the cleared strings and sub-messages for the next one.
    onnx::NodeProto np;
    onnx::ValueInfoProto vi;
    auto writeBefore = [&nodes](const onnx::NodeProto &n) {
      nodes.add(kGraphNodeTag, n);
    };
    for (const auto &n : graph.nodes()) {
      np.Clear();
      exportNode(*n, np);
      if (completer.completes(np))
        completer.complete(np, g, writeBefore);
      nodes.add(kGraphNodeTag, np);
      for (const Value *o : n->outputs())
        if (o && o->dtype != DType::Undefined && !o->isGraphOutput()) {
          exportValueInfo(*o, vi);
          infos.add(kGraphValueInfoTag, vi);
        }
    }
    onnx::GraphProto named;
    named.set_name(graph.name());
    nodes.addFields(named);
    pieces.before = nodes.take();
  }
  {
    MessageStream headers;
    onnx::TensorProto tp;
    for (const Value *init : graph.initializers())
      if (g.withState() || !init->isState)
        addInitializer(*init, tp, headers, pieces.inits);
    for (const Value *init : g.extraInits())
      addInitializer(*init, tp, headers, pieces.inits);
    pieces.initHeaders = headers.take();
  }
  {
    MessageStream io;
    onnx::ValueInfoProto vi;
    for (const Value *in : graph.inputs()) {
      exportValueInfo(*in, vi);
      io.add(kGraphInputTag, vi);
    }
    for (const Value *out : graph.outputs()) {
      exportValueInfo(*out, vi);
      io.add(kGraphOutputTag, vi);
    }
    pieces.inputsOutputs = io.take();
  }
  pieces.valueInfos = infos.take();
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
  std::string bindings;
  if (algorithm) {
    // TrainingInfoProto: 2 algorithm, 4 update_binding. The bindings (a
    // few per parameter) go through one reused entry.
    MessageStream entries;
    onnx::StringStringEntryProto entry;
    for (const auto &kv : model.training->updateBinding) {
      entry.set_key(kv.first);
      entry.set_value(kv.second);
      entries.add(kTrainingUpdateBindingTag, entry);
    }
    bindings = entries.take();
    size_t size =
        1 + varintSize(algorithm->size()) + algorithm->size() + bindings.size();
    const uint8_t tag[2] = {kModelTrainingInfoTag, kModelTrainingInfoTag2};
    out.put(tag, 2);
    out.varint(size);
    out.put(&kTrainingAlgorithmTag, 1);
    out.varint(algorithm->size());
    algorithm->write(out);
    out.putStable(bindings);
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
                       Fsync fsync) {
  onnx::ModelProto proto;
  exportModel(model, proto);
  writeModelAtomically(path, proto, fsync);
}

} // namespace

void writeModelFile(const Model &model, const std::string &path, Fsync fsync) {
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
    writeThroughProto(model, path, fsync);
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
  writeFileStreamed(
      path,
      [&](int fd, std::string &err) {
        FileSink out(fd, path);
        writeModelPieces(model, shell, mainPieces,
                         stepPieces ? &*stepPieces : nullptr, out);
        if (!out.flush()) {
          err = out.error();
          return false;
        }
        return true;
      },
      fsync);
}

} // namespace mpc
