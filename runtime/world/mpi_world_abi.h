// The interface between mpc-run and the MPI world plugin
// (libmpc_mpi_world.so, runtime/world/mpi_world.cpp).
//
// The plugin is the only code that links the MPI library: a process that
// mpirun did not launch never loads it, so single-process runs (and the GPU
// bundle, carried to machines without MPI) need no MPI at all.
#pragma once

#include "kernels/collective.h"

#include <cstddef>

/// Bumped whenever the Collective interface or the entry's signature changes.
#define MPC_MPI_WORLD_ABI 3
#define MPC_MPI_WORLD_SYMBOL "mpc_mpi_world_join"

extern "C" {
/// Initialises MPI and returns the world (owned by the caller; deleting it
/// finalises MPI), or nullptr with a one-line reason in `why`. `abi` is the
/// caller's MPC_MPI_WORLD_ABI; a plugin of another build refuses it. A
/// collective that hears nothing from a rank for `collectiveTimeoutSeconds`
/// prints a line naming it and aborts every rank (MPI_Abort).
typedef mpc::Collective *(*MpcMpiWorldJoinFn)(int abi,
                                              double collectiveTimeoutSeconds,
                                              char *why, size_t whySize);
}
