// Executor: runs a graph node by node on a backend, in one planned arena.
//
// Before the first run (and again when the inputs' shapes change) the
// executor infers every value's shape from the bound inputs and plans the
// step's memory (passes/memory_plan.h): one arena holds state, inputs and
// every intermediate at its planned offset, and kernels write their outputs
// in place there. Values whose size the graph does not tell (data-dependent
// shapes) get their own allocations, counted apart. A value is released
// after its last use, so the measured peak follows liveness, and equals the
// plan's when the plan is complete. Outputs stay until the next run.
//
// On a device-resident backend (Backend::deviceResident(), the CUDA
// backend) the same plan places every value in one arena the backend
// allocates once per plan; the executor binds each value to its address
// with the plan's static dtype and dims and never touches the bytes. The
// host keeps copies of the state and batch (uploaded when set), host
// mirrors of the values it can compute before the step (constants, shapes:
// the values an op must read on the host), and downloads only what it is
// asked for: the values named in fetchAfterRun, in the step's single
// synchronisation, and initializer()/output() on demand (checkpoints,
// exports). The update binding is applied on the device at the end of the
// step, so state never leaves the device. A step whose shapes the plan does
// not fix, or a node the backend cannot run on device data, is refused with
// a line naming the node, before any kernel runs: nothing falls back to the
// host silently. This logic is backend-agnostic and tested on the CPU with a
// resident test backend (tests/e2e/resident_executor_test.cpp).
#pragma once

#include "passes/memory_plan.h"
#include "runtime/backend.h"
#include "support/diagnostics.h"

#include <deque>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

namespace mpc {

/// The most bytes a step's planned arena may take, and where that number
/// comes from ("cpu, --memory-limit", "cuda, free device memory").
struct MemoryLimit {
  size_t bytes = 0; ///< 0: no limit
  std::string source;
};

/// A plan whose arena exceeds the memory limit: refused before the arena is
/// allocated (so before any kernel runs), with the plan's numbers.
class MemoryLimitError : public Error {
public:
  MemoryLimitError(size_t planned, size_t persistent, const MemoryLimit &limit);
  size_t planned, persistent, limit;
};

/// "412.4 MiB" (KiB below 1 MiB, GiB from 1 GiB).
std::string formatByteSize(size_t bytes);

struct ExecutorOptions {
  /// ONNX opset of the graph (shape inference when planning).
  int64_t opset = 17;
  /// Plan one arena (false: every tensor allocated on its own).
  bool useArena = true;
  size_t alignment = 256;
  /// The training step's update binding (state, new value): lets the plan
  /// write an optimizer update over its state.
  std::vector<std::pair<std::string, std::string>> updateBinding;
  /// The masters' 16-bit working copies among the state (mpc.weight_copies):
  /// the plan writes each one's new value over it (PlanInputs).
  std::vector<std::string> weightCopies;
  /// A plan above it throws MemoryLimitError (see setMemoryLimit).
  MemoryLimit memoryLimit;
  /// Device-resident runs: graph outputs or initializers downloaded at the
  /// end of every run, in its one synchronisation (the loss, found_inf, the
  /// loss scale); others are downloaded when asked for.
  std::vector<std::string> fetchAfterRun;
  /// The data-parallel world of the step's mpc.AllReduce nodes (nullptr:
  /// one rank). Not owned; outlives the executor.
  Collective *collective = nullptr;
};

class Executor {
public:
  /// Checks every node is supported by the backend (throws Error if not).
  Executor(const Graph &graph, Backend &backend, ExecutorOptions options = {});
  ~Executor();

  /// Sets a graph input by name (throws Error on unknown name or a dtype
  /// mismatch). Shapes are checked by the kernels.
  void setInput(const std::string &name, Tensor value);
  /// Replaces an initializer's value (state updates between steps).
  void setInitializer(const std::string &name, Tensor value);
  /// Current value of an initializer.
  const Tensor &initializer(const std::string &name) const;

