// mpc.AllReduce's CPU kernel across an in-process world of threads
// (tests/support/thread_world.h): the reductions, their order and rounding,
// the same bits on every rank, a world of one, the types each reduction
// takes, and the one-process expansion written for other runtimes.
#include "ir/mpc_ops.h"
#include "ir/round_to_odd.h"
#include "kernels/cpu/cpu_util.h"
#include "passes/onnx/expand_variadic.h"
#include "support/diagnostics.h"
#include "tests/support/thread_world.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

using namespace mpc;

namespace {

/// Runs one AllReduce node with `reduction` on every rank of `world`;
/// inputs[r] are rank r's values. Returns each rank's outputs.
std::vector<std::vector<Tensor>>
allReduce(test::ThreadWorld &world, const std::string &reduction,
          const std::vector<std::vector<Tensor>> &inputs,
          const std::string &wire = "") {
  const size_t n = inputs[0].size();
  std::vector<std::vector<Tensor>> outputs(size_t(world.size()),
                                           std::vector<Tensor>(n));
  world.run([&](int r) {
    Graph g;
    std::vector<Value *> vals;
    for (size_t i = 0; i < n; ++i)
      vals.push_back(
          g.addInput("x" + std::to_string(i), inputs[0][i].dtype, {}));
    Node *node = g.createNode("AllReduce", vals, n, "all_reduce", kMpcDomain);
    node->setAttr("reduction", Attribute::ofString(reduction));
    if (!wire.empty())
      node->setAttr("wire_dtype", Attribute::ofString(wire));
    KernelContext ctx{*node};
    for (size_t i = 0; i < n; ++i) {
      ctx.inputs.push_back(&inputs[size_t(r)][i]);
      ctx.outputs.push_back(&outputs[size_t(r)][i]);
    }
    ctx.collective = &world.rank(r);
    (*findCpuKernel(kMpcDomain, "AllReduce"))(ctx);
  });
  return outputs;
}

Tensor floats(std::vector<float> v) {
  return Tensor::fromFloats({int64_t(v.size())}, v);
}

Tensor bools(std::vector<uint8_t> v) {
  Tensor t(DType::Bool, {int64_t(v.size())});
  for (size_t i = 0; i < v.size(); ++i)
    t.bytes[i] = v[i];
  return t;
}

std::vector<uint8_t> bytesOf(const Tensor &t) {
  return std::vector<uint8_t>(t.bytes.data(), t.bytes.data() + t.byteSize());
}

TEST(AllReduce, MeanOfThreeRanksIsTheDoubleSumRoundedOnce) {
  test::ThreadWorld world(3);
  // 1 + 2^-24 + 2^-24 summed in fp32 from the left loses both halves; the
  // double sum keeps them, then / 3 rounds once.
  const float tiny = std::ldexp(1.0f, -24);
  auto out = allReduce(world, "mean",
                       {{floats({1.0f, 2.0f, -4.0f})},
                        {floats({tiny, 4.0f, 0.5f})},
                        {floats({tiny, 6.0f, 0.25f})}});
  for (int r = 0; r < 3; ++r) {
    const Tensor &y = out[size_t(r)][0];
    ASSERT_EQ(y.dtype, DType::F32);
    EXPECT_EQ(y.getAsDouble(0),
              double(float((1.0 + 2.0 * double(tiny)) / 3.0)));
    EXPECT_EQ(y.getAsDouble(1), 4.0);
    EXPECT_EQ(y.getAsDouble(2), double(float(-3.25 / 3.0)));
    EXPECT_EQ(bytesOf(y), bytesOf(out[0][0])) << "rank " << r;
  }
}

TEST(AllReduce, SeveralValuesTravelTogetherAndKeepTheirShapes) {
  test::ThreadWorld world(2);
  Tensor a0 = Tensor::fromFloats({2, 2}, {1, 2, 3, 4});
  Tensor a1 = Tensor::fromFloats({2, 2}, {5, 6, 7, 8});
  Tensor h0(DType::F16, {3}), h1(DType::F16, {3});
  const double h0Values[] = {2000, 2001, 1000};
  for (int i = 0; i < 3; ++i) {
    h0.setFromDouble(i, h0Values[i]);
    h1.setFromDouble(i, 0.5);
  }
  auto out = allReduce(world, "sum", {{a0, h0}, {a1, h1}});
  for (int r = 0; r < 2; ++r) {
    const Tensor &a = out[size_t(r)][0], &h = out[size_t(r)][1];
    EXPECT_EQ(a.dims, (std::vector<int64_t>{2, 2}));
    for (int i = 0; i < 4; ++i)
      EXPECT_EQ(a.getAsDouble(i), double(6 + 2 * i));
    ASSERT_EQ(h.dtype, DType::F16);
    // fp16's spacing is 1 from 1024 to 2048 and 0.5 below: 2000.5 and
    // 2001.5 are ties, rounded to the even neighbour; 1000.5 is exact.
    EXPECT_EQ(h.getAsDouble(0), 2000.0);
    EXPECT_EQ(h.getAsDouble(1), 2002.0);
    EXPECT_EQ(h.getAsDouble(2), 1000.5);
  }
}

TEST(AllReduce, MaxOrsOverflowFlagsAndPropagatesNaN) {
  test::ThreadWorld world(3);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  auto out = allReduce(world, "max",
                       {{bools({0, 0, 1}), floats({1, nan, -2})},
                        {bools({0, 1, 0}), floats({3, 0, -5})},
                        {bools({0, 0, 0}), floats({2, 7, -1})}});
  for (int r = 0; r < 3; ++r) {
    const Tensor &flag = out[size_t(r)][0], &m = out[size_t(r)][1];
    ASSERT_EQ(flag.dtype, DType::Bool);
    EXPECT_EQ(bytesOf(flag), (std::vector<uint8_t>{0, 1, 1}));
    EXPECT_EQ(m.getAsDouble(0), 3.0);
    EXPECT_TRUE(std::isnan(m.getAsDouble(1)));
    EXPECT_EQ(m.getAsDouble(2), -1.0);
  }
}

TEST(AllReduce, AnInfOnOneRankReachesEveryRanksMean) {
  test::ThreadWorld world(2);
  const float inf = std::numeric_limits<float>::infinity();
  auto out = allReduce(world, "mean", {{floats({1, 2})}, {floats({inf, 2})}});
  for (int r = 0; r < 2; ++r) {
    EXPECT_TRUE(std::isinf(out[size_t(r)][0].getAsDouble(0)));
    EXPECT_EQ(out[size_t(r)][0].getAsDouble(1), 2.0);
  }
}

TEST(AllReduce, OneRankAndNoWorldCopyTheInputs) {
  test::ThreadWorld world(1);
  Tensor x = floats({1.5f, -2.25f});
  auto out = allReduce(world, "mean", {{x}});
  EXPECT_EQ(bytesOf(out[0][0]), bytesOf(x));

  Graph g;
  Node *n = g.createNode("AllReduce", {g.addInput("x", DType::F32, {2})}, 1,
                         "all_reduce", kMpcDomain);
  std::vector<Tensor> outs;
  runCpuNode(*n, {&x}, outs); // no collective: a world of one
  EXPECT_EQ(bytesOf(outs[0]), bytesOf(x));
}

/// What every rank must hold: each element reduced over the ranks in rank
/// order in double, rounded once (setFromDouble), as the op's contract says.
Tensor naiveReduction(const std::vector<Tensor> &ofRanks,
                      const std::string &reduction) {
  Tensor want(ofRanks[0].dtype, ofRanks[0].dims);
  for (int64_t k = 0; k < want.numel(); ++k) {
    double acc = 0;
    for (size_t q = 0; q < ofRanks.size(); ++q) {
      double x = ofRanks[q].getAsDouble(k);
      if (reduction != "max")
        acc += x;
      else if (q == 0 || std::isnan(x) || (!std::isnan(acc) && x > acc))
        acc = x;
    }
    want.setFromDouble(k, reduction == "mean" ? acc / double(ofRanks.size())
                                              : acc);
  }
  return want;
}

TEST(AllReduce, ShardsCutMixedTypesAtElementBoundaries) {
  // Sizes that are not multiples of 8 bytes, in several element types, on
  // 2, 3 and 5 ranks: the shard edges fall inside values of every type.
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-3.0f, 3.0f);
  for (int ranks : {2, 3, 5})
    for (const std::string reduction : {"mean", "sum", "max"}) {
      std::vector<std::pair<DType, int64_t>> shapes = {{DType::F16, 7},
                                                       {DType::F32, 5},
                                                       {DType::F64, 3},
                                                       {DType::BF16, 9},
                                                       {DType::F32, 1}};
      if (reduction == "max")
        shapes.push_back({DType::Bool, 11});
      if (reduction != "mean")
        shapes.push_back({DType::I64, 3});
      std::vector<std::vector<Tensor>> inputs(static_cast<size_t>(ranks));
      for (auto &ofRank : inputs)
        for (const auto &[dtype, n] : shapes) {
          Tensor t(dtype, {n});
          for (int64_t k = 0; k < n; ++k)
            t.setFromDouble(k, dtype == DType::Bool ? double(rng() % 2)
                               : dtype == DType::I64
                                   ? double(int(rng() % 100) - 50)
                                   : double(u(rng)));
          ofRank.push_back(t);
        }
      test::ThreadWorld world(ranks);
      auto out = allReduce(world, reduction, inputs);
      for (size_t i = 0; i < shapes.size(); ++i) {
        std::vector<Tensor> column;
        for (const auto &ofRank : inputs)
          column.push_back(ofRank[i]);
        Tensor want = naiveReduction(column, reduction);
        for (int r = 0; r < ranks; ++r)
          EXPECT_EQ(bytesOf(out[size_t(r)][i]), bytesOf(want))
              << ranks << " ranks, " << reduction << ", input " << i << " ("
              << dtypeName(want.dtype) << "), rank " << r;
      }
    }
}

