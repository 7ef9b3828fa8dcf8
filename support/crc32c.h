// CRC-32C (Castagnoli, the iSCSI polynomial 0x1EDC6F41, reflected) and the
// masked form TFRecord files frame their records with
// (runtime/tensorboard_writer.h).
#pragma once

#include <cstddef>
#include <cstdint>

namespace mpc {

/// The CRC-32C of `size` bytes, continuing from `crc` (0 for a new one):
/// crc32c of "123456789" is 0xE3069283.
uint32_t crc32c(const void *data, size_t size, uint32_t crc = 0);

/// TFRecord's mask of a CRC: a CRC stored beside the bytes it covers is
/// rotated and offset, so that a CRC of data that holds CRCs stays strong.
inline uint32_t maskCrc32c(uint32_t crc) {
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

} // namespace mpc