  /// Runs every node. `seed` is passed to random ops.
  void run(uint64_t seed = 0);
  /// run(), leaving the values of fetchAfterRun in flight where the backend
  /// has asynchronous steps (Backend::asyncSteps): the host may set the
  /// next batch and launch again before they arrive. Until collect()
  /// installs a run's values, output() and initializer() of those values
  /// give the last collected run's; every launch is collected once, in
  /// order. Reading any other value first waits for every launched run.
  /// Elsewhere launch() is run() and collect() does nothing.
  void launch(uint64_t seed = 0);
  void collect();
  /// Launched runs not collected yet.
  size_t pendingRuns() const { return pending_.size(); }
  /// Plans the step for these input dims (one per graph input, in order)
  /// as run() would, without binding or allocating anything: throws
  /// MemoryLimitError when the plan exceeds the memory limit, Error when an
  /// input's byte size does not fit in 64 bits. Returns the planned arena
  /// bytes (0 when the shapes cannot be inferred: run() then says why).
  size_t checkMemory(const std::vector<std::vector<int64_t>> &inputDims) const;
  /// Sets the limit the next plan is checked against (0 bytes: none).
  void setMemoryLimit(MemoryLimit limit) {
    options_.memoryLimit = std::move(limit);
  }

  /// True when the step lives in the backend's memory (see the banner):
  /// run() then applies the update binding itself, on the device.
  bool resident() const { return resident_; }
  /// Device-resident: how many arenas were allocated so far (one per plan).
  size_t arenaAllocations() const { return arenaAllocations_; }
  /// Device-resident: the plan's dims of a value (static by construction).
  const std::vector<int64_t> &plannedDims(const std::string &name) const;

  /// Output i of the last run, or by name.
  const Tensor &output(size_t i) const;
  const Tensor &output(const std::string &name) const;
  size_t numOutputs() const { return graph_.outputs().size(); }

  /// Bytes of all live tensors at the worst point of the last run,
  /// initializers and inputs included; a tensor written in place over
  /// another is counted once. Comparable to MemoryPlan::livePeakBytes.
  size_t peakBytes() const { return peakBytes_; }
  /// The arena's size (0 without a plan).
  size_t arenaBytes() const { return plan_ ? plan_->arenaBytes : 0; }
  /// The most bytes held outside the arena at once in the last run (values
  /// the plan could not size, outputs a kernel did not write in place).
  size_t fallbackPeakBytes() const { return fallbackPeak_; }
  /// Values of the last run whose bytes were not where the plan put them.
  const std::vector<std::string> &outsideArena() const { return outside_; }
  /// The plan of the last run, or nullptr.
  const MemoryPlan *plan() const { return plan_.get(); }

  /// Optional hook called after each node (overflow provenance, tracing).
  using NodeHook = void (*)(void *user, const Node &, const KernelContext &);
  void setNodeHook(NodeHook hook, void *user) {
    hook_ = hook;
    hookUser_ = user;
  }

private:
  bool planIsCurrent() const;
  /// The plan for the graph with input i of type inputs[i] (Undefined dtype:
  /// as declared), into `g`; nullptr when shapes cannot be inferred. Throws
  /// MemoryLimitError above the limit.
  /// `whyNot` (optional) receives the shape inference error.
  std::unique_ptr<MemoryPlan>
  planFor(const std::vector<std::pair<DType, std::vector<int64_t>>> &inputs,
          std::unique_ptr<Graph> &g, std::string *whyNot = nullptr) const;
  void makePlan();
  /// inPlace_ (and run()'s per-node contexts) from the plan's in-place
  /// writes: which outputs a kernel may write over their input.
  void recordInPlace(const MemoryPlan &plan);
  /// Copies slot s into its planned place and makes it a view there.
  void moveIntoArena(size_t s);

