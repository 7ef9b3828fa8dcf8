// mpc-opt's OpenBLAS thread count (see the .cpp for why it is one).
#pragma once

namespace mpc {

/// OpenBLAS uses one thread, and the workers its constructor started are
/// stopped. Call first thing in main.
void useOneBlasThread();

} // namespace mpc