TEST(AllReduce, AGatedNodeCommunicatesOnlyWhereItsGateIsTrue) {
  // --grad-accum's form: input 0 is the window's boundary.
  for (bool gate : {false, true}) {
    test::ThreadWorld world(2);
    std::vector<Tensor> out(2u);
    const Tensor values[2] = {floats({1.0f, 4.0f}), floats({3.0f, 8.0f})};
    world.run([&](int r) {
      Graph g;
      Node *node = g.createNode("AllReduce",
                                {g.addInput("gate", DType::Bool, {}),
                                 g.addInput("x", DType::F32, {2})},
                                1, "all_reduce", kMpcDomain);
      node->setAttr("reduction", Attribute::ofString("mean"));
      node->setAttr("gated", Attribute::ofInt(1));
      Tensor flag = Tensor::scalar(DType::Bool, gate ? 1 : 0);
      KernelContext ctx{*node, {&flag, &values[r]}, {&out[size_t(r)]}};
      ctx.collective = &world.rank(r);
      (*findCpuKernel(kMpcDomain, "AllReduce"))(ctx);
    });
    for (int r = 0; r < 2; ++r)
      EXPECT_EQ(bytesOf(out[size_t(r)]),
                bytesOf(gate ? floats({2.0f, 6.0f}) : values[r]))
          << "gate " << gate << ", rank " << r;
    EXPECT_EQ(world.allToAllCalls(), gate ? 2 : 0);
  }
  // The gate must be a bool scalar.
  Graph g;
  Node *node = g.createNode(
      "AllReduce",
      {g.addInput("gate", DType::F32, {}), g.addInput("x", DType::F32, {2})}, 1,
      "all_reduce", kMpcDomain);
  node->setAttr("gated", Attribute::ofInt(1));
  Tensor notBool = Tensor::scalar(DType::F32, 1), x = floats({1, 2});
  std::vector<Tensor> outs;
  try {
    runCpuNode(*node, {&notBool, &x}, outs);
    ADD_FAILURE() << "an fp32 gate was accepted";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("gate must be a bool scalar"),
              std::string::npos)
        << e.what();
  }
}

