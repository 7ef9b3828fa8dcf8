// checkSamples and samplesConvert (runtime/data/sample_check.h): the dtype
// rule every array of samples meets, from an .npz, a .npy directory or a
// Python batch. fp32 samples for a bf16 input (numpy has no bfloat16) are
// rounded once, to nearest even, as torch's .to(torch.bfloat16) rounds;
// other floating mismatches are one line that says what to store.
#include "runtime/data/sample_check.h"

#include "support/diagnostics.h"

#include <cmath>
#include <gtest/gtest.h>

namespace mpc {
namespace {

DataInputSpec specOf(DType dtype, std::vector<int64_t> sampleDims) {
  DataInputSpec s;
  s.name = "x";
  s.dtype = dtype;
  s.sampleDims = std::move(sampleDims);
  return s;
}

TEST(SampleCheck, Fp32SamplesForABf16InputRoundToNearestEven) {
  // 1 + 2^-8 and 1 + 3 * 2^-8 are ties (bf16 keeps 7 fraction bits): to
  // the even neighbour, 1 (0x3F80) and 1 + 2^-6 (0x3F82); just above a tie
  // rounds up (0x3F81); -2.5 is exact (0xC020).
  Tensor t(DType::F32, {2, 2});
  float *v = t.data<float>();
  v[0] = 1.0f + std::ldexp(1.0f, -8);
  v[1] = 1.0f + 3 * std::ldexp(1.0f, -8);
  v[2] = 1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20);
  v[3] = -2.5f;
  checkSamples(t, specOf(DType::BF16, {2}), "d.npz: array 'x'");
  ASSERT_EQ(t.dtype, DType::BF16);
  ASSERT_EQ(t.dims, (std::vector<int64_t>{2, 2}));
  const uint16_t *b = t.data<uint16_t>();
  EXPECT_EQ(b[0], 0x3F80);
  EXPECT_EQ(b[1], 0x3F82);
  EXPECT_EQ(b[2], 0x3F81);
  EXPECT_EQ(b[3], 0xC020);
}

TEST(SampleCheck, OtherFloatingMismatchesAreOneLineSayingWhatToStore) {
  Tensor f64(DType::F64, {3, 2});
  try {
    checkSamples(f64, specOf(DType::BF16, {2}), "d.npz: array 'x'");
    FAIL() << "fp64 samples for a bf16 input were accepted";
  } catch (const Error &e) {
    EXPECT_STREQ(e.what(), "d.npz: array 'x': dtype fp64, the model expects "
                           "bf16 (numpy has no bfloat16: store float32, "
                           "which is rounded to bf16 as it is read)");
  }
  Tensor f32(DType::F32, {3, 2});
  try {
    checkSamples(f32, specOf(DType::F16, {2}), "d.npz: array 'x'");
    FAIL() << "fp32 samples for an fp16 input were accepted";
  } catch (const Error &e) {
    EXPECT_STREQ(e.what(),
                 "d.npz: array 'x': dtype fp32, the model expects fp16");
  }
}

TEST(SampleCheck, TheConversionRule) {
  EXPECT_TRUE(samplesConvert(DType::F32, DType::F32));
  EXPECT_TRUE(samplesConvert(DType::F32, DType::BF16));
  EXPECT_TRUE(samplesConvert(DType::I32, DType::I64));
  EXPECT_TRUE(samplesConvert(DType::U8, DType::I64));
  EXPECT_FALSE(samplesConvert(DType::F64, DType::F32));
  EXPECT_FALSE(samplesConvert(DType::F16, DType::BF16));
  EXPECT_FALSE(samplesConvert(DType::BF16, DType::F32));
  EXPECT_FALSE(samplesConvert(DType::F32, DType::I64));
  EXPECT_FALSE(samplesConvert(DType::Bool, DType::I64));
}

} // namespace
} // namespace mpc
