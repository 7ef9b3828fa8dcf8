// The memory planner (passes/memory_plan.h) and the byte buffers it places
// tensors in (ir/byte_buffer.h).
#include "ir/byte_buffer.h"
#include "passes/memory_plan.h"
#include "passes/memory_report.h"
#include "passes/onnx/onnx_io.h"
#include "passes/pipeline.h"
#include "passes/registry.h"
#include "passes/shape_inference.h"
#include "passes/step_graph.h"
#include "support/diagnostics.h"

#include <gtest/gtest.h>

#include <limits>

namespace mpc {
namespace {

TEST(ByteBuffer, ViewKeepsItsPlaceWhenFilledWithTheSameSize) {
  uint8_t arena[8] = {};
  ByteBuffer v = ByteBuffer::view(arena, 4);
  ByteBuffer src(std::vector<uint8_t>{1, 2, 3, 4});
  v = src;
  EXPECT_TRUE(v.isView());
  EXPECT_EQ(v.data(), arena);
  EXPECT_EQ(arena[3], 4);
  v.assign(4, 7);
  EXPECT_EQ(v.data(), arena);
  EXPECT_EQ(arena[0], 7);
  ByteBuffer moved = std::move(v); // a moved view is still the view
  EXPECT_TRUE(moved.isView());
  EXPECT_EQ(moved.data(), arena);
}

TEST(ByteBuffer, ViewDetachesWhenItsSizeChanges) {
  uint8_t arena[4] = {9, 9, 9, 9};
  ByteBuffer v = ByteBuffer::view(arena, 4);
  v.resize(6);
  EXPECT_FALSE(v.isView());
  EXPECT_NE(v.data(), arena);
  EXPECT_EQ(v.size(), 6u);
  EXPECT_EQ(v[0], 9);
  ByteBuffer w = ByteBuffer::view(arena, 4);
  ByteBuffer copy = w; // copies own their bytes
  EXPECT_FALSE(copy.isView());
  EXPECT_TRUE(copy == w);
}

TEST(Tensor, AllocateServesAFittingViewInPlace) {
  uint8_t arena[16];
  std::memset(arena, 0xff, sizeof arena);
  Tensor t;
  t.bytes = ByteBuffer::view(arena, 16);
  t.allocate(DType::F32, {2, 2});
  EXPECT_EQ(t.bytes.data(), arena);
  EXPECT_EQ(t.toFloats(), std::vector<float>(4, 0.0f)); // zeroed
  std::memset(arena, 0, sizeof arena);
  arena[0] = 1;
  t.allocate(DType::F32, {2, 2}, /*zero=*/false); // in place: kept
  EXPECT_EQ(arena[0], 1);
  t.allocate(DType::F32, {3}); // does not fit: owned
  EXPECT_NE(t.bytes.data(), arena);
}

// A size that cannot be allocated is an error, never an empty buffer that
// element loops would then run past.
TEST(Tensor, SizesPastSixtyFourBitsOrNegativeDimsThrow) {
  const int64_t big = int64_t(1) << 40;
  EXPECT_THROW(Tensor(DType::F32, {big, big}), Error);
  EXPECT_THROW(Tensor(DType::F64, {int64_t(1) << 61}), Error);
  EXPECT_THROW(Tensor(DType::F32, {2, -1}), Error);
  Tensor t;
  EXPECT_THROW(t.allocate(DType::F16, {big, big}), Error);
  EXPECT_EQ(Tensor(DType::F32, {0, big}).byteSize(), 0u); // empty is fine
  EXPECT_EQ(Tensor(DType::F16, {3, 5}).byteSize(), 30u);
}

std::unique_ptr<Model> parse(const std::string &text) {
  auto m = parseModelText(text, "test.onnxtext");
  inferGraph(*m->graph, 17);
  return m;
}

MemoryPlan planMain(const Model &m) {
  PlanInputs in;
  in.graph = m.graph.get();
  return planMemory(in);
}

const Value *value(const Model &m, const char *name) {
  const Value *v = m.graph->findValue(name);
  EXPECT_TRUE(v) << name;
  return v;
}

TEST(MemoryPlan, ValueByteSizeRefusesUnknownDimsAndElementCountsPastInt64) {
  Graph g("g");
  Value *v = g.addInput("v", DType::F32, {Dim(3), Dim(5)});
  size_t bytes = 0;
  ASSERT_TRUE(valueByteSize(*v, bytes));
  EXPECT_EQ(bytes, 60u);
  const int64_t big = std::numeric_limits<int64_t>::max();
  v->dims = {Dim(big / 4), Dim(1)};
  ASSERT_TRUE(valueByteSize(*v, bytes)) << "the largest fp32 size still fits";
  EXPECT_EQ(bytes, size_t(big / 4) * 4);
  v->dims = {Dim(big / 4 + 1), Dim(1)};
  EXPECT_FALSE(valueByteSize(*v, bytes)) << "bytes past int64 are no size";
  v->dims = {Dim(big), Dim(1)};
  EXPECT_FALSE(valueByteSize(*v, bytes)) << "a count that fits, bytes not";
  v->dims = {Dim(0), Dim(big), Dim(big)};
  ASSERT_TRUE(valueByteSize(*v, bytes)) << "an empty tensor";
  EXPECT_EQ(bytes, 0u);
  v->dims = {Dim(big / 2 + 1), Dim(2)};
  EXPECT_FALSE(valueByteSize(*v, bytes));
  v->dims = {Dim(int64_t(1) << 32), Dim(int64_t(1) << 31)};
  EXPECT_FALSE(valueByteSize(*v, bytes));
  v->dims = {Dim(4), Dim::symbolic("batch")};
  EXPECT_FALSE(valueByteSize(*v, bytes));
}

TEST(MemoryPlan, ElementwiseChainRunsInPlace) {
  auto m = parse(R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[64] x) => (float[64] c) {
  a = Relu(x)
  b = Exp(a)
  c = Neg(b)
})");
  MemoryPlan plan = planMain(*m);
  // a is the first intermediate (x is persistent); b and c take its bytes.
  EXPECT_EQ(plan.find(value(*m, "b"))->offset,
            plan.find(value(*m, "a"))->offset);
  EXPECT_EQ(plan.find(value(*m, "c"))->offset,
            plan.find(value(*m, "a"))->offset);
  EXPECT_EQ(plan.inPlace.size(), 2u);
  EXPECT_EQ(plan.livePeakBytes, 2 * 64 * 4u); // x and one buffer
  EXPECT_EQ(plan.arenaBytes, 2 * 256u);       // two aligned places
  EXPECT_EQ(plan.noReuseBytes, 4 * 64 * 4u);
}

TEST(MemoryPlan, NoInPlaceOverAValueReadLater) {
  auto m = parse(R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[64] x) => (float[64] d) {
  a = Relu(x)
  b = Exp(a)
  d = Add(b, a)
})");
  MemoryPlan plan = planMain(*m);
  const ValuePlacement *a = plan.find(value(*m, "a")),
                       *b = plan.find(value(*m, "b"));
  EXPECT_NE(a->offset, b->offset);
  // d may take a's or b's bytes (both die at Add), not both.
  EXPECT_EQ(plan.inPlace.size(), 1u);
}