TEST(AllReduce, RefusesTypesItsReductionDoesNotCombine) {
  test::ThreadWorld world(2);
  for (const char *reduction : {"mean", "sum"}) {
    try {
      allReduce(world, reduction, {{bools({1})}, {bools({0})}});
      ADD_FAILURE() << reduction << " of bool was accepted";
    } catch (const Error &e) {
      EXPECT_NE(std::string(e.what()).find("all_reduce"), std::string::npos);
      EXPECT_NE(std::string(e.what()).find("bool"), std::string::npos)
          << e.what();
    }
  }
  Tensor i0 = Tensor::fromInt64s({1}, {3});
  EXPECT_THROW(allReduce(world, "mean", {{i0}, {i0}}), Error);
  EXPECT_EQ(allReduce(world, "sum", {{i0}, {i0}})[1][0].getAsDouble(0), 6.0);
  try {
    allReduce(world, "min", {{floats({1})}, {floats({2})}});
    ADD_FAILURE() << "reduction min was accepted";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("reduction 'min'"), std::string::npos)
        << e.what();
  }
}

TEST(AllReduce, ExpandsToIdentitiesForAOneProcessRuntime) {
  Graph g;
  Value *a = g.addInput("a", DType::F32, {2});
  Value *b = g.addInput("b", DType::Bool, {});
  Node *n = g.createNode("AllReduce", {a, b}, 2, "all_reduce", kMpcDomain);
  n->output(0)->setType(DType::F32, {2});
  n->output(1)->setType(DType::Bool, {});
  std::string outA = n->output(0)->name(), outB = n->output(1)->name();
  g.addOutput(n->output(0));
  g.addOutput(n->output(1));
  ASSERT_EQ(expandVariadicMpcOps(g), 1u);
  ASSERT_EQ(g.outputs().size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    const Node *p = g.outputs()[i]->producer();
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(p->opType(), "Identity");
    EXPECT_EQ(p->input(0), i == 0 ? a : b);
  }
  EXPECT_EQ(g.outputs()[0]->name(), outA);
  EXPECT_EQ(g.outputs()[1]->name(), outB);

  // Gated: the gate is not a value; one Identity per value after it.
  Graph h;
  Value *gate = h.addInput("gate", DType::Bool, {});
  Value *c = h.addInput("c", DType::F32, {3});
  Node *m = h.createNode("AllReduce", {gate, c}, 1, "gated", kMpcDomain);
  m->setAttr("gated", Attribute::ofInt(1));
  m->output(0)->setType(DType::F32, {3});
  h.addOutput(m->output(0));
  ASSERT_EQ(expandVariadicMpcOps(h), 1u);
  const Node *p = h.outputs()[0]->producer();
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->opType(), "Identity");
  EXPECT_EQ(p->input(0), c);
}

} // namespace

