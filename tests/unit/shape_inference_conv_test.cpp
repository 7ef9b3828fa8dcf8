// Shape inference of the CNN family (passes/shape_rules/conv_pool.cpp and
// normalization.cpp): output sizes under every window attribute (auto_pad and
// ceil_mode included), symbolic batch dims, BatchNormalization's modes and
// opsets, the mpc backward ops, and the errors bad nodes get.
#include "passes/shape_inference.h"

#include "ir/mpc_ops.h"
#include "support/diagnostics.h"

#include <gtest/gtest.h>

using namespace mpc;

namespace {

using Attrs = std::vector<std::pair<std::string, Attribute>>;

Attribute ints(std::vector<int64_t> v) { return Attribute::ofInts(v); }
Attribute i64(int64_t v) { return Attribute::ofInt(v); }
Attribute str(std::string v) { return Attribute::ofString(v); }

/// "2x3x8x8" / "Nx3x8x8" / "?x3" -> Dims.
Dims parseDims(const std::string &s) {
  Dims out;
  size_t pos = 0;
  while (pos <= s.size()) {
    size_t x = s.find('x', pos);
    std::string item = s.substr(pos, x == std::string::npos ? x : x - pos);
    if (item == "?")
      out.push_back(Dim());
    else if (!item.empty() && isdigit((unsigned char)item[0]))
      out.push_back(Dim(std::stoll(item)));
    else
      out.push_back(Dim::symbolic(item));
    if (x == std::string::npos)
      break;
    pos = x + 1;
  }
  return out;
}

class InferConv : public ::testing::Test {
protected:
  Graph g;

  Value *input(const std::string &name, DType t, const std::string &dims) {
    return g.addInput(name, t, parseDims(dims));
  }
  Value *f32(const std::string &name, const std::string &dims) {
    return input(name, DType::F32, dims);
  }
  Value *shapeConst(const std::vector<int64_t> &v) {
    Value *c = g.addInitializer("shape" + std::to_string(g.inputs().size()),
                                Tensor::fromInt64s({int64_t(v.size())}, v));
    c->isState = false;
    return c;
  }
  /// Infers the node and returns every output's type, ", "-separated.
  std::string infer(const std::string &op, const std::vector<Value *> &inputs,
                    const Attrs &attrs = {}, int64_t opset = 17,
                    size_t outputs = 1, const std::string &domain = "") {
    Node *n = g.createNode(op, inputs, outputs, op, domain);
    for (auto &kv : attrs)
      n->setAttr(kv.first, kv.second);
    inferNode(*n, opset);
    std::string s;
    for (size_t i = 0; i < n->numOutputs(); ++i)
      s += (i ? ", " : "") + n->output(i)->typeString();
    return s;
  }
  std::string inferError(const std::string &op,
                         const std::vector<Value *> &inputs,
                         const Attrs &attrs = {}, int64_t opset = 17,
                         size_t outputs = 1, const std::string &domain = "") {
    try {
      infer(op, inputs, attrs, opset, outputs, domain);
    } catch (const Error &e) {
      return e.what();
    }
    return "";
  }
};

#define EXPECT_CONTAINS(haystack, needle)                                      \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos)             \
      << "'" << (haystack) << "' does not contain '" << (needle) << "'"

} // namespace

TEST_F(InferConv, ConvExplicitPadsStridesDilationsGroups) {
  Value *x = f32("x", "Nx4x9x8"), *w = f32("w", "6x2x3x2"), *b = f32("b", "6");
  // (9 + 1 + 2 - 5) / 2 + 1 = 4 and (8 + 0 + 1 - 2) / 1 + 1 = 8.
  EXPECT_EQ(infer("Conv", {x, w, b},
                  {{"strides", ints({2, 1})},
                   {"dilations", ints({2, 1})},
                   {"pads", ints({1, 0, 2, 1})},
                   {"group", i64(2)}}),
            "fp32[Nx6x4x8]");
  EXPECT_EQ(infer("Conv", {x, f32("w4", "6x4x3x3")}), "fp32[Nx6x7x6]");
  Value *x1 = input("x1", DType::F16, "2x3x10");
  EXPECT_EQ(infer("Conv", {x1, input("w1", DType::F16, "5x3x4")},
                  {{"strides", ints({3})}}),
            "fp16[2x5x3]");
  EXPECT_EQ(infer("Conv", {f32("x3", "1x2x4x5x6"), f32("w3", "3x2x2x2x2")}),
            "fp32[1x3x3x4x5]");
}

