// The data-parallel world over TCP, joined by torchrun's env:// rendezvous.
//
// One process per rank (or per GPU), started by any launcher that sets
// RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT: torchrun (`torchrun
// --nproc-per-node=N --no-python mpc-run ...`), a batch system's script, or
// a shell. No MPI: the ranks meet at rank 0, which listens on MASTER_PORT,
// learn each other's addresses there and connect to each other, one TCP
// connection per pair of ranks. The collectives move bytes over those
// connections, every transfer of a call at once (non-blocking sockets and
// poll), so large blocks cannot deadlock two ranks that send to each other.
// The reduction arithmetic stays the mpc.AllReduce kernel's
// (kernels/collective.h), so every rank holds the same bits as over MPI.
//
// A rank that fails ends its process (abort); the others see its
// connections close at their next collective and fail with a line naming
// it. A rank that is stopped or hung (its connections open, nothing moving)
// is named the same way once a collective has heard nothing from it for
// the collective timeout. IPv4 only.
#pragma once

#include "kernels/collective.h"
#include "runtime/world/free_port.h"

#include <memory>
#include <string>

namespace mpc {

/// Where and how the ranks meet.
struct TcpRendezvous {
  int rank = 0;
  int size = 1;
  std::string masterAddr; ///< rank 0's host (name or IPv4 address)
  int masterPort = 0;     ///< the port rank 0 listens on
  /// How long a rank waits for the others to join (and for rank 0 to
  /// listen) before it gives up with an error naming who is missing.
  double timeoutSeconds = 300;
  /// How long a collective waits while no byte moves to or from a rank it
  /// exchanges with before it fails naming that rank (Collective's
  /// timeoutSeconds()).
  double collectiveTimeoutSeconds = kDefaultCollectiveTimeoutSeconds;
};

/// Joins the world (every rank calls it with the same size, master address
/// and port, and its own rank). Throws Error with a one-line reason: a rank
/// that does not join in time, ranks that disagree on the world's size, two
/// ranks with one rank number, a port rank 0 cannot listen on. The world's
/// collectives throw Error naming the rank when a connection closes or
/// stays silent for collectiveTimeoutSeconds.
std::unique_ptr<Collective> joinTcpWorld(const TcpRendezvous &where);

} // namespace mpc
