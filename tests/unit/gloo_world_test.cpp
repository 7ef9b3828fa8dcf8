// The Gloo world (runtime/world/gloo_world.h) with its ranks as threads of
// this process, meeting on localhost: the rendezvous, every collective in
// and out of place with blocks large enough to fill the sockets' buffers
// both ways at once, mpc.AllReduce's kernel over it (the same bits as over
// the in-process world), and the one-line errors of a world that does not
// meet, loses a rank or hears nothing from one for the collective timeout.
#include "ir/mpc_ops.h"
#include "kernels/cpu/cpu_util.h"
#include "runtime/world/gloo_world.h"
#include "runtime/world/held_port.h"
#include "support/diagnostics.h"
#include "tests/support/thread_world.h"

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <thread>

using namespace mpc;

namespace {

/// Points `w` at rank 0 on this machine, at `held`'s port (rank 0 serving
/// on its socket), with `timeout` seconds to meet.
void meetHere(GlooRendezvous &w, const HeldPort &held, double timeout = 20) {
  w.masterAddr = "127.0.0.1";
  w.masterPort = held.port();
  w.storeFd = w.rank == 0 ? held.fd() : -1;
  w.timeoutSeconds = timeout;
}

/// Runs body(rank, world) on `size` threads that join one Gloo world; a
/// rank whose join or body throws records its message in errors[rank].
std::vector<std::string>
onRanks(int size, const std::function<void(int, Collective &)> &body,
        double timeout = 20, std::function<GlooRendezvous(int)> where = {}) {
  const HeldPort held;
  std::vector<std::string> errors(static_cast<size_t>(size));
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r)
    threads.emplace_back([&, r] {
      try {
        GlooRendezvous w;
        if (where) {
          w = where(r);
        } else {
          w.rank = r;
          w.size = size;
        }
        meetHere(w, held, timeout);
        std::unique_ptr<Collective> world = joinGlooWorld(w);
        body(r, *world);
      } catch (const Error &e) {
        errors[size_t(r)] = e.what();
      }
    });
  for (std::thread &t : threads)
    t.join();
  return errors;
}

/// Rank r's byte k of block q: every block of every rank tells them apart.
uint8_t pattern(int r, int q, size_t k) {
  return uint8_t(r * 131 + q * 31 + k * 7 + (k >> 9));
}

void expectNoErrors(const std::vector<std::string> &errors) {
  for (size_t r = 0; r < errors.size(); ++r)
    EXPECT_EQ(errors[r], "") << "rank " << r;
}

} // namespace

TEST(GlooWorld, CollectivesMoveEveryBlockInAndOutOfPlace) {
  // 3 MiB blocks: more than the sockets buffer, so each pair of ranks
  // sends and receives at once. 32 KiB and one byte more: the largest
  // block the synchronous pairs take, and the smallest the event loop's.
  for (int size : {2, 3, 4})
    for (size_t bytes : {size_t(0), size_t(1), size_t(1000), size_t(32) << 10,
                         (size_t(32) << 10) + 1, size_t(3) << 20}) {
      SCOPED_TRACE(std::to_string(size) + " ranks, " + std::to_string(bytes) +
                   " bytes");
      std::vector<std::string> errors =
          onRanks(size, [&](int r, Collective &w) {
            ASSERT_EQ(w.rank(), r);
            ASSERT_EQ(w.size(), size);
            const size_t n = size_t(size);
            // allGather, out of place and in place.
            std::vector<uint8_t> mine(bytes), all(n * bytes);
            for (size_t k = 0; k < bytes; ++k)
              mine[k] = pattern(r, 0, k);
            w.allGather(mine.data(), bytes, all.data());
            std::vector<uint8_t> inPlace(n * bytes);
            std::copy(mine.begin(), mine.end(), inPlace.begin() + r * bytes);
            w.allGather(inPlace.data() + r * bytes, bytes, inPlace.data());
            for (size_t q = 0; q < n; ++q)
              for (size_t k = 0; k < bytes; ++k) {
                ASSERT_EQ(all[q * bytes + k], pattern(int(q), 0, k));
                ASSERT_EQ(inPlace[q * bytes + k], pattern(int(q), 0, k));
              }
            // allToAll: block q of rank r goes to rank q.
            std::vector<uint8_t> send(n * bytes), recv(n * bytes);
            for (size_t q = 0; q < n; ++q)
              for (size_t k = 0; k < bytes; ++k)
                send[q * bytes + k] = pattern(r, int(q), k);
            w.allToAll(send.data(), bytes, recv.data());
            w.allToAll(send.data(), bytes, send.data());
            for (size_t q = 0; q < n; ++q)
              for (size_t k = 0; k < bytes; ++k) {
                ASSERT_EQ(recv[q * bytes + k], pattern(int(q), r, k));
                ASSERT_EQ(send[q * bytes + k], pattern(int(q), r, k));
              }
            // broadcast from the last rank.
            std::vector<uint8_t> b(bytes);
            for (size_t k = 0; k < bytes; ++k)
              b[k] = pattern(r, 9, k);
            w.broadcast(b.data(), bytes, size - 1);
            for (size_t k = 0; k < bytes; ++k)
              ASSERT_EQ(b[k], pattern(size - 1, 9, k));
          });
      expectNoErrors(errors);
    }
}

