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

#include "passes/ir/graph.h"
#include "runtime/collective.h"

#include <memory>
#include <string>
#include <vector>

namespace mpc {

/// Inputs and outputs of one node as the backend sees them.
struct KernelContext {
  /// The usual brace form {node, inputs, outputs, seed, inPlace}; a
  /// constructor (not an aggregate) so the resident fields below need not
  /// be spelled out where a context is made.
  KernelContext(const Node &node, std::vector<const Tensor *> inputs = {},
                std::vector<Tensor *> outputs = {}, uint64_t seed = 0,
                std::vector<bool> inPlace = {})
      : node(node), inputs(std::move(inputs)), outputs(std::move(outputs)),
        seed(seed), inPlace(std::move(inPlace)) {}

  const Node &node;
  /// One per node input; nullptr where an optional input is omitted.
  std::vector<const Tensor *> inputs;
  /// One per node output; nullptr where an optional output is omitted.
  /// The kernel sets dtype and dims (Tensor(dtype, dims)) and fills bytes.
  std::vector<Tensor *> outputs;
  /// Seed for ops that draw random numbers (dropout), fixed per step.
  uint64_t seed = 0;
  /// The data-parallel world mpc.AllReduce combines across (nullptr: a
  /// world of one rank, where the reduction of a value is the value).
  Collective *collective = nullptr;
  /// Per output: true when the memory plan put it in place over an input
  /// (out() then keeps the bytes: the input is still being read).
  std::vector<bool> inPlace;
  /// Device-resident steps only (empty otherwise): per input, the address
  /// of its bytes in the backend's arena (nullptr where omitted or empty).
  /// inputs[i] is then either a host mirror of a value the executor knows
  /// before the step (a constant, a shape), whose bytes the host may read,
  /// or a tensor whose bytes are the device address: dtype and dims only.
  /// Outputs arrive bound to their planned place with the plan's dtype and
  /// dims; a kernel must produce exactly those.
  std::vector<const void *> deviceInputs;
  /// Device-resident steps only: per input, whether inputs[i] is a host
  /// mirror (its bytes readable on the host).
  std::vector<bool> hostKnown;

  /// True in a device-resident step (then the two vectors above are sized).
  bool resident = false;

  /// Optional: where the backend may keep what it looked up for this node
  /// (the CPU backend: its kernel). The executor keeps one context per node
  /// for as long as it runs the graph, so the lookup is made once per node
  /// rather than once per step; a context made for one call starts at
  /// nullptr and the backend looks the node up again.
  const void *backendCache = nullptr;

  bool hasInput(size_t i) const {
    return i < inputs.size() && inputs[i] != nullptr;
  }
  const Tensor &in(size_t i) const { return *inputs.at(i); }
  bool hasOutput(size_t i) const {
    return i < outputs.size() && outputs[i] != nullptr;
  }
  /// Allocates output i with the given type and returns it, zeroed. Where
  /// the executor bound the output to its planned place in the arena, a
  /// fitting request is served there; otherwise the tensor owns its bytes.
  Tensor &out(size_t i, DType t, const std::vector<int64_t> &dims) const {
    Tensor &o = *outputs.at(i);
    o.allocate(t, dims, !(i < inPlace.size() && inPlace[i]));
    return o;
  }
};

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
  /// synchronize()).
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
