// The AVX2 and AVX-512 loops of vector_math.cpp, each in a file compiled for
// its instruction set (vector_math_avx2.cpp with -mavx2,
// vector_math_avx512.cpp with -mavx512f; CMakeLists.txt). Call them only
// where the CPU has that set. n is a multiple of the width (8 or 16).
#pragma once

#include <cstdint>

namespace mpc {
namespace cpu {

void erfInPlaceAvx2(float *v, int64_t n);
void expInPlaceAvx2(float *v, int64_t n);
void geluInPlaceAvx2(float *v, int64_t n);
void geluGradInPlaceAvx2(float *g, const float *x, int64_t n);
void erfInPlaceAvx512(float *v, int64_t n);
void expInPlaceAvx512(float *v, int64_t n);
void geluInPlaceAvx512(float *v, int64_t n);
void geluGradInPlaceAvx512(float *g, const float *x, int64_t n);

} // namespace cpu
} // namespace mpc