TEST(GlooWorld, ManySmallCollectivesOfMixedSizesKeepTheirOrder) {
  // Small collectives reuse one registered buffer per pair, and a rank may
  // run ahead into the next collective while its peer still reads this
  // one: 2000 calls of varying sizes (small and large paths interleaved),
  // every block checked.
  for (int size : {2, 3}) {
    SCOPED_TRACE(std::to_string(size) + " ranks");
    std::vector<std::string> errors = onRanks(size, [&](int r, Collective &w) {
      const size_t n = size_t(size);
      for (int call = 0; call < 2000; ++call) {
        const size_t bytes =
            call % 250 == 0
                ? (size_t(40) << 10)
                : size_t(1) + size_t(call * 37) % (size_t(32) << 10);
        std::vector<uint8_t> send(n * bytes), recv(n * bytes);
        for (size_t q = 0; q < n; ++q)
          for (size_t k = 0; k < bytes; k += 97)
            send[q * bytes + k] = pattern(r, int(q) + call, k);
        if (call % 2)
          w.allToAll(send.data(), bytes, recv.data());
        else
          w.allGather(send.data() + size_t(r) * bytes, bytes, recv.data());
        for (size_t q = 0; q < n; ++q)
          for (size_t k = 0; k < bytes; k += 97)
            ASSERT_EQ(recv[q * bytes + k],
                      call % 2 ? pattern(int(q), r + call, k)
                               : pattern(int(q), int(q) + call, k))
                << "call " << call;
      }
    });
    expectNoErrors(errors);
  }
}

TEST(GlooWorld, AllReduceGivesTheInProcessWorldsBits) {
  // The kernel's reduction (kernels/cpu/collective.cpp) over Gloo: 3 ranks,
  // fp32 means of 100001 values (shards end inside values) and a max of
  // flags, compared bit for bit with the same over the thread world.
  const int size = 3;
  auto values = [](int r) {
    std::vector<float> v(100001);
    for (size_t i = 0; i < v.size(); ++i)
      v[i] = std::sin(float(i) * 0.37f + float(r)) * float(r + 1) * 1e3f;
    return Tensor::fromFloats({int64_t(v.size())}, v);
  };
  auto run = [&](Collective &world, int r) {
    Graph g;
    Node *node = g.createNode("AllReduce", {g.addInput("x", DType::F32, {})}, 1,
                              "all_reduce", kMpcDomain);
    node->setAttr("reduction", Attribute::ofString("mean"));
    Tensor x = values(r), y;
    KernelContext ctx{*node};
    ctx.inputs.push_back(&x);
    ctx.outputs.push_back(&y);
    ctx.collective = &world;
    (*findCpuKernel(kMpcDomain, "AllReduce"))(ctx);
    return y;
  };
  std::vector<Tensor> overGloo(static_cast<size_t>(size)),
      inProcess(static_cast<size_t>(size));
  expectNoErrors(onRanks(
      size, [&](int r, Collective &w) { overGloo[size_t(r)] = run(w, r); }));
  test::ThreadWorld threads(size);
  threads.run([&](int r) { inProcess[size_t(r)] = run(threads.rank(r), r); });
  for (int r = 0; r < size; ++r) {
    ASSERT_EQ(overGloo[size_t(r)].byteSize(), inProcess[0].byteSize());
    EXPECT_EQ(0,
              std::memcmp(overGloo[size_t(r)].bytes.data(),
                          inProcess[0].bytes.data(), inProcess[0].byteSize()))
        << "rank " << r;
  }
}