TEST_F(InferConv, ConvAutoPad) {
  Value *w = f32("w", "3x2x3x3");
  for (auto [pad, size, out] :
       std::vector<std::tuple<const char *, const char *, const char *>>{
           {"SAME_UPPER", "1x2x7x6", "fp32[1x3x4x3]"},
           {"SAME_LOWER", "1x2x7x6", "fp32[1x3x4x3]"},
           {"VALID", "1x2x7x6", "fp32[1x3x3x2]"}})
    EXPECT_EQ(infer("Conv", {f32(std::string("x") + pad, size), w},
                    {{"auto_pad", str(pad)}, {"strides", ints({2, 2})}}),
              out)
        << pad;
  // Unknown spatial sizes stay unknown; the channels are still known.
  EXPECT_EQ(infer("Conv", {f32("xs", "Nx2xHxW"), w},
                  {{"auto_pad", str("SAME_UPPER")}}),
            "fp32[Nx3x?x?]");
}

TEST_F(InferConv, ConvErrors) {
  Value *x = f32("x", "2x3x8x8");
  EXPECT_CONTAINS(inferError("Conv", {x, f32("w", "4x2x3x3")}),
                  "has 3 channels but W fp32[4x2x3x3] expects 2 x group 1");
  EXPECT_CONTAINS(inferError("Conv", {x, f32("w2", "4x3x3x3"), f32("b", "5")}),
                  "B fp32[5] must have one entry per output channel of W "
                  "fp32[4x3x3x3] (5 vs 4)");
  EXPECT_CONTAINS(
      inferError("Conv", {x, f32("w8", "4x3x3x3"), f32("b2", "4x1")}),
      "B (input 2 ('b2')) must be 1-D, got fp32[4x1]");
  EXPECT_CONTAINS(inferError("Conv", {x, f32("w3", "4x3x3x3")},
                             {{"kernel_shape", ints({2, 2})}}),
                  "does not match the weight's kernel");
  EXPECT_CONTAINS(inferError("Conv", {x, f32("w4", "4x3x3x3")},
                             {{"strides", ints({1, 1, 1})}}),
                  "attribute 'strides' [1, 1, 1] must have 2 entries");
  EXPECT_CONTAINS(inferError("Conv", {x, f32("w5", "4x3x3x3")},
                             {{"auto_pad", str("SAME_UPPER")},
                              {"pads", ints({1, 1, 1, 1})}}),
                  "cannot be used together with auto_pad");
  EXPECT_CONTAINS(
      inferError("Conv", {f32("s", "1x3x2x2"), f32("w6", "4x3x3x3")}),
      "smaller than the window");
  EXPECT_CONTAINS(inferError("Conv", {x, input("wh", DType::F16, "4x3x3x3")}),
                  "the inputs must have the same type");
  EXPECT_CONTAINS(inferError("Conv", {x, f32("w7", "4x2x3x3")}), "(Conv)");
}

TEST_F(InferConv, ConvTranspose) {
  Value *x = f32("x", "Nx4x3x5"), *w = f32("w", "4x3x3x2");
  // 2 * (3 - 1) + 1 + 3 - 1 - 1 = 6 and 1 * (5 - 1) + 0 + 2 - 0 - 1 = 5.
  EXPECT_EQ(infer("ConvTranspose", {x, w, f32("b", "3")},
                  {{"strides", ints({2, 1})},
                   {"pads", ints({1, 0, 1, 1})},
                   {"output_padding", ints({1, 0})}}),
            "fp32[Nx3x6x5]");
  EXPECT_EQ(infer("ConvTranspose", {x, w}, {{"group", i64(2)}}),
            "fp32[Nx6x5x6]");
  EXPECT_EQ(infer("ConvTranspose", {x, w},
                  {{"auto_pad", str("SAME_UPPER")}, {"strides", ints({2, 2})}}),
            "fp32[Nx3x6x10]");
  EXPECT_EQ(infer("ConvTranspose", {x, w},
                  {{"strides", ints({2, 2})}, {"output_shape", ints({6, 9})}}),
            "fp32[Nx3x6x9]");
  EXPECT_CONTAINS(inferError("ConvTranspose", {x, f32("w2", "3x3x3x3")}),
                  "must agree on the input channels");
  // B has one entry per output channel: M/group (W's dim 1) x group.
  EXPECT_CONTAINS(inferError("ConvTranspose", {x, w, f32("b2", "6")}),
                  "B fp32[6] must have one entry per output channel (6 vs 3)");
  EXPECT_EQ(infer("ConvTranspose", {x, w, f32("b3", "6")}, {{"group", i64(2)}}),
            "fp32[Nx6x5x6]");
  EXPECT_CONTAINS(inferError("ConvTranspose", {x, w, f32("b4", "1x3")}),
                  "B (input 2 ('b4')) must be 1-D, got fp32[1x3]");
  EXPECT_CONTAINS(
      inferError("ConvTranspose", {x, w},
                 {{"output_padding", ints({2, 0})}, {"strides", ints({2, 1})}}),
      "must be smaller than the stride or the dilation");
}

