// A compiled step's memory report (passes/memory_baseline.h).
#include "passes/memory_baseline.h"

#include "passes/memory_report.h"
#include "passes/onnx/onnx_io.h"
#include "passes/training_info.h"

namespace mpc {

MemoryPlan planFp32Baseline(const std::string &modelPath,
                            const CompileOptions &options,
                            const std::vector<PipelineEntry> &pipeline) {
  std::unique_ptr<Model> base = loadModel(modelPath);
  CompileOptions fp32 = options;
  fp32.precision = DType::F32;
  fp32.lossScale = "none";
  // The budget and bf16 optimizer state are the chosen compile's savings:
  // the baseline is the plain fp32 step.
  fp32.memoryBudget = 0;
  fp32.optimizerStateDtype = DType::F32;
  PipelineConfig config;
  config.verifyEach = false; // the chosen compile was verified
  Statistics stats;
  runPipeline(*base, pipeline.empty() ? defaultPipelineFor(*base) : pipeline,
              fp32, config, stats);
  return planCompiledModel(*base);
}

StepMemoryReport reportStepMemory(const Model &compiled,
                                  const std::string &modelPath,
                                  const CompileOptions &options,
                                  const std::vector<PipelineEntry> &pipeline) {
  StepMemoryReport r;
  r.chosen = planCompiledModel(compiled);
  r.baseline = planFp32Baseline(modelPath, options, pipeline);
  r.flops = countStepFlops(compiled);
  r.label = dtypeName(options.precision);
  return r;
}

std::string StepMemoryReport::table() const {
  return memoryReportTable(chosen, label, baseline, &flops);
}

std::string StepMemoryReport::json() const {
  return memoryReportJson(chosen, label, baseline, &flops);
}

} // namespace mpc
