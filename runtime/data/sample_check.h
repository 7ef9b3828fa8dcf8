// The checks every array of samples passes before a step reads it, wherever
// it comes from: an .npz member (Dataset::fromNpz) or a batch a caller hands
// over (the Python module's Trainer.step). One rule for both, so a batch
// mpc-run would refuse is refused from Python with the same words.
#pragma once

#include "runtime/data/dataset.h"

#include <string>

namespace mpc {

/// Whether samples stored as `stored` are read for a data input of dtype
/// `wanted`: the same dtype; any integer for an integer (labels saved as
/// int32 are common; converted losslessly); fp32 for bf16 (numpy has no
/// bfloat16, so a model exported in bf16 gets its data as fp32, rounded
/// to nearest even as torch's .to(torch.bfloat16) does).
bool samplesConvert(DType stored, DType wanted);

/// The error for a dtype samplesConvert refuses, starting with `where`; for
/// a bf16 input it says to store fp32.
std::string dtypeMismatch(const std::string &where, DType stored, DType wanted);

/// Checks `t` (samples along axis 0) against the data input `spec`: a
/// sample shape equal to the spec's, its dtype (converted in place as
/// samplesConvert allows; any other mismatch is an error),
/// finite floating values, class labels in [0, numClasses) or the
/// ignore_index. Throws Error starting with `where` ("FILE: array 'x'").
void checkSamples(Tensor &t, const DataInputSpec &spec,
                  const std::string &where);

/// checkSamples' value checks (finite floats, labels in range) on row `row`
/// of `t`, a batch whose shape and dtype are right: the row is sample
/// `sample` of `where`, which an error names ("DIR/x.npy: array 'x': sample
/// 17 holds a non-finite value (nan)"). For data read a batch at a time.
void checkSampleValues(const Tensor &t, const DataInputSpec &spec, int64_t row,
                       const std::string &where, int64_t sample);

} // namespace mpc
