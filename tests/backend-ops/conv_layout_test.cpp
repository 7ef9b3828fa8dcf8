// The channels-last layout of the cuDNN convolutions (runtime/cuda/
// conv_plan.h: preferredLayout, packedStrides), without a GPU.
//
// The runner describes one buffer of NCHW-ordered dims by two stride sets
// and lets cudnnTransformTensor copy between them; here that strided copy
// runs on the host (dst[offset by `to` strides] = src[offset by `from`
// strides], as cuDNN defines it) and must give the NHWC (and, for filters,
// KRSC) arrangement computed by plain index math, and come back unchanged.
#include "ir/graph.h"
#include "runtime/cuda/conv_plan.h"

#include <gtest/gtest.h>

#include <numeric>

using namespace mpc;
using namespace mpc::cuda;

namespace {

/// cudnnTransformTensor on the host: every element of dims moves from its
/// offset under `from`'s strides to its offset under `to`'s.
std::vector<int> transform(const std::vector<int> &src,
                           const std::vector<int64_t> &dims, ConvLayout from,
                           ConvLayout to) {
  std::vector<int64_t> fs = packedStrides(dims, from),
                       ts = packedStrides(dims, to);
  std::vector<int> dst(src.size(), -1);
  std::vector<int64_t> idx(dims.size(), 0);
  for (size_t n = 0; n < src.size(); ++n) {
    int64_t a = 0, b = 0;
    for (size_t d = 0; d < dims.size(); ++d) {
      a += idx[d] * fs[d];
      b += idx[d] * ts[d];
    }
    dst.at(size_t(b)) = src.at(size_t(a));
    for (size_t d = dims.size(); d-- > 0;) // next index, last dim fastest
      if (++idx[d] < dims[d])
        break;
      else
        idx[d] = 0;
  }
  return dst;
}

TEST(ConvLayout, ChannelsLastStridesPutTheChannelsInnermost) {
  EXPECT_EQ(packedStrides({2, 3, 4, 5}, ConvLayout::Nchw),
            (std::vector<int64_t>{60, 20, 5, 1}));
  EXPECT_EQ(packedStrides({2, 3, 4, 5}, ConvLayout::Nhwc),
            (std::vector<int64_t>{60, 1, 15, 3}));
  EXPECT_EQ(packedStrides({2, 3, 4, 5, 6}, ConvLayout::Nhwc),
            (std::vector<int64_t>{360, 1, 90, 18, 3}));
  // An empty dim counts as 1, as cuDNN wants the strides of empty tensors.
  EXPECT_EQ(packedStrides({0, 3, 4, 5}, ConvLayout::Nhwc),
            (std::vector<int64_t>{60, 1, 15, 3}));
}

TEST(ConvLayout, TheStridedCopyIsTheNhwcPermutationAndComesBack) {
  for (std::vector<int64_t> dims :
       {std::vector<int64_t>{2, 8, 3, 5}, std::vector<int64_t>{1, 16, 1, 7},
        std::vector<int64_t>{3, 8, 4, 4}}) {
    int64_t N = dims[0], C = dims[1], H = dims[2], W = dims[3];
    std::vector<int> nchw(size_t(N * C * H * W));
    std::iota(nchw.begin(), nchw.end(), 0);
    std::vector<int> got =
        transform(nchw, dims, ConvLayout::Nchw, ConvLayout::Nhwc);
    for (int64_t n = 0; n < N; ++n)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t w = 0; w < W; ++w)
          for (int64_t c = 0; c < C; ++c)
            ASSERT_EQ(got[size_t(((n * H + h) * W + w) * C + c)],
                      nchw[size_t(((n * C + c) * H + h) * W + w)])
                << "n " << n << " c " << c << " h " << h << " w " << w;
    EXPECT_EQ(transform(got, dims, ConvLayout::Nhwc, ConvLayout::Nchw), nchw);
  }
}

TEST(ConvLayout, AFilterBecomesKrsc) {
  std::vector<int64_t> w = {16, 8, 3, 2}; // [M, C, kh, kw]
  std::vector<int> kcrs(size_t(16 * 8 * 3 * 2));
  std::iota(kcrs.begin(), kcrs.end(), 0);
  std::vector<int> krsc =
      transform(kcrs, w, ConvLayout::Nchw, ConvLayout::Nhwc);
  for (int64_t k = 0; k < 16; ++k)
    for (int64_t c = 0; c < 8; ++c)
      for (int64_t r = 0; r < 3; ++r)
        for (int64_t s = 0; s < 2; ++s)
          ASSERT_EQ(krsc[size_t(((k * 3 + r) * 2 + s) * 8 + c)],
                    kcrs[size_t(((k * 8 + c) * 3 + r) * 2 + s)]);
}

ConvProblem problem(DType t, int64_t c, int64_t m, int64_t groups,
                    size_t rank = 4) {
  ConvProblem p;
  p.type = t;
  p.groups = groups;
  p.x = {4, c};
  p.w = {m, c / groups};
  p.y = {4, m};
  for (size_t d = 2; d < rank; ++d) {
    p.x.push_back(9);
    p.w.push_back(3);
    p.y.push_back(7);
  }
  return p;
}

TEST(ConvLayout, NhwcOnlyWhereTheTensorCoresWantIt) {
  EXPECT_EQ(preferredLayout(problem(DType::F16, 64, 128, 1), true),
            ConvLayout::Nhwc);
  EXPECT_EQ(preferredLayout(problem(DType::BF16, 8, 16, 1), true),
            ConvLayout::Nhwc);
  // fp32 stays NCHW (no Tensor Core math: the precision rule).
  EXPECT_EQ(preferredLayout(problem(DType::F32, 64, 128, 1), true),
            ConvLayout::Nchw);
  // Channels not a multiple of 8 (the RGB stem), either side.
  EXPECT_EQ(preferredLayout(problem(DType::F16, 3, 64, 1), true),
            ConvLayout::Nchw);
  EXPECT_EQ(preferredLayout(problem(DType::F16, 64, 10, 1), true),
            ConvLayout::Nchw);
  // Groups and 3-D windows keep NCHW (the conservative choice).
  EXPECT_EQ(preferredLayout(problem(DType::F16, 64, 64, 2), true),
            ConvLayout::Nchw);
  EXPECT_EQ(preferredLayout(problem(DType::F16, 64, 64, 1, 5), true),
            ConvLayout::Nchw);
  // Turned off (MPC_CUDA_CONV_NHWC=0).
  EXPECT_EQ(preferredLayout(problem(DType::F16, 64, 128, 1), false),
            ConvLayout::Nchw);
}

TEST(ConvLayout, AOneDimensionalWindowLiftedToTwoMayRunNhwc) {
  Graph g;
  Node *node = g.createNode("Conv", {}, 1, "conv");
  WindowGeometry w;
  w.in = {32};
  w.out = {30};
  w.kernel = {3};
  w.strides = {1};
  w.dilations = {1};
  w.padBegin = {0};
  w.padEnd = {0};
  ConvProblem p = convProblem(*node, w, 2, 16, 32, 1, DType::F16);
  ASSERT_EQ(p.x.size(), 4u);
  EXPECT_EQ(preferredLayout(p, true), ConvLayout::Nhwc);
}

} // namespace
