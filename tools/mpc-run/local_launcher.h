// mpc-run --nproc-per-node=N: this machine's N ranks, started by mpc-run
// itself, as `torchrun --standalone --nproc-per-node=N` starts them.
//
// The launcher picks a free local port and starts N copies of this
// executable with the same arguments (less --nproc-per-node) and torchrun's
// variables (RANK = LOCAL_RANK = i, WORLD_SIZE = N, MASTER_ADDR =
// 127.0.0.1, MASTER_PORT), which meet over Gloo (runtime/world/gloo_world.h).
// It waits for them: the first rank that fails (each says why in its own
// line) ends the others, whose wait for it could otherwise last the
// rendezvous or collective timeout, and its exit code is the launcher's; a
// rank killed by a signal gets a line from the launcher naming it, exit
// code 1, and the others two seconds to name it too before SIGKILL. Every
// rank is reaped (a stopped one too) before the launcher returns. SIGINT
// (Ctrl-C) and SIGTERM reach every rank, passed on by the launcher, and the
// ranks agree on the step to stop at; a launcher that is killed sends its ranks
// SIGTERM (PR_SET_PDEATHSIG).
#pragma once

#include <string>
#include <vector>

namespace mpc {

/// Runs `ranks` copies of /proc/self/exe with `args` (argv[1..], without
/// --nproc-per-node) as one data-parallel world and returns the exit code
/// for the launcher: 0 when every rank exits 0, else the first failing
/// rank's (1 for a rank a signal ended). Throws Error when a rank cannot be
/// started.
int launchLocalRanks(int ranks, const std::vector<std::string> &args);

} // namespace mpc
