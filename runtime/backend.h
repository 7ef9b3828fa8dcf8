// The Backend interface: what a device must provide for the executor.
//
// Modelled on ggml's backend: one interface, a CPU reference that is always
// built, other devices (CUDA) behind the same calls. The executor owns the
// schedule and the values; a backend owns buffers and runs one node at a time.
#pragma once

#include "passes/ir/graph.h"

#include <memory>
#include <string>
#include <vector>

namespace mpc {

/// Inputs and outputs of one node as the backend sees them.
struct KernelContext {
  const Node &node;
  /// One per node input; nullptr where an optional input is omitted.
  std::vector<const Tensor *> inputs;
  /// One per node output; nullptr where an optional output is omitted.
  /// The kernel sets dtype and dims (Tensor(dtype, dims)) and fills bytes.
  std::vector<Tensor *> outputs;
  /// Seed for ops that draw random numbers (dropout), fixed per step.
  uint64_t seed = 0;
  /// Per output: true when the memory plan put it in place over an input
  /// (out() then keeps the bytes: the input is still being read).
  std::vector<bool> inPlace;

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
