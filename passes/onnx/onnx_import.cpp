// ONNX -> IR: binary protobuf (with external data), ONNX text, training_info.
//
// The importer is the first line of defence against bad input: it checks what
// protobuf alone cannot (types, dims, tensor sizes, external data bounds,
// duplicate names, cycles) and reports each problem as one clear line.
#include "passes/onnx/onnx_io.h"

#include "ir/mpc_ops.h"
#include "ir/step_metadata.h"
#include "ir/tensor_pb.h"
#include "passes/onnx/attribute_ranges.h"
#include "passes/onnx/external_data_reader.h"
#include "passes/onnx/foreign_file.h"
#include "passes/onnx/gradient_op.h"
#include "passes/onnx/import_lowering.h"
#include "passes/onnx/old_opsets.h"
#include "passes/onnx/torch_dropped_arguments.h"
#include "passes/onnx/torch_export_signature.h"
#include "passes/onnx/weights_in_file.h"
#include "passes/training_info.h"
#include "support/diagnostics.h"
#include "support/file_bytes.h"
#include "support/file_io.h"
#include "support/regular_input.h"

#include "onnx/defs/parser.h"
#include "onnx/onnx_pb.h"

#include <google/protobuf/arena.h>

#include <algorithm>
#include <limits>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

namespace mpc {

std::string readFile(const std::string &path) {
  // A FIFO would wait for a writer and a device (/dev/zero) never end.
  requireRegularFile(path, "");
  std::string bytes, error;
  if (!readWholeFile(path, bytes, error))
    throw Error(error);
  return bytes;
}

namespace {

bool endsWith(const std::string &s, const std::string &suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string dirName(const std::string &path) {
  auto pos = path.find_last_of('/');
  return pos == std::string::npos ? "." : pos == 0 ? "/" : path.substr(0, pos);
}

/// Strips `//` comments (to end of line), keeping line structure. Leaves
/// string literals alone; like ONNX's parser, a string ends at the next `"`
/// (there are no escapes), so `"dir\"` is the string `dir\`.
std::string stripComments(const std::string &text) {
  std::string out;
  out.reserve(text.size());
  bool inString = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (inString) {
      out += c;
      if (c == '"')
        inString = false;
      continue;
    }
    if (c == '"') {
      inString = true;
      out += c;
      continue;
    }
    if (c == '/' && i + 1 < text.size() && text[i + 1] == '/') {
      while (i < text.size() && text[i] != '\n')
        ++i;
      out += '\n';
      continue;
    }
    out += c;
  }
  return out;
}

/// ONNX's text parser recurses once per nested graph, type or list, and
/// overflows the stack a few thousand levels deep (a crash found by issue 7's
/// absurd inputs): refuse text nested deeper than any real model is first.
/// `text` is without comments; strings are skipped.
void checkNesting(const std::string &text, const std::string &sourceName) {
  constexpr int kMaxDepth = 256;
  int depth = 0, line = 1;
  bool inString = false;
  for (char c : text) {
    if (c == '\n')
      ++line;
    if (c == '"')
      inString = !inString;
    if (inString)
      continue;
    if (c == '{' || c == '(' || c == '[') {
      if (++depth > kMaxDepth)
        throw Error(sourceName +
                    ": cannot parse ONNX text: brackets nest deeper than " +
                    std::to_string(kMaxDepth) + " levels (line " +
                    std::to_string(line) + ")");
    } else if ((c == '}' || c == ')' || c == ']') && depth > 0) {
      --depth;
    }
  }
}

/// The main graph's large raw_data fields that parseModelLeavingWeights
/// left in the file's bytes, and what keeps those bytes valid.
struct WeightsLeftInFile {
  std::vector<WeightInFile> weights;
  std::shared_ptr<const void> keeper;
};

class GraphImporter {
  inline static const std::vector<Value *> kNoInputs;

public:
  GraphImporter(const std::string &baseDir, const Graph *outerState)
      : externalData_(baseDir), outer_(outerState) {}

