// The step's metadata: every mpc.* entry a pass records in the model (ONNX
// metadata_props) for the passes after it and for the runtime, declared once
// with the form of its text, and read and written through the typed
// accessors below rather than by spelling the key.
//
// Most entries name values of the step (mpc.loss, mpc.grads): those follow
// the values through later rewrites (ir/metadata_value_refs.cpp takes the
// list of them from kStepMetadata). The key's C++ type says what its text
// is, so a list cannot be read as one name, nor a name written as a list.
#pragma once

#include "ir/graph.h"

#include <string>
#include <string_view>
#include <vector>

namespace mpc {

/// What an entry's text holds.
enum class MetaForm {
  Value,      ///< the name of one value of the step
  ValueList,  ///< names of values, comma-separated, in a meaningful order
  ValuePairs, ///< name=name pairs of values, comma-separated
  NameList,   ///< names that are not values (state_dict keys), comma-separated
  Text,       ///< anything else: a number, a type name, a summary, a config
};

template <MetaForm F> struct MetaKey {
  std::string_view name;
  static constexpr MetaForm form = F;
};
using ValueKey = MetaKey<MetaForm::Value>;
using ValueListKey = MetaKey<MetaForm::ValueList>;
using ValuePairsKey = MetaKey<MetaForm::ValuePairs>;
using NameListKey = MetaKey<MetaForm::NameList>;
using TextKey = MetaKey<MetaForm::Text>;

namespace meta {
// --- import
/// Floating-point buffers of the torch module (state_dict names): frozen.
inline constexpr NameListKey kBuffers{"mpc.buffers"};
// --- autodiff
/// The loss the step differentiates.
inline constexpr ValueKey kLoss{"mpc.loss"};
/// The trainable parameters, in the order of kGrads.
inline constexpr ValueListKey kParams{"mpc.params"};
/// Each parameter's gradient (master-weights: its fp32 gradient).
inline constexpr ValueListKey kGrads{"mpc.grads"};
/// The backward's seed, dLoss/dLoss (loss-scale: the scaled seed).
inline constexpr ValueKey kGradSeed{"mpc.grad_seed"};
// --- sync-batchnorm, autocast, loss-scale, master-weights
/// How many batch norms normalise with the global batch's statistics.
inline constexpr TextKey kSyncBatchNorm{"mpc.sync_batchnorm"};
/// The autocast's type: fp16, bf16 or fp32.
inline constexpr TextKey kPrecision{"mpc.precision"};
/// dynamic, static or none.
inline constexpr TextKey kLossScaleMode{"mpc.loss_scale_mode"};
/// The loss scale's state.
inline constexpr ValueKey kLossScale{"mpc.loss_scale"};
/// The dynamic scaler's growth tracker state.
inline constexpr ValueKey kGrowthTracker{"mpc.growth_tracker"};
/// The step's overflow flag (data parallel: ORed across the ranks).
inline constexpr ValueKey kFoundInf{"mpc.found_inf"};
/// The fp32 master copies of the parameters.
inline constexpr ValueListKey kMasterParams{"mpc.master_params"};
// --- optimizer (passes/optimizer/)
/// The optimizer's configuration, one line (e.g. "adamw lr=0.001 ...").
inline constexpr TextKey kOptimizer{"mpc.optimizer"};
/// The optimizer's moments.
inline constexpr ValueListKey kOptimizerState{"mpc.optimizer_state"};
/// The update counter.
inline constexpr ValueKey kStep{"mpc.step"};
/// --max-grad-norm: the global 2-norm of the unscaled gradients before
/// clipping, as torch.nn.utils.clip_grad_norm_ returns it (inf or nan on a
/// step that overflowed; data parallel: of the averaged gradients, the same
/// on every rank; --grad-accum: of the sums so far, the window's at its
/// last micro-batch).
inline constexpr ValueKey kGradNorm{"mpc.grad_norm"};
/// The learning rate, as a number or a schedule's description.
inline constexpr TextKey kLr{"mpc.lr"};
/// ReduceLROnPlateau's fp64 rate state, and its configuration.
inline constexpr ValueKey kLrState{"mpc.lr_state"};
inline constexpr TextKey kLrPlateau{"mpc.lr_plateau"};
/// Gradient accumulation: K, the micro-step counter and the buffers.
inline constexpr TextKey kGradAccum{"mpc.grad_accum"};
inline constexpr ValueKey kGradAccumCounter{"mpc.grad_accum_counter"};
inline constexpr ValueListKey kGradAccumBuffers{"mpc.grad_accum_buffers"};
/// The moving average: parameter=average pairs, and its decay.
inline constexpr ValuePairsKey kEma{"mpc.ema"};
inline constexpr TextKey kEmaDecay{"mpc.ema_decay"};
/// master=copy pairs: each master weight's 16-bit working copy, state the
/// step rewrites after the master's update (passes/weight_copies.h).
inline constexpr ValuePairsKey kWeightCopies{"mpc.weight_copies"};
/// "1" when the step averages gradients across ranks.
inline constexpr TextKey kDataParallel{"mpc.data_parallel"};
/// --shard-optimizer: state=parameter pairs of the optimizer state each
/// rank holds 1/N of (its chunk of the flattened parameter), and N.
inline constexpr ValuePairsKey kShardedState{"mpc.sharded_state"};
inline constexpr TextKey kShardWorldSize{"mpc.shard_world_size"};
// --- a model's own training_info algorithm (passes/training_info.h)
inline constexpr ValueKey kUserLoss{"mpc.user_loss"};
inline constexpr ValueListKey kUserParams{"mpc.user_params"};
inline constexpr ValueListKey kUserGrads{"mpc.user_grads"};
inline constexpr ValueListKey kUserState{"mpc.user_state"};
} // namespace meta

/// One entry of the table below.
struct MetaKeyInfo {
  std::string_view name;
  MetaForm form;
};
template <MetaForm F> constexpr MetaKeyInfo keyInfo(MetaKey<F> key) {
  return {key.name, F};
}

/// Every key above.
inline constexpr MetaKeyInfo kStepMetadata[] = {
    keyInfo(meta::kBuffers),
    keyInfo(meta::kLoss),
    keyInfo(meta::kParams),
    keyInfo(meta::kGrads),
    keyInfo(meta::kGradSeed),
    keyInfo(meta::kSyncBatchNorm),
    keyInfo(meta::kPrecision),
    keyInfo(meta::kLossScaleMode),
    keyInfo(meta::kLossScale),
    keyInfo(meta::kGrowthTracker),
    keyInfo(meta::kFoundInf),
    keyInfo(meta::kMasterParams),
    keyInfo(meta::kOptimizer),
    keyInfo(meta::kOptimizerState),
    keyInfo(meta::kStep),
    keyInfo(meta::kGradNorm),
    keyInfo(meta::kLr),
    keyInfo(meta::kLrState),
    keyInfo(meta::kLrPlateau),
    keyInfo(meta::kGradAccum),
    keyInfo(meta::kGradAccumCounter),
    keyInfo(meta::kGradAccumBuffers),
    keyInfo(meta::kEma),
    keyInfo(meta::kEmaDecay),
    keyInfo(meta::kWeightCopies),
    keyInfo(meta::kDataParallel),
    keyInfo(meta::kShardedState),
    keyInfo(meta::kShardWorldSize),
    keyInfo(meta::kUserLoss),
    keyInfo(meta::kUserParams),
    keyInfo(meta::kUserGrads),
    keyInfo(meta::kUserState),
};

/// The entry's form, or nullptr for a key not in kStepMetadata.
const MetaKeyInfo *stepMetadataKey(std::string_view name);

/// Whether the model has the entry.
template <MetaForm F> bool hasMeta(const Model &model, MetaKey<F> key) {
  return model.meta(std::string(key.name)) != nullptr;
}

/// The named value, or nullptr when the entry is absent.
const std::string *readMeta(const Model &model, ValueKey key);
/// The text, or nullptr when the entry is absent.
const std::string *readMeta(const Model &model, TextKey key);
/// The pairs' text ("a=b,c=d"), or nullptr when the entry is absent.
const std::string *readMeta(const Model &model, ValuePairsKey key);
/// The pairs in order; empty when the entry is absent. Throws Error naming
/// the key for an item that is not two names joined by '='.
std::vector<std::pair<std::string, std::string>>
readMetaPairs(const Model &model, ValuePairsKey key);
/// The names in order; empty when the entry is absent (or empty).
std::vector<std::string> readMeta(const Model &model, ValueListKey key);
std::vector<std::string> readMeta(const Model &model, NameListKey key);

void writeMeta(Model &model, ValueKey key, const std::string &value);
void writeMeta(Model &model, TextKey key, const std::string &text);
void writeMeta(Model &model, ValuePairsKey key, const std::string &pairs);
void writeMeta(Model &model, ValueListKey key,
               const std::vector<std::string> &values);
void writeMeta(Model &model, NameListKey key,
               const std::vector<std::string> &names);

} // namespace mpc
