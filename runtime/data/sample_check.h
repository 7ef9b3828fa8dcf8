// The checks every array of samples passes before a step reads it, wherever
// it comes from: an .npz member (Dataset::fromNpz) or a batch a caller hands
// over (the Python module's Trainer.step). One rule for both, so a batch
// mpc-run would refuse is refused from Python with the same words.
#pragma once

#include "runtime/data/dataset.h"

#include <string>

namespace mpc {

/// Checks `t` (samples along axis 0) against the data input `spec`: a
/// sample shape equal to the spec's, its dtype (integers convert losslessly
/// to the spec's integer dtype, in place; any other mismatch is an error),
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