TEST(GlooWorld, RanksThatDisagreeOnTheWorldAreRefused) {
  // Rank 1 says the world has 3 ranks, rank 0 says 2: both stop, saying so.
  std::vector<std::string> errors = onRanks(
      2, [](int, Collective &) {}, 20,
      [](int r) {
        GlooRendezvous w;
        w.rank = r;
        w.size = r == 0 ? 2 : 3;
        return w;
      });
  EXPECT_EQ(errors[0], "rank 1 says WORLD_SIZE=3, rank 0 says 2");
  EXPECT_EQ(
      errors[1],
      "rank 0 refused the world: rank 1 says WORLD_SIZE=3, rank 0 says 2");
  // Two processes as rank 1.
  errors = onRanks(
      3, [](int, Collective &) {}, 20,
      [](int r) {
        GlooRendezvous w;
        w.rank = r == 0 ? 0 : 1;
        w.size = 3;
        return w;
      });
  EXPECT_EQ(errors[0], "two processes joined as RANK=1");
}

TEST(GlooWorld, AMissingRankIsNamedAfterTheTimeout) {
  // Ranks 0 and 2 of 3 start; rank 1 never does.
  std::vector<std::string> errors = onRanks(
      2, [](int, Collective &) {}, 1,
      [](int r) {
        GlooRendezvous w;
        w.rank = r == 0 ? 0 : 2;
        w.size = 3;
        return w;
      });
  const std::string &e = errors[0];
  EXPECT_EQ(
      e.rfind("timed out after 1 s waiting for rank 1 to join at port ", 0), 0u)
      << e;
  EXPECT_NE(e.find(" (WORLD_SIZE=3)"), std::string::npos) << e;
  // Rank 2, which joined, is told why the world did not meet.
  EXPECT_EQ(errors[1].rfind("rank 0 refused the world: timed out after 1 s "
                            "waiting for rank 1 to join",
                            0),
            0u)
      << errors[1];
  // Nobody listens: rank 1 alone gives up connecting to rank 0. The port
  // is bound here without listening, so connecting is refused and no other
  // process can listen there meanwhile (a port merely free when chosen may
  // be another test's by the time rank 1 knocks).
  const int bound = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(bound, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_ANY);
  socklen_t len = sizeof a;
  ASSERT_EQ(::bind(bound, reinterpret_cast<sockaddr *>(&a), sizeof a), 0);
  ASSERT_EQ(::getsockname(bound, reinterpret_cast<sockaddr *>(&a), &len), 0);
  GlooRendezvous w;
  w.rank = 1;
  w.size = 2;
  w.masterAddr = "127.0.0.1";
  w.masterPort = ntohs(a.sin_port);
  w.timeoutSeconds = 1;
  try {
    joinGlooWorld(w);
    ADD_FAILURE() << "joined";
  } catch (const Error &e) {
    EXPECT_EQ(std::string(e.what()),
              "timed out connecting to rank 0 (MASTER_ADDR=127.0.0.1, "
              "MASTER_PORT=" +
                  std::to_string(w.masterPort) + ") (Connection refused)");
  }
  ::close(bound);
}

TEST(GlooWorld, ARankThatStopsIsAnErrorOnTheOthersNotAHang) {
  // Rank 1 leaves after the rendezvous (its connections close); rank 0's
  // next collective fails naming it.
  // 1 MiB blocks take the event-loop pairs, 1 KiB the synchronous ones.
  for (size_t block : {size_t(1) << 20, size_t(1) << 10}) {
    SCOPED_TRACE(std::to_string(block) + " bytes");
    std::vector<std::string> errors = onRanks(2, [&](int r, Collective &w) {
      if (r == 1)
        return;
      std::vector<uint8_t> all(2 * block);
      w.allGather(all.data(), block, all.data());
    });
    EXPECT_EQ(errors[0].rfind("lost the connection to rank 1 (", 0), 0u)
        << errors[0];
    EXPECT_EQ(errors[1], "");
  }
}