TEST(MemoryPlan, DisjointLifetimesShareBytesOverlappingOnesDoNot) {
  // Three 1 KiB values; u dies before w is made, v lives across both.
  auto m = parse(R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[256] x, float[256] y) => (float[256] out) {
  u = Add(x, y)
  v = Mul(x, y)
  uu = Sub(u, v)
  w = Div(x, uu)
  out = Sub(w, v)
})");
  PlanInputs in;
  in.graph = m->graph.get();
  in.inPlace = false;
  MemoryPlan plan = planMemory(in);
  ASSERT_TRUE(plan.unplanned.empty());
  std::vector<std::pair<const Value *, ValuePlacement>> all(
      plan.placement.begin(), plan.placement.end());
  for (const auto &[va, pa] : all) {
    EXPECT_EQ(pa.offset % 256, 0u) << va->name();
    for (const auto &[vb, pb] : all) {
      if (va == vb || pa.persistent || pb.persistent)
        continue;
      bool liveTogether = pa.first <= pb.last && pb.first <= pa.last;
      bool bytesOverlap =
          pa.offset < pb.offset + pb.bytes && pb.offset < pa.offset + pa.bytes;
      EXPECT_FALSE(liveTogether && bytesOverlap)
          << va->name() << " and " << vb->name();
    }
  }
}

TEST(MemoryPlan, UnknownSizesAreListedNotPlaced) {
  auto m = parse(R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[N] x) => (float[N] y) {
  y = Relu(x)
})");
  MemoryPlan plan = planMain(*m);
  ASSERT_EQ(plan.unplanned.size(), 2u);
  EXPECT_EQ(plan.unplanned[0]->name(), "x");
}

