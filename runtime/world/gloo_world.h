// The data-parallel world over Gloo, joined by torchrun's env:// rendezvous.
//
// One process per rank (or per GPU), started by any launcher that sets
// RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT: torchrun (`torchrun
// --nproc-per-node=N --no-python mpc-run ...`), mpc-run --nproc-per-node, a
// batch system's script, a shell. No MPI: rank 0 serves a small key-value
// store at MASTER_PORT (runtime/world/tcp_store.h) where the ranks check
// that they agree on the world and publish their addresses; Gloo (Debian's
// libgloo-dev, the library under PyTorch's CPU DistributedDataParallel)
// connects every pair of ranks and moves the bytes over its TCP transport.
//
// Gloo only moves bytes here (pair sends and receives: on its event-loop
// pairs for large messages, on synchronous pairs read by the calling
// thread for small ones); the reduction arithmetic stays the mpc.AllReduce
// kernel's (kernels/collective.h), so every rank holds the bits of one
// process.
//
// A rank that fails ends its process (abort); the others see its
// connections close and fail at once with a line naming it. A rank that
// is stopped or hung is named once a collective has heard nothing from it
// for the collective timeout. IPv4 only.
#pragma once

#include "kernels/collective.h"

#include <memory>
#include <string>

namespace mpc {

/// Where and how the ranks meet.
struct GlooRendezvous {
  int rank = 0;
  int size = 1;
  std::string masterAddr; ///< rank 0's host (name or IPv4 address)
  int masterPort = 0;     ///< the port rank 0's store listens on
  /// Rank 0: a socket already listening on masterPort (a HeldPort's, from
  /// a launcher that chose the port), which the store serves on instead of
  /// binding the port itself; borrowed, the caller closes it. -1: none.
  int storeFd = -1;
  /// How long a rank waits for the others to join (and for rank 0 to
  /// listen) before it gives up with an error naming who is missing.
  double timeoutSeconds = 300;
  /// How long a collective waits for a rank that sends nothing before it
  /// fails naming that rank (Collective's timeoutSeconds()).
  double collectiveTimeoutSeconds = kDefaultCollectiveTimeoutSeconds;
};

/// Joins the world (every rank calls it with the same size, master address
/// and port, and its own rank). Throws Error with a one-line reason: a rank
/// that does not join in time (named), ranks that disagree on the world's
/// size, two processes with one rank number, a port rank 0 cannot listen
/// on, a host that does not resolve. The world's collectives throw Error
/// naming the rank when a connection closes or a rank stays silent for
/// collectiveTimeoutSeconds.
std::unique_ptr<Collective> joinGlooWorld(const GlooRendezvous &where);

} // namespace mpc
