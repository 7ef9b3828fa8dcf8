// The run's memory limit (runtime/memory_limit.h) and the executor refusing a
// plan above it before anything is allocated or run.
#include "passes/onnx/onnx_io.h"
#include "runtime/executor.h"
#include "runtime/memory_limit.h"
#include "support/diagnostics.h"

#include <gtest/gtest.h>

namespace mpc {
namespace {

TEST(MemoryLimit, ParsesBytesWithSuffixes) {
  EXPECT_EQ(parseByteSize("--memory-limit", "0"), 0u);
  EXPECT_EQ(parseByteSize("--memory-limit", "1000"), 1000u);
  EXPECT_EQ(parseByteSize("--memory-limit", "1000B"), 1000u);
  EXPECT_EQ(parseByteSize("--memory-limit", "4K"), 4096u);
  EXPECT_EQ(parseByteSize("--memory-limit", "4KiB"), 4096u);
  EXPECT_EQ(parseByteSize("--memory-limit", "256M"), 256u << 20);
  EXPECT_EQ(parseByteSize("--memory-limit", "256MB"), 256u << 20);
  EXPECT_EQ(parseByteSize("--memory-limit", "1.5G"), size_t(3) << 29);
  EXPECT_EQ(parseByteSize("--memory-limit", "8G"), size_t(8) << 30);
}

TEST(MemoryLimit, RefusesWhatIsNotAByteCount) {
  for (const char *bad : {"", "M", "-1", "1T", "1Bi", "1iB", "12Q", "1 M",
                          "nan", "inf", "1e30", "0x10", "+5", ".5M"}) {
    try {
      parseByteSize("--memory-limit", bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const Error &e) {
      EXPECT_EQ(std::string(e.what()),
                std::string("--memory-limit: expected a byte count with an "
                            "optional K, M or G suffix (e.g. 256M), got '") +
                    bad + "'");
    }
  }
}

TEST(MemoryLimit, CpuHasAvailableMemory) {
  // Linux always has MemAvailable (3.14+); a test machine has a few MiB.
  EXPECT_GT(cpuAvailableBytes(), size_t(16) << 20);
  auto cpu = createCpuBackend();
  MemoryLimit automatic = memoryLimitFor(*cpu, false, 0);
  EXPECT_GT(automatic.bytes, 0u);
  EXPECT_EQ(automatic.source, "cpu, available physical memory");
  MemoryLimit given = memoryLimitFor(*cpu, true, 1234);
  EXPECT_EQ(given.bytes, 1234u);
  EXPECT_EQ(given.source, "cpu, --memory-limit");
}

TEST(MemoryLimit, FormatsSizes) {
  EXPECT_EQ(formatByteSize(512), "0.5 KiB");
  EXPECT_EQ(formatByteSize(size_t(412) << 20), "412.0 MiB");
  EXPECT_EQ(formatByteSize(size_t(3) << 29), "1.5 GiB");
}

// x (64 floats, persistent) and one buffer the elementwise chain runs in
// place in: a 512-byte arena with 256 bytes of inputs (memory_plan_test).
const char *kChain = R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[64] x) => (float[64] c) {
  a = Relu(x)
  b = Exp(a)
  c = Neg(b)
})";

TEST(MemoryLimit, ExecutorRefusesAPlanAboveTheLimitBeforeRunning) {
  auto m = parseModelText(kChain, "chain.onnxtext");
  auto cpu = createCpuBackend();
  ExecutorOptions options;
  options.memoryLimit = {300, "cpu, --memory-limit"};
  Executor exec(*m->graph, *cpu, options);
  try {
    exec.checkMemory({{64}});
    FAIL() << "a plan above the limit was accepted";
  } catch (const MemoryLimitError &e) {
    EXPECT_EQ(e.limit, 300u);
    EXPECT_EQ(e.planned, 512u);
    EXPECT_EQ(e.persistent, 256u);
    EXPECT_EQ(std::string(e.what()),
              "planned peak 0.5 KiB (0.2 KiB of state and batch, the rest per "
              "step) exceeds the memory limit 0.3 KiB (cpu, --memory-limit)");
  }
  EXPECT_EQ(exec.plan(), nullptr); // nothing planned or allocated
  EXPECT_THROW(exec.checkMemory({{1024}}), MemoryLimitError);
  // run() plans the same way, and refuses the same way.
  exec.setInput("x", Tensor::fromFloats({64}, std::vector<float>(64, -1.0f)));
  EXPECT_THROW(exec.run(), MemoryLimitError);
  // At the planned size it fits, and runs.
  exec.setMemoryLimit({512, "cpu, --memory-limit"});
  EXPECT_EQ(exec.checkMemory({{64}}), 512u);
  exec.run();
  ASSERT_NE(exec.plan(), nullptr);
  EXPECT_EQ(exec.arenaBytes(), 512u);
  EXPECT_EQ(exec.output("c").toFloats()[0], -1.0f); // -exp(relu(-1))
  // No limit: no check.
  exec.setMemoryLimit({});
  EXPECT_EQ(exec.checkMemory({{1 << 20}}), 2 * (4u << 20));
}

TEST(MemoryLimit, InputsNoMemoryHoldsAreRefused) {
  auto m = parseModelText(kChain, "chain.onnxtext");
  auto cpu = createCpuBackend();
  Executor exec(*m->graph, *cpu);
  for (std::vector<int64_t> dims :
       {std::vector<int64_t>{int64_t(1) << 62}, {int64_t(1) << 61, 4}}) {
    try {
      exec.checkMemory({dims});
      ADD_FAILURE() << "accepted " << dimsToString(dims);
    } catch (const MemoryLimitError &) {
      ADD_FAILURE() << "not the size error";
    } catch (const Error &e) {
      EXPECT_EQ(std::string(e.what()), "input 'x' of fp32[" +
                                           dimsToString(dims) +
                                           "] is larger than any memory "
                                           "(over 2^63 bytes)");
    }
  }
  EXPECT_THROW(exec.checkMemory({}), Error); // one shape per input
}

} // namespace
} // namespace mpc
