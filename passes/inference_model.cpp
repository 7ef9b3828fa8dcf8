// The deployable model of a compiled model (passes/inference_model.h).
#include "passes/inference_model.h"

#include "ir/mpc_ops.h"
#include "ir/step_metadata.h"
#include "passes/inference_mode.h"
#include "passes/pipeline.h"
#include "passes/registry.h"
#include "passes/shape_inference.h"
#include "support/diagnostics.h"

#include <algorithm>
#include <optional>

namespace mpc {
namespace {

/// The ops whose first input is the scores a loss is computed from: what a
/// model that returns only its loss predicts.
bool isLossOfScores(const Node &n) {
  return n.domain().empty() && (n.opType() == "SoftmaxCrossEntropyLoss" ||
                                n.opType() == "NegativeLogLikelihoodLoss");
}

std::string outputList(const Graph &g) {
  std::string s;
  for (const Value *o : g.outputs())
    s += (s.empty() ? "" : ", ") + o->name();
  return s;
}

/// The values the deployed model outputs: `names`, else every output of
/// the forward but the loss, else the scores a lone loss is computed from.
std::vector<Value *> chooseOutputs(const Model &compiled, Graph &g,
                                   const std::vector<std::string> &names,
                                   std::vector<std::string> &notes) {
  std::vector<Value *> chosen;
  for (const std::string &name : names) {
    Value *v = g.findValue(name);
    if (!v)
      throw Error("--outputs: '" + name +
                  "' is not a value of the model's forward (its outputs: " +
                  outputList(g) + ")");
    if (std::find(chosen.begin(), chosen.end(), v) == chosen.end())
      chosen.push_back(v);
  }
  if (!chosen.empty())
    return chosen;
  const std::string *loss = readMeta(compiled, meta::kLoss);
  Value *lossValue = nullptr;
  for (Value *o : g.outputs()) {
    if (loss && o->name() == *loss)
      lossValue = o;
    else
      chosen.push_back(o);
  }
  if (!chosen.empty())
    return chosen;
  const Node *producer = lossValue ? lossValue->producer() : nullptr;
  if (producer && isLossOfScores(*producer) && producer->input(0)) {
    notes.push_back("the forward's only output is its loss: the model "
                    "outputs '" +
                    producer->input(0)->name() + "', the scores its " +
                    producer->opType() + " reads (--outputs=NAME chooses)");
    return {producer->input(0)};
  }
  throw Error("the model's forward outputs only its loss '" +
              (lossValue ? lossValue->name() : outputList(g)) +
              "': name the values to export with --outputs=NAME,NAME");
}

/// Dims [start, end) of a Shape node over an input of rank `rank` (ONNX's
/// clamping of negative and out-of-range bounds).
std::pair<int64_t, int64_t> shapeRange(const Node &shape, int64_t rank) {
  auto clamp = [&](int64_t i) {
    if (i < 0)
      i += rank;
    return std::min(std::max<int64_t>(i, 0), rank);
  };
  return {clamp(shape.attrInt("start", 0)), clamp(shape.attrInt("end", rank))};
}

/// Whether dims [begin, end) of `a` and `b` are provably equal: the same
/// static size, or the same symbol of the export (torch's exporter names
/// one symbol for a dim its inputs share, e.g. the sequence length of the
/// input ids and of the labels).
bool sameDims(const Value &a, const Value &b, int64_t begin, int64_t end) {
  if (!a.hasShape || !b.hasShape || b.rank() < end)
    return false;
  for (int64_t d = begin; d < end; ++d) {
    const Dim &x = a.dims[size_t(d)], &y = b.dims[size_t(d)];
    bool equal = x.isKnown() ? x.value == y.value
                             : !x.symbol.empty() && x.symbol == y.symbol;
    if (!equal)
      return false;
  }
  return true;
}

/// An input the chosen outputs read only through Shape nodes (the exporter
/// took the sequence length from the labels, say) is read from another
/// input whose dims there are provably the same, so that the deployed model
/// does without it.
void readShapesFromOtherInputs(Graph &g) {
  auto onlyShaped = [](const Value *v) {
    if (v->uses().empty() || v->isGraphOutput())
      return false;
    for (const Use &u : v->uses())
      if (!u.user->isOp("", "Shape"))
        return false;
    return true;
  };
  for (Value *in : std::vector<Value *>(g.inputs())) {
    if (!onlyShaped(in) || !in->hasShape)
      continue;
    std::vector<std::pair<Node *, Value *>> moves;
    for (const Use &u : in->uses()) {
      auto [begin, end] = shapeRange(*u.user, in->rank());
      Value *source = nullptr;
      for (Value *other : g.inputs())
        if (other != in && !onlyShaped(other) && !other->uses().empty() &&
            sameDims(*in, *other, begin, end) &&
            (u.user->hasAttr("start") || u.user->hasAttr("end") ||
             other->rank() == in->rank())) {
          source = other;
          break;
        }
      if (!source)
        break;
      moves.emplace_back(u.user, source);
    }
    if (moves.size() != in->uses().size())
      continue;
    for (auto &[shape, source] : moves) {
      // end, when absent, meant `in`'s rank: spell it for the new input.
      if (!shape->hasAttr("end") && source->rank() != in->rank())
        shape->setAttr("end", Attribute::ofInt(in->rank()));
      shape->setInput(0, source);
    }
  }
}

/// Removes the graph inputs nothing reads any more (the labels).
void removeUnusedInputs(Graph &g) {
  for (Value *in : std::vector<Value *>(g.inputs()))
    if (in->uses().empty() && !in->isGraphOutput())
      g.removeInput(in);
}

/// The leading dim every input shares, when each has a static one.
std::optional<int64_t> sharedStaticBatch(const Graph &g) {
  std::optional<int64_t> batch;
  for (const Value *in : g.inputs()) {
    if (!in->hasShape || in->dims.empty() || !in->dims[0].isKnown())
      return std::nullopt;
    if (batch && *batch != in->dims[0].value)
      return std::nullopt;
    batch = in->dims[0].value;
  }
  return batch;
}

/// Infers every node output of `g` afresh from its inputs' types; false
/// when inference fails (a computation that does not fit the inputs).
bool reinfer(Graph &g, int64_t opset) {
  forgetIntermediateShapes(g);
  try {
    inferGraph(g, opset);
  } catch (const Error &) {
    return false;
  }
  return true;
}

/// A model exported with a fixed batch B (no dynamic axes): makes the
/// inputs' leading dim symbolic when the computation does not depend on
/// it. The test: with B + 1 samples every output has B + 1 rows and the
/// same other dims (a Reshape to a constant shape holding B, say, fails
/// it); then the model keeps its static batch, with a note.
void makeBatchSymbolic(Model &m, std::vector<std::string> &notes) {
  Graph &g = *m.graph;
  std::optional<int64_t> batch = sharedStaticBatch(g);
  if (!batch || g.inputs().empty())
    return;
  const int64_t opset = std::max<int64_t>(m.opsetVersion(""), 1);
  std::unique_ptr<Graph> trial = g.clone();
  for (Value *in : trial->inputs())
    in->dims[0] = Dim(*batch + 1);
  bool flows = reinfer(*trial, opset);
  for (size_t i = 0; flows && i < g.outputs().size(); ++i) {
    const Value *before = g.outputs()[i];
    const Value *after = trial->outputs()[i];
    Dims expected = before->dims;
    flows = before->hasShape && after->hasShape && !expected.empty() &&
            expected[0].value == *batch;
    if (flows) {
      expected[0] = Dim(*batch + 1);
      flows = after->dims == expected;
    }
  }
  if (!flows) {
    notes.push_back("the model was exported with a fixed batch of " +
                    std::to_string(*batch) +
                    " that its computation depends on, so the exported "
                    "model keeps it (export with a dynamic batch dimension "
                    "for any batch size)");
    return;
  }
  for (Value *in : g.inputs())
    in->dims[0] = Dim::symbolic("batch");
  if (!reinfer(g, opset))
    throw Error("internal: the forward's shapes do not infer with a "
                "symbolic batch");
}

/// Casts each output back to the type it had before autocast (inputs and
/// outputs of a deployed half-precision model keep their types, as
/// onnxconverter-common's keep_io_types).
void keepOutputTypes(Graph &g, const std::vector<DType> &types) {
  for (size_t i = 0; i < g.outputs().size(); ++i) {
    Value *o = g.outputs()[i];
    if (o->dtype == types[i])
      continue;
    std::string name = o->name();
    g.renameValue(o, g.uniqueValueName(name + "_" + dtypeName(o->dtype)));
    Node *cast =
        g.createNodeWithOutputs("Cast", {o}, {name}, g.uniqueNodeName(name));
    cast->setAttr("to", Attribute::ofInt(toOnnxDataType(types[i])));
    g.setOutput(i, cast->output(0));
  }
}

} // namespace

std::unique_ptr<Model>
buildInferenceModel(const Model &compiled,
                    const InferenceExportOptions &options,
                    const std::map<std::string, TensorPtr> &weights,
                    std::vector<std::string> &notes) {
  auto m = std::make_unique<Model>();
  m->irVersion = compiled.irVersion;
  m->opsets = compiled.opsets;
  m->producerName = compiled.producerName;
  m->producerVersion = compiled.producerVersion;
  m->graph = compiled.graph->clone();
  Graph &g = *m->graph;
  for (Value *init : g.initializers()) {
    auto it = weights.find(init->name());
    if (it != weights.end())
      init->setInitializer(it->second);
    // No training state in a deployed model: every weight is a constant
    // (autocast converts constants in place, cleanup drops unused ones).
    init->isState = false;
  }

  std::vector<Value *> outputs =
      chooseOutputs(compiled, g, options.outputs, notes);
  g.clearOutputs();
  for (Value *o : outputs)
    g.addOutput(o);
  switchToInferenceMode(g);

  CompileOptions compile;
  compile.precision = options.precision;
  compile.lossScale = "none";
  compile.recordPrecision = false;
  Statistics stats;
  // cleanup drops what the chosen outputs do not need (the loss, batch
  // norms' running-statistic updates); then the inputs only the loss read.
  runPipeline(*m, parsePipeline("verify,infer-shapes,cleanup"), compile,
              PipelineConfig{}, stats);
  readShapesFromOtherInputs(g);
  removeUnusedInputs(g);
  makeBatchSymbolic(*m, notes);
  if (options.precision != DType::F32) {
    std::vector<DType> types;
    for (const Value *o : g.outputs())
      types.push_back(o->dtype);
    runPipeline(*m, parsePipeline("autocast,cleanup"), compile,
                PipelineConfig{}, stats);
    keepOutputTypes(*m->graph, types);
  }
  runPipeline(*m, parsePipeline("verify,infer-shapes"), compile,
              PipelineConfig{}, stats);
  m->metadata.clear(); // autocast's mpc.precision: not a training model
  // The training step's domain, unless a node of the forward still uses it
  // (an mpc op, written with its function).
  bool usesMpc = false;
  for (const Node *n : m->graph->nodeList())
    usesMpc |= n->domain() == kMpcDomain;
  if (!usesMpc)
    m->opsets.erase(
        std::remove_if(m->opsets.begin(), m->opsets.end(),
                       [](const auto &o) { return o.first == kMpcDomain; }),
        m->opsets.end());
  return m;
}

void keepShapeGenericForward(Model &compiled, std::unique_ptr<Graph> imported) {
  if (!compiled.training || !imported)
    return;
  const Graph &step = *compiled.training->algorithm;
  // The compiled value an initializer of the forward reads: the state the
  // step trains, else the compiled main graph's tensor (a constant, or the
  // whole weight of a master the step trains a chunk of: --shard-optimizer).
  auto compiledValue = [&](const Value &init) -> const Value * {
    const Value *v = step.findValue(init.name());
    const Value *main = compiled.graph->findValue(init.name());
    const bool chunk = v && v->isInitializer() && main &&
                       main->isInitializer() &&
                       v->initializer()->dims != main->initializer()->dims;
    if (!v || !v->isInitializer() || !v->isState || chunk)
      v = main;
    return v && v->isInitializer() ? v : nullptr;
  };
  for (const Value *init : imported->initializers())
    if (const Value *v = compiledValue(*init))
      if (v->initializer()->dtype != init->initializer()->dtype ||
          v->initializer()->dims != init->initializer()->dims)
        return; // master weights of another type: keep the specialised one
  // The compiled main graph's other state (none today) must stay readable.
  for (const Value *init : compiled.graph->initializers())
    if (init->isState && !imported->findValue(init->name()))
      return;
  for (Value *init : imported->initializers())
    if (const Value *v = compiledValue(*init)) {
      init->setInitializer(v->initializer());
      init->isState = v->isState;
    }
  imported->setName(compiled.graph->name());
  compiled.graph = std::move(imported);
}

} // namespace mpc
