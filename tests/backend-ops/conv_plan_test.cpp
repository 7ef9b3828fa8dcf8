// The cuDNN convolution plan (runtime/cuda/conv_plan.h) replayed on the
// CPU kernels, bit for bit.
//
// The CUDA runners hand cuDNN a different problem than the node states
// where cuDNN cannot take the node's: 1-D windows lifted to 2-D, pads that
// differ at a dim's two ends turned into an explicit zero-padding copy (or,
// for data gradients and ConvTranspose, a crop) around a convolution with
// symmetric pads, ConvTranspose as the data gradient of the convolution
// from its output to its input. Here the planned problem runs on the CPU
// kernels, with the copies done by the shifted copy's own index math
// (shiftSource), and must give exactly what the node gives on the CPU:
// the geometry, the filter layouts and the pad/crop offsets the GPU uses
// are right, checked without a GPU.
#include "ir/mpc_ops.h"
#include "kernels/cpu/conv_util.h"
#include "kernels/cpu/kernel_table.h"
#include "kernels/cuda/conv_support.h"
#include "op_cases.h"
#include "runtime/cuda/conv_plan.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

using namespace mpc;
using namespace mpc::cuda;
using namespace mpc::backend_ops;

namespace {

Attribute ints(std::vector<int64_t> v) { return Attribute::ofInts(v); }

std::vector<Tensor> runCpu(const std::string &op,
                           const std::vector<const Tensor *> &in,
                           const Builder::Attrs &attrs,
                           const std::string &domain = "") {
  Graph g;
  std::vector<Value *> values;
  for (size_t i = 0; i < in.size(); ++i)
    values.push_back(g.addInput("in" + std::to_string(i), in[i]->dtype,
                                toDims(in[i]->dims)));
  Node *node = g.createNode(op, values, 1, "conv", domain);
  for (const auto &kv : attrs)
    node->setAttr(kv.first, kv.second);
  std::vector<Tensor> out;
  runCpuNode(*node, in, out);
  return out;
}

/// A node of `op` with `attrs` (for the window resolvers and messages).
Node *attrNode(Graph &g, const std::string &op, const Builder::Attrs &attrs) {
  Node *node = g.createNode(op, {}, 1, "conv");
  for (const auto &kv : attrs)
    node->setAttr(kv.first, kv.second);
  return node;
}

Tensor reshaped(Tensor t, std::vector<int64_t> dims) {
  EXPECT_EQ(elementCount(dims), t.numel());
  t.dims = std::move(dims);
  return t;
}

/// The shifted copy as the device runs it, on an fp32 tensor.
Tensor shifted(const Tensor &src, const std::vector<int64_t> &srcDims,
               const std::vector<int64_t> &dstDims,
               const std::vector<int64_t> &offset) {
  ShiftGeometry g = makeShiftGeometry(srcDims, dstDims, offset);
  Tensor dst(DType::F32, dstDims);
  for (int64_t i = 0; i < dst.numel(); ++i) {
    int64_t from = shiftSource(g, i);
    dst.data<float>()[i] = from >= 0 ? src.data<float>()[from] : 0.0f;
  }
  return dst;
}

Tensor shapeTensor(const std::vector<int64_t> &dims) {
  return Tensor::fromInt64s({int64_t(dims.size())}, dims);
}

/// The attributes of the planned (symmetric, lifted) problem.
Builder::Attrs plannedAttrs(const ConvProblem &p) {
  std::vector<int64_t> pads = p.pads;
  pads.insert(pads.end(), p.pads.begin(), p.pads.end());
  return {
      {"pads", ints(pads)},
      {"strides", ints(p.strides)},
      {"dilations", ints(p.dilations)},
      {"group", Attribute::ofInt(p.groups)},
      {"kernel_shape", ints(std::vector<int64_t>(p.w.begin() + 2, p.w.end()))}};
}

/// Bit for bit holds on the CPU's reference convolution (im2col + sgemm),
/// whose sums per output element do not depend on the problem's shape;
/// oneDNN picks kernels (and summation orders) by shape, so the tests pin
/// the reference for their duration (kernels/cpu/onednn.h reads it on each
/// call).
struct ReferenceConvolutions {
  ReferenceConvolutions() { ::setenv("MPC_CPU_ONEDNN", "0", 1); }
  ~ReferenceConvolutions() { ::unsetenv("MPC_CPU_ONEDNN"); }
};

void expectSameBytes(const Tensor &got, const Tensor &want,
                     const std::string &what) {
  ASSERT_EQ(got.dims, want.dims) << what;
  ASSERT_EQ(got.bytes.size(), want.bytes.size()) << what;
  for (int64_t k = 0; k < want.numel(); ++k)
    if (std::memcmp(got.bytes.data() + k * 4, want.bytes.data() + k * 4, 4)) {
      ADD_FAILURE() << what << ": element " << k << " is " << got.getAsDouble(k)
                    << ", the node's " << want.getAsDouble(k);
      return;
    }
}

struct ConvCase {
  const char *name;
  std::vector<int64_t> x, w;
  Builder::Attrs attrs;
  bool explicitPad; ///< whether the plan pads explicitly
};

TEST(ConvPlan, ConvAndItsGradientsReplayOnTheCpuKernels) {
  ReferenceConvolutions reference;
  const std::vector<ConvCase> cases = {
      {"symmetric_groups_stride",
       {2, 4, 9, 8},
       {6, 2, 3, 3},
       {{"pads", ints({1, 1, 1, 1})},
        {"strides", ints({2, 1})},
        {"group", Attribute::ofInt(2)}},
       false},
      {"asymmetric_pads",
       {1, 3, 8, 7},
       {5, 3, 2, 3},
       {{"pads", ints({0, 1, 1, 2})}},
       true},
      {"same_upper_even_kernel",
       {2, 2, 7, 6},
       {3, 2, 2, 2},
       {{"auto_pad", Attribute::ofString("SAME_UPPER")},
        {"strides", ints({2, 2})}},
       true},
      {"same_lower_dilated",
       {1, 2, 9, 9},
       {2, 2, 2, 2},
       {{"auto_pad", Attribute::ofString("SAME_LOWER")},
        {"dilations", ints({3, 1})}},
       true},
      {"conv1d_asymmetric",
       {3, 3, 20},
       {4, 3, 5},
       {{"strides", ints({2})}, {"pads", ints({1, 3})}},
       true},
      {"conv1d_symmetric",
       {2, 2, 12},
       {3, 2, 3},
       {{"pads", ints({1, 1})}},
       false},
      {"conv3d_asymmetric",
       {1, 2, 5, 6, 7},
       {3, 2, 2, 3, 3},
       {{"pads", ints({0, 1, 1, 1, 0, 1})}},
       true},
  };
  std::mt19937 rng(41);
  for (const ConvCase &c : cases) {
    std::string what = c.name;
    Graph g;
    Node *node = attrNode(g, "Conv", c.attrs);
    WindowAttrs a =
        readWindowAttrs(*node, WindowKind::Conv, c.x.size() - 2,
                        std::vector<int64_t>(c.w.begin() + 2, c.w.end()));
    WindowGeometry geo = resolveWindow(*node, a, cpu::spatialDims(c.x));
    ConvProblem p =
        convProblem(*node, geo, c.x[0], c.x[1], c.w[0], a.group, DType::F32);
    EXPECT_EQ(p.explicitPad, c.explicitPad) << what;
    EXPECT_TRUE(p.x.size() == 4 || p.x.size() == 5) << what;
    Builder::Attrs planned = plannedAttrs(p);

    Tensor x = randomTensor(rng, DType::F32, c.x);
    Tensor w = randomTensor(rng, DType::F32, c.w);
    Tensor wp = reshaped(w, p.w);
    Tensor xp = shifted(x, p.xUnpadded, p.x, p.offset);

    // Forward: Conv on the padded input with the planned pads.
    Tensor want = runCpu("Conv", {&x, &w}, c.attrs)[0];
    ASSERT_EQ(elementCount(p.y), want.numel()) << what;
    Tensor got = runCpu("Conv", {&xp, &wp}, planned)[0];
    expectSameBytes(reshaped(got, want.dims), want, what + " Conv");

    // Data gradient into the padded shape, then cropped.
    Tensor dy = randomTensor(rng, DType::F32, want.dims);
    Tensor dyp = reshaped(dy, p.y);
    Tensor xs = shapeTensor(c.x), xsp = shapeTensor(p.x);
    Tensor wantDx =
        runCpu("ConvGradInput", {&dy, &w, &xs}, c.attrs, kMpcDomain)[0];
    Tensor dxp =
        runCpu("ConvGradInput", {&dyp, &wp, &xsp}, planned, kMpcDomain)[0];
    Tensor gotDx = shifted(dxp, p.x, p.xUnpadded, cropOffset(p));
    expectSameBytes(reshaped(gotDx, c.x), wantDx, what + " ConvGradInput");

    // Weight gradient over the padded input.
    Builder::Attrs withKernel = c.attrs;
    withKernel.push_back({"kernel_shape", ints(std::vector<int64_t>(
                                              c.w.begin() + 2, c.w.end()))});
    Tensor wantDw =
        runCpu("ConvGradWeight", {&dy, &x}, withKernel, kMpcDomain)[0];
    Tensor gotDw =
        runCpu("ConvGradWeight", {&dyp, &xp}, planned, kMpcDomain)[0];
    expectSameBytes(reshaped(gotDw, c.w), wantDw, what + " ConvGradWeight");
  }
}

TEST(ConvPlan, ConvTransposeReplaysAsADataGradient) {
  ReferenceConvolutions reference;
  const std::vector<ConvCase> cases = {
      {"stride_output_padding",
       {2, 4, 5, 5},
       {4, 3, 3, 3},
       {{"strides", ints({2, 2})},
        {"pads", ints({1, 1, 1, 1})},
        {"output_padding", ints({1, 1})}},
       false},
      {"groups",
       {1, 4, 6, 5},
       {4, 2, 3, 2},
       {{"group", Attribute::ofInt(2)}},
       false},
      // A target one larger than the computed size: a negative end pad
      // (the plan crops into a larger output, zeros at the end).
      {"output_shape_larger",
       {1, 3, 4, 4},
       {3, 2, 3, 3},
       {{"strides", ints({2, 2})}, {"output_shape", ints({10, 9})}},
       true},
      {"asymmetric_pads",
       {2, 2, 4, 3},
       {2, 3, 3, 2},
       {{"pads", ints({1, 0, 0, 1})}, {"strides", ints({2, 1})}},
       true},
      {"same_upper_1d",
       {2, 3, 7},
       {3, 2, 3},
       {{"auto_pad", Attribute::ofString("SAME_UPPER")},
        {"strides", ints({2})}},
       true},
  };
  std::mt19937 rng(42);
  for (const ConvCase &c : cases) {
    std::string what = c.name;
    Graph g;
    Node *node = attrNode(g, "ConvTranspose", c.attrs);
    WindowAttrs a =
        readWindowAttrs(*node, WindowKind::Conv, c.x.size() - 2,
                        std::vector<int64_t>(c.w.begin() + 2, c.w.end()));
    WindowGeometry geo =
        resolveTransposedWindow(*node, a, cpu::spatialDims(c.x));
    int64_t m = c.w[1] * a.group;
    // As run_conv_pool.cpp: the data gradient of the convolution from Y's M
    // channels and size to X's C channels and size.
    ConvProblem p =
        convProblem(*node, geo, c.x[0], m, c.x[1], a.group, DType::F32);
    EXPECT_EQ(p.explicitPad, c.explicitPad) << what;

    Tensor x = randomTensor(rng, DType::F32, c.x);
    Tensor w = randomTensor(rng, DType::F32, c.w);
    Tensor want = runCpu("ConvTranspose", {&x, &w}, c.attrs)[0];
    Tensor xp = reshaped(x, p.y), wp = reshaped(w, p.w);
    Tensor shape = shapeTensor(p.x);
    Tensor padded = runCpu("ConvGradInput", {&xp, &wp, &shape}, plannedAttrs(p),
                           kMpcDomain)[0];
    Tensor got = shifted(padded, p.x, p.xUnpadded, cropOffset(p));
    expectSameBytes(reshaped(got, want.dims), want, what + " ConvTranspose");
  }
}

} // namespace