  /// Imports `gp`. With `owned` (the same message, which the caller lets
  /// go of afterwards) the initializers' raw_data strings become the
  /// tensors' storage instead of being copied; with `inFile`, the tensors
  /// whose raw_data the parse left in the file keep their bytes there.
  std::unique_ptr<Graph> run(const onnx::GraphProto &gp,
                             onnx::GraphProto *owned = nullptr,
                             const WeightsLeftInFile *inFile = nullptr) {
    auto g = std::make_unique<Graph>(gp.name().empty() ? "graph" : gp.name());
    graph_ = g.get();
    // Keys are the initializers' own names in `gp` (which outlives run;
    // taking a tensor over leaves its name in place).
    std::unordered_set<std::string_view> initNames;
    initNames.reserve(size_t(gp.initializer_size()));
    size_t nextInFile = 0; // inFile's weights are in initializer order
    for (int i = 0; i < gp.initializer_size(); ++i) {
      const onnx::TensorProto &t = gp.initializer(i);
      if (t.name().empty())
        throw Error("initializer with an empty name");
      if (!initNames.insert(t.name()).second)
        throw Error("initializer '" + t.name() + "' is defined twice");
      const WeightInFile *raw = nullptr;
      if (inFile && nextInFile < inFile->weights.size() &&
          inFile->weights[nextInFile].initializer == i)
        raw = &inFile->weights[nextInFile++];
      Tensor data = loadTensor(
          t, [&] { return "initializer '" + t.name() + "'"; },
          owned ? owned->mutable_initializer(i) : nullptr, raw,
          inFile ? inFile->keeper : nullptr);
      graph_->addInitializer(t.name(), std::move(data));
    }
    if (gp.sparse_initializer_size() > 0)
      throw Error("sparse initializers are not supported");
    for (int i = 0; i < gp.input_size(); ++i) {
      const auto &vi = gp.input(i);
      if (vi.name().empty())
        throw Error("graph input " + std::to_string(i) + " has an empty name");
      if (initNames.count(vi.name()))
        continue; // old-style model listing initializers as inputs too
      if (graph_->findValue(vi.name()))
        throw Error("graph input '" + vi.name() + "' is defined twice");
      DType t;
      Dims dims;
      bool hasShape = readType(vi, t, dims);
      Value *v = graph_->addInput(vi.name(), t, dims);
      v->hasShape = hasShape;
    }
    // A node may appear before the producer of its input (ONNX requires
    // topological order; we sort). While every node so far reads only values
    // defined before it (the usual, sorted model), it is created with its
    // inputs; from the first node that reads a value not defined yet, nodes
    // are created without inputs and wired once every output exists. Either
    // way each value's uses are added in node order, as wiring every node
    // after all of them are created adds them.
    const int numNodes = gp.node_size();
    std::vector<Node *> nodes;
    nodes.reserve(size_t(numNodes));
    int firstUnwired = 0; // nodes before it were created with their inputs
    std::vector<Value *> inputs;
    for (int i = 0; i < numNodes; ++i) {
      const onnx::NodeProto &np = gp.node(i);
      bool wired = firstUnwired == i && inputsDefinedSoFar(np, inputs);
      nodes.push_back(importNode(np, i, wired ? inputs : kNoInputs));
      if (wired)
        firstUnwired = i + 1;
    }
    for (int i = firstUnwired; i < numNodes; ++i)
      wireInputs(gp.node(i), nodes[size_t(i)]);
    for (const auto &vi : gp.value_info())
      applyValueInfo(vi);
    std::unordered_set<std::string> outNames;
    for (const auto &vi : gp.output()) {
      Value *v = graph_->findValue(vi.name());
      if (!v)
        throw Error("graph output '" + vi.name() +
                    "' is not produced by any node, input or initializer");
      if (!outNames.insert(vi.name()).second)
        throw Error("graph output '" + vi.name() + "' is listed twice");
      applyValueInfo(vi);
      graph_->addOutput(v);
    }
    // Nodes that each read only values defined before them are in
    // topological order already: the sort, which keeps an order that is
    // valid, would leave them as they are.
    if (firstUnwired < numNodes && !graph_->topologicalSort()) {
      const Node *onCycle = nodeOnCycle();
      throw Error("graph '" + graph_->name() + "' has a cycle" +
                  (onCycle ? " through " + describeNode(*onCycle) : ""));
    }
    return g;
  }

private:
  /// After a failed sort: a node on a cycle (not merely behind one).
  const Node *nodeOnCycle() const {
    // Nodes Kahn's algorithm cannot order are on or behind a cycle; walking
    // back through their unordered producers must revisit a node.
    std::unordered_map<const Node *, int> pending;
    std::vector<const Node *> ready;
    for (const auto &n : graph_->nodes()) {
      int count = 0;
      for (const Value *in : n->inputs())
        if (in && in->producer())
          ++count;
      pending[n.get()] = count;
      if (count == 0)
        ready.push_back(n.get());
    }
    while (!ready.empty()) {
      const Node *n = ready.back();
      ready.pop_back();
      for (const Value *o : n->outputs())
        if (o)
          for (const Use &u : o->uses())
            if (--pending[u.user] == 0)
              ready.push_back(u.user);
    }
    const Node *n = nullptr;
    for (const auto &node : graph_->nodes())
      if (pending[node.get()] > 0) {
        n = node.get();
        break;
      }
    std::unordered_set<const Node *> seen;
    while (n && seen.insert(n).second) {
      const Node *next = nullptr;
      for (const Value *in : n->inputs())
        if (in && in->producer() && pending[in->producer()] > 0) {
          next = in->producer();
          break;
        }
      n = next;
    }
    return n;
  }