/// The seed MLP compiled with Adam in fp16.
std::unique_ptr<Model> compiledMlp(DType precision) {
  auto m = loadModel(std::string(MPC_SOURCE_DIR) + "/models/mlp_seed.onnx");
  CompileOptions o;
  o.precision = precision;
  o.optimizer = "adam";
  Statistics stats;
  runPipeline(*m, defaultPipeline(), o, PipelineConfig{}, stats);
  return m;
}

TEST(MemoryPlan, OptimizerUpdatesAreWrittenOverTheirState) {
  auto m = compiledMlp(DType::F16);
  MemoryPlan plan = planMemory(planInputsFor(*m, *m->training->algorithm));
  const Graph &step = *m->training->algorithm;
  int overState = 0;
  for (const auto &kv : m->training->updateBinding) {
    const ValuePlacement *state = plan.find(step.findValue(kv.first));
    const ValuePlacement *next = plan.find(step.findValue(kv.second));
    ASSERT_TRUE(state && next) << kv.first;
    overState += state->offset == next->offset;
  }
  // Parameters, both Adam moments and the fp16 working copies (which the
  // updates write too) of the 4 parameters; the scalars (scale, tracker,
  // step) are made by ops that are not updates in place.
  EXPECT_EQ(overState, 16);
}

// plan-memory plans the algorithm in place, with runnableStep's outputs
// passed as extraOutputs: the same plan as on runnableStep's copy, and the
// algorithm's types are left as they were.
TEST(MemoryPlan, InPlacePlanEqualsThePlanOfTheRunnableCopy) {
  for (DType precision : {DType::F16, DType::F32}) {
    auto m = compiledMlp(precision);
    const Graph &alg = *m->training->algorithm;
    std::vector<std::string> before;
    for (const auto &n : alg.nodes())
      for (const Value *o : n->outputs())
        if (o)
          before.push_back(o->name() + ":" + o->typeString());
    MemoryPlan inPlace = planCompiledModel(*m, /*asWritten=*/false);
    std::unique_ptr<Graph> step = runnableStep(*m);
    inferGraph(*step, m->opsetVersion(""));
    MemoryPlan copy = planMemory(planInputsFor(*m, *step));
    EXPECT_EQ(inPlace.arenaBytes, copy.arenaBytes);
    EXPECT_EQ(inPlace.livePeakBytes, copy.livePeakBytes);
    EXPECT_EQ(inPlace.noReuseBytes, copy.noReuseBytes);
    EXPECT_EQ(inPlace.atPeak, copy.atPeak);
    EXPECT_EQ(inPlace.total, copy.total);
    EXPECT_EQ(inPlace.inPlace.size(), copy.inPlace.size());
    EXPECT_EQ(inPlace.numBuffers, copy.numBuffers);
    std::vector<std::string> after;
    for (const auto &n : alg.nodes())
      for (const Value *o : n->outputs())
        if (o)
          after.push_back(o->name() + ":" + o->typeString());
    EXPECT_EQ(before, after);
  }
}

TEST(MemoryPlan, ClassesAddUpAndFp16HalvesTheActivations) {
  auto fp16 = compiledMlp(DType::F16), fp32 = compiledMlp(DType::F32);
  MemoryPlan a = planCompiledModel(*fp16), b = planCompiledModel(*fp32);
  size_t sum = 0;
  for (size_t c = 0; c < kNumMemoryClasses; ++c)
    sum += a.atPeak[c];
  EXPECT_EQ(sum, a.livePeakBytes);
  // fc1.weight 20x10, fc1.bias 20, fc2.weight 2x20, fc2.bias 2, in fp32.
  EXPECT_EQ(a.atPeak[size_t(MemoryClass::Parameters)],
            (200 + 20 + 40 + 2) * 4u);
  EXPECT_EQ(a.atPeak[size_t(MemoryClass::Inputs)], 64 * 10 * 4 + 64 * 8u);
  EXPECT_LT(a.atPeak[size_t(MemoryClass::Activations)],
            b.atPeak[size_t(MemoryClass::Activations)]);
  EXPECT_LT(a.arenaBytes, b.arenaBytes);
  std::string json = memoryReportJson(a, "fp16", b);
  EXPECT_NE(
      json.find("\"planned\": {\"precision\": \"fp16\", \"peak_bytes\": " +
                std::to_string(a.arenaBytes)),
      std::string::npos)
      << json;
  EXPECT_NE(json.find("\"fp32_baseline\": {\"precision\": \"fp32\""),
            std::string::npos);
}

} // namespace
} // namespace mpc
