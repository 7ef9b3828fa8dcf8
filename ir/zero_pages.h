// Zero-filled tensor bytes that cost nothing until they are written.
//
// A compiled training step starts its optimizer moments at zero: for Adam
// that is two zero tensors per parameter, twice the size of the model, and
// filling them was 26M instructions and as many fresh pages as the moments
// have bytes, only for the export to copy the zeros into the output file.
// Large zero buffers are instead carved out of private anonymous mappings:
// reading them maps the kernel's shared zero page (a huge one where
// transparent huge pages allow it), writing one copies only the pages
// written, and the export finds the zero blocks and leaves holes for them
// (passes/onnx/model_file_writer.cpp).
#pragma once

#include "ir/byte_buffer.h"

#include <cstddef>

namespace mpc {

/// `size` zero bytes. From `kZeroPagesMinBytes` on, they are held in a shared
/// anonymous mapping (ByteBuffer::isHeld()); smaller ones are in place
/// (ByteBuffer::isInPlace()) over one shared, never written zero block,
/// copied into bytes of their own on first typed access; any when the
/// mapping fails are ordinary owned zeros.
ByteBuffer zeroBytes(size_t size);

/// Below this (four pages) a buffer is cheaper as a view of the shared
/// block than in page-aligned slots.
constexpr size_t kZeroPagesMinBytes = size_t(16) << 10;

} // namespace mpc
