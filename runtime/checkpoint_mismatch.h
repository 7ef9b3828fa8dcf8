// Why a checkpoint's state does not fit a step: the compile settings that
// differ between the step a checkpoint was saved from and the step resuming
// it (precision, loss scaling, optimizer, accumulation, moving average,
// sharding), read from the step metadata both carry. Trainer::resumeFrom
// appends it to its "checkpoint does not match the model" lines, which name
// only the first state that differs.
#pragma once

#include "ir/graph.h"

#include <string>

namespace mpc {

/// "; the checkpoint's step was compiled with precision fp16 and optimizer
/// 'sgd ...', this one with precision bf16 and optimizer 'adam ...': resume
/// with the step the checkpoint was saved from, or train the checkpoint
/// itself on (mpc-run CKPT --resume=CKPT)", or "" when the settings compared
/// are the same.
std::string compileSettingsDifference(const Model &checkpoint,
                                      const Model &step);

/// "the checkpoint trained with lr 0.001, this step goes on with lr 0.5 (as
/// compiled)" when the two steps' learning rates (numbers or schedules)
/// differ, else "": a resume takes the step's rate, which may be meant (a
/// lower rate to fine-tune on) or not.
std::string learningRateChange(const Model &checkpoint, const Model &step);

} // namespace mpc