  /// Loads `tp`; `what()` names it in errors (built only for one). With
  /// `owned` (the same message, which the caller lets go of afterwards) its
  /// raw_data string becomes the tensor's storage; with `raw`, the raw_data
  /// the parse left in the file (kept valid by `keeper`), the tensor's
  /// bytes stay there.
  template <class What>
  Tensor loadTensor(const onnx::TensorProto &tp, const What &what,
                    onnx::TensorProto *owned = nullptr,
                    const WeightInFile *raw = nullptr,
                    const std::shared_ptr<const void> &keeper = nullptr) {
    // Only external data needs a message of its own (most tensors do not:
    // constructing and destroying an empty one each is not free).
    std::optional<onnx::TensorProto> resolved;
    const onnx::TensorProto *src = &tp;
    if (tp.data_location() == onnx::TensorProto::EXTERNAL) {
      resolved.emplace(tp);
      externalData_.read(*resolved, what());
      src = &*resolved;
      owned = &*resolved;
    }
    Tensor t;
    std::string err;
    bool ok;
    if (raw && !resolved) // external data replaces any raw_data
      ok = tensorFromProtoInPlace(*src, raw->data, raw->size, keeper, t, err);
    else if (owned)
      ok = tensorFromProto(std::move(*owned), t, err);
    else
      ok = tensorFromProto(*src, t, err);
    if (!ok)
      throw Error(what() + ": " + err);
    return t;
  }

  /// Reads a ValueInfoProto's tensor type. Returns whether it has a shape.
  bool readType(const onnx::ValueInfoProto &vi, DType &t, Dims &dims) {
    t = DType::Undefined;
    dims.clear();
    if (!vi.has_type())
      return false;
    if (!vi.type().has_tensor_type())
      throw Error("value '" + vi.name() +
                  "' is not a tensor (sequences, maps and optionals are not "
                  "supported)");
    const auto &tt = vi.type().tensor_type();
    if (tt.elem_type() != 0) {
      auto dt = fromOnnxDataType(tt.elem_type());
      if (!dt)
        throw Error("value '" + vi.name() + "' has unsupported element type " +
                    std::to_string(tt.elem_type()));
      t = *dt;
    }
    if (!tt.has_shape())
      return false;
    if (tt.shape().dim_size() > 64)
      throw Error("value '" + vi.name() + "' has rank " +
                  std::to_string(tt.shape().dim_size()) +
                  " (at most 64 is supported)");
    for (const auto &d : tt.shape().dim()) {
      if (d.has_dim_value()) {
        if (d.dim_value() < 0)
          throw Error("value '" + vi.name() + "' has a negative dimension " +
                      std::to_string(d.dim_value()));
        dims.push_back(Dim(d.dim_value()));
      } else if (d.has_dim_param()) {
        dims.push_back(Dim::symbolic(d.dim_param()));
      } else {
        dims.push_back(Dim());
      }
    }
    return true;
  }

