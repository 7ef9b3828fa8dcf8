// A device-resident test backend whose "device" memory is host memory, so
// the CPU kernels run on it (tests of runtime/executor.h's resident mode).
//
// It behaves like the CUDA backend where the executor can tell: it
// allocates the arena, counts every copy and synchronisation, and records
// the second step of a plan and replays the recording afterwards (a CUDA
// graph), setting only the step's seed. Which inputs a node may read on the
// host is a table (hostInputs) or a real backend's rule (residentCheck).
//
// With `late`, its steps are asynchronous (Backend::asyncSteps) and their
// downloads arrive late, as a device's do: a download is taken when it is
// enqueued, its destination filled with NaN bytes, and the bytes reach it
// only at the waitStep of its step (or a synchronize), so that a value read
// before its step was collected shows.
#pragma once

#include "runtime/backend.h"
#include "support/diagnostics.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace mpc {
namespace testing {

class ResidentCpuBackend final : public Backend {
public:
  /// Per op type, the inputs whose value a kernel reads on the host (bit i:
  /// input i), as the CUDA op table declares them.
  std::map<std::string, uint32_t> hostInputs;
  /// When set, answers supportsResident instead of hostInputs (a real
  /// backend's rule, e.g. the CUDA op table's).
  std::function<bool(const Node &, const std::vector<bool> &, std::string &)>
      residentCheck;
  /// Replay recordings (false: run every node every step).
  bool replay = true;
  /// Asynchronous steps whose downloads arrive at waitStep (see above).
  bool late = false;
  /// The step (1-based, counting beginStep calls) that fails as a kernel
  /// finding bad data would (0: none).
  size_t failAtStep = 0;
  /// The step (1-based, counting submitStep calls in `late` mode) whose
  /// wait reports an error found on the device, as a bad label does (0:
  /// none).
  uint64_t failWaitOfStep = 0;

  struct Counts {
    size_t arenas = 0, uploads = 0, downloads = 0, deviceCopies = 0, syncs = 0,
           nodeRuns = 0, replays = 0, submits = 0, waits = 0;
    /// The most steps submitted and not yet waited for at once.
    size_t mostInFlight = 0;
  } counts;

  ~ResidentCpuBackend() override {
    for (uint8_t *a : live_)
      std::free(a);
  }

