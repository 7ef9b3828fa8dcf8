// IR -> ONNX: ModelProto with training_info, the --emit=step functional
// model, the deterministic text form, and atomic file writes.
#include "passes/onnx/onnx_io.h"

#include "ir/mpc_ops.h"
#include "ir/step_metadata.h"
#include "ir/tensor_pb.h"
#include "passes/onnx/expand_variadic.h"
#include "passes/onnx/mpc_functions.h"
#include "passes/onnx/onnx_export_parts.h"
#include "support/diagnostics.h"
#include "support/file_io.h"

#include "onnx/defs/printer.h"
#include "onnx/onnx_pb.h"

#include <google/protobuf/io/zero_copy_stream_impl.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string_view>
#include <unordered_set>

namespace mpc {

void exportValueInfo(const Value &v, onnx::ValueInfoProto &vi) {
  // `vi` may hold an earlier value (the file writer fills one message for
  // every value): each field is set or cleared, and the type's messages are
  // kept rather than cleared, as ValueInfoProto::Clear would free them.
  vi.set_name(v.name());
  if (v.dtype == DType::Undefined) {
    vi.clear_type();
    return;
  }
  auto *tt = vi.mutable_type()->mutable_tensor_type();
  tt->set_elem_type(toOnnxDataType(v.dtype));
  if (!v.hasShape) {
    tt->clear_shape();
    return;
  }
  auto *shape = tt->mutable_shape();
  shape->clear_dim(); // keeps the cleared dims for add_dim
  for (const Dim &d : v.dims) {
    auto *pd = shape->add_dim();
    if (d.isKnown())
      pd->set_dim_value(d.value);
    else if (!d.symbol.empty())
      pd->set_dim_param(d.symbol.str());
  }
}

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

void exportHeader(const Model &model, onnx::ModelProto &proto,
                  bool forStepModel) {
  proto.set_ir_version(model.irVersion);
  proto.set_producer_name(model.producerName);
  proto.set_producer_version(model.producerVersion);
  for (const auto &kv : model.opsets) {
    auto *op = proto.add_opset_import();
    op->set_domain(kv.first);
    op->set_version(kv.second);
  }
  for (const auto &kv : model.metadata) {
    if (forStepModel && kv.first != meta::kPrecision.name &&
        kv.first != meta::kOptimizer.name && kv.first.rfind("mpc.", 0) == 0)
      continue;
    auto *p = proto.add_metadata_props();
    p->set_key(kv.first);
    p->set_value(kv.second);
  }
}

std::vector<std::string> mpcOpsUsed(const Model &model) {
  // A model uses a few mpc ops, each on many nodes (an Adam per
  // parameter): a look along the short list, the last op found first,
  // costs less than hashing every node's op.
  std::vector<std::string> ops;
  size_t last = 0; // index in ops of the last op found
  auto scan = [&](const Graph &g) {
    for (const auto &n : g.nodes()) {
      const std::string &op = n->opType();
      if (!isMpcDomain(n->domain()) || (last < ops.size() && ops[last] == op))
        continue;
      last = size_t(std::find(ops.begin(), ops.end(), op) - ops.begin());
      if (last == ops.size())
        ops.push_back(op);
    }
  };
  scan(*model.graph);
  if (model.training)
    scan(*model.training->algorithm);
  return ops;
}

namespace {

/// Writes a graph. State initializers are written only when `withState`.
void exportGraph(const Graph &g, onnx::GraphProto &gp, bool withState,
                 bool withValueInfo = true) {
  gp.set_name(g.name());
  for (const Value *in : g.inputs())
    exportValueInfo(*in, *gp.add_input());
  for (const Value *init : g.initializers())
    if (withState || !init->isState)
      tensorToProto(*init->initializer(), init->name(), *gp.add_initializer());
  for (const auto &n : g.nodes()) {
    exportNode(*n, *gp.add_node());
    if (!withValueInfo)
      continue;
    for (const Value *o : n->outputs())
      if (o && o->dtype != DType::Undefined && !o->isGraphOutput())
        exportValueInfo(*o, *gp.add_value_info());
  }
  for (const Value *out : g.outputs())
    exportValueInfo(*out, *gp.add_output());
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

void exportModel(const Model &model, onnx::ModelProto &proto) {
  exportHeader(model, proto);
  exportGraph(*model.graph, *proto.mutable_graph(), true);
  if (model.training) {
    // State that only the training step reads (optimizer moments, loss
    // scale, ...) is persistent too: it lives in the main graph.
    auto *mainGraph = proto.mutable_graph();
    for (const Value *init : model.training->algorithm->initializers())
      if (init->isState && !model.graph->findValue(init->name()))
        tensorToProto(*init->initializer(), init->name(),
                      *mainGraph->add_initializer());
    auto *ti = proto.add_training_info();
    exportGraph(*model.training->algorithm, *ti->mutable_algorithm(), false);
    for (const auto &kv : model.training->updateBinding) {
      auto *b = ti->add_update_binding();
      b->set_key(kv.first);
      b->set_value(kv.second);
    }
  }
  appendMpcFunctions(mpcOpsUsed(model), model, proto);
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
  expandVariadicMpcOps(*step, model.opsetVersion(""));
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
    exportValueInfo(*s, *gp.add_input());
  for (Value *b : batch)
    exportValueInfo(*b, *gp.add_input());
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
        exportValueInfo(*v, vi);
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

void writeFileAtomically(const std::string &path, const std::string &bytes,
                         Fsync fsync) {
  if (path == "-") {
    std::cout.write(bytes.data(), std::streamsize(bytes.size()));
    std::cout.flush();
    return;
  }
  std::string error;
  if (!writeFileAtomically(path, bytes.data(), bytes.size(), error, fsync))
    throw Error(error);
}

void writeFileStreamed(
    const std::string &path,
    const std::function<bool(int fd, std::string &error)> &fill, Fsync fsync) {
  std::string error;
  if (!writeFileAtomically(path, fill, error, fsync))
    throw Error(error);
}

void writeModelAtomically(const std::string &path,
                          const onnx::ModelProto &proto, Fsync fsync) {
  writeFileStreamed(
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
      fsync);
}

} // namespace mpc
