// checkSamples (runtime/data/sample_check.h).
#include "runtime/data/sample_check.h"

#include "support/diagnostics.h"

#include <cmath>

namespace mpc {

bool samplesConvert(DType stored, DType wanted) {
  if (stored == wanted)
    return true;
  if (stored == DType::F32 && wanted == DType::BF16)
    return true;
  return !isFloating(stored) && !isFloating(wanted) && stored != DType::Bool &&
         wanted != DType::Bool;
}

std::string dtypeMismatch(const std::string &where, DType stored,
                          DType wanted) {
  std::string line = where + ": dtype " + dtypeName(stored) +
                     ", the model expects " + dtypeName(wanted);
  if (wanted == DType::BF16)
    line += " (numpy has no bfloat16: store float32, which is rounded to "
            "bf16 as it is read)";
  return line;
}

void checkSamples(Tensor &t, const DataInputSpec &s, const std::string &where) {
  if (t.dims.empty())
    throw Error(where + ": is a scalar; expected samples along axis 0");
  std::vector<int64_t> sample(t.dims.begin() + 1, t.dims.end());
  if (sample != s.sampleDims)
    throw Error(where + ": samples have shape " + dimsToString(sample) +
                ", the model expects " + dimsToString(s.sampleDims));
  if (t.dtype != s.dtype) {
    if (!samplesConvert(t.dtype, s.dtype))
      throw Error(dtypeMismatch(where, t.dtype, s.dtype));
    t = t.castTo(s.dtype);
  }
  int64_t perSample = elementCount(s.sampleDims);
  int64_t n = t.numel();
  if (isFloating(t.dtype)) {
    if (const int64_t i = t.firstNonFinite(); i >= 0)
      throw Error(where + ": sample " +
                  std::to_string(perSample ? i / perSample : 0) +
                  " holds a non-finite value (" +
                  std::to_string(t.getAsDouble(i)) + ")");
  } else if (s.numClasses > 0) {
    for (int64_t i = 0; i < n; ++i) {
      int64_t label = int64_t(t.getAsDouble(i));
      if (label == s.ignoreIndex)
        continue;
      if (label < 0 || label >= s.numClasses)
        throw Error(where + ": sample " +
                    std::to_string(perSample ? i / perSample : 0) +
                    " has label " + std::to_string(label) + ", outside [0, " +
                    std::to_string(s.numClasses) + ")");
    }
  }
}

void checkSampleValues(const Tensor &t, const DataInputSpec &s, int64_t row,
                       const std::string &where, int64_t sample) {
  const int64_t perSample = elementCount(s.sampleDims);
  const int64_t begin = row * perSample, end = begin + perSample;
  if (isFloating(t.dtype)) {
    for (int64_t i = begin; i < end; ++i)
      if (!std::isfinite(t.getAsDouble(i)))
        throw Error(where + ": sample " + std::to_string(sample) +
                    " holds a non-finite value (" +
                    std::to_string(t.getAsDouble(i)) + ")");
  } else if (s.numClasses > 0) {
    for (int64_t i = begin; i < end; ++i) {
      int64_t label = int64_t(t.getAsDouble(i));
      if (label == s.ignoreIndex)
        continue;
      if (label < 0 || label >= s.numClasses)
        throw Error(where + ": sample " + std::to_string(sample) +
                    " has label " + std::to_string(label) + ", outside [0, " +
                    std::to_string(s.numClasses) + ")");
    }
  }
}

} // namespace mpc