  std::string name() const override { return "resident-test"; }
  bool supports(const Node &node, std::string &why) const override {
    return cpu_->supports(node, why);
  }
  bool deviceResident() const override { return true; }
  bool supportsResident(const Node &node, const std::vector<bool> &known,
                        std::string &why) const override {
    if (residentCheck)
      return residentCheck(node, known, why);
    auto it = hostInputs.find(node.opType());
    if (it != hostInputs.end())
      for (size_t i = 0; i < known.size(); ++i)
        if ((it->second >> i & 1u) && !known[i]) {
          why = "input " + std::to_string(i) + " is data";
          return false;
        }
    return true;
  }
  void run(KernelContext &ctx) override {
    EXPECT_TRUE(ctx.resident);
    EXPECT_EQ(ctx.deviceInputs.size(), ctx.inputs.size());
    ++counts.nodeRuns;
    runInPlace(ctx);
    if (recording_)
      recorded_.push_back(ctx);
  }
  uint8_t *allocateArena(size_t bytes) override {
    ++counts.arenas;
    auto *p = static_cast<uint8_t *>(std::calloc(bytes ? bytes : 1, 1));
    live_.push_back(p);
    return p;
  }
  void freeArena(uint8_t *arena) override {
    for (auto &p : live_)
      if (p == arena) {
        std::free(p);
        p = nullptr;
      }
  }
  void copyToDevice(void *dst, const void *src, size_t bytes) override {
    ++counts.uploads;
    std::memcpy(dst, src, bytes);
  }
  void copyToHost(void *dst, const void *src, size_t bytes) override {
    ++counts.downloads;
    if (!late) {
      std::memcpy(dst, src, bytes);
      return;
    }
    const auto *p = static_cast<const uint8_t *>(src);
    current_.push_back({dst, std::vector<uint8_t>(p, p + bytes)});
    std::memset(dst, 0xFF, bytes);
  }
  void copyOnDevice(void *dst, const void *src, size_t bytes) override {
    ++counts.deviceCopies;
    std::memmove(dst, src, bytes);
    if (recording_)
      copies_.push_back({dst, src, bytes});
  }
  void synchronize() override {
    ++counts.syncs;
    for (Step &s : inFlight_)
      deliver(s.downloads);
    inFlight_.clear();
    deliver(current_);
  }
  bool asyncSteps() const override { return late; }
  uint64_t submitStep() override {
    if (!late)
      return Backend::submitStep();
    ++counts.submits;
    inFlight_.push_back({++tickets_, std::move(current_)});
    current_.clear();
    counts.mostInFlight = std::max(counts.mostInFlight, inFlight_.size());
    return tickets_;
  }
  void waitStep(uint64_t ticket) override {
    ++counts.waits;
    bool failed = false;
    while (!inFlight_.empty() && inFlight_.front().ticket <= ticket) {
      failed |= inFlight_.front().ticket == failWaitOfStep;
      deliver(inFlight_.front().downloads);
      inFlight_.erase(inFlight_.begin());
    }
    if (failed)
      throw Error("step " + std::to_string(failWaitOfStep) +
                  ": a label out of range (found on the device)");
  }
  bool beginStep(const StepInfo &info) override {
    if (++begun_ == failAtStep)
      throw Error("step " + std::to_string(begun_) + " failed on the device");
    if (info.planId != plan_) { // new shapes: warm up, then record again
      plan_ = info.planId;
      stepsOfPlan_ = 0;
      recorded_.clear();
      copies_.clear();
    }
    ++stepsOfPlan_;
    if (replay && stepsOfPlan_ > 2) {
      ++counts.replays;
      for (KernelContext &ctx : recorded_) {
        ctx.seed = info.seed; // the one value a replay takes from the host
        runInPlace(ctx);
      }
      for (const Copy &c : copies_)
        std::memmove(c.dst, c.src, c.bytes);
      return true;
    }
    recording_ = replay && stepsOfPlan_ == 2;
    return false;
  }
  void endStep() override { recording_ = false; }

private:
  /// A CPU kernel may give an output new bytes of its own; a device kernel
  /// writes where the output is bound: copy them back there.
  void runInPlace(KernelContext &ctx) {
    std::vector<uint8_t *> at;
    std::vector<size_t> size;
    for (Tensor *o : ctx.outputs) {
      at.push_back(o ? o->bytes.data() : nullptr);
      size.push_back(o ? o->bytes.size() : 0);
    }
    cpu_->run(ctx);
    for (size_t i = 0; i < ctx.outputs.size(); ++i) {
      Tensor *o = ctx.outputs[i];
      if (!o || o->bytes.data() == at[i] || o->bytes.size() != size[i])
        continue; // in place, or a size the executor will refuse
      std::memcpy(at[i], o->bytes.data(), size[i]);
      o->bytes = ByteBuffer::view(at[i], size[i]);
    }
  }

  struct Copy {
    void *dst;
    const void *src;
    size_t bytes;
  };
  /// A download taken, on its way to `dst`.
  struct Download {
    void *dst;
    std::vector<uint8_t> bytes;
  };
  struct Step {
    uint64_t ticket;
    std::vector<Download> downloads;
  };
  static void deliver(std::vector<Download> &downloads) {
    for (Download &d : downloads)
      std::memcpy(d.dst, d.bytes.data(), d.bytes.size());
    downloads.clear();
  }
  std::vector<Download> current_;
  std::vector<Step> inFlight_;
  uint64_t tickets_ = 0;
  size_t begun_ = 0;
  std::unique_ptr<Backend> cpu_ = createCpuBackend();
  std::vector<uint8_t *> live_;
  uint64_t plan_ = 0;
  int stepsOfPlan_ = 0;
  bool recording_ = false;
  std::vector<KernelContext> recorded_;
  std::vector<Copy> copies_;
};

} // namespace testing
} // namespace mpc
