// Pipeline runner: passes in order, verify after each, hooks for printing.
#include "passes/pipeline.h"

#include "passes/support/diagnostics.h"

#include <sstream>

namespace mpc {

void runPipeline(Model &model, const std::vector<PipelineEntry> &pipeline,
                 const CompileOptions &options, const PipelineConfig &config,
                 Statistics &stats) {
  for (const PipelineEntry &entry : pipeline) {
    PassContext ctx{options, entry.options, {}};
    entry.pass->run(model, ctx);
    for (const auto &kv : ctx.stats)
      stats[std::string(entry.pass->name) + "." + kv.first] += kv.second;
    if (config.verifyEach && std::string(entry.pass->name) != "verify") {
      PassContext vctx{options, {}, {}};
      try {
        runVerify(model, vctx);
      } catch (const Error &e) {
        throw Error(std::string("verifier failed after pass '") +
                    entry.pass->name + "' (a bug in that pass): " + e.what());
      }
    }
    if (config.afterPass)
      config.afterPass(entry.pass->name, model);
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
