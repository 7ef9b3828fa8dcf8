// The Backend interface: what a device must provide for the executor.
//
// Modelled on ggml's backend: one interface, a CPU reference that is always
// built, other devices (CUDA) behind the same calls. The executor owns the
// schedule and the values; a backend owns buffers and runs one node at a time.
//
// A backend with memory of its own (a GPU) may also be device-resident
// (deviceResident()): the executor then keeps the whole step in one arena
// the backend allocates, binds tensors to addresses in it without touching
// their bytes, and moves bytes only through the copy calls below. The
// executor keeps the planning (shared with the CPU backend and tested
// there); the backend keeps its device, stream and any recording of the
// step (a CUDA graph), bracketed by beginStep/endStep.
#pragma once

#include "kernels/kernel_context.h"

#include <memory>
#include <string>
#include <vector>

namespace mpc {

class Backend {
public:
  virtual ~Backend() = default;

  /// "cpu", "cuda".
  virtual std::string name() const = 0;

  /// Whether this backend can run the node; when not, `why` says what is
  /// missing (the executor reports it before the first step).
  virtual bool supports(const Node &node, std::string &why) const = 0;

  /// Runs one node. Throws mpc::Error on bad runtime input (e.g. a label out
  /// of range, a shape that does not reshape).
  virtual void run(KernelContext &ctx) = 0;

  // --- Device-resident steps (optional; all defaults say "not resident").

  /// True when the executor should keep the step in this backend's memory
  /// (the calls below are then used instead of the host's).
  virtual bool deviceResident() const { return false; }
  /// Whether `node` can run in a device-resident step, given which of its
  /// inputs the executor knows on the host before the step (hostKnown[i]);
  /// when not, `why` says what it would need (the executor refuses the
  /// step naming the node: falling back to host reads is never silent).
  virtual bool supportsResident(const Node &node,
                                const std::vector<bool> &hostKnown,
                                std::string &why) const {
    why = "the " + name() + " backend keeps no memory of its own";
    return false;
  }
  /// The step's arena: `bytes` of zeroed device memory, once per plan.
  virtual uint8_t *allocateArena(size_t bytes) { return nullptr; }
  virtual void freeArena(uint8_t *arena) {}
  /// Enqueue copies in stream order (host memory must stay valid until
  /// synchronize(); a backend with asyncSteps() is done reading copyToDevice's
  /// `src` when the call returns, and writes copyToHost's `dst` by the
  /// waitStep() of the step that enqueued it).
  virtual void copyToDevice(void *dst, const void *src, size_t bytes) {}
  virtual void copyToHost(void *dst, const void *src, size_t bytes) {}
  virtual void copyOnDevice(void *dst, const void *src, size_t bytes) {}
  /// Waits for every enqueued copy and kernel; throws mpc::Error naming the
  /// node when a kernel flagged bad data (an index out of range) on the
  /// device during the step.
  virtual void synchronize() {}

  /// What the executor tells the backend about the step it is starting.
  struct StepInfo {
    uint64_t seed = 0;   ///< as KernelContext::seed, for every node
    uint64_t planId = 0; ///< changes whenever the arena or shapes change
  };
  /// Starts a device-resident step. Returns true when the backend replays
  /// a recording of an earlier step with the same planId (a CUDA graph): the
  /// executor then runs no node and calls endStep() at once.
  virtual bool beginStep(const StepInfo &info) { return false; }
  /// Ends the step started by beginStep (a recording ends and is launched).
  virtual void endStep() {}
  /// Ends a step a node's error interrupted: nothing recorded is kept.
  virtual void abortStep() {}

  /// Whether a resident step may be left running while the host goes on
  /// (submitStep/waitStep below): the executor then launches the next step
  /// before the last one's fetched values have arrived. The run loop turns
  /// it on by default for such a backend only (runtime/step_lookahead.h).
  virtual bool asyncSteps() const { return false; }
  /// Ends the host's part of the step started by beginStep, after its
  /// endStep and its copyToHost calls, without waiting for the device:
  /// returns a ticket for waitStep. By default: synchronize() at once.
  virtual uint64_t submitStep() {
    synchronize();
    return 0;
  }
  /// Waits for the submitted step `ticket` (and every one before it): its
  /// downloads are in host memory after it. Throws as synchronize() does
  /// for an error the device found in that step.
  virtual void waitStep(uint64_t ticket) {}

  /// The device's free and total memory, where the device has its own (a
  /// GPU: cudaMemGetInfo); false where it does not know or shares the host's
  /// (runtime/memory_limit.h then reads the host's available memory).
  virtual bool deviceMemory(size_t &freeBytes, size_t &totalBytes) const {
    return false;
  }
};

/// The CPU reference backend (always available).
std::unique_ptr<Backend> createCpuBackend();

} // namespace mpc