TEST(GlooWorld, SendingToARankThatLeftNamesItAndDoesNotEndTheProcess) {
  // Rank 1 leaves; rank 0 only sends (broadcasts from itself) until a
  // collective fails. A write to a closed connection raises SIGPIPE, which
  // would end this whole test process: it must be an error naming rank 1.
  for (size_t block : {size_t(1) << 20, size_t(1) << 10}) {
    SCOPED_TRACE(std::to_string(block) + " bytes");
    std::vector<std::string> errors = onRanks(2, [&](int r, Collective &w) {
      if (r == 1)
        return;
      std::vector<uint8_t> b(block, 7);
      for (int i = 0; i < 100000; ++i)
        w.broadcast(b.data(), block, 0);
    });
    EXPECT_EQ(errors[0].rfind("lost the connection to rank 1 (", 0), 0u)
        << errors[0];
    EXPECT_EQ(errors[1], "");
  }
}

TEST(GlooWorld, ASilentRankIsNamedAfterTheCollectiveTimeout) {
  // Rank 2 of 3 joins but does not take part (as a stopped process keeps
  // its connections open and answers nothing): ranks 0 and 1 fail their
  // collective after the timeout, each naming rank 2, instead of waiting.
  // 1 MiB blocks take the event-loop pairs, 1 KiB the synchronous ones.
  for (size_t block : {size_t(1) << 20, size_t(1) << 10}) {
    SCOPED_TRACE(std::to_string(block) + " bytes");
    const HeldPort held;
    std::vector<std::string> errors(3);
    std::vector<double> waited(3, 0);
    std::vector<std::thread> threads;
    for (int r = 0; r < 3; ++r)
      threads.emplace_back([&, r] {
        try {
          GlooRendezvous w;
          w.rank = r;
          w.size = 3;
          meetHere(w, held);
          w.collectiveTimeoutSeconds = 0.5;
          std::unique_ptr<Collective> world = joinGlooWorld(w);
          EXPECT_EQ(world->timeoutSeconds(), 0.5);
          if (r == 2) {
            std::this_thread::sleep_for(std::chrono::seconds(3));
            return;
          }
          std::vector<uint8_t> all(3 * block);
          auto start = std::chrono::steady_clock::now();
          try {
            world->allGather(all.data() + size_t(r) * block, block, all.data());
          } catch (const Error &) {
            waited[size_t(r)] = std::chrono::duration<double>(
                                    std::chrono::steady_clock::now() - start)
                                    .count();
            throw;
          }
        } catch (const Error &e) {
          errors[size_t(r)] = e.what();
        }
      });
    for (std::thread &t : threads)
      t.join();
    for (int r = 0; r < 2; ++r) {
      EXPECT_EQ(errors[size_t(r)],
                "rank 2 did not answer in a collective for 0.5 s "
                "(--collective-timeout): stopped, hung or unreachable")
          << "rank " << r;
      EXPECT_GE(waited[size_t(r)], 0.45) << "rank " << r;
      EXPECT_LT(waited[size_t(r)], 2.5) << "rank " << r;
    }
    EXPECT_EQ(errors[2], "");
  }
}

