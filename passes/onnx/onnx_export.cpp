// IR -> ONNX: ModelProto with training_info, the --emit=step functional
// model, the deterministic text form, and atomic file writes.
#include "passes/onnx/onnx_io.h"

#include "passes/onnx/expand_variadic.h"
#include "passes/onnx/mpc_functions.h"
#include "passes/support/diagnostics.h"
#include "passes/support/file_io.h"
#include "runtime/data/tensor_pb.h"

#include "onnx/defs/printer.h"
#include "onnx/onnx_pb.h"

#include <google/protobuf/io/zero_copy_stream_impl.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <unordered_set>

namespace mpc {
namespace {

void setType(onnx::ValueInfoProto &vi, const Value &v) {
  vi.set_name(v.name());
  if (v.dtype == DType::Undefined)
    return;
  auto *tt = vi.mutable_type()->mutable_tensor_type();
  tt->set_elem_type(toOnnxDataType(v.dtype));
  if (!v.hasShape)
    return;
  auto *shape = tt->mutable_shape();
  for (const Dim &d : v.dims) {
    auto *pd = shape->add_dim();
    if (d.isKnown())
      pd->set_dim_value(d.value);
    else if (!d.symbol.empty())
      pd->set_dim_param(d.symbol.str());
  }
}

} // namespace

void exportAttribute(const std::string &name, const Attribute &a,
                     onnx::AttributeProto &p) {
  p.set_name(name);
  switch (a.kind) {
  case Attribute::Kind::Float:
    p.set_type(onnx::AttributeProto::FLOAT);
    p.set_f(a.f);
    break;
  case Attribute::Kind::Int:
    p.set_type(onnx::AttributeProto::INT);
    p.set_i(a.i);
    break;
  case Attribute::Kind::String:
    p.set_type(onnx::AttributeProto::STRING);
    p.set_s(a.s);
    break;
  case Attribute::Kind::Floats:
    p.set_type(onnx::AttributeProto::FLOATS);
    for (float f : a.floats)
      p.add_floats(f);
    break;
  case Attribute::Kind::Ints:
    p.set_type(onnx::AttributeProto::INTS);
    for (int64_t i : a.ints)
      p.add_ints(i);
    break;
  case Attribute::Kind::Strings:
    p.set_type(onnx::AttributeProto::STRINGS);
    for (const auto &s : a.strings)
      p.add_strings(s);
    break;
  case Attribute::Kind::Tensor:
    p.set_type(onnx::AttributeProto::TENSOR);
    tensorToProto(*a.t, "", *p.mutable_t());
    break;
  }
}

namespace {

void exportNode(const Node &n, onnx::NodeProto &np) {
  np.set_op_type(n.opType());
  np.set_name(n.name());
  if (!n.domain().empty())
    np.set_domain(n.domain());
  // Trailing omitted inputs are dropped; inner ones are written as "".
  size_t last = n.numInputs();
  while (last > 0 && !n.input(last - 1))
    --last;
  np.mutable_input()->Reserve(int(last));
  np.mutable_output()->Reserve(int(n.numOutputs()));
  // No `v ? v->name() : ""`: that makes a temporary copy of every name.
  static const std::string omitted;
  for (size_t i = 0; i < last; ++i)
    np.add_input(n.input(i) ? n.input(i)->name() : omitted);
  for (const Value *o : n.outputs())
    np.add_output(o ? o->name() : omitted);
  for (const auto &kv : n.attributes())
    exportAttribute(kv.first, kv.second, *np.add_attribute());
}

/// Initializers exported without their bytes, and the tensors holding them:
/// writeModelFile writes each one's raw_data straight from the IR instead of
/// copying every tensor into the proto first.
using DeferredBytes =
    std::unordered_map<const onnx::TensorProto *, const Tensor *>;

/// An initializer as tensorToProto writes it; with `deferred`, without
/// raw_data (recorded there, to be written with the model).
void exportInitializer(const Value &init, onnx::TensorProto &p,
                       DeferredBytes *deferred) {
  const Tensor &t = *init.initializer();
  if (!deferred) {
    tensorToProto(t, init.name(), p);
    return;
  }
  p.set_name(init.name());
  p.set_data_type(toOnnxDataType(t.dtype));
  for (int64_t d : t.dims)
    p.add_dims(d);
  (*deferred)[&p] = &t;
}

/// Writes a graph. State initializers are written only when `withState`.
void exportGraph(const Graph &g, onnx::GraphProto &gp, bool withState,
                 bool withValueInfo = true, DeferredBytes *deferred = nullptr) {
  gp.set_name(g.name());
  for (const Value *in : g.inputs())
    setType(*gp.add_input(), *in);
  for (const Value *init : g.initializers())
    if (withState || !init->isState)
      exportInitializer(*init, *gp.add_initializer(), deferred);
  for (const auto &n : g.nodes()) {
    exportNode(*n, *gp.add_node());
    if (!withValueInfo)
      continue;
    for (const Value *o : n->outputs())
      if (o && o->dtype != DType::Undefined && !o->isGraphOutput())
        setType(*gp.add_value_info(), *o);
  }
  for (const Value *out : g.outputs())
    setType(*gp.add_output(), *out);
}

/// Writes ir_version, producer, opsets and metadata. The step model has no
/// training_info and its state are inputs, so the metadata naming training
/// state (mpc.params, mpc.loss_scale, ...) would be wrong there; it keeps only
/// the descriptive keys.
void exportHeader(const Model &model, onnx::ModelProto &proto,
                  bool forStepModel = false) {
  proto.set_ir_version(model.irVersion);
  proto.set_producer_name(model.producerName);
  proto.set_producer_version(model.producerVersion);
  for (const auto &kv : model.opsets) {
    auto *op = proto.add_opset_import();
    op->set_domain(kv.first);
    op->set_version(kv.second);
  }
  for (const auto &kv : model.metadata) {
    if (forStepModel && kv.first != "mpc.precision" &&
        kv.first != "mpc.optimizer" && kv.first.rfind("mpc.", 0) == 0)
      continue;
    auto *p = proto.add_metadata_props();
    p->set_key(kv.first);
    p->set_value(kv.second);
  }
}

/// Ops of domain `mpc` used anywhere in the model.
std::vector<std::string> mpcOpsUsed(const Model &model) {
  std::vector<std::string> ops;
  std::unordered_set<std::string> seen;
  auto scan = [&](const Graph &g) {
    for (const auto &n : g.nodes())
      if (n->domain() == "mpc" && seen.insert(n->opType()).second)
        ops.push_back(n->opType());
  };
  scan(*model.graph);
  if (model.training)
    scan(*model.training->algorithm);
  return ops;
}

std::string formatFloat(double v) {
  if (std::isnan(v))
    return "nan";
  if (std::isinf(v))
    return v > 0 ? "inf" : "-inf";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  std::string s = buf;
  if (s.find_first_of(".eE") == std::string::npos)
    s += ".0";
  return s;
}

std::string typeText(const Value &v) {
  std::string s = onnxTypeName(v.dtype);
  // ONNX 1.12's parser reads `float` as rank 0 and `float[]` as "no shape",
  // so scalars are written without brackets to parse back the same.
  if (!v.hasShape)
    return s + "[]";
  if (v.dims.empty())
    return s;
  s += "[";
  for (size_t i = 0; i < v.dims.size(); ++i) {
    if (i)
      s += ",";
    const Dim &d = v.dims[i];
    s += d.isKnown() ? std::to_string(d.value)
                     : (d.symbol.empty() ? "?" : d.symbol.str());
  }
  s += "]";
  return s;
}

/// Prints a graph. For the training algorithm, `mainGraph` is the model's
/// main graph: state it already shows is not repeated, state only the step
/// has (optimizer moments, loss scale) is printed with its initial value.
void printGraphText(std::ostream &os, const Graph &g, const Graph *mainGraph) {
  os << g.name() << " (";
  for (size_t i = 0; i < g.inputs().size(); ++i)
    os << (i ? ", " : "") << typeText(*g.inputs()[i]) << " "
       << g.inputs()[i]->name();
  os << ") => (";
  for (size_t i = 0; i < g.outputs().size(); ++i)
    os << (i ? ", " : "") << typeText(*g.outputs()[i]) << " "
       << g.outputs()[i]->name();
  os << ")";
  bool first = true;
  for (const Value *init : g.initializers()) {
    if (init->isState && mainGraph && mainGraph->findValue(init->name()))
      continue;
    os << (first ? "\n  <" : ",\n   ");
    first = false;
    const Tensor &t = *init->initializer();
    os << typeText(*init) << " " << init->name() << " = {";
    int64_t n = t.numel();
    for (int64_t i = 0; i < n; ++i) {
      os << (i ? ", " : "");
      if (isFloating(t.dtype))
        os << formatFloat(t.getAsDouble(i));
      else
        os << (t.dtype == DType::I64 ? t.data<int64_t>()[i]
                                     : int64_t(t.getAsDouble(i)));
    }
    os << "}";
  }
  if (!first)
    os << ">";
  os << "\n{\n";
  for (const auto &n : g.nodes()) {
    onnx::NodeProto np;
    exportNode(*n, np);
    std::ostringstream line;
    line << np;
    std::string text = line.str();
    while (!text.empty() && (text.back() == '\n' || text.back() == ' '))
      text.pop_back();
    // ONNX 1.12's printer drops the domain; show it as the parser spells it.
    if (!n->domain().empty()) {
      size_t eq = text.find("= ");
      size_t at = text.find(n->opType(), eq == std::string::npos ? 0 : eq);
      if (at != std::string::npos)
        text.insert(at, n->domain() + ".");
    }
    os << "  " << text << "\n";
  }
  os << "}\n";
}

} // namespace

namespace {

void exportModel(const Model &model, onnx::ModelProto &proto,
                 DeferredBytes *deferred) {
  exportHeader(model, proto);
  exportGraph(*model.graph, *proto.mutable_graph(), true, true, deferred);
  if (model.training) {
    // State that only the training step reads (optimizer moments, loss
    // scale, ...) is persistent too: it lives in the main graph.
    auto *mainGraph = proto.mutable_graph();
    for (const Value *init : model.training->algorithm->initializers())
      if (init->isState && !model.graph->findValue(init->name()))
        exportInitializer(*init, *mainGraph->add_initializer(), deferred);
    auto *ti = proto.add_training_info();
    exportGraph(*model.training->algorithm, *ti->mutable_algorithm(), false,
                true, deferred);
    for (const auto &kv : model.training->updateBinding) {
      auto *b = ti->add_update_binding();
      b->set_key(kv.first);
      b->set_value(kv.second);
    }
  }
  appendMpcFunctions(mpcOpsUsed(model), model, proto);
}

} // namespace

void exportModel(const Model &model, onnx::ModelProto &proto) {
  exportModel(model, proto, nullptr);
}

void exportStepModel(const Model &model, onnx::ModelProto &proto) {
  if (!model.training)
    throw Error("--emit=step needs a compiled training step (run autodiff "
                "and optimizer first)");
  exportHeader(model, proto, /*forStepModel=*/true);
  auto step = model.training->algorithm->clone();
  step->setName("train_step");
  // Variadic mpc ops have no function body: other runtimes get them in
  // standard ops.
  expandVariadicMpcOps(*step);
  // State becomes leading inputs: (state..., batch...) -> (loss, state'...).
  // Bound state comes first, in update_binding order (the order of the new
  // values among the outputs, so a runtime can feed state' back as state),
  // then any state the step only reads.
  std::vector<Value *> state;
  std::unordered_set<const Value *> placed;
  for (const auto &kv : model.training->updateBinding) {
    Value *v = step->findValue(kv.first);
    if (v && v->isInitializer() && v->isState && placed.insert(v).second)
      state.push_back(v);
  }
  for (Value *init : step->initializers())
    if (init->isState && placed.insert(init).second)
      state.push_back(init);
  std::vector<Value *> batch = step->inputs();
  for (Value *s : state)
    step->makeInitializerAnInput(s);
  onnx::GraphProto &gp = *proto.mutable_graph();
  gp.set_name(step->name());
  for (Value *s : state)
    setType(*gp.add_input(), *s);
  for (Value *b : batch)
    setType(*gp.add_input(), *b);
  onnx::GraphProto body;
  exportGraph(*step, body, false);
  for (const auto &init : body.initializer())
    *gp.add_initializer() = init;
  for (const auto &n : body.node())
    *gp.add_node() = n;
  // Outputs: the loss first, then each bound state's new value (named
  // after the algorithm output), in binding order, then any other outputs
  // of the step. The algorithm's own output order need not match the
  // bindings (passes append outputs as they add state), and a bound value
  // need not be an algorithm output at all.
  std::vector<onnx::ValueInfoProto> outputs;
  std::unordered_set<std::string> placedOutputs;
  auto place = [&](const onnx::ValueInfoProto &vi) {
    if (placedOutputs.insert(vi.name()).second)
      outputs.push_back(vi);
  };
  if (body.output_size() > 0)
    place(body.output(0));
  for (const auto &kv : model.training->updateBinding) {
    if (placedOutputs.count(kv.second))
      continue;
    bool found = false;
    for (const auto &vi : body.output())
      if (vi.name() == kv.second) {
        place(vi);
        found = true;
        break;
      }
    if (!found)
      if (const Value *v = step->findValue(kv.second)) {
        onnx::ValueInfoProto vi;
        setType(vi, *v);
        place(vi);
      }
  }
  for (const auto &vi : body.output())
    place(vi);
  for (const auto &vi : body.value_info())
    if (!placedOutputs.count(vi.name()))
      *gp.add_value_info() = vi;
  for (const auto &vi : outputs)
    *gp.add_output() = vi;
  appendMpcFunctions(mpcOpsUsed(model), model, proto);
}

std::string printModelText(const Model &model) {
  std::ostringstream os;
  os << "<ir_version: " << model.irVersion << ", opset_import: [";
  for (size_t i = 0; i < model.opsets.size(); ++i)
    os << (i ? ", " : "") << "\"" << model.opsets[i].first
       << "\" : " << model.opsets[i].second;
  os << "]>\n";
  printGraphText(os, *model.graph, nullptr);
  if (model.training) {
    os << "// training_info[0].algorithm\n";
    printGraphText(os, *model.training->algorithm, model.graph.get());
    for (const auto &kv : model.training->updateBinding)
      os << "// update_binding: " << kv.first << " <- " << kv.second << "\n";
  }
  for (const auto &kv : model.metadata)
    os << "// metadata: " << kv.first << " = " << kv.second << "\n";
  onnx::ModelProto fns;
  appendMpcFunctions(mpcOpsUsed(model), model, fns);
  for (const auto &f : fns.functions()) {
    std::ostringstream fs;
    fs << f;
    os << "// function " << f.domain() << "." << f.name() << "\n" << fs.str();
    if (fs.str().empty() || fs.str().back() != '\n')
      os << "\n";
  }
  return os.str();
}

void writeFileAtomically(const std::string &path, const std::string &bytes) {
  if (path == "-") {
    std::cout.write(bytes.data(), std::streamsize(bytes.size()));
    std::cout.flush();
    return;
  }
  std::string error;
  if (!writeFileAtomically(path, bytes.data(), bytes.size(), error))
    throw Error(error);
}

void writeModelAtomically(const std::string &path,
                          const onnx::ModelProto &proto) {
  std::string error;
  bool ok = writeFileAtomically(
      path,
      [&](int fd, std::string &err) {
        // Blocks of 1 MiB: a few hundred writes for a large model, each
        // filled by the serializer (tensor bytes are copied once, into it).
        google::protobuf::io::FileOutputStream out(fd, 1 << 20);
        if (!proto.SerializeToZeroCopyStream(&out) || !out.Flush()) {
          err = path + ": write error: " +
                (out.GetErrno() ? std::strerror(out.GetErrno())
                                : "cannot serialize the model (over 2 GiB?)");
          return false;
        }
        return true;
      },
      error);
  if (!ok)
    throw Error(error);
}

namespace {

/// Buffered writes to a file descriptor; large blocks (tensor bytes) go to
/// the file directly, without a copy through the buffer.
class FileSink {
public:
  FileSink(int fd, const std::string &path) : fd_(fd), path_(path) {
    buffer_.reserve(kBlock);
  }
  void put(const void *data, size_t size) {
    if (buffer_.size() + size > kBlock || size >= kBlock / 4)
      flush(); // what is buffered goes first
    if (size >= kBlock / 4) {
      if (ok_)
        ok_ = writeAll(fd_, data, size, path_, error_);
      return;
    }
    const char *p = static_cast<const char *>(data);
    buffer_.insert(buffer_.end(), p, p + size);
  }
  void put(const std::string &bytes) { put(bytes.data(), bytes.size()); }
  void varint(uint64_t v) {
    char b[10];
    size_t n = 0;
    for (; v >= 0x80; v >>= 7)
      b[n++] = char(v | 0x80);
    b[n++] = char(v);
    put(b, n);
  }
  /// Writes what is buffered; false (with error()) once any write failed.
  bool flush() {
    if (ok_ && !buffer_.empty())
      ok_ = writeAll(fd_, buffer_.data(), buffer_.size(), path_, error_);
    buffer_.clear();
    return ok_;
  }
  const std::string &error() const { return error_; }

private:
  static constexpr size_t kBlock = 1 << 20;
  int fd_;
  const std::string &path_;
  std::vector<char> buffer_;
  bool ok_ = true;
  std::string error_;
};

size_t varintSize(uint64_t v) {
  size_t n = 1;
  for (; v >= 0x80; v >>= 7)
    ++n;
  return n;
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
// written by hand below; every other field is serialized by protobuf in
// fragments. Protobuf writes the known fields of a message in field-number
// order, so the fragments are cut and joined in that order, which gives the
// bytes SerializeToString gives for the whole model.
constexpr uint8_t kModelGraphTag = 7 << 3 | 2;        // ModelProto.graph
constexpr uint8_t kModelTrainingInfoTag = 0xA2;       // field 20: 2 bytes
constexpr uint8_t kModelTrainingInfoTag2 = 0x01;      //   (varint 162)
constexpr uint8_t kTrainingAlgorithmTag = 2 << 3 | 2; // .algorithm
constexpr uint8_t kGraphInitializerTag = 5 << 3 | 2;  // GraphProto.initializer
constexpr uint8_t kTensorRawDataTag = 9 << 3 | 2;     // TensorProto.raw_data

/// A graph as a list of pieces: protobuf fragments, and initializers whose
/// raw_data comes from the IR. Its size is known before any of it is written.
struct GraphPieces {
  std::string before; ///< node (1), name (2)
  struct Init {
    std::string header; ///< the TensorProto without raw_data (fields 1-8)
    const Tensor *bytes = nullptr; ///< nullptr: header is the whole entry
    size_t size() const {
      size_t inner = header.size();
      if (bytes)
        inner += 1 + varintSize(bytes->bytes.size()) + bytes->bytes.size();
      return 1 + varintSize(inner) + inner;
    }
  };
  std::vector<Init> inits;
  std::string after; ///< doc_string (10) and fields 11-15

  size_t size() const {
    size_t n = before.size() + after.size();
    for (const Init &i : inits)
      n += i.size();
    return n;
  }
  void write(FileSink &out) const {
    out.put(before);
    for (const Init &i : inits) {
      size_t inner = i.header.size();
      if (i.bytes)
        inner += 1 + varintSize(i.bytes->bytes.size()) + i.bytes->bytes.size();
      out.put(&kGraphInitializerTag, 1);
      out.varint(inner);
      out.put(i.header);
      if (i.bytes) {
        out.put(&kTensorRawDataTag, 1);
        out.varint(i.bytes->bytes.size());
        out.put(i.bytes->bytes.data(), i.bytes->bytes.size());
      }
    }
    out.put(after);
  }
};

/// Cuts `g` into pieces. The repeated fields are swapped into scratch
/// messages and back (no copies), so `g` is left as it was.
GraphPieces graphPieces(onnx::GraphProto &g, const DeferredBytes &deferred) {
  GraphPieces pieces;
  {
    onnx::GraphProto part;
    part.mutable_node()->Swap(g.mutable_node());
    if (g.has_name())
      part.set_name(g.name());
    pieces.before = serialized(part);
    part.mutable_node()->Swap(g.mutable_node());
  }
  for (const onnx::TensorProto &t : g.initializer()) {
    GraphPieces::Init init;
    auto it = deferred.find(&t);
    if (it == deferred.end()) {
      // Not deferred: the whole entry, as protobuf writes it.
      onnx::GraphProto part;
      *part.add_initializer() = t;
      init.header = serialized(part);
      init.header.erase(0, 1 + varintSize(t.ByteSizeLong()));
      // Written back with its tag and length by GraphPieces::write.
    } else {
      // raw_data (9) is the highest field such a tensor sets (dims 1,
      // data_type 2, name 8), so the entry is the rest, then raw_data.
      init.header = serialized(t);
      init.bytes = it->second;
    }
    pieces.inits.push_back(std::move(init));
  }
  {
    onnx::GraphProto part;
    if (g.has_doc_string())
      part.set_doc_string(g.doc_string());
    part.mutable_input()->Swap(g.mutable_input());
    part.mutable_output()->Swap(g.mutable_output());
    part.mutable_value_info()->Swap(g.mutable_value_info());
    part.mutable_quantization_annotation()->Swap(
        g.mutable_quantization_annotation());
    part.mutable_sparse_initializer()->Swap(g.mutable_sparse_initializer());
    pieces.after = serialized(part);
    part.mutable_input()->Swap(g.mutable_input());
    part.mutable_output()->Swap(g.mutable_output());
    part.mutable_value_info()->Swap(g.mutable_value_info());
    part.mutable_quantization_annotation()->Swap(
        g.mutable_quantization_annotation());
    part.mutable_sparse_initializer()->Swap(g.mutable_sparse_initializer());
  }
  return pieces;
}

/// Writes `proto` (whose deferred initializers hold no raw_data yet) with
/// every tensor's bytes taken from the IR: the bytes SerializeToString would
/// give for the proto with its raw_data filled in.
void writeModelPieces(onnx::ModelProto &proto, const DeferredBytes &deferred,
                      FileSink &out) {
  // ModelProto: 1-6 (header), 7 graph, 8 opset_import, 14 metadata_props,
  // 20 training_info, 25 functions.
  onnx::ModelProto head;
  if (proto.has_ir_version())
    head.set_ir_version(proto.ir_version());
  if (proto.has_producer_name())
    head.set_producer_name(proto.producer_name());
  if (proto.has_producer_version())
    head.set_producer_version(proto.producer_version());
  if (proto.has_domain())
    head.set_domain(proto.domain());
  if (proto.has_model_version())
    head.set_model_version(proto.model_version());
  if (proto.has_doc_string())
    head.set_doc_string(proto.doc_string());
  out.put(serialized(head));
  if (proto.has_graph()) {
    GraphPieces g = graphPieces(*proto.mutable_graph(), deferred);
    out.put(&kModelGraphTag, 1);
    out.varint(g.size());
    g.write(out);
  }
  {
    onnx::ModelProto mid;
    mid.mutable_opset_import()->Swap(proto.mutable_opset_import());
    mid.mutable_metadata_props()->Swap(proto.mutable_metadata_props());
    std::string bytes = serialized(mid);
    mid.mutable_opset_import()->Swap(proto.mutable_opset_import());
    mid.mutable_metadata_props()->Swap(proto.mutable_metadata_props());
    out.put(bytes);
  }
  for (onnx::TrainingInfoProto &ti : *proto.mutable_training_info()) {
    // TrainingInfoProto: 1 initialization, 2 algorithm, 3 and 4 bindings.
    onnx::TrainingInfoProto first, last;
    if (ti.has_initialization())
      first.mutable_initialization()->Swap(ti.mutable_initialization());
    std::string firstBytes = serialized(first);
    if (first.has_initialization())
      first.mutable_initialization()->Swap(ti.mutable_initialization());
    last.mutable_initialization_binding()->Swap(
        ti.mutable_initialization_binding());
    last.mutable_update_binding()->Swap(ti.mutable_update_binding());
    std::string lastBytes = serialized(last);
    last.mutable_initialization_binding()->Swap(
        ti.mutable_initialization_binding());
    last.mutable_update_binding()->Swap(ti.mutable_update_binding());
    GraphPieces alg;
    bool hasAlgorithm = ti.has_algorithm();
    size_t size = firstBytes.size() + lastBytes.size();
    if (hasAlgorithm) {
      alg = graphPieces(*ti.mutable_algorithm(), deferred);
      size += 1 + varintSize(alg.size()) + alg.size();
    }
    const uint8_t tag[2] = {kModelTrainingInfoTag, kModelTrainingInfoTag2};
    out.put(tag, 2);
    out.varint(size);
    out.put(firstBytes);
    if (hasAlgorithm) {
      out.put(&kTrainingAlgorithmTag, 1);
      out.varint(alg.size());
      alg.write(out);
    }
    out.put(lastBytes);
  }
  {
    onnx::ModelProto tail;
    tail.mutable_functions()->Swap(proto.mutable_functions());
    std::string bytes = serialized(tail);
    tail.mutable_functions()->Swap(proto.mutable_functions());
    out.put(bytes);
  }
}

} // namespace

void writeModelFile(const Model &model, const std::string &path,
                    onnx::ModelProto &proto) {
  DeferredBytes deferred;
  exportModel(model, proto, &deferred);
  std::string error;
  bool ok = writeFileAtomically(
      path,
      [&](int fd, std::string &err) {
        FileSink out(fd, path);
        writeModelPieces(proto, deferred, out);
        if (!out.flush()) {
          err = out.error();
          return false;
        }
        return true;
      },
      error);
  if (!ok)
    throw Error(error);
}

} // namespace mpc
