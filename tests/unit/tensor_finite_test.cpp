// Tensor::firstNonFinite: the first NaN or infinity of a floating tensor in
// every width (the check a model's parameters and a checkpoint's state
// pass before training), found by its exponent bits.
#include "ir/half.h"
#include "ir/tensor.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

using namespace mpc;

namespace {

/// A tensor of `n` finite values of dtype t (largest finite among them),
/// with `bad` at position `at` when at >= 0.
Tensor withValueAt(DType t, int64_t n, int64_t at, double bad) {
  Tensor x(t, {n});
  for (int64_t i = 0; i < n; ++i)
    x.setFromDouble(i, i % 3 == 0 ? -1.5 : double(i));
  if (t == DType::F16)
    x.setFromDouble(1, 65504.0); // fp16's largest finite value
  if (at >= 0)
    x.setFromDouble(at, bad);
  return x;
}

} // namespace

TEST(TensorFinite, FindsTheFirstNanOrInfinityInEveryFloatWidth) {
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::F64}) {
    SCOPED_TRACE(dtypeName(t));
    EXPECT_EQ(withValueAt(t, 1000, -1, 0).firstNonFinite(), -1);
    EXPECT_EQ(withValueAt(t, 1000, 0, nan).firstNonFinite(), 0);
    EXPECT_EQ(withValueAt(t, 1000, 999, inf).firstNonFinite(), 999);
    EXPECT_EQ(withValueAt(t, 1000, 417, -inf).firstNonFinite(), 417);
    Tensor two = withValueAt(t, 1000, 600, nan);
    two.setFromDouble(7, -inf);
    EXPECT_EQ(two.firstNonFinite(), 7);
    EXPECT_EQ(Tensor(t, {0}).firstNonFinite(), -1);
  }
  // fp32 subnormals and the largest finite float are finite.
  Tensor edge(DType::F32, {3});
  edge.setFromDouble(0, std::numeric_limits<float>::denorm_min());
  edge.setFromDouble(1, std::numeric_limits<float>::max());
  edge.setFromDouble(2, -std::numeric_limits<float>::max());
  EXPECT_EQ(edge.firstNonFinite(), -1);
  // Integer tensors hold no NaN.
  EXPECT_EQ(Tensor::fromInt64s({3}, {-1, 0, int64_t(1) << 62}).firstNonFinite(),
            -1);
}
