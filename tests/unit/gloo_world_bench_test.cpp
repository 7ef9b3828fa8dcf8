// The Gloo world's collective latency on 2 ranks (threads of this process,
// meeting on localhost): microseconds per call of allToAll (the reduce-
// scatter half of mpc.AllReduce, and ReduceScatter), allGather (the other
// half, and AllGather) and both (one AllReduce's traffic) at 1 KiB, 64 KiB
// and 16 MiB per rank. A measurement, not a check: DISABLED_ keeps it out
// of make test; bench/gloo_world.sh --latency runs it (median of 5 rounds).
#include "runtime/world/gloo_world.h"
#include "runtime/world/held_port.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

using namespace mpc;

namespace {

using Clock = std::chrono::steady_clock;

/// Microseconds per call of `op` on rank `r` of `w` (both ranks call it the
/// same number of times): the median of 5 rounds of `calls` calls.
template <typename F> double microsPerCall(Collective &w, int calls, F op) {
  op(); // warm-up: buffers and connections sized
  std::vector<double> rounds;
  for (int k = 0; k < 5; ++k) {
    auto start = Clock::now();
    for (int i = 0; i < calls; ++i)
      op();
    rounds.push_back(
        std::chrono::duration<double, std::micro>(Clock::now() - start)
            .count() /
        calls);
  }
  std::sort(rounds.begin(), rounds.end());
  (void)w;
  return rounds[2];
}

} // namespace

TEST(GlooWorldBench, DISABLED_CollectiveLatency) {
  const HeldPort held;
  const std::vector<size_t> sizes = {size_t(1) << 10, size_t(64) << 10,
                                     size_t(16) << 20};
  std::vector<std::string> lines;
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r)
    threads.emplace_back([&, r] {
      GlooRendezvous where;
      where.rank = r;
      where.size = 2;
      where.masterAddr = "127.0.0.1";
      where.masterPort = held.port();
      if (r == 0)
        where.storeFd = held.fd();
      std::unique_ptr<Collective> w = joinGlooWorld(where);
      for (size_t bytes : sizes) {
        // `bytes` per rank: allToAll moves half of it each way, as the
        // AllReduce kernel's reduce-scatter of a `bytes` message does.
        std::vector<char> buf(bytes * 2, char(r));
        const size_t half = bytes / 2;
        const int calls = bytes >= (size_t(1) << 20) ? 4 : 200;
        double a2a = microsPerCall(
            *w, calls, [&] { w->allToAll(buf.data(), half, buf.data()); });
        double ag = microsPerCall(*w, calls, [&] {
          w->allGather(buf.data() + size_t(r) * half, half, buf.data());
        });
        double ar = microsPerCall(*w, calls, [&] {
          w->allToAll(buf.data(), half, buf.data());
          w->allGather(buf.data() + size_t(r) * half, half, buf.data());
        });
        if (r == 0) {
          char line[200];
          std::snprintf(line, sizeof line,
                        "latency bytes=%zu reduce_scatter_us=%.1f "
                        "all_gather_us=%.1f all_reduce_us=%.1f",
                        bytes, a2a, ag, ar);
          lines.push_back(line);
        }
      }
    });
  for (std::thread &t : threads)
    t.join();
  for (const std::string &l : lines)
    std::printf("%s\n", l.c_str());
}
