// Collective: the data-parallel world one training process belongs to.
//
// mpc-run launched N times by mpirun (one process per rank) runs the same
// compiled step on each rank's slice of the batch; the step's mpc.AllReduce
// nodes (mpc-opt --data-parallel) combine the gradients and the overflow
// flag across the ranks through this interface. The reduction arithmetic is
// the kernel's (kernels/cpu/collective.cpp), not the transport's: the
// transport only moves bytes, so each element is reduced by one rank in rank
// order and every rank holds the same bits afterwards, whatever algorithm
// the MPI library picks. No world (nullptr) is a world of one rank.
//
// The interface is header-only so that the MPI transport can live in a
// plugin (runtime/world/), loaded only by a process that mpirun launched.
//
// Every wait is bounded: a collective that hears nothing from a rank for
// timeoutSeconds() (mpc-run --collective-timeout) fails with a line naming
// that rank, so a rank that is stopped, hung or unreachable ends the
// others instead of holding them forever.
#pragma once

#include <cstddef>
#include <type_traits>
#include <vector>

namespace mpc {

/// The default of mpc-run --collective-timeout: long enough for a slow
/// step or a large checkpoint written by rank 0 while the others wait.
constexpr double kDefaultCollectiveTimeoutSeconds = 300;

class Collective {
public:
  virtual ~Collective() = default;
  /// This process's rank, 0 .. size() - 1.
  virtual int rank() const = 0;
  /// Ranks in the world (>= 1).
  virtual int size() const = 0;
  /// Every rank's `bytes` bytes at `send`, concatenated in rank order into
  /// `recv` (size() * bytes). Every rank calls it with the same `bytes`;
  /// it returns when this rank's `recv` is complete. In place when `send`
  /// is `recv` + rank() * bytes (this rank's own block already there).
  virtual void allGather(const void *send, size_t bytes, void *recv) = 0;
  /// Block q of `send` (size() blocks of `bytes`) to rank q: `recv` gets
  /// every rank's block for this rank, in rank order (size() * bytes).
  /// `send` may be `recv` (in place).
  virtual void allToAll(const void *send, size_t bytes, void *recv) = 0;
  /// Rank `root`'s `bytes` bytes at `buf` into every rank's `buf`.
  virtual void broadcast(void *buf, size_t bytes, int root) = 0;
  /// Ends every rank's process with `code` (after an error on this rank,
  /// so that the others do not wait for it forever).
  [[noreturn]] virtual void abort(int code) = 0;
  /// How long a collective may wait without hearing from a rank before it
  /// fails naming it (device collectives, such as NCCL's, use it too).
  virtual double timeoutSeconds() const {
    return kDefaultCollectiveTimeoutSeconds;
  }
};

/// Every rank's `value`, in rank order (a small allGather: flags, counts,
/// losses, fingerprints the ranks compare).
template <typename T>
std::vector<T> gatherFromRanks(Collective &world, const T &value) {
  static_assert(std::is_trivially_copyable_v<T>);
  std::vector<T> all(static_cast<size_t>(world.size()));
  world.allGather(&value, sizeof(T), all.data());
  return all;
}

} // namespace mpc