TEST_F(InferConv, PoolsWithCeilModeAndAutoPad) {
  Value *x = f32("x", "Nx3x7x6");
  EXPECT_EQ(infer("MaxPool", {x},
                  {{"kernel_shape", ints({2, 2})}, {"strides", ints({2, 2})}}),
            "fp32[Nx3x3x3]");
  EXPECT_EQ(infer("MaxPool", {x},
                  {{"kernel_shape", ints({2, 2})},
                   {"strides", ints({2, 2})},
                   {"ceil_mode", i64(1)}},
                  17, 2),
            "fp32[Nx3x4x3], int64[Nx3x4x3]");
  // ceil_mode: in 4 + pad 1, kernel 3, stride 2: ceil(2 / 2) + 1 = 2
  // windows; in 5 + pad 1: ceil(3 / 2) + 1 = 3, all starting inside.
  Value *x4 = f32("x4", "1x1x4x5");
  EXPECT_EQ(infer("AveragePool", {x4},
                  {{"kernel_shape", ints({3, 3})},
                   {"strides", ints({2, 2})},
                   {"pads", ints({1, 1, 0, 0})},
                   {"ceil_mode", i64(1)}}),
            "fp32[1x1x2x3]");
  // PyTorch drops a last window that would start in the end padding: in
  // 4, kernel 2, stride 2, end pad 1: ceil(3 / 2) + 1 = 3 windows would
  // start at 0, 2 and 4, and 4 >= 4 + 0 is past the input: 2 windows.
  Value *x5 = f32("x5", "1x1x4x4");
  EXPECT_EQ(infer("MaxPool", {x5},
                  {{"kernel_shape", ints({2, 2})},
                   {"strides", ints({2, 2})},
                   {"pads", ints({0, 0, 1, 1})},
                   {"ceil_mode", i64(1)}}),
            "fp32[1x1x2x2]");
  EXPECT_EQ(infer("MaxPool", {x},
                  {{"kernel_shape", ints({3, 3})},
                   {"strides", ints({2, 2})},
                   {"auto_pad", str("SAME_LOWER")}}),
            "fp32[Nx3x4x3]");
  EXPECT_EQ(infer("AveragePool", {x},
                  {{"kernel_shape", ints({3, 2})},
                   {"dilations", ints({2, 1})},
                   {"auto_pad", str("VALID")}}),
            "fp32[Nx3x3x5]");
  EXPECT_EQ(infer("GlobalAveragePool", {input("h", DType::F16, "Nx8x5x5")}),
            "fp16[Nx8x1x1]");
  EXPECT_CONTAINS(inferError("MaxPool", {x}),
                  "requires attribute 'kernel_shape'");
  EXPECT_CONTAINS(inferError("AveragePool", {x},
                             {{"kernel_shape", ints({2, 2})},
                              {"count_include_pad", i64(2)}}),
                  "'count_include_pad' must be 0 or 1");
  EXPECT_CONTAINS(
      inferError("MaxPool", {f32("v", "3x4")}, {{"kernel_shape", ints({2})}}),
      "must have rank >= 3");
}