TEST(AllReduce, AWireTypeRoundsEachRanksValuesAndTheResultOnce) {
  // --grad-comm-dtype=bf16: 1 + 2^-8 + 2^-30 (the three ranks' exact sum)
  // lies just above the half-way point between bf16's 1 and 1 + 2^-7; in
  // fp32 it is that half-way point, which a second rounding would tie to
  // 1. Rounded once, it is 1 + 2^-7. Without the wire the fp32 sum is
  // 1 + 2^-8.
  test::ThreadWorld world(3);
  std::vector<std::vector<Tensor>> in = {{floats({1.0f})},
                                         {floats({std::ldexp(1.0f, -8)})},
                                         {floats({std::ldexp(1.0f, -30)})}};
  auto wired = allReduce(world, "sum", in, "bf16");
  auto plain = allReduce(world, "sum", in);
  for (int r = 0; r < 3; ++r) {
    ASSERT_EQ(wired[size_t(r)][0].dtype, DType::F32);
    EXPECT_EQ(wired[size_t(r)][0].getAsDouble(0), 1.0 + std::ldexp(1.0, -7));
    EXPECT_EQ(plain[size_t(r)][0].getAsDouble(0), 1.0 + std::ldexp(1.0, -8));
  }
}

TEST(AllReduce, AWireTypeMeansLikeTheReferenceOnEveryRank) {
  // fp32 means of 1001 values (2-byte elements: shards end inside a value
  // list) over bf16 and fp16 wires: every rank's values rounded to the
  // wire, the double sum / 3 rounded once to it, widened back; the same
  // bits on every rank. Integers, flags and fp16 values (not wider than
  // the wire) travel as they are; a world of one copies, rounding nothing.
  for (const char *wire : {"bf16", "fp16"}) {
    SCOPED_TRACE(wire);
    const bool half = std::string(wire) == "fp16";
    auto toWire = [&](double v) {
      float f = roundToOddFloat(v);
      return double(half ? halfToFloat(floatToHalf(f))
                         : bf16ToFloat(floatToBf16(f)));
    };
    test::ThreadWorld world(3);
    std::vector<std::vector<Tensor>> in(3u), ints(3u);
    for (int r = 0; r < 3; ++r) {
      std::vector<float> v(1001);
      for (size_t i = 0; i < v.size(); ++i)
        v[i] = std::sin(0.7f * float(i) + float(r)) * 3.0f;
      Tensor h(DType::F16, {2});
      h.setFromDouble(0, 0.1 * (r + 1));
      h.setFromDouble(1, 2049.0);
      in[size_t(r)] = {floats(v), h};
      ints[size_t(r)] = {Tensor::fromInt64s({2}, {r, 10 * r})};
    }
    auto out = allReduce(world, "mean", in, wire);
    auto summed = allReduce(world, "sum", ints, wire);
    auto halves =
        allReduce(world, "mean", {{in[0][1]}, {in[1][1]}, {in[2][1]}});
    for (size_t i = 0; i < 1001; ++i) {
      double sum = 0;
      for (int r = 0; r < 3; ++r)
        sum += toWire(in[size_t(r)][0].getAsDouble(int64_t(i)));
      ASSERT_EQ(out[0][0].getAsDouble(int64_t(i)), toWire(sum / 3.0))
          << "element " << i;
    }
    for (int r = 0; r < 3; ++r) {
      EXPECT_EQ(bytesOf(out[size_t(r)][0]), bytesOf(out[0][0]));
      EXPECT_EQ(summed[size_t(r)][0].getAsDouble(1), 30.0);
      EXPECT_EQ(bytesOf(out[size_t(r)][1]), bytesOf(halves[0][0]))
          << "an fp16 value is not narrowed";
    }
    test::ThreadWorld one(1);
    Tensor x = floats({1.0f + std::ldexp(1.0f, -20)});
    EXPECT_EQ(bytesOf(allReduce(one, "mean", {{x}}, wire)[0][0]), bytesOf(x));
  }
}

TEST(AllReduce, AnUnknownWireTypeIsRefused) {
  test::ThreadWorld world(2);
  EXPECT_THROW(allReduce(world, "mean", {{floats({1})}, {floats({2})}}, "int8"),
               Error);
}