TEST(GlooWorld, ACollectiveTimeoutUnderAMillisecondStillBoundsTheWait) {
  // 0.0001 s rounds to 0 ms, which Gloo reads as "no timeout": a small
  // collective must still fail at once naming the silent rank, not wait
  // until it closes its connections; and joining, which waits for the
  // rendezvous timeout, must not fail on it (the synchronous pairs, whose
  // connect waits for the collective timeout, are left out below 0.5 s).
  const HeldPort held;
  std::vector<std::string> errors(2);
  double waited = 0;
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r)
    threads.emplace_back([&, r] {
      try {
        GlooRendezvous w;
        w.rank = r;
        w.size = 2;
        meetHere(w, held);
        w.collectiveTimeoutSeconds = 0.0001;
        std::unique_ptr<Collective> world = joinGlooWorld(w);
        if (r == 1) {
          std::this_thread::sleep_for(std::chrono::seconds(3));
          return;
        }
        std::vector<uint8_t> all(2 << 10);
        auto start = std::chrono::steady_clock::now();
        try {
          world->allGather(all.data(), 1 << 10, all.data());
        } catch (const Error &) {
          waited = std::chrono::duration<double>(
                       std::chrono::steady_clock::now() - start)
                       .count();
          throw;
        }
      } catch (const Error &e) {
        errors[size_t(r)] = e.what();
      }
    });
  for (std::thread &t : threads)
    t.join();
  EXPECT_EQ(errors[0], "rank 1 did not answer in a collective for 0.0001 s "
                       "(--collective-timeout): stopped, hung or unreachable");
  EXPECT_LT(waited, 1.5);
  EXPECT_EQ(errors[1], "");
}

TEST(GlooWorld, BadRendezvousValuesAreOneLine) {
  GlooRendezvous w;
  w.rank = 2;
  w.size = 2;
  w.masterAddr = "127.0.0.1";
  w.masterPort = 1234;
  EXPECT_THROW(
      {
        try {
          joinGlooWorld(w);
        } catch (const Error &e) {
          EXPECT_STREQ(e.what(), "RANK=2 is not in 0 to 1 (WORLD_SIZE=2)");
          throw;
        }
      },
      Error);
  w.rank = 1;
  w.masterAddr = "no-such-host.invalid";
  w.timeoutSeconds = 1;
  try {
    joinGlooWorld(w);
    ADD_FAILURE() << "joined";
  } catch (const Error &e) {
    EXPECT_EQ(std::string(e.what()).rfind(
                  "MASTER_ADDR 'no-such-host.invalid' is not an IPv4 host", 0),
              0u)
        << e.what();
  }
}

TEST(GlooWorld, RankZeroServesOnTheSocketItIsHandedAndRefusesOneThatIsNot) {
  // A launcher holds the port it chose (HeldPort) and hands rank 0 its
  // socket: rank 1 may knock before rank 0 starts (its connection waits in
  // the backlog) and the world still meets.
  {
    const HeldPort held;
    std::vector<std::string> errors(2);
    std::vector<int32_t> got(2, -1);
    auto rank = [&](int r) {
      try {
        GlooRendezvous w;
        w.rank = r;
        w.size = 2;
        meetHere(w, held);
        auto world = joinGlooWorld(w);
        int32_t v = r == 0 ? 7 : 0;
        world->broadcast(&v, sizeof v, 0);
        got[size_t(r)] = v;
      } catch (const Error &e) {
        errors[size_t(r)] = e.what();
      }
    };
    std::thread rank1(rank, 1);
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    std::thread rank0(rank, 0);
    rank0.join();
    rank1.join();
    expectNoErrors(errors);
    EXPECT_EQ(got, (std::vector<int32_t>{7, 7}));
  }
  // A descriptor that is not a socket listening on MASTER_PORT: one line.
  const HeldPort held, other;
  const int bound = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(bound, 0);
  for (int fd : {other.fd(), bound, 0, 1000000}) {
    GlooRendezvous w;
    w.size = 2;
    w.masterAddr = "127.0.0.1";
    w.masterPort = held.port();
    w.storeFd = fd;
    w.timeoutSeconds = 1;
    try {
      joinGlooWorld(w);
      ADD_FAILURE() << "joined with descriptor " << fd;
    } catch (const Error &e) {
      EXPECT_EQ(std::string(e.what()),
                "descriptor " + std::to_string(fd) +
                    " handed to rank 0's store is not a socket listening on "
                    "port " +
                    std::to_string(held.port()));
    }
  }
  ::close(bound);
}