TEST_F(InferConv, BatchNormalizationModesAndOpsets) {
  Value *x = input("x", DType::F16, "Nx3x4x4");
  Value *s = f32("s", "3"), *b = f32("b", "3"), *m = f32("m", "3"),
        *v = f32("v", "3");
  EXPECT_EQ(infer("BatchNormalization", {x, s, b, m, v}), "fp16[Nx3x4x4]");
  // Training: fp16 Y, fp32 running statistics.
  EXPECT_EQ(infer("BatchNormalization", {x, s, b, m, v},
                  {{"training_mode", i64(1)}}, 15, 3),
            "fp16[Nx3x4x4], fp32[3], fp32[3]");
  // BatchNormalization-9 (opset 13): training means asking for the stats.
  EXPECT_EQ(infer("BatchNormalization", {x, s, b, m, v}, {}, 13, 5),
            "fp16[Nx3x4x4], fp32[3], fp32[3], fp32[3], fp32[3]");
  EXPECT_CONTAINS(inferError("BatchNormalization", {x, s, b, m, v}, {}, 17, 3),
                  "exists only in training mode");
  EXPECT_CONTAINS(inferError("BatchNormalization", {x, s, b, m, v},
                             {{"training_mode", i64(1)}}, 13),
                  "exists from opset 14");
  EXPECT_CONTAINS(inferError("BatchNormalization", {x, s, b, m, v},
                             {{"training_mode", i64(1)}}, 17, 5),
                  "expected 1 to 3 from opset 14");
  EXPECT_CONTAINS(
      inferError("BatchNormalization", {x, f32("s4", "4"), b, m, v}),
      "must have one entry per channel");
  EXPECT_CONTAINS(inferError("BatchNormalization",
                             {x, s, input("bh", DType::F16, "3"), m, v}),
                  "the inputs must have the same type");
  EXPECT_CONTAINS(inferError("BatchNormalization",
                             {f32("one", "1x3x1x1"), s, b, m, v},
                             {{"training_mode", i64(1)}}),
                  "more than one value per channel");
}

TEST_F(InferConv, BackwardOps) {
  Value *dy = f32("dy", "Nx6x4x8"), *w = f32("w", "6x2x3x2");
  Attrs conv = {{"strides", ints({2, 1})},
                {"dilations", ints({2, 1})},
                {"pads", ints({1, 0, 2, 1})},
                {"group", i64(2)}};
  EXPECT_EQ(infer("ConvGradInput", {dy, w, shapeConst({5, 4, 9, 8})}, conv, 17,
                  1, kMpcDomain),
            "fp32[5x4x9x8]");
  // A computed (non-constant) shape gives the rank only.
  Value *shape = input("sh", DType::I64, "4");
  EXPECT_EQ(infer("ConvGradInput", {dy, w, shape}, conv, 17, 1, kMpcDomain),
            "fp32[?x?x?x?]");
  Attrs withKernel = conv;
  withKernel.push_back({"kernel_shape", ints({3, 2})});
  EXPECT_EQ(infer("ConvGradWeight", {dy, f32("x", "Nx4x9x8")}, withKernel, 17,
                  1, kMpcDomain),
            "fp32[6x2x3x2]");
  EXPECT_CONTAINS(inferError("ConvGradWeight", {dy, f32("x2", "Nx4x9x8")}, conv,
                             17, 1, kMpcDomain),
                  "requires attribute 'kernel_shape'");
  // dY that is not the window's output is a bug the inference catches.
  EXPECT_CONTAINS(
      inferError("ConvGradInput",
                 {f32("bad", "5x6x5x8"), w, shapeConst({5, 4, 9, 8})}, conv, 17,
                 1, kMpcDomain),
      "is not the window output of spatial dim 0");
  Attrs pool = {{"kernel_shape", ints({2, 2})}, {"strides", ints({2, 2})}};
  EXPECT_EQ(infer("MaxPoolGrad", {f32("pdy", "Nx3x3x3"), f32("px", "Nx3x7x6")},
                  pool, 17, 1, kMpcDomain),
            "fp32[Nx3x7x6]");
  EXPECT_EQ(
      infer("AveragePoolGrad",
            {input("ady", DType::F16, "2x3x3x3"), shapeConst({2, 3, 7, 6})},
            pool, 17, 1, kMpcDomain),
      "fp16[2x3x7x6]");
  EXPECT_EQ(infer("BatchNormalizationGrad",
                  {input("bdy", DType::F16, "Nx3x4x4"),
                   input("bx", DType::F16, "Nx3x4x4"), f32("bs", "3")},
                  {}, 17, 3, kMpcDomain),
            "fp16[Nx3x4x4], fp32[3], fp32[3]");
  EXPECT_CONTAINS(inferError("BatchNormalizationGrad",
                             {f32("d4", "2x3"), f32("x4", "2x3"),
                              f32("s4", "3"), f32("m4", "3")},
                             {}, 17, 3, kMpcDomain),
                  "takes mean and var together");
}
