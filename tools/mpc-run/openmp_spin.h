// How long mpc-run's OpenMP threads spin before they sleep.
//
// oneDNN and the CPU kernels' parallel loops run on libgomp's threads
// (kernels/cpu/parallel.h). Between parallel regions libgomp's idle threads
// spin 300,000 pause loops (milliseconds on these cores) before they sleep,
// unless OMP_WAIT_POLICY or GOMP_SPINCOUNT says otherwise, and it reads
// those variables once, when it loads, before main. On a machine with more
// runnable threads than cores (a CI runner, a shared box) the spinning
// threads take the cores the others need and every region waits for a
// descheduled thread: a GPT-like bf16 step on 2 threads took 2400-2700 ms
// with the default, 930-1170 ms with OMP_WAIT_POLICY=passive and 950-1230 ms
// with GOMP_SPINCOUNT=10000 (load 7-8 on 2 cores).
#pragma once

namespace mpc {

/// When neither OMP_WAIT_POLICY nor GOMP_SPINCOUNT is set, sets
/// GOMP_SPINCOUNT=10000 (a short spin: about half a millisecond) and runs
/// this program again with the same arguments, so that libgomp reads it;
/// returns only when nothing was to be done or the exec failed (the run
/// then goes on with libgomp's default). Call first thing in main.
void boundOpenMpSpin(char **argv);

} // namespace mpc