TEST(GlooWorld, AMasterAddressRankZeroCannotListenOnIsOneLine) {
  // Rank 0 listens for Gloo's pairs on MASTER_ADDR: an address of another
  // host fails it at once, naming the address, instead of a world that
  // cannot connect.
  GlooRendezvous w;
  w.rank = 0;
  w.size = 2;
  w.masterAddr = "10.255.255.1";
  const HeldPort held;
  w.masterPort = held.port();
  w.storeFd = held.fd();
  w.timeoutSeconds = 20;
  auto start = std::chrono::steady_clock::now();
  try {
    joinGlooWorld(w);
    ADD_FAILURE() << "joined";
  } catch (const Error &e) {
    EXPECT_EQ(std::string(e.what()).rfind(
                  "MASTER_ADDR '10.255.255.1' is not an address of this host "
                  "Gloo can listen on (",
                  0),
              0u)
        << e.what();
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos);
  }
  EXPECT_LT(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count(),
      5.0);
}

TEST(GlooWorld, ARankThatLeavesIsNamedByEveryOtherRank) {
  // Rank 2 of 3 leaves after the rendezvous: ranks 0 and 1 both fail their
  // collective at once (not after a timeout), and each names rank 2, even
  // when the other survivor's own failure closes its connections too.
  // 1 MiB blocks take the event-loop pairs, 1 KiB the synchronous ones.
  for (size_t block : {size_t(1) << 20, size_t(1) << 10}) {
    SCOPED_TRACE(std::to_string(block) + " bytes");
    auto start = std::chrono::steady_clock::now();
    std::vector<std::string> errors = onRanks(3, [&](int r, Collective &w) {
      if (r == 2)
        return;
      std::vector<uint8_t> all(3 * block);
      w.allGather(all.data() + size_t(r) * block, block, all.data());
    });
    double took =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
    for (int r = 0; r < 2; ++r) {
      const std::string &e = errors[size_t(r)];
      EXPECT_EQ(e.rfind("lost the connection to rank", 0), 0u) << e;
      const std::string who = e.substr(0, e.find(" ("));
      EXPECT_NE(who.find('2'), std::string::npos) << e;
    }
    EXPECT_EQ(errors[2], "");
    EXPECT_LT(took, 10.0);
  }
}

TEST(GlooWorld, TheStoreDropsWhatIsNotARank) {
  // While rank 0 waits for rank 1, something else connects to its port:
  // junk, then a request that claims a 2 GiB key. The store drops both
  // (allocating nothing) and the world still meets when rank 1 comes.
  const HeldPort held;
  const int port = held.port();
  std::vector<std::string> errors(2);
  std::vector<int32_t> got(2, -1);
  std::thread rank0([&] {
    try {
      GlooRendezvous w;
      w.size = 2;
      meetHere(w, held);
      auto world = joinGlooWorld(w);
      int32_t v = 40;
      world->broadcast(&v, sizeof v, 0);
      got[0] = v;
    } catch (const Error &e) {
      errors[0] = e.what();
    }
  });
  auto junk = [&](const std::vector<uint8_t> &bytes) {
    for (int tries = 0; tries < 200; ++tries) {
      int s = ::socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      a.sin_port = htons(uint16_t(port));
      if (::connect(s, reinterpret_cast<sockaddr *>(&a), sizeof a) == 0) {
        EXPECT_EQ(::send(s, bytes.data(), bytes.size(), MSG_NOSIGNAL),
                  ssize_t(bytes.size()));
        char c;
        // The store closes the connection (a reset, with bytes unread)
        // rather than answer.
        EXPECT_LE(::recv(s, &c, 1, 0), 0);
        ::close(s);
        return;
      }
      ::close(s);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ADD_FAILURE() << "nothing listens on port " << port;
  };
  junk({'G', 'E', 'T', ' ', '/', ' ', 'H', 'T', 'T', 'P'});
  junk({'S', 0x80, 0, 0, 0, 'k'});
  std::thread rank1([&] {
    try {
      GlooRendezvous w;
      w.rank = 1;
      w.size = 2;
      meetHere(w, held);
      auto world = joinGlooWorld(w);
      int32_t v = 0;
      world->broadcast(&v, sizeof v, 0);
      got[1] = v;
    } catch (const Error &e) {
      errors[1] = e.what();
    }
  });
  rank0.join();
  rank1.join();
  expectNoErrors(errors);
  EXPECT_EQ(got[0], 40);
  EXPECT_EQ(got[1], 40);
}
