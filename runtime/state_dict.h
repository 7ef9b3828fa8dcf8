// Which tensors of a compiled model a PyTorch module's state_dict holds, and
// under which names (mpc-run --export-safetensors).
//
// mpc-opt keeps the exporter's initializer names, which for torch exports are
// the module's state_dict keys. The state_dict is the model's parameters and
// persistent buffers; a compiled model also holds the optimizer's moments, the
// loss-scale state and counters (the training step's state, which the forward
// does not read) and constants (values the exporter or mpc-opt's folding made,
// which the training step keeps as its own initializers). The rule, over the
// main graph's initializers in their order:
//   - a floating tensor the forward reads and the training step reads as
//     state: a parameter (trainable or frozen) or a training-mode batch
//     norm's running statistic;
//   - a floating tensor the forward reads as a BatchNormalization's running
//     mean or var (a batch norm in eval mode, whose statistics are constants
//     of the step but buffers of the module);
//   - an integer tensor named PREFIX.num_batches_tracked;
//   - a persistent buffer torch's dynamo exporter named (its signature's
//     persistent=True BUFFERs, kept by the importer as mpc.buffers): a
//     constant to the step, state to the module.
// Everything else is left out: other integer tensors (an int64
// position_ids buffer, which transformers registers as non-persistent, or
// folded shape arithmetic) and floating constants (torch's dynamo
// exporter's val_N, a TorchScript export's /Constant_output_0).
//
// Batch norms: exporters drop num_batches_tracked, which strict
// load_state_dict needs. For every PREFIX.running_mean / PREFIX.running_var
// pair without one, PREFIX.num_batches_tracked is added (int64 scalar): the
// forward passes run in training mode (optimizer steps x micro-batches, every
// step counted, skipped ones too, as torch's forward counts them) for a batch
// norm that trains, plus the initial value where the model carried one.
#pragma once

#include "ir/graph.h"

#include <string>
#include <vector>

namespace mpc {

/// One entry of the state_dict: its key and value.
struct StateDictEntry {
  std::string name;
  Tensor value;
};

/// The state_dict of a compiled model whose initializers hold the current
/// state. `trainedBatches`: forward passes run in training mode since
/// compilation (each training-mode batch norm's num_batches_tracked grows by
/// it). `ema`: the parameters' moving average (mpc-opt --ema-decay, see
/// passes/optimizer/ema.h) in place of the parameters; buffers stay the
/// model's.
std::vector<StateDictEntry> stateDictOf(const Model &model,
                                        int64_t trainedBatches, bool ema);

} // namespace mpc
