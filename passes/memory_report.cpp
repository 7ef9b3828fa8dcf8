// Memory report: the step's plan by class, as a table and as JSON.
#include "passes/memory_report.h"

#include "passes/flop_count.h"
#include "passes/onnx/onnx_io.h"
#include "passes/optimizer/shard_optimizer.h"
#include "passes/shape_inference.h"
#include "passes/step_graph.h"
#include "passes/verify.h"

#include "onnx/onnx_pb.h"
#include "support/diagnostics.h"

#include <algorithm>
#include <cstdio>
#include <optional>
#include <sstream>

namespace mpc {

namespace {

/// Bytes in the table's unit (MiB, or KiB for small models).
std::string inUnit(size_t bytes, double unit) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", double(bytes) / unit);
  return buf;
}

std::string ratio(size_t a, size_t b) {
  if (b == 0)
    return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", double(a) / double(b));
  return buf;
}

void jsonPlan(std::ostringstream &os, const MemoryPlan &p,
              const std::string &label) {
  os << "{\"precision\": \"" << label << "\", \"peak_bytes\": " << p.arenaBytes
     << ", \"live_peak_bytes\": " << p.livePeakBytes
     << ", \"no_reuse_bytes\": " << p.noReuseBytes
     << ", \"persistent_bytes\": " << p.persistentBytes
     << ", \"in_place_writes\": " << p.inPlace.size();
  for (const auto &[key, bytes] : {std::pair{"by_class", &p.atPeak},
                                   std::pair{"total_by_class", &p.total}}) {
    os << ", \"" << key << "\": {";
    for (size_t c = 0; c < kNumMemoryClasses; ++c)
      os << (c ? ", " : "") << "\"" << memoryClassName(MemoryClass(c))
         << "\": " << (*bytes)[c];
    os << "}";
  }
  size_t saved = 0;
  for (size_t bytes : p.savedForBackward)
    saved += bytes;
  os << ", \"saved_for_backward\": {\"bytes\": " << saved
     << ", \"by_class\": {";
  for (size_t c = 0; c < kNumMemoryClasses; ++c)
    os << (c ? ", " : "") << "\"" << memoryClassName(MemoryClass(c))
       << "\": " << p.savedForBackward[c];
  os << "}}";
  os << "}";
}

} // namespace

