// The compile of one loaded model (passes/compile_model.h).
#include "passes/compile_model.h"

#include "passes/inference_model.h"
#include "passes/onnx/import_lowering.h"
#include "passes/precision_map.h"

namespace mpc {

void compileLoadedModel(Model &model,
                        const std::vector<PipelineEntry> &pipeline,
                        bool pipelineGiven, const CompileOptions &options,
                        PipelineConfig config, Statistics &stats) {
  // --input-shape and --batch fix the step's shapes; the forward users
  // deploy keeps the ones the export declared (passes/inference_model.h),
  // lowered: it is taken as lower-onnx, the pipeline's first pass, leaves it.
  std::unique_ptr<Graph> generic;
  bool keepGeneric = !pipelineGiven && !model.training &&
                     (!options.inputShapes.empty() || options.batch > 0);
  auto userHook = std::move(config.afterPass);
  config.afterPass = [&](const std::string &pass, const Model &m) {
    if (keepGeneric && pass == kLowerOnnx)
      generic = m.graph->clone();
    // The nodes later passes add are recorded only when the precision map is
    // kept (--explain, --dot, Step.explain).
    if (options.recordPrecision)
      recordNodesAddedBy(m, pass);
    if (userHook)
      userHook(pass, m);
  };
  runPipeline(model, pipeline, options, config, stats);
  keepShapeGenericForward(model, std::move(generic));
}

} // namespace mpc
