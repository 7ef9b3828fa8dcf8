// noteEvalModeExport (passes/eval_export_note.h).
#include "passes/eval_export_note.h"

#include "ir/batch_norm_mode.h"

#include <string>

namespace mpc {
namespace {

/// "'a', 'b', 'c' and 2 more": the first names of a list, for a note.
std::string someNames(const std::vector<std::string> &names) {
  std::string list;
  const size_t shown = names.size() < 3 ? names.size() : 3;
  for (size_t i = 0; i < shown; ++i)
    list += (i ? ", '" : "'") + names[i] + "'";
  if (names.size() > shown)
    list += " and " + std::to_string(names.size() - shown) + " more";
  return list;
}

/// Whether `v` is a constant of the file: an initializer or a Constant,
/// through Identity nodes (the TorchScript exporter writes a statistic equal
/// to another initializer as an Identity of it).
bool isStoredConstant(const Value *v) {
  while (v && v->producer() && v->producer()->isOp("", "Identity") &&
         v->producer()->numInputs() == 1)
    v = v->producer()->input(0);
  if (!v)
    return false;
  return v->isInitializer() ||
         (v->producer() && v->producer()->isOp("", "Constant"));
}

} // namespace

void noteEvalModeExport(const Graph &g, const std::vector<Value *> &params,
                        PassContext &ctx) {
  // A training export keeps batch norms in training mode (the dynamo
  // exporter's functional batch norm is put back in it at import); one
  // normalising with constant running statistics was traced in eval mode.
  std::vector<std::string> evalNorms;
  for (const Node *n : g.nodeList()) {
    if (!n->isOp("", "BatchNormalization") || isBatchNormTraining(*n) ||
        n->numInputs() < 5)
      continue;
    if (isStoredConstant(n->input(3)) && isStoredConstant(n->input(4)))
      evalNorms.push_back(n->name());
  }
  if (!evalNorms.empty())
    ctx.notes.push_back(
        std::to_string(evalNorms.size()) +
        " batch norm(s) normalise with their running statistics, as in eval "
        "mode (" +
        someNames(evalNorms) +
        "): they will not learn batch statistics, and an eval-mode export has "
        "no dropout either; unless frozen batch norms are meant, export the "
        "module after model.train() (TorchScript exporter: "
        "training=torch.onnx.TrainingMode.TRAINING)");

  // The TorchScript exporter names a constant it folded after the op that
  // reads it; in eval mode that is a convolution with a batch norm folded
  // in, and either way the module's name is lost.
  std::vector<std::string> folded;
  for (const Value *p : params)
    if (p->name().rfind("onnx::", 0) == 0)
      folded.push_back(p->name());
  if (!folded.empty())
    ctx.notes.push_back(
        std::to_string(folded.size()) +
        " trained initializer(s) are constants the TorchScript exporter "
        "folded (" +
        someNames(folded) +
        "), not the module's parameters (in eval mode it folds batch norms "
        "into convolutions), so --export-safetensors cannot give them back "
        "under the module's names; export with "
        "training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False");
}

} // namespace mpc
