// Data parallelism (--data-parallel): the step combines its gradients and
// its overflow flag across the ranks that run it, as PyTorch's
// DistributedDataParallel does with AMP's GradScaler.
//
// Each rank (one mpc-run process of an mpirun launch) runs the same step on
// its own slice of the global batch. Before any update reads them, the
// unscaled fp32 gradients are averaged over the ranks (one mpc.AllReduce
// <mean> over all of them: one message per step), and the overflow flag
// is OR-ed (mpc.AllReduce <max> of found_inf), so every rank updates with
// the same gradients and skips the same steps: the ranks' parameters,
// moments and loss scale stay bit-identical. With a mean loss and no
// batch-size-dependent layer, N ranks of batch B follow one process of batch
// N*B up to the order of the sums. Gradient clipping and --grad-accum's
// boundary see the combined values; with --grad-accum the ranks reduce once
// per window (the reductions are gated by its boundary). Batch-norm
// statistics stay per rank (as DDP's running statistics are rank 0's)
// unless --sync-batchnorm makes them the global batch's
// (passes/sync_batch_norm.cpp).
#pragma once

#include "passes/training_support.h"

namespace mpc {

/// Throws a one-line error for data-parallel options that do not go
/// together (--grad-comm-dtype without --data-parallel, or not fp32, bf16 or
/// fp16); `pass` names the caller. The optimizer passes call it before they
/// change the model.
void checkDataParallelOptions(const CompileOptions &o, const std::string &pass);

/// Inserts the two reductions after the gradients (tv.grads) and found_inf
/// (nullptr without loss scaling) are computed: tv.grads become the
/// averaged gradients (mpc.grads follows); every reader of found_inf
/// (UpdateLossScale, the skip flags) reads the OR-ed flag, which becomes
/// mpc.found_inf. Records mpc.data_parallel = "1". `pass` names the caller
/// in errors. `gate` (--grad-accum's boundary flag, or nullptr): the
/// reductions take it as their first input, and they cross ranks only
/// where it is true, once per accumulation window as DDP's no_sync (inside
/// the window the updates skip and the scaler holds, so what the
/// reductions give there is never read). `wireDtype` (--grad-comm-dtype,
/// checked by checkDataParallelOptions) is the type the gradients cross
/// ranks in.
void allReduceGradients(Model &model, TrainingValues &tv, Value *foundInf,
                        const std::string &pass, const std::string &wireDtype,
                        Value *gate = nullptr);

} // namespace mpc
