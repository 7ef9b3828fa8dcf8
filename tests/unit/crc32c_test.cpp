// CRC-32C (support/crc32c.h) against the published check value and the
// vectors of RFC 3720 (iSCSI), B.4; continuation and TFRecord's mask.
#include "support/crc32c.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace mpc {
namespace {

uint32_t crcOf(const std::vector<unsigned char> &bytes) {
  return crc32c(bytes.data(), bytes.size());
}

TEST(Crc32c, CheckValue) {
  const std::string text = "123456789";
  EXPECT_EQ(crc32c(text.data(), text.size()), 0xe3069283u);
  EXPECT_EQ(crc32c("", 0), 0u);
  EXPECT_EQ(crc32c("a", 1), 0xc1d04330u);
}

TEST(Crc32c, Rfc3720Vectors) {
  std::vector<unsigned char> zeros(32, 0), ones(32, 0xff), up(32), down(32);
  for (int i = 0; i < 32; ++i) {
    up[size_t(i)] = (unsigned char)i;
    down[size_t(i)] = (unsigned char)(31 - i);
  }
  EXPECT_EQ(crcOf(zeros), 0x8a9136aau);
  EXPECT_EQ(crcOf(ones), 0x62a8ab43u);
  EXPECT_EQ(crcOf(up), 0x46dd794eu);
  EXPECT_EQ(crcOf(down), 0x113fdb5cu);
}

TEST(Crc32c, ContinuesAcrossPieces) {
  const std::string text = "The quick brown fox jumps over the lazy dog";
  const uint32_t whole = crc32c(text.data(), text.size());
  for (size_t cut = 0; cut <= text.size(); ++cut)
    EXPECT_EQ(
        crc32c(text.data() + cut, text.size() - cut, crc32c(text.data(), cut)),
        whole)
        << cut;
}

TEST(Crc32c, TfRecordMask) {
  // ((crc >> 15) | (crc << 17)) + 0xa282ead8, modulo 2^32.
  EXPECT_EQ(maskCrc32c(0), 0xa282ead8u);
  EXPECT_EQ(
      maskCrc32c(0xe3069283u),
      uint32_t(((0xe3069283u >> 15) | (0xe3069283u << 17)) + 0xa282ead8u));
  EXPECT_EQ(maskCrc32c(0xffffffffu), uint32_t(0xffffffffu + 0xa282ead8u));
  EXPECT_NE(maskCrc32c(1), maskCrc32c(2));
}

} // namespace
} // namespace mpc
