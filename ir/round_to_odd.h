// double -> fp16/bf16 with one rounding, through fp32.
//
// Rounding a double to fp32 and then to fp16/bf16 can round twice (a value
// just past a half-way point of the narrow type lands on it in fp32, then
// ties to even). Rounding to fp32 toward zero and setting the last bit when
// the result is inexact ("round to odd") keeps the information a second
// rounding needs: fp32 has more than two bits beyond fp16's and bf16's, so
// the narrow type's round-to-nearest-even of that float is the double's.
// Cast from fp64 and integers, mpc.AllReduce's 16-bit results and
// Tensor::setFromDouble (constants, folded values) use it.
#pragma once

#include "ir/half.h"
#include "ir/host_device.h"

namespace mpc {

MPC_HD float roundToOddFloat(double d) {
  float f = float(d);
  if (double(f) == d || d != d) // exact, or NaN
    return f;
  uint32_t bits = floatBits(f);
  // float(d) rounded away from zero: one step back toward it (the bits of
  // a float's magnitude count its steps; an overflow to inf steps back to
  // the largest float, which is what truncation gives).
  double rounded = double(f);
  if ((rounded < 0 ? -rounded : rounded) > (d < 0 ? -d : d))
    --bits;
  return bitsToFloat(bits | 1u);
}

} // namespace mpc
