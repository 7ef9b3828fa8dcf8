// The data-parallel world a launcher (mpirun) started this process in.
//
// `mpirun -np N mpc-run MODEL ...` starts N processes; each finds its rank
// in the environment the launcher sets and joins the others through the MPI
// world plugin (runtime/world/mpi_world_abi.h), loaded only then. A process
// started any other way (or by `mpirun -np 1`) is a world of one rank and
// loads no MPI.
#pragma once

#include "runtime/collective.h"

#include <memory>

namespace mpc {

/// Ranks the launcher started: OMPI_COMM_WORLD_SIZE (Open MPI's mpirun),
/// else PMI_SIZE (MPICH's Hydra); 1 when neither is set. Throws Error on a
/// value that is not a whole number >= 1.
int launchedWorldSize();

/// This process's index among the launcher's ranks on this machine:
/// OMPI_COMM_WORLD_LOCAL_RANK (Open MPI), else MPI_LOCALRANKID (MPICH), else
/// 0. A rank's GPU is the one with this ordinal (one GPU per rank, as
/// torchrun gives LOCAL_RANK).
int launchedLocalRank();

/// The world of launchedWorldSize() ranks: nullptr for one rank; otherwise
/// the MPI plugin's (libmpc_mpi_world.so beside the executable, or
/// $MPC_MPI_WORLD_PLUGIN). Throws Error saying why when the plugin cannot
/// be loaded or MPI cannot start.
std::unique_ptr<Collective> joinLaunchedWorld();

} // namespace mpc
