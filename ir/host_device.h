// MPC_HD marks per-element math that compiles for both the CPU and the GPU.
//
// Kernels in kernels/cuda and kernels/cpu include the same headers, so the CPU
// tests exercise exactly the arithmetic the GPU runs.
#pragma once

#if defined(__CUDACC__)
#define MPC_HD __host__ __device__ __forceinline__
#else
#define MPC_HD inline
#endif