namespace {

/// Infers the types of every node output of `g` in place, as the executor
/// infers them before it plans, and puts the types the outputs held back
/// when it goes out of scope (also when inference or planning throws): the
/// plan is made on the graph itself instead of on a copy, and the graph is
/// left as it was.
class InferredTypesScope {
public:
  InferredTypesScope(Graph &g, int64_t opset) {
    // Every output's type goes into two flat arrays (one allocation, not
    // one per output: the step has thousands).
    size_t outputs = 0, dims = 0;
    for (const auto &n : g.nodes())
      for (const Value *o : n->outputs())
        if (o) {
          ++outputs;
          dims += o->dims.size();
        }
    saved_.reserve(outputs);
    dims_.reserve(dims);
    for (const auto &n : g.nodes())
      for (Value *o : n->outputs())
        if (o) {
          saved_.push_back(
              {o, o->dtype, o->hasShape, dims_.size(), o->dims.size()});
          dims_.insert(dims_.end(), o->dims.begin(), o->dims.end());
        }
    inferGraph(g, opset);
  }
  InferredTypesScope(const InferredTypesScope &) = delete;
  InferredTypesScope &operator=(const InferredTypesScope &) = delete;
  ~InferredTypesScope() {
    for (const Saved &s : saved_) {
      s.value->dtype = s.dtype;
      s.value->hasShape = s.hasShape;
      // In place when the rank held (inference refines dims in place).
      s.value->dims.assign(dims_.begin() + s.dimsAt,
                           dims_.begin() + s.dimsAt + s.numDims);
    }
  }

private:
  struct Saved {
    Value *value;
    DType dtype;
    bool hasShape;
    size_t dimsAt, numDims; ///< its dims in dims_
  };
  std::vector<Saved> saved_;
  Dims dims_;
};

/// The opset the step's types are inferred at (as the executor does).
int64_t planningOpset(const Model &model) {
  return std::max<int64_t>(model.opsetVersion(""), 1);
}

/// Plans the step of `model` (planCompiledModel), whose types inference
/// would leave as they are when `typesAsInferred`.
MemoryPlan planStep(const Model &model, bool typesAsInferred) {
  // The step as mpc-run runs it: the algorithm with runnableStep's extra
  // outputs, planned in place (the types inference changes are put back, so
  // the model is left as it was; a Model's graphs are not const through it).
  Graph &g = model.training ? *model.training->algorithm : *model.graph;
  std::vector<Value *> extra;
  if (model.training)
    extra = runnableStepExtraOutputs(model, g);
  // Types of what the importer could not read from value_info, inferred as
  // the executor infers them before it plans.
  std::optional<InferredTypesScope> inferred;
  if (!typesAsInferred)
    inferred.emplace(g, planningOpset(model));
  PlanInputs in = planInputsFor(model, g);
  in.extraOutputs.assign(extra.begin(), extra.end());
  // The placements would point into the graph, whose types are put back.
  in.keepPlacements = false;
  MemoryPlan plan = planMemory(in);
  if (!plan.unplanned.empty()) {
    const Value *v = plan.unplanned.front();
    throw Error("cannot plan memory: value '" + v->name() +
                "' has no known size (" + v->typeString() +
                "); give concrete shapes with --batch=B or "
                "--input-shape=NAME:AxB");
  }
  plan.unplanned.clear();
  return plan;
}

} // namespace

MemoryPlan planCompiledModel(const Model &compiled, bool asWritten) {
  // The exporter completes mpc nodes' optional inputs with small constants;
  // planning the model as mpc-run will load it counts those too.
  std::unique_ptr<Model> written;
  if (asWritten) {
    onnx::ModelProto proto;
    exportModel(compiled, proto);
    written = importModel(proto, compiled.sourcePath, ".");
    // As each rank holds it: sharded masters are chunks in the step.
    cutShardedMastersForPlanning(*written);
  }
  return planStep(asWritten ? *written : compiled, /*typesAsInferred=*/false);
}

