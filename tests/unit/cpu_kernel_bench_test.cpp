// CPU time per element of the elementwise, softmax, normalisation, loss and
// cast kernels at the GPT-like benchmark's sizes (4 layers, 512 wide,
// sequence 128, batch 8: 1024 tokens, 2048-wide feed-forward, 8 heads,
// vocabulary 1024), on one thread. A measurement, not a check: DISABLED_
// keeps it out of make test; run it with
//   build/bin/mpc-unit-tests --gtest_also_run_disabled_tests \
//     --gtest_filter='CpuKernelBench.*'
// It reads the process's CPU time, not the wall clock, so a loaded machine
// moves it less; PyTorch's figures for the same ops sit beside it in
// docs/cpu.md.
#include "ir/graph.h"
#include "ir/mpc_ops.h"
#include "kernels/cpu/kernel_table.h"
#include "kernels/cpu/parallel.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <random>
#include <string>
#include <vector>

namespace mpc {
namespace {

using Attrs = std::vector<std::pair<std::string, Attribute>>;

double cpuMs() {
  timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return double(t.tv_sec) * 1e3 + double(t.tv_nsec) * 1e-6;
}

Tensor randomTensor(DType t, const std::vector<int64_t> &dims, unsigned seed,
                    float lo = -3, float hi = 3) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(size_t(elementCount(dims)));
  for (float &x : v)
    x = d(rng);
  return Tensor::fromFloats(dims, v).castTo(t);
}

/// Median CPU ms of one node's kernel over 7 runs after one, its outputs
/// views of memory that outlives the runs, as the executor's arena is (no
/// allocation or first-touch page faults counted; a kernel that fills its
/// output with zeros first still pays for it).
double timeNode(const std::string &domain, const std::string &op,
                const std::vector<const Tensor *> &inputs, const Attrs &attrs,
                int outputs) {
  Graph g;
  std::vector<Value *> vals;
  for (size_t i = 0; i < inputs.size(); ++i)
    vals.push_back(g.addInput("in" + std::to_string(i), inputs[i]->dtype,
                              toDims(inputs[i]->dims)));
  Node *n = g.createNode(op, vals, size_t(outputs), "node", domain);
  for (const auto &kv : attrs)
    n->setAttr(kv.first, kv.second);
  // The first run sizes the outputs; then each becomes a view of a buffer
  // of its size.
  std::vector<Tensor> outs;
  runCpuNode(*n, inputs, outs);
  std::vector<std::vector<uint8_t>> arena;
  for (Tensor &t : outs) {
    arena.emplace_back(t.bytes.size());
    t.bytes = ByteBuffer::view(arena.back().data(), arena.back().size());
  }
  const CpuKernel *k = findCpuKernel(domain, op);
  KernelContext ctx{*n, inputs, {}, 0, {}};
  for (Tensor &t : outs)
    ctx.outputs.push_back(&t);
  std::vector<double> ms;
  for (int r = 0; r < 8; ++r) {
    double t0 = cpuMs();
    (*k)(ctx);
    if (r > 0)
      ms.push_back(cpuMs() - t0);
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

void report(const char *what, double ms, int64_t elements) {
  std::printf("%-44s %8.3f ms %7.2f ns/element\n", what, ms,
              ms * 1e6 / double(elements));
}

TEST(CpuKernelBench, DISABLED_GptSizedKernelsOnOneThread) {
  cpu::setThreadCount(1);
  const int64_t tokens = 1024, d = 512, ff = 2048, heads = 8, seq = 128;
  const int64_t batch = tokens / seq, vocab = 1024;
  Tensor h = randomTensor(DType::BF16, {tokens, ff}, 1);
  Tensor dh = randomTensor(DType::BF16, {tokens, ff}, 2);
  report("Gelu bf16 [1024, 2048]", timeNode("", "Gelu", {&h}, {}, 1),
         h.numel());
  report("GeluGrad bf16 [1024, 2048]",
         timeNode(kMpcDomain, "GeluGrad", {&dh, &h}, {}, 1), h.numel());

  Tensor scores = randomTensor(DType::BF16, {batch, heads, seq, seq}, 3);
  Tensor divisor = Tensor::fromFloats({}, {8.f}).castTo(DType::BF16);
  Attrs softmax = {{"axis", Attribute::ofInt(-1)},
                   {"to", Attribute::ofInt(toOnnxDataType(DType::F32))},
                   {"low", Attribute::ofInt(toOnnxDataType(DType::BF16))}};
  report("DivSoftmaxTo bf16 -> fp32 + bf16 [8, 8, 128, 128]",
         timeNode(kMpcDomain, "DivSoftmaxTo", {&scores, &divisor}, softmax, 2),
         scores.numel());
  Tensor y = randomTensor(DType::F32, {batch, heads, seq, seq}, 4, 0, 1);
  Tensor dy = randomTensor(DType::BF16, {batch, heads, seq, seq}, 5);
  Tensor divisor32 = Tensor::fromFloats({}, {8.f});
  Attrs grad = {{"axis", Attribute::ofInt(-1)},
                {"to", Attribute::ofInt(toOnnxDataType(DType::BF16))}};
  report("SoftmaxGradDiv bf16, fp32 -> bf16 [8, 8, 128, 128]",
         timeNode(kMpcDomain, "SoftmaxGradDiv", {&dy, &y, &divisor32}, grad, 1),
         y.numel());

  Tensor logits = randomTensor(DType::F32, {tokens, vocab}, 6);
  std::vector<int64_t> labelValues(static_cast<size_t>(tokens));
  for (int64_t i = 0; i < tokens; ++i)
    labelValues[size_t(i)] = (i * 7919) % vocab;
  Tensor labels = Tensor::fromInt64s({tokens}, labelValues);
  report("SoftmaxCrossEntropyLoss fp32 [1024, 1024]",
         timeNode("", "SoftmaxCrossEntropyLoss", {&logits, &labels}, {}, 2),
         logits.numel());
  Tensor logProb = randomTensor(DType::F32, {tokens, vocab}, 7, -9, -5);
  Tensor dl = Tensor::fromFloats({}, {1.f});
  report("SoftmaxCrossEntropyLossGrad fp32 [1024, 1024]",
         timeNode(kMpcDomain, "SoftmaxCrossEntropyLossGrad",
                  {&dl, &logProb, &labels}, {}, 1),
         logProb.numel());

  Tensor x = randomTensor(DType::F32, {tokens, d}, 8);
  Tensor scale = randomTensor(DType::F32, {d}, 9),
         bias = randomTensor(DType::F32, {d}, 10);
  report("LayerNormalization fp32 [1024, 512] (+ mean, inv std dev)",
         timeNode("", "LayerNormalization", {&x, &scale, &bias},
                  {{"axis", Attribute::ofInt(-1)}}, 3),
         x.numel());

  Tensor dx = randomTensor(DType::F32, {tokens, d}, 12);
  Tensor mean = randomTensor(DType::F32, {tokens, 1}, 13, -0.1f, 0.1f);
  Tensor invStd = randomTensor(DType::F32, {tokens, 1}, 14, 0.8f, 1.2f);
  report("LayerNormalizationGrad fp32 [1024, 512] (dX, dScale, dBias)",
         timeNode(kMpcDomain, "LayerNormalizationGrad",
                  {&dx, &x, &scale, &mean, &invStd}, {}, 3),
         x.numel());

  Tensor w = randomTensor(DType::F32, {ff, d}, 11);
  report("Cast fp32 -> bf16 [2048, 512]",
         timeNode("", "Cast", {&w},
                  {{"to", Attribute::ofInt(toOnnxDataType(DType::BF16))}}, 1),
         w.numel());
  report("Cast bf16 -> fp32 [1024, 2048]",
         timeNode("", "Cast", {&h},
                  {{"to", Attribute::ofInt(toOnnxDataType(DType::F32))}}, 1),
         h.numel());
}

} // namespace
} // namespace mpc
