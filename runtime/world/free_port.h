// A free local port, for a world whose ranks all run on this machine.
#pragma once

namespace mpc {

/// A port free on the loopback interface now (the kernel's choice), for a
/// world whose ranks all run here (mpc-run --nproc-per-node, tests). Rank
/// 0 binds it a moment later; another process taking it in between makes
/// rank 0 fail with a line saying so.
int freeLocalPort();

} // namespace mpc