  void applyValueInfo(const onnx::ValueInfoProto &vi) {
    Value *v = graph_->findValue(vi.name());
    if (!v || v->isInitializer() || v->isGraphInput())
      return;
    DType t;
    Dims dims;
    bool hasShape = readType(vi, t, dims);
    if (t != DType::Undefined)
      v->dtype = t;
    if (hasShape) {
      v->hasShape = true;
      v->dims = dims;
    }
  }

  Attribute convertAttribute(const onnx::AttributeProto &a, const Node &n) {
    // A reference has no value of its own, whatever its declared type.
    if (!a.ref_attr_name().empty())
      throw Error(describeNode(n) + ": attribute '" + a.name() +
                  "' refers to a function attribute outside a function");
    if (std::optional<Attribute> plain = plainAttributeFromProto(a))
      return std::move(*plain);
    if (a.type() == onnx::AttributeProto::TENSOR)
      return Attribute::ofTensor(loadTensor(a.t(), [&] {
        return describeNode(n) + ": attribute '" + a.name() + "'";
      }));
    throw Error(describeNode(n) + ": attribute '" + a.name() +
                "' has a kind mpc does not support (graphs, sparse tensors, "
                "type protos)");
  }

  /// Whether every input `np` names is defined already (or omitted); if so
  /// `inputs` receives them, as wireInputs would find them.
  bool inputsDefinedSoFar(const onnx::NodeProto &np,
                          std::vector<Value *> &inputs) const {
    inputs.clear();
    for (const auto &in : np.input()) {
      Value *v = nullptr;
      if (!in.empty() && !(v = graph_->findValue(in)))
        return false;
      inputs.push_back(v);
    }
    return true;
  }

  /// Creates `np`'s node and outputs, reading `inputs` (empty when wired
  /// later by wireInputs).
  Node *importNode(const onnx::NodeProto &np, int index,
                   const std::vector<Value *> &inputs) {
    std::string name = graph_->uniqueNodeName(
        np.name().empty() ? np.op_type() + "_" + std::to_string(index)
                          : np.name());
    std::vector<std::string> outs;
    outs.reserve(size_t(np.output_size()));
    // The exporter names an output an mpc node omits "<node>_unused_<formal
    // output>" (its function's formals must all be bound): omitted again
    // here, so that the kernel skips it (a SoftmaxTo's or layer norm's
    // Ylow nothing reads is not written, nor planned).
    const bool mpcNode = np.domain() == kMpcDomain;
    for (const auto &o : np.output()) {
      if (mpcNode && o.find("_unused_") != std::string::npos) {
        outs.emplace_back();
        continue;
      }
      if (!o.empty() && graph_->findValue(o))
        throw Error("node '" + name + "' (" + np.op_type() + "): output '" + o +
                    "' is already defined (values must be assigned once)");
      for (const auto &prev : outs)
        if (!o.empty() && prev == o)
          throw Error("node '" + name + "' (" + np.op_type() + "): output '" +
                      o + "' is listed twice");
      outs.push_back(o);
    }
    static const std::string kDefaultDomain;
    const std::string &domain =
        np.domain() == "ai.onnx" ? kDefaultDomain : np.domain();
    Node *n = graph_->createNodeWithOutputs(
        np.op_type(), inputs, std::move(outs), std::move(name), domain);
    for (const auto &a : np.attribute()) {
      Attribute value = convertAttribute(a, *n);
      checkAttributeRange(*n, a.name(), value);
      n->setAttr(a.name(), std::move(value));
    }
    return n;
  }

  void wireInputs(const onnx::NodeProto &np, Node *n) {
    for (const auto &in : np.input()) {
      if (in.empty()) {
        n->addInput(nullptr);
        continue;
      }
      Value *v = graph_->findValue(in);
      if (!v && outer_) {
        // The training algorithm may read the main graph's initializers.
        Value *outerValue = outer_->findValue(in);
        if (outerValue && outerValue->isInitializer()) {
          v = graph_->addInitializer(in, outerValue->initializer());
          v->isState = true;
        }
      }
      if (!v)
        throw Error(describeNode(*n) + ": input '" + in +
                    "' is not defined by any node, graph input or "
                    "initializer");
      n->addInput(v);
    }
  }

