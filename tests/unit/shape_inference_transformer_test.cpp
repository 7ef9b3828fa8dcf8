// Shape inference of the transformer and residual-MLP family's ops
// (passes/shape_rules/: normalization, activation, elementwise, shape_ops,
// random): output types and shapes, symbolic dims, opset forms, and the
// errors bad nodes get.
#include "passes/shape_inference.h"

#include "ir/mpc_ops.h"
#include "support/diagnostics.h"

#include <gtest/gtest.h>

using namespace mpc;

namespace {

/// "4x8" / "Nx8" / "?x8" / "scalar" -> Dims.
Dims parseDims(const std::string &s) {
  Dims out;
  if (s == "scalar")
    return out;
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

using Attrs = std::vector<std::pair<std::string, Attribute>>;

class InferTransformer : public ::testing::Test {
protected:
  Graph g;

  Value *input(const std::string &name, DType t, const std::string &dims) {
    return g.addInput(name, t, parseDims(dims));
  }
  Value *ints(const std::string &name, const std::vector<int64_t> &v) {
    Value *c =
        g.addInitializer(name, Tensor::fromInt64s({int64_t(v.size())}, v));
    c->isState = false;
    return c;
  }
  Node *node(const std::string &op, const std::vector<Value *> &inputs,
             const Attrs &attrs = {}, size_t outputs = 1,
             const std::string &domain = "") {
    Node *n = g.createNode(op, inputs, outputs, op, domain);
    for (auto &kv : attrs)
      n->setAttr(kv.first, kv.second);
    return n;
  }
  /// Infers the node and returns every output's type, ", "-separated.
  std::string infer(const std::string &op, const std::vector<Value *> &inputs,
                    const Attrs &attrs = {}, int64_t opset = 17,
                    size_t outputs = 1, const std::string &domain = "") {
    Node *n = node(op, inputs, attrs, outputs, domain);
    inferNode(*n, opset);
    std::string s;
    for (size_t i = 0; i < n->numOutputs(); ++i)
      s += (i ? ", " : "") + n->output(i)->typeString();
    return s;
  }
  std::string inferMpc(const std::string &op,
                       const std::vector<Value *> &inputs,
                       const Attrs &attrs = {}, size_t outputs = 1) {
    return infer(op, inputs, attrs, 17, outputs, kMpcDomain);
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
      << "message: " << (haystack)

Attribute I(int64_t v) { return Attribute::ofInt(v); }
Attribute Is(std::vector<int64_t> v) { return Attribute::ofInts(std::move(v)); }
Attribute S(std::string v) { return Attribute::ofString(std::move(v)); }
Attribute F(float v) { return Attribute::ofFloat(v); }

} // namespace

TEST_F(InferTransformer, LayerNormalizationStatisticsAreFp32) {
  Value *x = input("x", DType::F16, "Bx16x32");
  Value *s = input("s", DType::F16, "32");
  Value *b = input("b", DType::F16, "32");
  EXPECT_EQ(infer("LayerNormalization", {x, s, b}, {}, 17, 3),
            "fp16[Bx16x32], fp32[Bx16x1], fp32[Bx16x1]");
  Value *s2 = input("s2", DType::F16, "16x32");
  EXPECT_EQ(infer("LayerNormalization", {x, s2}, {{"axis", I(1)}}, 17, 3),
            "fp16[Bx16x32], fp32[Bx1x1], fp32[Bx1x1]");
  Value *xd = input("xd", DType::F64, "2x3");
  Value *sd = input("sd", DType::F64, "3");
  EXPECT_EQ(infer("LayerNormalization", {xd, sd}, {}, 17, 3),
            "fp64[2x3], fp64[2x1], fp64[2x1]");
}

TEST_F(InferTransformer, LayerNormalizationErrorsNameTheNode) {
  Value *x = input("x", DType::F32, "4x8");
  Value *s = input("s", DType::F32, "8");
  Value *bad = input("bad", DType::F32, "4");
  Value *half = input("half", DType::F16, "8");
  std::string e = inferError("LayerNormalization", {x, bad});
  EXPECT_CONTAINS(e, "LayerNormalization");
  EXPECT_CONTAINS(e, "does not broadcast to the normalised shape 8");
  EXPECT_CONTAINS(inferError("LayerNormalization", {x, half}),
                  "must have the same type");
  EXPECT_CONTAINS(inferError("LayerNormalization", {x, s}, {{"axis", I(2)}}),
                  "axis 2 is out of range for rank 2");
  EXPECT_CONTAINS(
      inferError("LayerNormalization", {x, s}, {{"stash_type", I(10)}}),
      "stash_type 10 is not supported");
  EXPECT_CONTAINS(inferError("LayerNormalization", {x, s}, {}, 16),
                  "from opset 17");
}

TEST_F(InferTransformer, GeluLeakyReluClip) {
  Value *x = input("x", DType::BF16, "Nx8");
  EXPECT_EQ(infer("Gelu", {x}, {{"approximate", S("tanh")}}, 20), "bf16[Nx8]");
  EXPECT_CONTAINS(inferError("Gelu", {x}, {}, 17), "from opset 20");
  EXPECT_CONTAINS(inferError("Gelu", {x}, {{"approximate", S("erf")}}, 20),
                  "\"none\" or \"tanh\"");
  EXPECT_EQ(infer("LeakyRelu", {x}, {{"alpha", F(0.2f)}}), "bf16[Nx8]");
  Value *lo = input("lo", DType::BF16, "scalar");
  EXPECT_EQ(infer("Clip", {x, lo}, {}, 13), "bf16[Nx8]");
  EXPECT_EQ(infer("Clip", {x, nullptr, lo}, {}, 13), "bf16[Nx8]");
  Value *vec = input("vec", DType::BF16, "2");
  EXPECT_CONTAINS(inferError("Clip", {x, vec}, {}, 13), "must be a scalar");
  Value *f32 = input("f32", DType::F32, "scalar");
  EXPECT_CONTAINS(inferError("Clip", {x, f32}, {}, 13), "same type");
  EXPECT_EQ(infer("Clip", {x}, {{"min", F(0)}, {"max", F(1)}}, 10),
            "bf16[Nx8]");
  EXPECT_CONTAINS(inferError("Clip", {x}, {{"min", F(0)}}, 13),
                  "as inputs since opset 11");
  EXPECT_CONTAINS(inferError("Clip", {x, lo}, {}, 10),
                  "as attributes before opset 11");
}

TEST_F(InferTransformer, MaxMinSumBroadcast) {
  Value *a = input("a", DType::F32, "Nx1x5");
  Value *b = input("b", DType::F32, "3x1");
  Value *c = input("c", DType::F32, "scalar");
  EXPECT_EQ(infer("Max", {a, b, c}), "fp32[Nx3x5]");
  EXPECT_EQ(infer("Min", {a}), "fp32[Nx1x5]");
  EXPECT_EQ(infer("Sum", {b, c}), "fp32[3x1]");
  Value *i = input("i", DType::I64, "3x1");
  EXPECT_CONTAINS(inferError("Sum", {b, i}), "same type");
  Value *wide = input("wide", DType::F32, "4x5");
  EXPECT_CONTAINS(inferError("Max", {b, wide}), "cannot be broadcast");
}

TEST_F(InferTransformer, SplitForms) {
  Value *x = input("x", DType::F32, "Nx6");
  EXPECT_EQ(infer("Split", {x, ints("s", {1, 5})}, {{"axis", I(1)}}, 13, 2),
            "fp32[Nx1], fp32[Nx5]");
  EXPECT_EQ(infer("Split", {x}, {{"axis", I(-1)}}, 13, 3),
            "fp32[Nx2], fp32[Nx2], fp32[Nx2]");
  // num_outputs (opset 18): pieces of ceil(7 / 4), the last one smaller.
  Value *x7 = input("x7", DType::F32, "Nx7");
  EXPECT_EQ(
      infer("Split", {x7}, {{"axis", I(1)}, {"num_outputs", I(4)}}, 18, 4),
      "fp32[Nx2], fp32[Nx2], fp32[Nx2], fp32[Nx1]");
  EXPECT_CONTAINS(
      inferError("Split", {x}, {{"axis", I(1)}, {"num_outputs", I(4)}}, 18, 4),
      "into 4 non-empty pieces");
  EXPECT_EQ(infer("Split", {x}, {{"axis", I(1)}, {"split", Is({4, 2})}}, 11, 2),
            "fp32[Nx4], fp32[Nx2]");
  // The batch axis is symbolic: equal pieces of it are unknown.
  EXPECT_EQ(infer("Split", {x}, {}, 13, 2), "fp32[?x6], fp32[?x6]");
  EXPECT_CONTAINS(
      inferError("Split", {x, ints("s2", {1, 2})}, {{"axis", I(1)}}, 13, 2),
      "sums to 3 but axis 1");
  EXPECT_CONTAINS(inferError("Split", {x}, {{"axis", I(1)}}, 13, 4),
                  "into 4 equal pieces");
  EXPECT_CONTAINS(
      inferError("Split", {x}, {{"axis", I(1)}, {"num_outputs", I(2)}}, 13, 2),
      "from opset 18");
  EXPECT_CONTAINS(
      inferError("Split", {x, ints("s3", {6})}, {{"axis", I(1)}}, 13, 2),
      "has 1 entries for 2 outputs");
}

TEST_F(InferTransformer, DropoutAndCastLike) {
  Value *x = input("x", DType::F16, "Nx8");
  Value *r = input("r", DType::F32, "scalar");
  Value *t = input("t", DType::Bool, "scalar");
  EXPECT_EQ(infer("Dropout", {x, r, t}, {}, 13, 2), "fp16[Nx8], bool[Nx8]");
  Value *ti = input("ti", DType::I64, "scalar");
  EXPECT_CONTAINS(inferError("Dropout", {x, r, ti}, {}, 13),
                  "must be bool, got int64");
  Value *bad = g.addInitializer("bad", Tensor::scalar(DType::F32, 1.5));
  bad->isState = false;
  EXPECT_CONTAINS(inferError("Dropout", {x, bad}, {}, 13),
                  "ratio must be in [0, 1], got 1.5");
  EXPECT_CONTAINS(inferError("Dropout", {x}, {{"ratio", F(0.1f)}}, 13),
                  "as an input since opset 12");
  Value *like = input("like", DType::BF16, "scalar");
  EXPECT_EQ(infer("CastLike", {x, like}, {}, 15), "bf16[Nx8]");
  EXPECT_CONTAINS(inferError("CastLike", {x, like}, {}, 13), "from opset 15");
}

TEST_F(InferTransformer, GatherElements) {
  Value *data = input("data", DType::F16, "Nx8");
  Value *idx = input("idx", DType::I32, "Nx3");
  EXPECT_EQ(infer("GatherElements", {data, idx}, {{"axis", I(-1)}}, 13),
            "fp16[Nx3]");
  Value *big = input("big", DType::I64, "4x9");
  EXPECT_CONTAINS(inferError("GatherElements", {data, big}, {}, 13),
                  "exceed data fp16[Nx8] in dim 1 (only axis 0 may differ)");
  Value *flat = input("flat", DType::I64, "8");
  EXPECT_CONTAINS(inferError("GatherElements", {data, flat}, {}, 13),
                  "must have the rank of data");
  EXPECT_CONTAINS(inferError("GatherElements", {data, idx}, {}, 10),
                  "from opset 11");
  Value *dy = input("dy", DType::F32, "Nx3");
  EXPECT_EQ(inferMpc("GatherElementsGrad", {dy, idx, data}, {{"axis", I(1)}}),
            "fp32[Nx8]");
  EXPECT_CONTAINS(inferError("GatherElementsGrad", {data, idx, data}, {}, 17, 1,
                             kMpcDomain),
                  "must have the same shape");
}

TEST_F(InferTransformer, MpcBackwardOps) {
  Value *dy = input("dy", DType::F32, "Bx4x8");
  Value *x = input("x", DType::F32, "Bx4x8");
  Value *s = input("s", DType::F32, "8");
  Value *m = input("m", DType::F32, "Bx4x1");
  EXPECT_EQ(
      inferMpc("LayerNormalizationGrad", {dy, x, s, m, m}, {{"axis", I(2)}}, 3),
      "fp32[Bx4x8], fp32[8], fp32[8]");
  Value *w = input("w", DType::F32, "64x8");
  Value *tok = input("tok", DType::I64, "Bx4");
  EXPECT_EQ(inferMpc("GatherGrad", {dy, tok, w}, {{"axis", I(0)}}),
            "fp32[64x8]");
  EXPECT_CONTAINS(inferError("GatherGrad", {dy, w, w}, {}, 17, 1, kMpcDomain),
                  "must be int64 or int32");
  Value *big = input("big", DType::F32, "Bx9x8");
  EXPECT_EQ(inferMpc("SliceGrad", {dy, big, ints("st", {1}), ints("en", {5}),
                                   ints("ax", {1})}),
            "fp32[Bx9x8]");
  EXPECT_EQ(inferMpc("GeluGrad", {dy, x}, {{"approximate", S("none")}}),
            "fp32[Bx4x8]");
  Value *y = input("y", DType::F32, "Bx4x8");
  EXPECT_EQ(inferMpc("ExtremumGrad", {dy, y, x, s}, {{"index", I(1)}}),
            "fp32[Bx4x8]");
  EXPECT_CONTAINS(inferError("ExtremumGrad", {dy, y, x, s}, {{"index", I(2)}},
                             17, 1, kMpcDomain),
                  "index 2 is out of range for 2 forward inputs");
  Value *red = input("red", DType::F32, "Bx1x8");
  EXPECT_EQ(inferMpc("ReduceExtremumGrad", {red, x, red}, {{"axes", Is({1})}}),
            "fp32[Bx4x8]");
  Value *mask = input("mask", DType::Bool, "Bx4x8");
  EXPECT_EQ(inferMpc("DropoutGrad", {dy, mask}), "fp32[Bx4x8]");
  EXPECT_CONTAINS(inferError("DropoutGrad", {dy, x}, {}, 17, 1, kMpcDomain),
                  "must be bool");
  Value *lo = input("lo", DType::F32, "scalar");
  EXPECT_EQ(inferMpc("ClipGrad", {dy, x, lo, lo}), "fp32[Bx4x8]");
}