std::string memoryReportTable(const MemoryPlan &chosen,
                              const std::string &chosenLabel,
                              const MemoryPlan &baseline,
                              const StepFlops *flops) {
  std::ostringstream os;
  char line[160];
  bool small = std::max(chosen.arenaBytes, baseline.arenaBytes) < (10u << 20);
  const double unit = small ? 1024.0 : 1024.0 * 1024.0;
  auto mib = [unit](size_t bytes) { return inUnit(bytes, unit); };
  std::snprintf(line, sizeof line, "%-34s %12s %12s %8s\n",
                small ? "memory plan (KiB, live at peak)"
                      : "memory plan (MiB, live at peak)",
                chosenLabel.c_str(), "fp32", "ratio");
  os << line;
  for (size_t c = 0; c < kNumMemoryClasses; ++c) {
    std::snprintf(line, sizeof line, "  %-32s %12s %12s %8s\n",
                  memoryClassName(MemoryClass(c)),
                  mib(chosen.atPeak[c]).c_str(),
                  mib(baseline.atPeak[c]).c_str(),
                  ratio(chosen.atPeak[c], baseline.atPeak[c]).c_str());
    os << line;
  }
  auto row = [&](const char *name, size_t a, size_t b) {
    std::snprintf(line, sizeof line, "%-34s %12s %12s %8s\n", name,
                  mib(a).c_str(), mib(b).c_str(), ratio(a, b).c_str());
    os << line;
  };
  row("peak (planned arena)", chosen.arenaBytes, baseline.arenaBytes);
  row("live peak (lower bound)", chosen.livePeakBytes, baseline.livePeakBytes);
  row("all tensors, no reuse", chosen.noReuseBytes, baseline.noReuseBytes);
  std::snprintf(line, sizeof line,
                "peak / no-reuse: %s (%s), %s (fp32); in-place writes: %zu "
                "(%s), %zu (fp32)\n",
                ratio(chosen.arenaBytes, chosen.noReuseBytes).c_str(),
                chosenLabel.c_str(),
                ratio(baseline.arenaBytes, baseline.noReuseBytes).c_str(),
                chosen.inPlace.size(), chosenLabel.c_str(),
                baseline.inPlace.size());
  os << line;
  if (flops) {
    // GFLOPs, and the recomputation's share of the step's.
    auto g = [](int64_t f) { return double(f) / 1e9; };
    std::snprintf(
        line, sizeof line,
        "step GFLOPs: forward %.4g, backward %.4g, recompute %.4g "
        "(%.3f of the step, %.3f forwards)\n",
        g(flops->forward), g(flops->backward), g(flops->recompute),
        flops->total() ? double(flops->recompute) / double(flops->total())
                       : 0.0,
        flops->forward ? double(flops->recompute) / double(flops->forward)
                       : 0.0);
    os << line;
  }
  os << "largest at the " << chosenLabel << " peak:\n";
  for (const auto &r : chosen.largestAtPeak) {
    std::snprintf(line, sizeof line, "  %10s  %-16s %s\n", mib(r.bytes).c_str(),
                  memoryClassName(r.cls), r.name.c_str());
    os << line;
  }
  return os.str();
}

std::string memoryReportJson(const MemoryPlan &chosen,
                             const std::string &chosenLabel,
                             const MemoryPlan &baseline,
                             const StepFlops *flops) {
  std::ostringstream os;
  os << "{\"planned\": ";
  jsonPlan(os, chosen, chosenLabel);
  os << ", \"fp32_baseline\": ";
  jsonPlan(os, baseline, "fp32");
  os << ", \"ratio\": " << ratio(chosen.arenaBytes, baseline.arenaBytes);
  if (flops) {
    char fraction[32];
    std::snprintf(fraction, sizeof fraction, "%.6f",
                  flops->total()
                      ? double(flops->recompute) / double(flops->total())
                      : 0.0);
    os << ", \"flops\": {\"forward\": " << flops->forward
       << ", \"backward\": " << flops->backward
       << ", \"recompute\": " << flops->recompute
       << ", \"step\": " << flops->total()
       << ", \"recompute_fraction\": " << fraction << "}";
  }
  os << "}\n";
  return os.str();
}

void runPlanMemory(Model &model, PassContext &ctx) {
  if (!ctx.options.planMemory)
    return; // no one reads the statistics (CompileOptions::planMemory)
  // Right after a verify that found every type of the step as inference
  // gives it (as infer-shapes leaves them), inferring them again for the
  // plan would change nothing; the pipeline says whether the model is still
  // as that verify left it (not so with --no-verify-each after a pass).
  const Graph &step =
      model.training ? *model.training->algorithm : *model.graph;
  bool typesAsInferred =
      ctx.unchangedSinceVerify &&
      lastVerifyFoundTypesAsInferred(model, step, planningOpset(model));
  try {
    MemoryPlan plan = planStep(model, typesAsInferred);
    ctx.stats["peak_bytes"] = int64_t(plan.arenaBytes);
    ctx.stats["live_peak_bytes"] = int64_t(plan.livePeakBytes);
    ctx.stats["no_reuse_bytes"] = int64_t(plan.noReuseBytes);
    ctx.stats["in_place_writes"] = int64_t(plan.inPlace.size());
  } catch (const Error &) {
    // Symbolic shapes: the runtime plans once the batch is known.
    ctx.stats["skipped_symbolic_shapes"] = 1;
  }
}

} // namespace mpc
