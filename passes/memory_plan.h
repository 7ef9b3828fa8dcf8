// Memory plan: where every tensor of a step lives in one arena.
//
// Liveness-based buffer assignment, the way TFLite's arena planner and XLA's
// buffer assignment do it: state, graph inputs and constants get their own
// places at the front (they persist between steps); every other value lives
// from the node that makes it to its last use and is given an offset by
// greedy best-fit over values sorted by size, so values whose lifetimes do
// not overlap share bytes. Elementwise ops and the fused optimizer updates
// may write in place over an input that dies there (and, for an optimizer
// update, over the state the update is bound to), which is what PyTorch's
// in-place optimizers do. Offsets are aligned for the GPU (256 bytes, what
// cudaMalloc guarantees).
//
// The executor allocates its arena from this plan (runtime/executor.cpp) and
// mpc-opt --report=memory prints it by class (passes/memory_report.h).
#pragma once

#include "ir/graph.h"

#include <array>
#include <cstddef>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace mpc {

/// What a tensor is for, as the memory report groups them.
enum class MemoryClass {
  Parameters,     ///< trainable (fp32 master) parameters
  WorkingCopies,  ///< fp16/bf16 copies of the parameters made each step
  Gradients,      ///< parameter gradients (and accumulation buffers)
  OptimizerState, ///< moments, momentum buffers, loss-scale state, counters
  OtherState,     ///< other persistent state (batch-norm statistics)
  Inputs,         ///< the batch
  Activations,    ///< forward values saved for the backward
  Temporaries,    ///< everything else that lives inside one step
  Count
};
constexpr size_t kNumMemoryClasses = size_t(MemoryClass::Count);

/// "parameters", "working_copies", ... (the report's and JSON's keys).
const char *memoryClassName(MemoryClass c);

/// Per-class byte counts.
using ClassBytes = std::array<size_t, kNumMemoryClasses>;

/// What the planner needs besides the graph: which values are what.
struct PlanInputs {
  const Graph *graph = nullptr;
  /// Names (from the model's mpc.* metadata) used to classify values. Views,
  /// as planInputsFor takes them from the model's metadata lists without a
  /// copy per name: what they view must outlive planMemory's call.
  std::string_view loss;
  std::vector<std::string_view> params, grads, optimizerState, gradBuffers;
  std::vector<std::string_view>
      scalerState; ///< loss scale, growth tracker, step
  /// The masters' 16-bit copies kept as state (mpc.weight_copies).
  std::vector<std::string> weightCopies;
  /// (state, new value): the step's update binding (none when null; not
  /// owned, like `graph`). An optimizer update whose output is bound to the
  /// state it reads may be written over that state, and so may a weight
  /// copy's new value once the copy's readers ran.
  const std::vector<std::pair<std::string, std::string>> *updateBinding =
      nullptr;
  /// Values of `graph` that count as its outputs too (live to the step's
  /// end, never written over): runnableStep's additions, so the algorithm
  /// itself can be planned as the executor runs it, without a copy.
  std::vector<const Value *> extraOutputs;
  size_t alignment = 256;
  bool inPlace = true;
  /// Fill MemoryPlan::placement (off for callers that want only the
  /// numbers: mpc-opt's pass and report, which plan the whole step).
  bool keepPlacements = true;
};

/// Fills PlanInputs' names and binding from a compiled model's metadata and
/// training_info (views of the model's: it must outlive the plan's making);
/// `graph` is the step (the algorithm or a copy of it, such as
/// runnableStep's) or the main graph.
PlanInputs planInputsFor(const Model &model, const Graph &graph);

struct ValuePlacement {
  size_t offset = 0; ///< from the arena's start
  size_t bytes = 0;  ///< the tensor's size (unaligned)
  MemoryClass cls = MemoryClass::Temporaries;
  bool persistent = false;
  /// First and last node index (into graph.nodes()) the value is live at;
  /// persistent values span the whole step.
  int64_t first = 0, last = 0;
  /// Transient values written in place over one another share a buffer
  /// (index); kNoBuffer for persistent ones (and updates over state).
  static constexpr size_t kNoBuffer = size_t(-1);
  size_t buffer = kNoBuffer;
};

/// An output computed over an input's bytes.
struct InPlaceWrite {
  size_t node = 0;   ///< index into graph.nodes()
  size_t output = 0; ///< output index
  size_t input = 0;  ///< input index whose bytes it takes
};

struct MemoryPlan {
  size_t alignment = 256;
  /// Bytes at the arena's front that persist between steps (state, inputs,
  /// constants); transient values are placed after them.
  size_t persistentBytes = 0;
  /// The arena's size: the planned peak of the step.
  size_t arenaBytes = 0;
  /// The most bytes live at once (no alignment or fragmentation): a lower
  /// bound of arenaBytes, and what the executor measures as it runs.
  size_t livePeakBytes = 0;
  int64_t livePeakNode = -1; ///< node index where livePeakBytes is reached
  /// Sum of every tensor's size: what the step needs with no reuse at all.
  size_t noReuseBytes = 0;
  /// Bytes by class live at livePeakNode, and of the whole step (no reuse).
  ClassBytes atPeak{}, total{};
  /// The largest values live at the peak: (name, class, bytes), largest first.
  struct Resident {
    std::string name;
    MemoryClass cls;
    size_t bytes;
  };
  std::vector<Resident> largestAtPeak;
  /// Bytes the backward keeps from the forward, by class: every buffer
  /// holding a value made at or before the loss node that a node after the
  /// loss node reads (activations, and the fp16 working copies of weights
  /// the backward's products read), each buffer once (in-place writes and
  /// views share one), as torch's saved_tensors_hooks count storages. Zero
  /// without a loss node.
  ClassBytes savedForBackward{};
  /// Every planned value's place (empty unless PlanInputs::keepPlacements).
  std::unordered_map<const Value *, ValuePlacement> placement;
  std::vector<InPlaceWrite> inPlace;
  /// Transient buffers (ValuePlacement::buffer indexes them).
  size_t numBuffers = 0;
  /// Values whose size is not known from the graph's shapes (the executor
  /// allocates them on their own; the report names them).
  std::vector<const Value *> unplanned;

  const ValuePlacement *find(const Value *v) const {
    auto it = placement.find(v);
    return it == placement.end() ? nullptr : &it->second;
  }
};

/// The value's size in bytes when its dtype and dims are known and the size
/// fits in int64 (false past it: absurd dims are no size).
bool valueByteSize(const Value &v, size_t &bytes);

/// Plans the graph's memory. Every value needs a known dtype and concrete
/// dims to be placed; the others are listed in `unplanned`.
MemoryPlan planMemory(const PlanInputs &in);

} // namespace mpc
