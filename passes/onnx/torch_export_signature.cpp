// Reads torch's dynamo-exporter signature from metadata_props and applies
// it to the imported graph (torch_export_signature.h).
#include "passes/onnx/torch_export_signature.h"

#include "ir/batch_norm_mode.h"
#include "passes/onnx/metadata_props.h"
#include "support/diagnostics.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>
#include <google/protobuf/unknown_field_set.h>

#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

namespace mpc {
namespace {

constexpr std::string_view kKindKey =
    "pkg.torch.export.graph_signature.InputSpec.kind";
constexpr std::string_view kPersistentKey =
    "pkg.torch.export.graph_signature.InputSpec.persistent";
constexpr std::string_view kAtenOpKey = "pkg.torch.onnx.class_hierarchy";
/// The aten op torch.export's functionalisation makes of a training-mode
/// batch norm (an eval-mode one is ..._no_training).
constexpr std::string_view kTrainingBatchNorm =
    "_native_batch_norm_legit_functional";

/// Puts a BatchNormalization written in inference form back in training
/// mode: batch statistics, and outputs 1 and 2 (the new running mean and
/// var), which become state updates (batchNormStateUpdates).
void restoreTrainingMode(Node &bn) {
  if (bn.numInputs() != 5 || !bn.input(3) || !bn.input(4) ||
      !bn.input(3)->isState || !bn.input(4)->isState)
    errorAt(bn) << "was traced from a training-mode batch norm, but its "
                   "running mean and var are not the module's buffers";
  bn.setAttr("training_mode", Attribute::ofInt(1));
  for (size_t i = bn.numOutputs(); i < 3; ++i)
    bn.addOutput(bn.input(i + 2)->name() + "/updated");
}

} // namespace

bool applyTorchExportSignature(const onnx::GraphProto &gp, Graph &g,
                               std::vector<std::string> *persistentBuffers,
                               std::vector<std::string> *frozen) {
  std::unordered_map<std::string, std::string> kinds;
  std::unordered_set<std::string> persistent;
  for (const auto &vi : gp.value_info()) {
    std::string kind = metadataValue(vi, kValueInfoMetadataField, kKindKey);
    if (kind == "BUFFER" &&
        metadataValue(vi, kValueInfoMetadataField, kPersistentKey) == "True")
      persistent.insert(vi.name());
    if (!kind.empty())
      kinds.emplace(vi.name(), std::move(kind));
  }
  if (kinds.empty())
    return false;

  // Training-mode batch norms first: their running statistics are the
  // buffers that stay state (an eval-mode batch norm's are constants).
  std::unordered_set<std::string_view> trainingBatchNorms;
  for (const auto &np : gp.node())
    if (np.op_type() == "BatchNormalization" && np.output_size() >= 1 &&
        metadataValue(np, kNodeMetadataField, kAtenOpKey)
                .find(kTrainingBatchNorm) != std::string::npos)
      trainingBatchNorms.insert(np.output(0));
  std::unordered_set<const Value *> runningStats;
  for (const auto &owned : g.nodes()) {
    Node &n = *owned;
    if (!n.isOp("", "BatchNormalization") || !n.output(0))
      continue;
    if (trainingBatchNorms.count(n.output(0)->name()) &&
        !isBatchNormTraining(n))
      restoreTrainingMode(n);
    if (!isBatchNormTraining(n))
      continue;
    for (size_t i = 3; i < 5 && i < n.numInputs(); ++i)
      if (n.input(i) && n.input(i)->isInitializer())
        runningStats.insert(n.input(i));
  }

  for (Value *init : g.initializers()) {
    auto it = kinds.find(init->name());
    if (it == kinds.end())
      throw Error(
          "initializer '" + init->name() +
          "' has no role in the torch exporter's signature: the exporter's "
          "ONNX optimizer made it (optimize=True, the default), and that "
          "optimizer folds batch norms into convolutions and merges "
          "parameters of equal value, which changes what trains; export with "
          "torch.onnx.export(..., dynamo=True, optimize=False)");
    if (it->second != "PARAMETER" && !runningStats.count(init)) {
      init->isState = false;
      if (frozen && isFloating(init->dtype))
        frozen->push_back(init->name());
    }
    if (persistentBuffers && persistent.count(init->name()))
      persistentBuffers->push_back(init->name());
  }
  return true;
}

} // namespace mpc
