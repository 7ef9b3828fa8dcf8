// mpc-opt's OpenBLAS thread count (see the .cpp for why it is one).
#pragma once

namespace mpc {

/// OpenBLAS, if a constant product loads it, uses one thread. Call first
/// thing in main, before anything could load it.
void useOneBlasThread();

} // namespace mpc
