// Tests for passes/shape_inference: each op's output types and shapes,
// broadcasting, symbolic dims, opset differences and the errors bad nodes get.
#include "passes/shape_inference.h"

#include "ir/mpc_ops.h"
#include "passes/onnx/import_lowering.h"
#include "support/diagnostics.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>

using namespace mpc;

namespace {

/// "64x10" / "Nx10" / "?x3" / "scalar" -> Dims.
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

/// A graph to build one node in, with helpers for typed inputs.
class InferTest : public ::testing::Test {
protected:
  Graph g;

  Value *input(const std::string &name, DType t, const std::string &dims) {
    return g.addInput(name, t, parseDims(dims));
  }
  Value *unranked(const std::string &name, DType t) {
    Value *v = g.addInput(name, t, {});
    v->hasShape = false;
    return v;
  }
  Value *ints(const std::string &name, const std::vector<int64_t> &v) {
    Value *c =
        g.addInitializer(name, Tensor::fromInt64s({int64_t(v.size())}, v));
    c->isState = false;
    return c;
  }
  Node *node(const std::string &op, const std::vector<Value *> &inputs,
             std::vector<std::pair<std::string, Attribute>> attrs = {},
             size_t outputs = 1, const std::string &domain = "") {
    Node *n = g.createNode(op, inputs, outputs, op, domain);
    for (auto &kv : attrs)
      n->setAttr(kv.first, kv.second);
    return n;
  }
  /// Infers one single-output node and returns its output type string.
  std::string infer(const std::string &op, const std::vector<Value *> &inputs,
                    std::vector<std::pair<std::string, Attribute>> attrs = {},
                    int64_t opset = 17) {
    Node *n = node(op, inputs, std::move(attrs));
    inferNode(*n, opset);
    return n->output(0)->typeString();
  }
  /// The message inference throws for a node (empty when it does not throw).
  std::string
  inferError(const std::string &op, const std::vector<Value *> &inputs,
             std::vector<std::pair<std::string, Attribute>> attrs = {},
             int64_t opset = 17, size_t outputs = 1,
             const std::string &domain = "") {
    Node *n = node(op, inputs, std::move(attrs), outputs, domain);
    try {
      inferNode(*n, opset);
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

// --- elementwise and broadcasting --------------------------------------------

TEST_F(InferTest, AddBroadcastsNumpyStyle) {
  Value *a = input("a", DType::F32, "8x1x6x1");
  Value *b = input("b", DType::F32, "7x1x5");
  EXPECT_EQ(infer("Add", {a, b}), "fp32[8x7x6x5]");
}

TEST_F(InferTest, BroadcastScalarAndSymbolicBatch) {
  Value *x = input("x", DType::F16, "Nx10");
  Value *s = input("s", DType::F16, "scalar");
  Value *row = input("row", DType::F16, "10");
  EXPECT_EQ(infer("Mul", {x, s}), "fp16[Nx10]");
  EXPECT_EQ(infer("Sub", {x, row}), "fp16[Nx10]");
  Value *n1 = input("n1", DType::F16, "Nx1");
  Value *m5 = input("m5", DType::F16, "1x5");
  EXPECT_EQ(infer("Div", {n1, m5}), "fp16[Nx5]");
  // A symbolic dim against a known one: it can only be 1 or equal.
  Value *k = input("k", DType::F16, "4x10");
  EXPECT_EQ(infer("Add", {x, k}), "fp16[4x10]");
  // Two different symbols: unknown.
  Value *m = input("m", DType::F16, "Mx10");
  EXPECT_EQ(infer("Add", {x, m}), "fp16[?x10]");
}

TEST_F(InferTest, AddRejectsMismatchedDTypes) {
  Value *a = input("a", DType::F32, "4");
  Value *b = input("b", DType::F16, "4");
  std::string msg = inferError("Add", {a, b});
  EXPECT_CONTAINS(msg, "node 'Add' (Add)");
  EXPECT_CONTAINS(msg, "fp16");
  EXPECT_CONTAINS(msg, "same type");
}

TEST_F(InferTest, AddRejectsIncompatibleBroadcast) {
  Value *a = input("a", DType::F32, "3x4");
  Value *b = input("b", DType::F32, "5");
  std::string msg = inferError("Add", {a, b});
  EXPECT_CONTAINS(msg, "3x4 and 5 cannot be broadcast");
}

TEST_F(InferTest, UnaryOpsKeepType) {
  Value *x = input("x", DType::BF16, "Nx3");
  for (const char *op : {"Relu", "Identity", "Neg", "Abs", "Sqrt", "Exp", "Log",
                         "Tanh", "Sigmoid", "Erf"})
    EXPECT_EQ(infer(op, {x}), "bf16[Nx3]") << op;
  Value *i = input("i", DType::I64, "3");
  EXPECT_CONTAINS(inferError("Sqrt", {i}), "must be floating point");
}

TEST_F(InferTest, UnknownInputShapeStaysUnknown) {
  Value *x = unranked("x", DType::F32);
  Value *y = input("y", DType::F32, "4");
  EXPECT_EQ(infer("Add", {x, y}), "fp32");
  EXPECT_EQ(infer("Relu", {x}), "fp32");
}

TEST_F(InferTest, PowComparisonsNotWhere) {
  Value *x = input("x", DType::F32, "2x3");
  Value *e = input("e", DType::I64, "scalar");
  EXPECT_EQ(infer("Pow", {x, e}), "fp32[2x3]");
  Value *y = input("y", DType::F32, "3");
  EXPECT_EQ(infer("Equal", {x, y}), "bool[2x3]");
  EXPECT_EQ(infer("Greater", {x, y}), "bool[2x3]");
  EXPECT_EQ(infer("Less", {y, x}), "bool[2x3]");
  Value *c = input("c", DType::Bool, "2x1");
  EXPECT_EQ(infer("Not", {c}), "bool[2x1]");
  EXPECT_EQ(infer("Where", {c, x, y}), "fp32[2x3]");
  EXPECT_CONTAINS(inferError("Not", {x}), "must be bool");
  EXPECT_CONTAINS(inferError("Where", {x, x, y}), "must be bool");
}

TEST_F(InferTest, CastSetsDType) {
  Value *x = input("x", DType::F32, "Nx4");
  EXPECT_EQ(infer("Cast", {x}, {{"to", I(10)}}), "fp16[Nx4]");
  EXPECT_EQ(infer("Cast", {x}, {{"to", I(7)}}), "int64[Nx4]");
  EXPECT_CONTAINS(inferError("Cast", {x}), "requires attribute 'to'");
  EXPECT_CONTAINS(inferError("Cast", {x}, {{"to", I(8)}}),
                  "not a data type mpc supports");
  EXPECT_CONTAINS(inferError("Cast", {x}, {{"to", F(1.0f)}}),
                  "attribute 'to' must be an int");
}

// --- matrix products
// ----------------------------------------------------------

TEST_F(InferTest, GemmTransposes) {
  Value *a = input("a", DType::F32, "Nx10");
  Value *w = input("w", DType::F32, "20x10");
  Value *bias = input("bias", DType::F32, "20");
  EXPECT_EQ(infer("Gemm", {a, w, bias}, {{"transB", I(1)}}), "fp32[Nx20]");
  Value *at = input("at", DType::F32, "10xN");
  Value *wt = input("wt", DType::F32, "10x20");
  EXPECT_EQ(infer("Gemm", {at, wt}, {{"transA", I(1)}}), "fp32[Nx20]");
  EXPECT_EQ(infer("Gemm", {at, w}, {{"transA", I(1)}, {"transB", I(1)}}),
            "fp32[Nx20]");
}

TEST_F(InferTest, GemmInnerDimMismatch) {
  Value *a = input("a", DType::F32, "64x10");
  Value *w = input("w", DType::F32, "20x10");
  std::string msg = inferError("Gemm", {a, w});
  EXPECT_CONTAINS(msg, "node 'Gemm' (Gemm)");
  EXPECT_CONTAINS(msg, "inner dimensions differ");
  EXPECT_CONTAINS(msg, "10 vs 20");
}

TEST_F(InferTest, GemmBiasMustBroadcast) {
  Value *a = input("a", DType::F32, "4x3");
  Value *b = input("b", DType::F32, "3x5");
  Value *bad = input("bad", DType::F32, "4");
  EXPECT_CONTAINS(inferError("Gemm", {a, b, bad}), "does not broadcast");
  Value *col = input("col", DType::F32, "4x1");
  EXPECT_EQ(infer("Gemm", {a, b, col}), "fp32[4x5]");
  Value *v = input("v", DType::F32, "3");
  EXPECT_CONTAINS(inferError("Gemm", {v, b}), "must have rank 2");
  EXPECT_CONTAINS(inferError("Gemm", {a, b}, {{"transA", I(2)}}),
                  "'transA' must be 0 or 1");
}

TEST_F(InferTest, MatMulBatchesAndVectors) {
  Value *a = input("a", DType::F16, "Bx1x4x3");
  Value *b = input("b", DType::F16, "5x3x6");
  EXPECT_EQ(infer("MatMul", {a, b}), "fp16[Bx5x4x6]");
  Value *v = input("v", DType::F16, "3");
  Value *m = input("m", DType::F16, "3x6");
  EXPECT_EQ(infer("MatMul", {v, m}), "fp16[6]");
  Value *m2 = input("m2", DType::F16, "4x3");
  EXPECT_EQ(infer("MatMul", {m2, v}), "fp16[4]");
  EXPECT_EQ(infer("MatMul", {v, v}), "fp16[scalar]");
  Value *bad = input("bad", DType::F16, "4x6");
  EXPECT_CONTAINS(inferError("MatMul", {m2, bad}), "inner dimensions differ");
}

// --- shape manipulation
// ---------------------------------------------------------

TEST_F(InferTest, ReshapeZeroAndMinusOne) {
  Value *x = input("x", DType::F32, "2x3x4");
  EXPECT_EQ(infer("Reshape", {x, ints("s1", {0, -1})}), "fp32[2x12]");
  EXPECT_EQ(infer("Reshape", {x, ints("s2", {-1})}), "fp32[24]");
  EXPECT_EQ(infer("Reshape", {x, ints("s3", {4, 0, 2})}), "fp32[4x3x2]");
  EXPECT_CONTAINS(inferError("Reshape", {x, ints("s4", {5, -1})}),
                  "cannot reshape");
  EXPECT_CONTAINS(inferError("Reshape", {x, ints("s5", {-1, -1})}),
                  "more than one -1");
  EXPECT_CONTAINS(inferError("Reshape", {x, ints("s6", {4, 7})}),
                  "cannot reshape");
}

TEST_F(InferTest, ReshapeKeepsSymbolicBatch) {
  Value *x = input("x", DType::F32, "Nx4x5");
  EXPECT_EQ(infer("Reshape", {x, ints("s1", {0, -1})}), "fp32[Nx20]");
  EXPECT_EQ(infer("Reshape", {x, ints("s2", {-1, 20})}), "fp32[Nx20]");
  EXPECT_EQ(infer("Reshape", {x, ints("s3", {-1, 2})}), "fp32[?x2]");
}

TEST_F(InferTest, ReshapeAllowZeroAndNonConstantShape) {
  Value *x = input("x", DType::F32, "0x4");
  EXPECT_EQ(
      infer("Reshape", {x, ints("s1", {0, 4})}, {{"allowzero", I(1)}}, 14),
      "fp32[0x4]");
  Value *shape = input("shape", DType::I64, "3");
  EXPECT_EQ(infer("Reshape", {x, shape}), "fp32[?x?x?]");
  Value *f = input("f", DType::F32, "2");
  EXPECT_CONTAINS(inferError("Reshape", {x, f}), "must be int64");
}

TEST_F(InferTest, ReshapeReadsConstantNodes) {
  Value *x = input("x", DType::F32, "6x4");
  Node *c = node("Constant", {},
                 {{"value", Attribute::ofTensor(Tensor::fromInt64s(
                                {2}, std::vector<int64_t>{3, -1}))}});
  inferNode(*c, 17);
  EXPECT_EQ(c->output(0)->typeString(), "int64[2]");
  EXPECT_EQ(infer("Reshape", {x, c->output(0)}), "fp32[3x8]");
}

TEST_F(InferTest, FlattenAxis) {
  Value *x = input("x", DType::F32, "2x3x4x5");
  EXPECT_EQ(infer("Flatten", {x}), "fp32[2x60]");
  EXPECT_EQ(infer("Flatten", {x}, {{"axis", I(0)}}), "fp32[1x120]");
  EXPECT_EQ(infer("Flatten", {x}, {{"axis", I(-1)}}), "fp32[24x5]");
  EXPECT_EQ(infer("Flatten", {x}, {{"axis", I(4)}}), "fp32[120x1]");
  Value *n = input("n", DType::F32, "Nx3x4");
  EXPECT_EQ(infer("Flatten", {n}), "fp32[Nx12]");
  EXPECT_CONTAINS(inferError("Flatten", {x}, {{"axis", I(5)}}),
                  "axis 5 is out of range");
}

TEST_F(InferTest, TransposeDefaultAndPerm) {
  Value *x = input("x", DType::F32, "Nx3x4");
  EXPECT_EQ(infer("Transpose", {x}), "fp32[4x3xN]");
  EXPECT_EQ(infer("Transpose", {x}, {{"perm", Is({0, 2, 1})}}), "fp32[Nx4x3]");
  EXPECT_CONTAINS(inferError("Transpose", {x}, {{"perm", Is({0, 0, 1})}}),
                  "not a permutation");
  EXPECT_CONTAINS(inferError("Transpose", {x}, {{"perm", Is({1, 0})}}),
                  "has rank 3");
}

TEST_F(InferTest, SoftmaxAxisDefaultsByOpset) {
  Value *x = input("x", DType::F32, "2x3");
  EXPECT_EQ(infer("Softmax", {x}), "fp32[2x3]");
  EXPECT_EQ(infer("LogSoftmax", {x}, {{"axis", I(-2)}}), "fp32[2x3]");
  EXPECT_CONTAINS(inferError("Softmax", {x}, {{"axis", I(2)}}),
                  "axis 2 is out of range for rank 2");
  Value *v = input("v", DType::F32, "5");
  // Opset 13 defaults to -1 (valid for rank 1); before, to 1 (invalid).
  EXPECT_EQ(infer("Softmax", {v}, {}, 13), "fp32[5]");
  EXPECT_CONTAINS(inferError("Softmax", {v}, {}, 12), "axis 1 is out of range");
}

// --- losses
// -----------------------------------------------------------------------

TEST_F(InferTest, SoftmaxCrossEntropyLossOutputs) {
  Value *scores = input("scores", DType::F32, "Nx10");
  Value *labels = input("labels", DType::I64, "N");
  Node *n = node("SoftmaxCrossEntropyLoss", {scores, labels}, {}, 2);
  inferNode(*n, 17);
  EXPECT_EQ(n->output(0)->typeString(), "fp32[scalar]");
  EXPECT_EQ(n->output(1)->typeString(), "fp32[Nx10]");
  EXPECT_EQ(infer("SoftmaxCrossEntropyLoss", {scores, labels},
                  {{"reduction", S("none")}}),
            "fp32[N]");
  Value *s4 = input("s4", DType::F32, "2x5x3x4");
  Value *l4 = input("l4", DType::I32, "2x3x4");
  EXPECT_EQ(
      infer("SoftmaxCrossEntropyLoss", {s4, l4}, {{"reduction", S("none")}}),
      "fp32[2x3x4]");
}

TEST_F(InferTest, LossErrors) {
  Value *scores = input("scores", DType::F32, "64x10");
  Value *fl = input("fl", DType::F32, "64");
  EXPECT_CONTAINS(inferError("SoftmaxCrossEntropyLoss", {scores, fl}),
                  "labels (input 1 ('fl')) must be int64 or int32, got fp32");
  Value *wrong = input("wrong", DType::I64, "32");
  EXPECT_CONTAINS(inferError("SoftmaxCrossEntropyLoss", {scores, wrong}),
                  "must have the shape of scores");
  Value *l = input("l", DType::I64, "64");
  EXPECT_CONTAINS(inferError("SoftmaxCrossEntropyLoss", {scores, l},
                             {{"reduction", S("avg")}}),
                  "'reduction' must be");
  Value *w = input("w", DType::F32, "9");
  EXPECT_CONTAINS(inferError("NegativeLogLikelihoodLoss", {scores, l, w}),
                  "one entry per class");
  EXPECT_EQ(infer("NegativeLogLikelihoodLoss", {scores, l}), "fp32[scalar]");
}

// --- reductions
// ---------------------------------------------------------------------

TEST_F(InferTest, ReduceMeanAttributeBeforeOpset18) {
  Value *x = input("x", DType::F32, "Nx3x4");
  EXPECT_EQ(infer("ReduceMean", {x}, {{"axes", Is({-1})}}, 17), "fp32[Nx3x1]");
  EXPECT_EQ(
      infer("ReduceMean", {x}, {{"axes", Is({1, -1})}, {"keepdims", I(0)}}, 17),
      "fp32[N]");
  EXPECT_EQ(infer("ReduceMax", {x}, {{"keepdims", I(0)}}, 17), "fp32[scalar]");
  EXPECT_CONTAINS(inferError("ReduceMean", {x, ints("a", {1})}, {}, 17),
                  "attribute before opset 18");
}

TEST_F(InferTest, ReduceAxesAsInput) {
  Value *x = input("x", DType::F32, "Nx3x4");
  EXPECT_EQ(infer("ReduceSum", {x, ints("a1", {0})}, {}, 13), "fp32[1x3x4]");
  EXPECT_EQ(
      infer("ReduceMean", {x, ints("a2", {-2})}, {{"keepdims", I(0)}}, 18),
      "fp32[Nx4]");
  EXPECT_EQ(infer("ReduceSum", {x}, {{"keepdims", I(0)}}, 13), "fp32[scalar]");
  EXPECT_EQ(infer("ReduceSum", {x}, {{"noop_with_empty_axes", I(1)}}, 13),
            "fp32[Nx3x4]");
  EXPECT_CONTAINS(inferError("ReduceSum", {x}, {{"axes", Is({0})}}, 13),
                  "'axes' is an input since opset 13");
  EXPECT_CONTAINS(inferError("ReduceSum", {x, ints("a3", {3})}, {}, 13),
                  "axis 3 is out of range");
  EXPECT_CONTAINS(inferError("ReduceSum", {x, ints("a4", {1, -2})}, {}, 13),
                  "listed twice");
  Value *dyn = input("dyn", DType::I64, "1");
  EXPECT_EQ(infer("ReduceSum", {x, dyn}, {}, 13), "fp32[?x?x?]");
}

// --- shapes and constants
// -------------------------------------------------------------

TEST_F(InferTest, ShapeGatherUnsqueezeConcat) {
  Value *x = input("x", DType::F32, "Nx3x4");
  EXPECT_EQ(infer("Shape", {x}), "int64[3]");
  EXPECT_EQ(infer("Shape", {x}, {{"start", I(1)}}, 15), "int64[2]");
  EXPECT_EQ(infer("Shape", {x}, {{"start", I(-1)}, {"end", I(5)}}, 15),
            "int64[1]");
  Value *idx = g.addInitializer("idx", Tensor::fromInt64s({}, {0}));
  Value *shape = input("shape", DType::I64, "3");
  EXPECT_EQ(infer("Gather", {shape, idx}), "int64[scalar]");
  Value *idx2 = input("idx2", DType::I64, "2x5");
  EXPECT_EQ(infer("Gather", {x, idx2}, {{"axis", I(1)}}), "fp32[Nx2x5x4]");
  Value *big = g.addInitializer("big", Tensor::fromInt64s({}, {3}));
  EXPECT_CONTAINS(inferError("Gather", {shape, big}),
                  "index 3 is out of range for axis 0 of size 3");
  Value *s = input("s", DType::I64, "scalar");
  EXPECT_EQ(infer("Unsqueeze", {s, ints("ax", {0})}, {}, 13), "int64[1]");
  EXPECT_EQ(infer("Unsqueeze", {x}, {{"axes", Is({0, -1})}}, 12),
            "fp32[1xNx3x4x1]");
  Value *a = input("a", DType::I64, "1");
  Value *b = input("b", DType::I64, "2");
  EXPECT_EQ(infer("Concat", {a, b, a}, {{"axis", I(0)}}), "int64[4]");
  Value *p = input("p", DType::F32, "Nx2");
  Value *q = input("q", DType::F32, "Nx5");
  EXPECT_EQ(infer("Concat", {p, q}, {{"axis", I(-1)}}), "fp32[Nx7]");
  EXPECT_EQ(infer("Concat", {p, p}, {{"axis", I(0)}}), "fp32[?x2]");
  EXPECT_CONTAINS(inferError("Concat", {p, q}, {{"axis", I(0)}}),
                  "only the concat axis");
  EXPECT_CONTAINS(inferError("Concat", {p, q}), "requires attribute 'axis'");
}

TEST_F(InferTest, SqueezeByOpset) {
  Value *x = input("x", DType::F32, "1x3x1x4");
  EXPECT_EQ(infer("Squeeze", {x}, {}, 13), "fp32[3x4]");
  EXPECT_EQ(infer("Squeeze", {x, ints("a", {-2})}, {}, 13), "fp32[1x3x4]");
  EXPECT_EQ(infer("Squeeze", {x}, {{"axes", Is({0})}}, 11), "fp32[3x1x4]");
  EXPECT_CONTAINS(inferError("Squeeze", {x, ints("b", {1})}, {}, 13),
                  "cannot squeeze axis 1 of size 3");
  EXPECT_CONTAINS(inferError("Squeeze", {x}, {{"axes", Is({0})}}, 13),
                  "'axes' is an input since opset 13");
  EXPECT_CONTAINS(inferError("Unsqueeze", {x}, {}, 13),
                  "requires the 'axes' input");
  Value *n = input("n", DType::F32, "Nx1");
  EXPECT_EQ(infer("Squeeze", {n}, {}, 13), "fp32");
}

TEST_F(InferTest, Slice) {
  Value *x = input("x", DType::F32, "10x20xN");
  EXPECT_EQ(infer("Slice", {x, ints("s", {1}), ints("e", {-1})}),
            "fp32[8x20xN]");
  EXPECT_EQ(infer("Slice", {x, ints("s2", {0, 5}), ints("e2", {100, 1}),
                            ints("a2", {0, 1}), ints("st2", {3, -2})}),
            "fp32[4x2xN]");
  EXPECT_EQ(infer("Slice", {x, ints("s3", {0}), ints("e3", {INT64_MAX}),
                            ints("a3", {2})}),
            "fp32[10x20xN]");
  EXPECT_EQ(
      infer("Slice", {x, ints("s4", {1}), ints("e4", {3}), ints("a4", {-1})}),
      "fp32[10x20x?]");
  EXPECT_CONTAINS(inferError("Slice", {x, ints("s5", {0}), ints("e5", {1}),
                                       ints("a5", {0}), ints("st5", {0})}),
                  "steps must not be 0");
}

TEST_F(InferTest, ExpandAndConstantOfShape) {
  Value *x = input("x", DType::F32, "3x1");
  EXPECT_EQ(infer("Expand", {x, ints("s", {2, 1, 6})}), "fp32[2x3x6]");
  EXPECT_CONTAINS(inferError("Expand", {x, ints("s2", {4, 5})}),
                  "cannot be broadcast");
  EXPECT_EQ(infer("ConstantOfShape", {ints("c", {2, 3})}), "fp32[2x3]");
  Tensor one = Tensor::fromInt64s({1}, {7});
  EXPECT_EQ(infer("ConstantOfShape", {ints("c2", {4})},
                  {{"value", Attribute::ofTensor(one)}}),
            "int64[4]");
  EXPECT_CONTAINS(inferError("ConstantOfShape", {ints("c3", {-1})}),
                  "negative entry");
}

TEST_F(InferTest, ConstantAttributes) {
  EXPECT_EQ(infer("Constant", {}, {{"value_float", F(1.5f)}}), "fp32[scalar]");
  EXPECT_EQ(infer("Constant", {}, {{"value_ints", Is({1, 2, 3})}}), "int64[3]");
  EXPECT_CONTAINS(inferError("Constant", {}), "has no 'value' attribute");
  EXPECT_CONTAINS(
      inferError("Constant", {}, {{"value_int", I(1)}, {"value_float", F(1)}}),
      "exactly one value attribute");
}

// --- counts, unsupported ops, metadata of the table
// -------------------------------

TEST_F(InferTest, WrongInputCount) {
  Value *x = input("x", DType::F32, "2");
  std::string msg = inferError("Add", {x});
  EXPECT_CONTAINS(msg, "node 'Add' (Add): has 1 inputs, expected 2");
  EXPECT_CONTAINS(inferError("Gemm", {x}), "expected 2 to 3");
}

TEST_F(InferTest, MissingRequiredInput) {
  Value *x = input("x", DType::F32, "2x2");
  EXPECT_CONTAINS(inferError("Gemm", {x, nullptr}),
                  "required input 1 is missing");
}

TEST_F(InferTest, UnsupportedOpListsSupported) {
  Value *x = input("x", DType::F32, "2");
  Node *n = g.createNode("Foo", {x}, 1, "n");
  try {
    inferNode(*n, 17);
    FAIL() << "no error";
  } catch (const Error &e) {
    std::string msg = e.what();
    EXPECT_CONTAINS(msg, "unsupported op 'Foo' (node 'n'); supported: Abs, ");
    EXPECT_CONTAINS(msg, "mpc.SGD");
  }
}

TEST(SupportedOps, SortedAndComplete) {
  std::vector<std::string> ops = supportedOpNames();
  EXPECT_TRUE(std::is_sorted(ops.begin(), ops.end()));
  for (const char *op : {"Gemm",
                         "MatMul",
                         "Add",
                         "Sub",
                         "Mul",
                         "Div",
                         "Relu",
                         "Identity",
                         "Cast",
                         "Reshape",
                         "Flatten",
                         "Transpose",
                         "Softmax",
                         "LogSoftmax",
                         "SoftmaxCrossEntropyLoss",
                         "NegativeLogLikelihoodLoss",
                         "ReduceMean",
                         "ReduceSum",
                         "ReduceMax",
                         "Constant",
                         "Shape",
                         "Gather",
                         "Concat",
                         "Unsqueeze",
                         "Squeeze",
                         "Slice",
                         "Expand",
                         "ConstantOfShape",
                         "Neg",
                         "Abs",
                         "Sqrt",
                         "Exp",
                         "Log",
                         "Pow",
                         "Tanh",
                         "Sigmoid",
                         "Erf",
                         "Equal",
                         "Greater",
                         "Less",
                         "Not",
                         "Where"}) {
    EXPECT_TRUE(isSupportedOp("", op)) << op;
    EXPECT_TRUE(isSupportedOp("ai.onnx", op)) << op;
  }
  for (const char *op :
       {"ReluGrad", "SoftmaxGrad", "LogSoftmaxGrad",
        "SoftmaxCrossEntropyLossGrad", "NegativeLogLikelihoodLossGrad",
        "SumToShape", "ReduceGrad", "UnscaleGradients", "UpdateLossScale",
        "ClipGradNorm", "SGD", "Adam", "IncrementStep"}) {
    EXPECT_TRUE(isSupportedOp(kMpcDomain, op)) << op;
    EXPECT_NE(std::find(ops.begin(), ops.end(), std::string("mpc.") + op),
              ops.end())
        << op;
  }
  EXPECT_FALSE(isSupportedOp("", "ReluGrad"));
  EXPECT_FALSE(isSupportedOp("mpc", "Relu"));
}

// The rule lookup is a hash table of its own: every listed op must be found
// under its own domain, and names that differ by a letter, a case or a
// domain must not be.
TEST(SupportedOps, LookupFindsEveryOpAndOnlyThem) {
  for (const std::string &name : supportedOpNames()) {
    size_t dot = name.rfind('.');
    std::string domain = dot == std::string::npos ? "" : name.substr(0, dot);
    std::string op = dot == std::string::npos ? name : name.substr(dot + 1);
    EXPECT_TRUE(isSupportedOp(domain, op)) << name;
    EXPECT_FALSE(isSupportedOp(domain, op + "x")) << name;
    EXPECT_FALSE(isSupportedOp(domain, op.substr(0, op.size() - 1))) << name;
    EXPECT_FALSE(isSupportedOp(domain + "x", op)) << name;
    std::string lower = op;
    lower[0] = char(std::tolower(static_cast<unsigned char>(lower[0])));
    EXPECT_FALSE(isSupportedOp(domain, lower)) << name;
  }
  EXPECT_FALSE(isSupportedOp("", ""));
  EXPECT_FALSE(isSupportedOp("ai.onnx.ml", "Add"));
}

// The table gathers every category file's rows (passes/shape_rules/): one op
// of each must be found, and no op may be listed twice (a second row, in
// another category file say, would be dead).
TEST(SupportedOps, EveryRuleCategoryIsInTheTableAndNoOpIsListedTwice) {
  std::vector<std::string> ops = supportedOpNames();
  EXPECT_EQ(std::adjacent_find(ops.begin(), ops.end()), ops.end());
  for (const char *op :
       {"Add", "Relu", "ReduceSum", "MatMul", "Conv", "LayerNormalization",
        "Reshape", "GatherElements", "TopK", "SoftmaxCrossEntropyLoss",
        "mpc.Adam", "ai.onnx.preview.training.Momentum", "RandomNormal",
        "mpc.FusedMatMul"})
    EXPECT_TRUE(std::binary_search(ops.begin(), ops.end(), std::string(op)))
        << op;
}

// The ops the importer lowers (passes/onnx/import_lowering.h): the list the
// unsupported-op error prints is exactly what the importer lowers, and none
// of them reaches shape inference (none has a rule).
TEST(SupportedOps, LoweredAtImportListIsWhatTheImporterLowers) {
  std::vector<std::string> lowered = opsLoweredAtImport();
  EXPECT_GE(lowered.size(), 23u);
  for (const std::string &op : lowered) {
    EXPECT_TRUE(isLoweredAtImport("", op)) << op;
    EXPECT_TRUE(isLoweredAtImport("ai.onnx", op)) << op;
    EXPECT_FALSE(isSupportedOp("", op)) << op;
  }
  for (const char *op : {"Scan", "Loop", "CumSum", "Relu", "ReduceSum"})
    EXPECT_FALSE(isLoweredAtImport("", op)) << op;
  EXPECT_FALSE(isLoweredAtImport("com.microsoft", "Resize"));
}

TEST_F(InferTest, KeepsDeclaredDimsWhereInferenceCannotTell) {
  Value *x = input("x", DType::F32, "6x4");
  Value *shape = input("shape", DType::I64, "2");
  Node *n = node("Reshape", {x, shape});
  n->output(0)->setType(DType::F32, parseDims("3x8"));
  inferNode(*n, 17);
  EXPECT_EQ(n->output(0)->typeString(), "fp32[3x8]");
}

// --- mpc domain
// ----------------------------------------------------------------------

TEST_F(InferTest, MpcBackwardOps) {
  Value *dy = input("dy", DType::F16, "Nx10");
  Value *y = input("y", DType::F16, "Nx10");
  Node *n = node("ReluGrad", {dy, y}, {}, 1, kMpcDomain);
  inferNode(*n, 17);
  EXPECT_EQ(n->output(0)->typeString(), "fp16[Nx10]");
  Value *bias = input("bias", DType::F32, "10");
  Node *s = node("SumToShape", {dy, bias}, {}, 1, kMpcDomain);
  inferNode(*s, 17);
  EXPECT_EQ(s->output(0)->typeString(), "fp16[10]");
  Value *wrong = input("wrong", DType::F32, "7");
  EXPECT_CONTAINS(inferError("SumToShape", {dy, wrong}, {}, 17, 1, kMpcDomain),
                  "does not broadcast");
  Value *dl = input("dl", DType::F32, "scalar");
  Value *lp = input("lp", DType::F32, "Nx10");
  Value *labels = input("labels", DType::I64, "N");
  Node *l =
      node("SoftmaxCrossEntropyLossGrad", {dl, lp, labels}, {}, 1, kMpcDomain);
  inferNode(*l, 17);
  EXPECT_EQ(l->output(0)->typeString(), "fp32[Nx10]");
  Value *x = input("x", DType::F32, "Nx3x4");
  Value *r = input("r", DType::F32, "Nx1x4");
  Node *rg = node("ReduceGrad", {r, x}, {{"axes", Is({1})}}, 1, kMpcDomain);
  inferNode(*rg, 17);
  EXPECT_EQ(rg->output(0)->typeString(), "fp32[Nx3x4]");
}

TEST_F(InferTest, MpcTrainingOps) {
  Value *scale = input("scale", DType::F32, "scalar");
  Value *g1 = input("g1", DType::F16, "20x10");
  Value *g2 = input("g2", DType::F16, "20");
  Node *u = node("UnscaleGradients", {scale, g1, g2}, {}, 3, kMpcDomain);
  inferNode(*u, 17);
  EXPECT_EQ(u->output(0)->typeString(), "bool[scalar]");
  EXPECT_EQ(u->output(1)->typeString(), "fp32[20x10]");
  EXPECT_EQ(u->output(2)->typeString(), "fp32[20]");
  EXPECT_CONTAINS(
      inferError("UnscaleGradients", {scale, g1}, {}, 17, 3, kMpcDomain),
      "expected found_inf and one per gradient");

  Value *tracker = input("tracker", DType::I64, "scalar");
  Value *found = input("found", DType::Bool, "scalar");
  Node *up =
      node("UpdateLossScale", {scale, tracker, found}, {}, 2, kMpcDomain);
  inferNode(*up, 17);
  EXPECT_EQ(up->output(0)->typeString(), "fp32[scalar]");
  EXPECT_EQ(up->output(1)->typeString(), "int64[scalar]");

  Value *p = input("p", DType::F32, "20x10");
  Value *gf = input("gf", DType::F32, "20x10");
  Node *clip =
      node("ClipGradNorm", {gf}, {{"max_norm", F(1.0f)}}, 2, kMpcDomain);
  inferNode(*clip, 17);
  EXPECT_EQ(clip->output(0)->typeString(), "fp32[20x10]");
  EXPECT_EQ(clip->output(1)->typeString(), "fp32[scalar]");
  EXPECT_CONTAINS(inferError("ClipGradNorm", {gf}, {}, 17, 2, kMpcDomain),
                  "'max_norm' must be positive");

  Value *step = input("step", DType::I64, "scalar");
  Node *sgd =
      node("SGD", {nullptr, step, p, gf}, {{"lr", F(0.1f)}}, 1, kMpcDomain);
  inferNode(*sgd, 17);
  EXPECT_EQ(sgd->output(0)->typeString(), "fp32[20x10]");
  Value *m = input("m", DType::F32, "20x10");
  Value *v = input("v", DType::F32, "20x10");
  Node *adam = node("Adam", {found, step, p, gf, m, v}, {}, 3, kMpcDomain);
  inferNode(*adam, 17);
  EXPECT_EQ(adam->output(2)->typeString(), "fp32[20x10]");
  Value *small = input("small", DType::F32, "20");
  EXPECT_CONTAINS(
      inferError("Adam", {found, step, p, small, m, v}, {}, 17, 3, kMpcDomain),
      "must have the same shape");
  Node *inc = node("IncrementStep", {step, found}, {}, 1, kMpcDomain);
  inferNode(*inc, 17);
  EXPECT_EQ(inc->output(0)->typeString(), "int64[scalar]");
  EXPECT_CONTAINS(
      inferError("IncrementStep", {found, found}, {}, 17, 1, kMpcDomain),
      "must be int64");
}

TEST_F(InferTest, InferGraphPropagatesThroughChain) {
  // The exporter's shape chain with a symbolic batch: rank survives.
  Value *x = input("x", DType::F32, "Nx2x5");
  Node *shape = node("Shape", {x});
  Value *zero = g.addInitializer("zero", Tensor::fromInt64s({}, {0}));
  Node *gather = node("Gather", {shape->output(0), zero});
  Node *unsq = node("Unsqueeze", {gather->output(0), ints("ax", {0})});
  Node *concat =
      node("Concat", {unsq->output(0), ints("rest", {-1})}, {{"axis", I(0)}});
  Node *reshape = node("Reshape", {x, concat->output(0)});
  inferGraph(g, 17);
  EXPECT_EQ(concat->output(0)->typeString(), "int64[2]");
  EXPECT_EQ(reshape->output(0)->typeString(), "fp32[?x?]");
}

} // namespace
