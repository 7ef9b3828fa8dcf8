// The pass table and pipeline parsing.
#include "passes/registry.h"

#include "ir/step_metadata.h"
#include "passes/compile_flags.h"
#include "passes/fold_unscale.h"
#include "passes/onnx/import_lowering.h"
#include "passes/shrink_saved.h"
#include "passes/training_info.h"
#include "passes/weight_copies.h"
#include "support/diagnostics.h"

#include <algorithm>

namespace mpc {

const std::vector<PassInfo> &passRegistry() {
  static const std::vector<PassInfo> table = {
      {kLowerOnnx,
       "ONNX ops without a kernel (Resize, Einsum, LSTM, Pad, ...) rewritten "
       "into ops with one; always first (implied before a --passes list)",
       runLowerOnnx},
      {"verify", "structural and type checks of every graph", runVerify},
      {"infer-shapes", "static dtypes and shapes for every value",
       runInferShapes},
      {"fold-constants", "fold Constant nodes and shape arithmetic",
       runFoldConstants},
      {"fuse-gelu",
       "one Gelu node for the GELU arithmetic of opset < 20 exports (before "
       "autodiff)",
       runFuseGelu},
      {"fuse-rmsnorm",
       "one mpc.RMSNormalization for RMS-norm arithmetic (LlamaRMSNorm's, "
       "RMSNormalization's lowering; before autodiff)",
       runFuseRmsNorm},
      {"fuse-log-sigmoid",
       "one stable mpc.LogSigmoid for Log(Sigmoid(x)) and Log(1 - "
       "Sigmoid(x)) (BCE-with-logits, logsigmoid; before autodiff)",
       runFuseLogSigmoid},
      {"gathers-to-split",
       "one Split for constant Gathers of every index of an axis (a packed "
       "q/k/v projection; its gradient one Concat; before autodiff)",
       runGathersToSplit},
      {"autodiff", "backward graph of the loss w.r.t. trainable parameters",
       runAutodiff},
      {"sync-batchnorm",
       "training-mode batch norms on the ranks' global batch statistics "
       "(--sync-batchnorm; after autodiff)",
       runSyncBatchNorm,
       false,
       meta::kSyncBatchNorm.name,
       {"autocast"}},
      {"autocast", "fp16/bf16 by policy, fp32 islands, shared casts",
       runAutocast, false, meta::kPrecision.name},
      {"loss-scale",
       "scale the loss, unscale and check gradients, update the scale",
       runLossScale,
       false,
       meta::kLossScaleMode.name,
       {"master-weights", "optimizer"}},
      {"master-weights",
       "fp32 master parameters, fp32 gradients",
       runMasterWeights,
       false,
       meta::kMasterParams.name,
       {"optimizer"}},
      {"user-optimizer",
       "a training_info model's own optimizer on fp32 unscaled gradients, "
       "skipped on overflow (instead of optimizer)",
       runUserOptimizer,
       false,
       meta::kOptimizer.name,
       {"weight-copies"}},
      {"optimizer",
       "SGD/Adam/AdamW updates (PyTorch semantics), clipping",
       runOptimizer,
       false,
       meta::kOptimizer.name,
       {"weight-copies"}},
      {"weight-copies",
       "each master weight's fp16/bf16 copy kept as state, written by its "
       "update (SGD, Adam) instead of cast twice per step",
       runWeightCopies, false, meta::kWeightCopies.name},
      {"fold-widening-casts",
       "gradients cast up to fp32 only to be summed (bias gradients: "
       "mpc.SumToShapeAs), unscaled (UnscaleGradients), applied (SGD, "
       "Adam) or normalised (LayerNormalizationGrad, RMSNormalizationGrad), "
       "softmax islands' inputs (mpc.SoftmaxTo, mpc.SoftmaxGradAs) and "
       "residual Adds' operands (mpc.AddTo), are read as stored",
       runFoldWideningCasts},
      {"fold-unscale",
       "the updates (SGD, Adam) unscale the gradients they read "
       "(grad_scale): UnscaleGradients only checks them, no fp32 unscaled "
       "copies (after fold-widening-casts)",
       runFoldUnscale},
      {"fold-transpose",
       "last-two-axes Transposes folded into mpc.FusedMatMul / Gemm "
       "transA/transB (after autocast)",
       runFoldTranspose},
      {"fold-bias-add",
       "a Linear's bias Add folded into its product as Gemm's C (the CUDA "
       "backend adds it in cuBLASLt's epilogue; after fold-transpose)",
       runFoldBiasAdd},
      {"cleanup", "dead code, duplicate casts and identity casts removed",
       runCleanup},
      {"shrink-saved",
       "values saved for the backward kept in their smallest exact form: "
       "an fp16 twin cast again, an exact widening widened again (after "
       "cleanup)",
       runShrinkSaved},
      {"recompute",
       "activation checkpointing: recompute chosen saved activations in the "
       "backward (--recompute)",
       runRecompute},
      {"plan-memory",
       "liveness-based buffer plan of the step, in-place updates (--stats)",
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

void checkPassOrder(const Model &model, const char *pass) {
  const PassInfo *info = findPass(pass);
  if (!info)
    throw Error(std::string("checkPassOrder: no pass '") + pass + "'");
  auto ran = [&](std::string_view key) {
    return !key.empty() && model.meta(std::string(key)) != nullptr;
  };
  if (ran(info->records))
    throw Error(std::string(pass) + ": already applied (" +
                std::string(info->records) + " is set)");
  for (const char *later : info->runsBefore) {
    const PassInfo *l = findPass(later);
    if (l && ran(l->records))
      throw Error(std::string(pass) + ": must run before " + later + " (" +
                  std::string(l->records) + " is set)");
  }
}

namespace {

/// The options of name{...}: "k=v" items separated by ',' or blanks, as
/// MLIR writes them; an item without '=' continues the value before it, so
/// list values keep their commas (fp32-ops=Softmax,Exp).
std::map<std::string, std::string> parsePassOptions(const std::string &name,
                                                    const std::string &text) {
  std::vector<std::string> items;
  std::string item;
  auto flush = [&]() {
    if (item.empty())
      return;
    if (item.find('=') == std::string::npos && !items.empty())
      items.back() += "," + item;
    else
      items.push_back(item);
    item.clear();
  };
  for (char c : text) {
    if (c == ',' || c == ' ' || c == '\t')
      flush();
    else
      item += c;
  }
  flush();
  std::map<std::string, std::string> opts;
  for (const std::string &kv : items) {
    size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0)
      throw Error("--passes: option '" + kv + "' of pass '" + name +
                  "' is not key=value");
    if (!opts.emplace(kv.substr(0, eq), kv.substr(eq + 1)).second)
      throw Error("--passes: option '" + kv.substr(0, eq) + "' of pass '" +
                  name + "' is given twice");
  }
  return opts;
}

} // namespace

std::vector<std::string> passOptionNames(const PassInfo &pass) {
  std::vector<std::string> names;
  for (const std::string &flag : compileFlagsReadBy(pass.name))
    names.push_back(flag.substr(2));
  return names;
}

CompileOptions withPassOptions(const CompileOptions &options,
                               const PipelineEntry &entry) {
  CompileOptions local = options;
  std::vector<std::string> names = passOptionNames(*entry.pass);
  for (const auto &[key, value] : entry.options) {
    if (std::find(names.begin(), names.end(), key) == names.end()) {
      std::string list;
      for (const std::string &n : names)
        list += (list.empty() ? "" : ", ") + n;
      throw Error("--passes: pass '" + std::string(entry.pass->name) +
                  "' has no option '" + key + "' (" +
                  (names.empty() ? std::string("it takes none")
                                 : "its options: " + list) +
                  ")");
    }
    try {
      applyCompileFlag(local, "--" + key, &value);
    } catch (const Error &e) {
      throw Error("--passes: " + std::string(entry.pass->name) + "{" + key +
                  "=...}: " + e.what());
    }
  }
  return local;
}

std::vector<PipelineEntry> parsePipeline(const std::string &text) {
  std::vector<PipelineEntry> out;
  size_t i = 0;
  while (i < text.size()) {
    size_t j = i;
    while (j < text.size() && text[j] != ',' && text[j] != '{')
      ++j;
    std::string name = text.substr(i, j - i);
    std::string optionText;
    if (j < text.size() && text[j] == '{') {
      // The matching '}': a value may hold braces (a pattern's a{2}).
      size_t close = j + 1;
      for (int depth = 1; close < text.size(); ++close)
        if (text[close] == '{')
          ++depth;
        else if (text[close] == '}' && --depth == 0)
          break;
      if (close >= text.size())
        throw Error("--passes: missing '}' after '" + name + "{'");
      optionText = text.substr(j + 1, close - j - 1);
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
      PipelineEntry entry{p, parsePassOptions(name, optionText)};
      // Every option named and its value checked now, before the model
      // is read (the pipeline applies them again as the pass runs).
      withPassOptions(CompileOptions{}, entry);
      out.push_back(std::move(entry));
    } else if (!optionText.empty()) {
      throw Error("--passes: options '{" + optionText + "}' follow no pass");
    }
    i = j < text.size() && text[j] == ',' ? j + 1 : j;
  }
  // Every other pass, verify included, knows only the lowered ops: a list
  // without lower-onnx lowers first all the same, and one that names it
  // after another pass would hand that pass ops it does not know.
  for (size_t k = 1; k < out.size(); ++k)
    if (out[k].pass->name == std::string(kLowerOnnx))
      throw Error(std::string("--passes: ") + kLowerOnnx +
                  " must come first (every other pass works on the lowered "
                  "ops), not after '" +
                  out[k - 1].pass->name + "'");
  // The order passes declare (PassInfo::runsBefore), before anything runs.
  for (size_t a = 0; a < out.size(); ++a)
    for (const char *later : out[a].pass->runsBefore)
      for (size_t b = 0; b < a; ++b)
        if (out[b].pass->name == std::string(later))
          throw Error("--passes: " + std::string(out[a].pass->name) +
                      " must run before " + later);
  if (!out.empty() && out[0].pass->name != std::string(kLowerOnnx))
    out.insert(out.begin(), PipelineEntry{findPass(kLowerOnnx), {}});
  return out;
}

std::vector<PipelineEntry> defaultPipeline() {
  std::vector<PipelineEntry> out;
  for (const PassInfo &p : passRegistry())
    out.push_back({&p, {}});
  return out;
}

// Which pass reads which compile flag is written in the flag's row of the
// compile-flag table (passes/compile_flags.cpp, its marks).
std::vector<std::string> compileFlagsReadBy(const std::string &pass) {
  std::vector<std::string> flags;
  for (const Flag &f : compileFlagTable())
    if (f.hasMark(pass))
      flags.push_back(f.name);
  return flags;
}

std::vector<std::string> passesReadingFlag(const std::string &flag) {
  const Flag *f = findFlag(compileFlagTable(), flag);
  return f ? f->marks : std::vector<std::string>{};
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
