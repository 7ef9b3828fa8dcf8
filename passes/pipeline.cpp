// Pipeline runner: passes in order, verify after each, hooks for printing.
#include "passes/pipeline.h"

#include "passes/onnx/import_lowering.h"
#include "support/diagnostics.h"

#include <chrono>
#include <cstdio>
#include <ctime>
#include <optional>
#include <sstream>
#include <string>
#include <unordered_set>

namespace mpc {

TimePoint TimePoint::now() {
  using Clock = std::chrono::steady_clock;
  timespec cpu{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cpu);
  return {
      std::chrono::duration<double>(Clock::now().time_since_epoch()).count(),
      double(cpu.tv_sec) + double(cpu.tv_nsec) * 1e-9};
}

void PassTimings::add(const std::string &name, const TimePoint &start) {
  TimePoint end = TimePoint::now();
  for (PassTiming &row : rows_)
    if (row.name == name) {
      row.wall += end.wall - start.wall;
      row.cpu += end.cpu - start.cpu;
      return;
    }
  rows_.push_back({name, end.wall - start.wall, end.cpu - start.cpu});
}

std::string PassTimings::report() const {
  PassTiming total{"Total"};
  for (const PassTiming &row : rows_) {
    total.wall += row.wall;
    total.cpu += row.cpu;
  }
  std::ostringstream os;
  char line[200];
  os << "===-------------------------------------------------------------"
        "------------===\n"
     << "                      ... Pass execution timing report ...\n"
     << "===-------------------------------------------------------------"
        "------------===\n";
  std::snprintf(line, sizeof line,
                "  Total Execution Time: %.4f seconds (%.4f wall clock)\n\n",
                total.cpu, total.wall);
  os << line << "   ---User+System---   ---Wall Time---  --- Name ---\n";
  auto share = [](double part, double whole) {
    return whole > 0 ? 100.0 * part / whole : 0.0;
  };
  auto row = [&](const PassTiming &r) {
    std::snprintf(line, sizeof line,
                  "   %7.4f (%5.1f%%)   %7.4f (%5.1f%%)  %s\n", r.cpu,
                  share(r.cpu, total.cpu), r.wall, share(r.wall, total.wall),
                  r.name.c_str());
    os << line;
  };
  for (const PassTiming &r : rows_)
    row(r);
  row(total);
  return os.str();
}

void runPipeline(Model &model, const std::vector<PipelineEntry> &pipeline,
                 const CompileOptions &options, const PipelineConfig &config,
                 Statistics &stats) {
  // The model as it stands has passed the verifier (the verify pass, or the
  // check after the pass before).
  bool verified = false;
  std::unordered_set<std::string> said; // the notes given so far
  // The metadata names values; each pass's rewrites carry those names along
  // (Model::updateValueReferences), so no pass updates them by hand.
  model.updateValueReferences();
  for (size_t index = 0; index < pipeline.size(); ++index) {
    const PipelineEntry &entry = pipeline[index];
    // name{k=v}: the pass sees the options its flags would have set.
    std::optional<CompileOptions> passOptions;
    if (!entry.options.empty())
      passOptions = withPassOptions(options, entry);
    PassContext ctx{passOptions ? *passOptions : options, entry.options, {}};
    ctx.unchangedSinceVerify = verified;
    TimePoint start = TimePoint::now();
    entry.pass->run(model, ctx);
    model.updateValueReferences();
    if (config.timings)
      config.timings->add(entry.pass->name, start);
    for (const auto &kv : ctx.stats)
      stats[std::string(entry.pass->name) + "." + kv.first] += kv.second;
    // A note two passes give (one looking before the other erases the
    // evidence, one after) is said once.
    if (config.note)
      for (const std::string &n : ctx.notes)
        if (said.insert(n).second)
          config.note(n);
    // Not after verify itself (it throws unless the model passes), nor
    // after an analysis, or a pass that found nothing to do, that left a
    // verified model as it was.
    //
    // lower-onnx is the one pass whose input nothing verified (the verifier
    // knows only lowered ops): what the verifier finds after it, an
    // unsupported op say, is as likely the input's fault as the pass's, and
    // is reported as the verify pass reports it. When it lowered nothing,
    // or the verify pass comes next, the next pass checks the model.
    bool lowering = entry.pass->name == std::string(kLowerOnnx);
    bool verifyNext = index + 1 < pipeline.size() &&
                      std::string(pipeline[index + 1].pass->name) == "verify";
    if (std::string(entry.pass->name) == "verify") {
      verified = true;
    } else if ((entry.pass->preservesModel || ctx.changedNothing) && verified) {
      // unchanged since it passed
    } else if (lowering && (ctx.changedNothing || verifyNext)) {
      // the next pass's to check
    } else if (!config.verifyEach) {
      verified = false;
    } else {
      verified = true; // below, or it throws
      PassContext vctx{options, {}, {}};
      start = TimePoint::now();
      try {
        runVerify(model, vctx);
      } catch (const Error &e) {
        if (lowering)
          throw;
        throw Error(std::string("verifier failed after pass '") +
                    entry.pass->name + "' (a bug in that pass): " + e.what());
      }
      if (config.timings)
        config.timings->add("verify-each", start);
    }
    if (config.afterPass) {
      start = TimePoint::now();
      config.afterPass(entry.pass->name, model);
      if (config.timings)
        config.timings->add("after-pass hooks", start);
    }
  }
}

std::string printValueTypes(const Model &model) {
  std::ostringstream os;
  auto print = [&](const Graph &g) {
    for (const auto &n : g.nodes())
      for (const Value *o : n->outputs())
        if (o)
          os << "// type: " << o->name() << " : " << o->typeString() << "\n";
  };
  print(*model.graph);
  if (model.training)
    print(*model.training->algorithm);
  return os.str();
}

} // namespace mpc
