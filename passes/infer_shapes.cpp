// infer-shapes: static dtypes and shapes for every value of the model.
//
// First applies the user's shape facts to the graph inputs:
// --input-shape=x:64x10 fixes one input's dims (it must agree with the rank and
// any static dim the model declares), --batch=B replaces a symbolic or unknown
// leading dim of every input. Then runs the per-op rules of
// passes/shape_inference.h over the main graph and the training algorithm, in
// node order. Needs a graph in topological order (verify); fold-constants runs
// after it to turn the shape arithmetic it can now see through into constants.
#include "passes/pass.h"
#include "passes/shape_inference.h"
#include "support/diagnostics.h"

namespace mpc {
namespace {

/// The graph inputs of the model named `name` (main graph and algorithm).
std::vector<Value *> inputsNamed(Model &model, const std::string &name) {
  std::vector<Value *> found;
  auto scan = [&](Graph &g) {
    for (Value *in : g.inputs())
      if (in->name() == name)
        found.push_back(in);
  };
  scan(*model.graph);
  if (model.training)
    scan(*model.training->algorithm);
  return found;
}

std::string inputNames(const Model &model) {
  std::string s;
  auto scan = [&](const Graph &g) {
    for (const Value *in : g.inputs())
      if (s.find("'" + in->name() + "'") == std::string::npos)
        s += (s.empty() ? "'" : ", '") + in->name() + "'";
  };
  scan(*model.graph);
  if (model.training)
    scan(*model.training->algorithm);
  return s.empty() ? "none" : s;
}

void applyInputShape(Value &v, const std::vector<int64_t> &dims) {
  std::string given = dimsToString(dims);
  if (v.hasShape && v.rank() != int64_t(dims.size()))
    error() << "--input-shape=" << v.name() << ":" << given << ": input '"
            << v.name() << "' has rank " << v.rank() << " ("
            << dimsToString(v.dims) << "), not " << dims.size();
  for (size_t i = 0; v.hasShape && i < dims.size(); ++i)
    if (v.dims[i].isKnown() && v.dims[i].value != dims[i])
      error() << "--input-shape=" << v.name() << ":" << given << ": input '"
              << v.name() << "' is " << dimsToString(v.dims) << ", dim " << i
              << " is " << v.dims[i].value << ", not " << dims[i];
  v.dims = toDims(dims);
  v.hasShape = true;
}

} // namespace

void runInferShapes(Model &model, PassContext &ctx) {
  const CompileOptions &opts = ctx.options;
  bool inputsChanged = false;
  for (const auto &[name, dims] : opts.inputShapes) {
    std::vector<Value *> targets = inputsNamed(model, name);
    if (targets.empty())
      error() << "--input-shape=" << name << ":" << dimsToString(dims)
              << ": the model has no input named '" << name
              << "' (inputs: " << inputNames(model) << ")";
    for (int64_t d : dims)
      if (d < 0)
        error() << "--input-shape=" << name << ": dims must not be negative";
    // --batch fixes every symbolic dim 0; an --input-shape that fixes one
    // to another batch would silently win over it.
    for (Value *v : targets)
      if (opts.batch > 0 && v->hasShape && !v->dims.empty() &&
          !v->dims[0].isKnown() && !dims.empty() && dims[0] != opts.batch)
        error() << "--input-shape=" << name << ":" << dimsToString(dims)
                << " contradicts --batch=" << opts.batch << ": dim 0 of input '"
                << name << "' (" << dimsToString(v->dims)
                << ") is the batch, which --batch fixes to " << opts.batch;
    for (Value *v : targets)
      applyInputShape(*v, dims);
    inputsChanged = true;
  }
  if (opts.batch < 0)
    error() << "--batch=" << opts.batch << ": the batch must be positive";
  if (opts.batch > 0) {
    auto applyBatch = [&](Graph &g) {
      for (Value *in : g.inputs())
        if (in->hasShape && !in->dims.empty() && !in->dims[0].isKnown()) {
          in->dims[0] = Dim(opts.batch);
          inputsChanged = true;
        }
    };
    bool applied = inputsChanged;
    inputsChanged = false;
    applyBatch(*model.graph);
    if (model.training)
      applyBatch(*model.training->algorithm);
    // Nothing symbolic to fix: a fixed batch other than --batch's would be
    // trained silently instead of the one asked for.
    if (!inputsChanged)
      for (const Value *in : model.graph->inputs())
        if (!in->isInitializer() && in->hasShape && !in->dims.empty() &&
            in->dims[0].isKnown() && in->dims[0].value != opts.batch)
          error() << "--batch=" << opts.batch
                  << ": no input has a symbolic batch dim to fix, and input '"
                  << in->name() << "' is " << dimsToString(in->dims)
                  << " (its batch is " << in->dims[0].value
                  << "; re-export the model with a dynamic batch dim, or "
                     "drop --batch)";
    inputsChanged |= applied;
  }

  int64_t opset = model.opsetVersion("");
  if (opset < 0)
    opset = 17; // the importer adds the default domain; this is a fallback
  int64_t before = 0, after = 0;
  auto run = [&](Graph &g) {
    if (inputsChanged)
      forgetIntermediateShapes(g);
    for (Node *n : g.nodeList())
      for (Value *o : n->outputs())
        before += o && o->hasShape && concreteDims(o->dims) ? 1 : 0;
    inferGraph(g, opset);
    for (Node *n : g.nodeList())
      for (Value *o : n->outputs())
        after += o && o->hasShape && concreteDims(o->dims) ? 1 : 0;
  };
  run(*model.graph);
  if (model.training)
    run(*model.training->algorithm);
  ctx.stats["static-values"] = after;
  ctx.stats["newly-static-values"] = std::max<int64_t>(0, after - before);
}

} // namespace mpc
