// The data-parallel world a launcher started this process in.
//
// `mpirun -np N mpc-run MODEL ...` starts N processes; each finds its rank
// in the environment the launcher sets and joins the others through the MPI
// world plugin (runtime/world/mpi_world_abi.h), loaded only then. A launcher
// that sets torchrun's variables instead (RANK, WORLD_SIZE, MASTER_ADDR,
// MASTER_PORT: `torchrun --nproc-per-node=N --no-python mpc-run ...`, a
// batch script, a shell) gets the Gloo world (runtime/world/gloo_world.h),
// no MPI at all. A process started any other way (or as a world of one rank)
// joins nothing.
#pragma once

#include "kernels/collective.h"
#include "support/diagnostics.h"

#include <memory>

namespace mpc {

/// Why this process could not join the world its launcher started: about
/// the launch, not about the model (mpc-run prints it as it is).
class LaunchError : public Error {
public:
  using Error::Error;
};

/// Ranks the launcher started: OMPI_COMM_WORLD_SIZE (Open MPI's mpirun),
/// else PMI_SIZE (MPICH's Hydra), else WORLD_SIZE (torchrun); 1 when none
/// is set. Throws Error on a value that is not a whole number >= 1.
int launchedWorldSize();

/// This process's index among the launcher's ranks on this machine:
/// OMPI_COMM_WORLD_LOCAL_RANK (Open MPI), else MPI_LOCALRANKID (MPICH), else
/// LOCAL_RANK (torchrun), else 0. A rank's GPU is the one with this ordinal
/// (one GPU per rank).
int launchedLocalRank();

/// The world of launchedWorldSize() ranks: nullptr for one rank; under an
/// MPI launcher the MPI plugin's (libmpc_mpi_world.so beside the
/// executable, or $MPC_MPI_WORLD_PLUGIN); otherwise the Gloo world at
/// MASTER_ADDR:MASTER_PORT (MASTER_PORT + 1 under torchrun, whose agent
/// holds MASTER_PORT; MPC_MASTER_PORT overrides both) as rank RANK, waiting
/// for the others up to
/// MPC_RENDEZVOUS_TIMEOUT seconds (default 300). Its collectives wait for a
/// silent rank up to `collectiveTimeoutSeconds` (mpc-run
/// --collective-timeout) and then fail naming it. Throws LaunchError saying
/// why when the plugin cannot be loaded, MPI cannot start, a variable is
/// missing or malformed, or the ranks do not meet (over Gloo: "rank R: ...").
std::unique_ptr<Collective> joinLaunchedWorld(
    double collectiveTimeoutSeconds = kDefaultCollectiveTimeoutSeconds);

} // namespace mpc