  ExternalDataReader externalData_;
  const Graph *outer_;
  Graph *graph_ = nullptr;
};

} // namespace

std::optional<Attribute>
plainAttributeFromProto(const onnx::AttributeProto &a) {
  switch (a.type()) {
  case onnx::AttributeProto::FLOAT:
    return Attribute::ofFloat(a.f());
  case onnx::AttributeProto::INT:
    return Attribute::ofInt(a.i());
  case onnx::AttributeProto::STRING:
    return Attribute::ofString(a.s());
  case onnx::AttributeProto::FLOATS:
    return Attribute::ofFloats({a.floats().begin(), a.floats().end()});
  case onnx::AttributeProto::INTS:
    return Attribute::ofInts({a.ints().begin(), a.ints().end()});
  case onnx::AttributeProto::STRINGS:
    return Attribute::ofStrings({a.strings().begin(), a.strings().end()});
  default:
    return std::nullopt;
  }
}

namespace {

/// importModel; with `owned` (the same message, let go of afterwards) the
/// weights are taken over from it instead of copied, and those in `inFile`
/// stay in the file (GraphImporter::run).
std::unique_ptr<Model>
importModelFrom(const onnx::ModelProto &proto, onnx::ModelProto *owned,
                const std::string &sourceName, const std::string &baseDir,
                const ImportOptions &options,
                const WeightsLeftInFile *inFile = nullptr) {
  auto model = std::make_unique<Model>();
  model->sourcePath = sourceName;
  if (!proto.has_graph())
    throw Error("not an ONNX model (no graph)");
  model->irVersion = proto.ir_version() > 0 ? proto.ir_version() : 8;
  model->opsets.clear();
  for (const auto &op : proto.opset_import()) {
    std::string domain = op.domain() == "ai.onnx" ? "" : op.domain();
    model->opsets.emplace_back(domain, op.version());
    if (domain.empty() && op.version() > kMaxSupportedOpset)
      throw Error("opset " + std::to_string(op.version()) +
                  " is newer than the newest supported (" +
                  std::to_string(kMaxSupportedOpset) + ")");
  }
  // Which operator set the ops follow decides what they mean (Split's
  // split, Reduce*'s axes, ...): a model that does not say is refused
  // rather than read as some opset (onnx.checker refuses it too).
  // A model of other domains' ops only (ai.onnx.preview.training's) has
  // no ONNX op to interpret: the nodes the passes add follow opset 17.
  if (proto.opset_import().empty())
    throw Error("the model has no opset_import (it does not say which ONNX "
                "opset its ops follow; add one, e.g. opset 17)");
  if (model->opsetVersion("") < 0) {
    for (const auto &np : proto.graph().node())
      if (np.domain().empty() || np.domain() == "ai.onnx")
        throw Error("node '" + np.name() + "' (" + np.op_type() +
                    ") is an ONNX op, but the model's opset_import has no "
                    "entry for the ONNX domain (add one, e.g. opset 17)");
    model->opsets.insert(model->opsets.begin(), {"", 17});
  }
  if (!proto.producer_name().empty())
    model->producerName = proto.producer_name();
  if (!proto.producer_version().empty())
    model->producerVersion = proto.producer_version();
  for (const auto &kv : proto.metadata_props())
    model->metadata.emplace_back(kv.key(), kv.value());

  GraphImporter mainImporter(baseDir, nullptr);
  model->graph = mainImporter.run(
      proto.graph(), owned ? owned->mutable_graph() : nullptr, inFile);
  // An older opset is accepted when its ops are the same operators as at
  // kMinSupportedOpset; the model then is that opset's model, which is what
  // the passes (and nodes they add, such as Cast) and the export assume.
  int64_t importedOpset = model->opsetVersion("");
  bool oldOpset = importedOpset < kMinSupportedOpset;
  if (oldOpset) {
    requireSemanticsUnchangedSince(*model->graph, importedOpset);
    for (auto &o : model->opsets)
      if (o.first.empty())
        o.second = kMinSupportedOpset;
  }
  for (Value *init : model->graph->initializers())
    init->isState = true;
  // torch's dynamo exporter says which initializers are parameters and
  // which batch norms were traced in training mode.
  std::vector<std::string> buffers;
  applyTorchExportSignature(proto.graph(), *model->graph, &buffers,
                            &model->frozenByExporter);
  if (!buffers.empty() && !hasMeta(*model, meta::kBuffers))
    writeMeta(*model, meta::kBuffers, buffers);
  // ... and records what it traced, arguments it dropped included
  // (passes/onnx/torch_dropped_arguments.h).
  checkDroppedTorchArguments(proto.graph(), *model->graph);
  // ONNX's Gradient operator has no kernel: it becomes the backward
  // subgraph it names (passes/onnx/gradient_op.h).
  // InstanceNormalization and some activations have no kernel: they become
  // ops that do (passes/onnx/import_lowering.h), before any Gradient
  // differentiates through them. Without options.lower the caller runs the
  // lower-onnx pass, unless what follows here reads the lowered graph.
  bool hasGradientOps = !gradientOps(*model->graph).empty();
  if (options.lower || hasGradientOps || proto.training_info_size() > 0)
    lowerAtImport(*model->graph, model->opsetVersion(""));
  if (hasGradientOps)
    expandGradientOps(*model->graph, model->opsetVersion(""));

  if (proto.training_info_size() > 1)
    throw Error("more than one training_info entry is not supported");
  if (proto.training_info_size() == 1) {
    const auto &ti = proto.training_info(0);
    if (ti.initialization().node_size() > 0 ||
        ti.initialization_binding_size() > 0) {
      // Runs once, before the algorithm reads the state it initialises.
      GraphImporter initImporter(baseDir, model->graph.get());
      std::unique_ptr<Graph> init = initImporter.run(ti.initialization());
      if (oldOpset)
        requireSemanticsUnchangedSince(*init, importedOpset);
      std::vector<std::pair<std::string, std::string>> binding;
      for (const auto &kv : ti.initialization_binding())
        binding.emplace_back(kv.key(), kv.value());
      applyInitialization(*model, *init, binding);
    }
    TrainingInfo info;
    GraphImporter stepImporter(baseDir, model->graph.get());
    info.algorithm = stepImporter.run(
        ti.algorithm(),
        owned ? owned->mutable_training_info(0)->mutable_algorithm() : nullptr);
    if (oldOpset)
      requireSemanticsUnchangedSince(*info.algorithm, importedOpset);
    for (const auto &kv : ti.update_binding()) {
      if (!model->graph->findValue(kv.key()) ||
          !model->graph->findValue(kv.key())->isInitializer())
        throw Error("training_info update_binding key '" + kv.key() +
                    "' is not an initializer of the main graph");
      if (!info.algorithm->findValue(kv.value()))
        throw Error("training_info update_binding value '" + kv.value() +
                    "' is not a value of the training algorithm");
      info.updateBinding.emplace_back(kv.key(), kv.value());
    }
    // State that the algorithm does not read still belongs to it (it may be
    // bound); make every bound state visible in the algorithm graph.
    for (const auto &kv : info.updateBinding) {
      if (!info.algorithm->findValue(kv.first)) {
        Value *v = info.algorithm->addInitializer(
            kv.first, model->graph->findValue(kv.first)->initializer());
        v->isState = true;
      }
    }
    model->training = std::move(info);
    // A Gradient node in the algorithm: the model trains with its own
    // optimizer on mpc's gradients (passes/training_info.h).
    lowerTrainingAlgorithm(*model);
  }
  return model;
}

/// Block sizes for the arena a model is parsed onto: the default blocks
/// (256 B growing to 8 KiB) take hundreds of mallocs for a large graph's
/// messages; 16 KiB growing to 64 KiB take a few dozen. Larger blocks cost
/// more than they save: with 1 MiB blocks the 64-layer compile's peak RSS
/// grew by 0.4 MB (freed large blocks are not reused by the small
/// allocations that follow), for 20k fewer instructions.
google::protobuf::ArenaOptions modelArenaOptions(size_t fileBytes) {
  google::protobuf::ArenaOptions options;
  options.start_block_size = 16 << 10;
  options.max_block_size = std::max<size_t>(
      options.start_block_size, std::min<size_t>(fileBytes, 64 << 10));
  return options;
}

} // namespace

std::unique_ptr<Model> importModel(const onnx::ModelProto &proto,
                                   const std::string &sourceName,
                                   const std::string &baseDir,
                                   const ImportOptions &options) {
  return importModelFrom(proto, nullptr, sourceName, baseDir, options);
}

std::unique_ptr<Model> importModel(onnx::ModelProto &&proto,
                                   const std::string &sourceName,
                                   const std::string &baseDir,
                                   const ImportOptions &options) {
  return importModelFrom(proto, &proto, sourceName, baseDir, options);
}

std::unique_ptr<Model> parseModelText(const std::string &text,
                                      const std::string &sourceName,
                                      const ImportOptions &options) {
  onnx::ModelProto proto;
  std::string clean = stripComments(text);
  checkNesting(clean, sourceName);
  onnx::Common::Status status;
  try {
    status = onnx::OnnxParser::Parse(proto, clean.c_str());
  } catch (const std::exception &e) {
    // ONNX 1.12's parser converts numbers with std::stoll/std::stof, which
    // throw on out-of-range or malformed literals.
    throw Error(sourceName +
                ": cannot parse ONNX text: a numeric literal is malformed or "
                "out of range (" +
                e.what() + ")");
  }
  if (!status.IsOK()) {
    std::string msg = status.ErrorMessage();
    for (char &c : msg)
      if (c == '\n')
        c = ' ';
    throw Error(sourceName + ": cannot parse ONNX text: " + msg);
  }
  if (proto.ir_version() == 0)
    proto.set_ir_version(8);
  try {
    return importModel(proto, sourceName, ".", options);
  } catch (const Error &e) {
    throw Error(sourceName + ": " + e.what());
  }
}

std::unique_ptr<Model> loadModel(const std::string &path,
                                 WeightBytes weightBytes,
                                 const ImportOptions &options) {
  // A FIFO would wait for a writer and a device (/dev/zero) never end:
  // refused for every caller (mpc-opt, mpc-run, mpc.compile, mpc.Trainer).
  requireRegularFile(path, "");
  // Shared: tensors whose bytes stay in the file keep it mapped.
  auto file = std::make_shared<FileBytes>();
  std::string error;
  if (!file->open(path, error))
    throw Error(error);
  std::string_view bytes = file->view();
  bool looksText = endsWith(path, ".onnxtext") || endsWith(path, ".txt");
  if (looksText)
    return parseModelText(std::string(bytes), path, options);
  if (bytes.empty())
    throw Error(path + ": empty file, not an ONNX model");
  if (std::string foreign = foreignFileKind(bytes, path); !foreign.empty())
    throw Error(foreign);
  if (bytes.size() > size_t(std::numeric_limits<int>::max()))
    throw Error(path + ": file is too large for a protobuf message (over 2 "
                       "GiB; keep large weights in external data)");
  // The parsed messages live on an arena: one bump-pointer allocation per
  // message and one free of the arena's blocks for all of them, instead of a
  // malloc and a destructor call each (thousands of nodes, attributes and
  // strings). The weights' raw_data strings do not pin the arena: taking one
  // over (tensorFromProto on an owned TensorProto, release_raw_data) moves
  // its heap buffer into a string of its own, so a tensor's bytes stay
  // alive exactly as long as without the arena.
  google::protobuf::Arena arena(modelArenaOptions(bytes.size()));
  onnx::ModelProto &proto =
      *google::protobuf::Arena::CreateMessage<onnx::ModelProto>(&arena);
  WeightsLeftInFile inFile;
  bool parsed =
      weightBytes == WeightBytes::InFile &&
      parseModelLeavingWeights(bytes, kHeldRawDataBytes, proto, inFile.weights);
  if (parsed) {
    inFile.keeper = std::move(file);
  } else if (!proto.ParseFromArray(bytes.data(), int(bytes.size()))) {
    // Text that does not end in .onnxtext, or a truncated/corrupt protobuf.
    size_t i = 0;
    while (i < bytes.size() && isspace((unsigned char)bytes[i]))
      ++i;
    if (i < bytes.size() &&
        (bytes[i] == '<' || isalpha((unsigned char)bytes[i])))
      return parseModelText(std::string(bytes), path, options);
    throw Error(path +
                ": not an ONNX model (protobuf parse failed: truncated or "
                "corrupt file)");
  }
  try {
    return importModelFrom(proto, &proto, path, dirName(path), options,
                           parsed ? &inFile : nullptr);
  } catch (const Error &e) {
    throw Error(path + ": " + e.what());
  }
}

} // namespace mpc
