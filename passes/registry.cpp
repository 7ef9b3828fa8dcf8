// The pass table and pipeline parsing.
#include "passes/registry.h"

#include "passes/support/diagnostics.h"
#include "passes/training_info.h"

#include <algorithm>

namespace mpc {

const std::vector<PassInfo> &passRegistry() {
  static const std::vector<PassInfo> table = {
      {"verify", "structural and type checks of every graph", "", runVerify},
      {"infer-shapes", "static dtypes and shapes for every value", "",
       runInferShapes},
      {"fold-constants", "fold Constant nodes and shape arithmetic", "",
       runFoldConstants},
      {"fuse-gelu",
       "one Gelu node for the GELU arithmetic of opset < 20 exports (before "
       "autodiff)",
       "", runFuseGelu},
      {"fuse-rmsnorm",
       "one mpc.RMSNormalization for RMS-norm arithmetic (LlamaRMSNorm's, "
       "RMSNormalization's lowering; before autodiff)",
       "", runFuseRmsNorm},
      {"fuse-log-sigmoid",
       "one stable mpc.LogSigmoid for Log(Sigmoid(x)) and Log(1 - "
       "Sigmoid(x)) (BCE-with-logits, logsigmoid; before autodiff)",
       "", runFuseLogSigmoid},
      {"autodiff", "backward graph of the loss w.r.t. trainable parameters",
       "loss=NAME", runAutodiff},
      {"sync-batchnorm",
       "training-mode batch norms on the ranks' global batch statistics "
       "(--sync-batchnorm; after autodiff)",
       "", runSyncBatchNorm},
      {"autocast", "fp16/bf16 by policy, fp32 islands, shared casts", "",
       runAutocast},
      {"loss-scale",
       "scale the loss, unscale and check gradients, update the scale", "",
       runLossScale},
      {"master-weights", "fp32 master parameters, fp32 gradients", "",
       runMasterWeights},
      {"user-optimizer",
       "a training_info model's own optimizer on fp32 unscaled gradients, "
       "skipped on overflow (instead of optimizer)",
       "", runUserOptimizer},
      {"optimizer", "SGD/Adam/AdamW updates (PyTorch semantics), clipping", "",
       runOptimizer},
      {"fold-widening-casts",
       "gradients cast up to fp32 only to be summed (bias gradients: "
       "mpc.SumToShapeAs) or unscaled (UnscaleGradients), and softmax "
       "islands' inputs (mpc.SoftmaxTo, mpc.SoftmaxGradAs), are read as "
       "stored",
       "", runFoldWideningCasts},
      {"fold-transpose",
       "last-two-axes Transposes folded into mpc.FusedMatMul / Gemm "
       "transA/transB (after autocast)",
       "", runFoldTranspose},
      {"fold-bias-add",
       "a Linear's bias Add folded into its product as Gemm's C (the CUDA "
       "backend adds it in cuBLASLt's epilogue; after fold-transpose)",
       "", runFoldBiasAdd},
      {"cleanup", "dead code, duplicate casts and identity casts removed", "",
       runCleanup},
      {"recompute",
       "activation checkpointing: recompute chosen saved activations in the "
       "backward (--recompute)",
       "", runRecompute},
      {"plan-memory",
       "liveness-based buffer plan of the step, in-place updates (--stats)", "",
       runPlanMemory, /*preservesModel=*/true},
  };
  return table;
}

const PassInfo *findPass(const std::string &name) {
  for (const PassInfo &p : passRegistry())
    if (name == p.name)
      return &p;
  return nullptr;
}

std::vector<PipelineEntry> parsePipeline(const std::string &text) {
  std::vector<PipelineEntry> out;
  size_t i = 0;
  while (i < text.size()) {
    size_t j = i;
    while (j < text.size() && text[j] != ',' && text[j] != '{')
      ++j;
    std::string name = text.substr(i, j - i);
    std::map<std::string, std::string> opts;
    if (j < text.size() && text[j] == '{') {
      size_t close = text.find('}', j);
      if (close == std::string::npos)
        throw Error("--passes: missing '}' after '" + name + "{'");
      for (const std::string &kv :
           splitList(text.substr(j + 1, close - j - 1))) {
        size_t eq = kv.find('=');
        if (eq == std::string::npos)
          throw Error("--passes: option '" + kv + "' of pass '" + name +
                      "' is not key=value");
        opts[kv.substr(0, eq)] = kv.substr(eq + 1);
      }
      j = close + 1;
    }
    if (!name.empty()) {
      const PassInfo *p = findPass(name);
      if (!p) {
        std::string names;
        for (const PassInfo &q : passRegistry())
          names += (names.empty() ? "" : ", ") + std::string(q.name);
        throw Error("--passes: unknown pass '" + name + "' (passes: " + names +
                    ")");
      }
      out.push_back({p, std::move(opts)});
    }
    i = j < text.size() && text[j] == ',' ? j + 1 : j;
  }
  return out;
}

std::vector<PipelineEntry> defaultPipeline() {
  std::vector<PipelineEntry> out;
  for (const PassInfo &p : passRegistry())
    out.push_back({&p, {}});
  return out;
}

namespace {

/// Which passes read each compile flag (CompileOptions' fields).
struct FlagReaders {
  std::vector<const char *> flags;
  std::vector<const char *> passes;
};

const std::vector<FlagReaders> &flagReaders() {
  static const std::vector<FlagReaders> table = {
      {{"--input-shape", "--batch"}, {"infer-shapes"}},
      {{"--loss", "--trainable", "--frozen"}, {"autodiff"}},
      {{"--sync-batchnorm"}, {"sync-batchnorm"}},
      {{"--precision"}, {"autocast", "master-weights"}},
      {{"--fp32-ops", "--fp16-ops", "--fp32-nodes"}, {"autocast"}},
      {{"--loss-scale", "--init-scale", "--growth-factor", "--backoff-factor",
        "--growth-interval"},
       {"loss-scale"}},
      {{"--optimizer",       "--lr",
        "--momentum",        "--dampening",
        "--nesterov",        "--weight-decay",
        "--no-weight-decay", "--beta1",
        "--beta2",           "--eps",
        "--beta2-decay",     "--eps2",
        "--clip-threshold",  "--max-grad-norm",
        "--lr-schedule",     "--warmup-steps",
        "--total-steps",     "--min-lr-ratio",
        "--lr-step-size",    "--lr-gamma",
        "--lr-cycles",       "--lr-end",
        "--lr-power",        "--lr-timescale",
        "--lr-stable-steps", "--lr-decay-steps",
        "--lr-warmup-type",  "--lr-decay-type",
        "--lr-factor",       "--lr-patience",
        "--lr-threshold",    "--lr-cooldown",
        "--min-lr",          "--ema-decay",
        "--grad-comm-dtype"},
       {"optimizer", "user-optimizer"}},
      {{"--grad-accum"}, {"optimizer", "user-optimizer", "loss-scale"}},
      {{"--data-parallel"}, {"optimizer", "user-optimizer", "sync-batchnorm"}},
      {{"--recompute", "--memory-budget"}, {"recompute"}},
  };
  return table;
}

} // namespace

std::vector<std::string> passesReadingFlag(const std::string &flag) {
  for (const FlagReaders &r : flagReaders())
    for (const char *f : r.flags)
      if (flag == f)
        return {r.passes.begin(), r.passes.end()};
  return {};
}

void checkFlagsReachPipeline(const std::vector<std::string> &givenFlags,
                             const std::vector<PipelineEntry> &pipeline) {
  std::vector<std::string> ignored;
  std::vector<std::string> missingPasses;
  for (const std::string &flag : givenFlags) {
    std::vector<std::string> readers = passesReadingFlag(flag);
    if (readers.empty())
      continue;
    bool read = false;
    for (const PipelineEntry &e : pipeline)
      for (const std::string &r : readers)
        read |= r == e.pass->name;
    if (read ||
        std::find(ignored.begin(), ignored.end(), flag) != ignored.end())
      continue;
    ignored.push_back(flag);
    if (std::find(missingPasses.begin(), missingPasses.end(), readers[0]) ==
        missingPasses.end())
      missingPasses.push_back(readers[0]);
  }
  if (ignored.empty())
    return;
  auto joined = [](const std::vector<std::string> &items) {
    std::string out;
    for (const std::string &i : items)
      out += (out.empty() ? "" : ", ") + i;
    return out;
  };
  throw Error(
      "--passes: the list leaves out " +
      std::string(missingPasses.size() == 1 ? "the pass " : "the passes ") +
      joined(missingPasses) + ", so " + joined(ignored) +
      " would be ignored; drop --passes to compile the whole "
      "training step, or add " +
      (missingPasses.size() == 1 ? "that pass" : "those passes"));
}

} // namespace mpc