  // Device-resident runs (executor.cpp, "device-resident").
  bool residentPlanIsCurrent() const;
  void makeResidentPlan();
  void computeMirrors();
  void runResident(uint64_t seed);
  /// runResident's end: the fetched values' downloads, submitted.
  void submitFetches();
  /// The host copy of slot s, downloaded when it is not current.
  const Tensor &hostCopy(size_t s) const;
  /// "node 'n' (Op)" for the producer of slot s, or "graph input 'x'".
  std::string whereIs(size_t s) const;

  const Graph &graph_;
  Backend &backend_;
  ExecutorOptions options_;
  std::vector<const Node *> nodes_;
  /// Each value's slot by Value::id() (kNoSlot: none): a vector, not a
  /// hash map, because the run loop looks up every input and output of
  /// every node of every step.
  static constexpr size_t kNoSlot = size_t(-1);
  std::vector<size_t> slotById_;
  /// Whether v (of any graph) has a slot, and which (throws if none).
  bool hasSlot(const Value *v) const {
    return v && v->owner() == &graph_ && v->id() < slotById_.size() &&
           slotById_[v->id()] != kNoSlot;
  }
  size_t slotOf(const Value *v) const;
  std::vector<const Value *> valueOf_;
  std::vector<Tensor> slots_;
  std::vector<bool> persistent_;
  /// For each node (in order), the slots whose last use it is.
  std::vector<std::vector<size_t>> freeAfter_;
  std::vector<size_t> outputSlots_;
  /// For each node (in order), the slots of its outputs (kNoSlot where an
  /// optional output is omitted).
  std::vector<std::vector<size_t>> nodeOutputSlots_;
  /// One context per node, made once: its inputs and outputs point at slots
  /// (which never move), so a step only sets the seed and resets the
  /// outputs, and the backend keeps its per-node lookups in it. Only run()
  /// (not the device-resident step) uses them.
  std::vector<KernelContext> contexts_;
  /// run()'s per-step scratch, kept to avoid allocating it every step.
  std::vector<int> bufferUsers_;
  std::vector<bool> inArena_;

  // The plan (for the graph with the shapes the inputs had when planned).
  std::unique_ptr<MemoryPlan> plan_;
  std::unique_ptr<Graph> planned_; ///< the graph the plan's values belong to
  std::vector<std::vector<int64_t>> plannedInputDims_;
  struct Arena;
  std::unique_ptr<Arena> arena_;
  struct SlotPlan {
    bool planned = false;
    size_t offset = 0, bytes = 0;
    size_t buffer = 0;   ///< values sharing bytes in place share a buffer
    bool counted = true; ///< false: lives in a state's bytes (not counted)
  };
  std::vector<SlotPlan> slotPlan_;
  /// Per node, per output: written in place over an input.
  std::vector<std::vector<bool>> inPlace_;

  bool resident_ = false;
  uint8_t *deviceArena_ = nullptr;
  size_t arenaAllocations_ = 0;
  uint64_t planId_ = 0;
  /// Per slot: the host copy (state, batch, downloads), whether it equals
  /// the device bytes, whether it must be uploaded before the next run.
  mutable std::vector<Tensor> host_;
  mutable std::vector<bool> hostValid_;
  std::vector<bool> dirty_;
  /// Per slot: a host mirror of a value known before the step, if any.
  std::vector<Tensor> mirror_;
  std::vector<bool> hasMirror_;
  /// Per slot: state the update binding rewrites each run.
  std::vector<bool> updated_;
  struct DeviceCopy {
    size_t dst, src, bytes; ///< arena offsets
  };
  std::vector<DeviceCopy> updateCopies_;
  std::vector<size_t> fetchSlots_;
  std::vector<bool> fetched_; ///< per slot: one of fetchSlots_
  /// A launched run's fetched values (in fetchSlots_' order), arriving by
  /// the backend's waitStep(ticket).
  struct PendingRun {
    uint64_t ticket = 0;
    std::vector<Tensor> values;
  };
  std::deque<PendingRun> pending_;

  size_t peakBytes_ = 0, fallbackPeak_ = 0;
  std::vector<std::string> outside_;
  NodeHook hook_ = nullptr;
  void *hookUser_ = nullptr;
};

} // namespace mpc
