// The Gloo world (gloo_world.h): the rendezvous through rank 0's store, the
// pairs through Gloo's connectFullMesh, the collectives as Gloo pair sends
// and receives.
//
// Rendezvous, in the store: rank r > 0 adds "rank/r" (its WORLD_SIZE),
// which fails when another process took that rank first; rank 0 waits for
// every "rank/r", checks the sizes and adds "verdict": "ok", or the reason
// the world does not meet, which every rank then reports. Only after an
// "ok" do the ranks publish their Gloo addresses ("mesh/r", then "fast/r")
// and connect, so a world that does not meet never half-connects.
//
// Two meshes connect every pair of ranks. Large messages take the first,
// whose pairs Gloo's event-loop thread serves: each call takes the next
// Gloo slot (the ranks call the same collectives in the same order), posts
// every send and receive at once (the loop moves them concurrently, so
// large blocks both ways cannot deadlock), then waits for each, one buffer
// per peer so that an error or a silence is the peer's; a wait is bounded
// by the collective timeout counted from the last completion, so a slow
// but moving collective never fails and a silent rank fails it, named.
// Small messages (up to 32 KiB a peer; resnet18's sync batch norm sends 120
// a step) take the second, synchronous pairs: no ready-to-receive round
// trip and no event-loop wake-up, which cost 0.1 to 10 ms a message on a
// loaded machine against 10 to 20 us (bench/gloo_world.sh --latency); their
// sockets' timeouts are the collective timeout.
#include "runtime/world/gloo_world.h"

#include "runtime/world/tcp_store.h"
#include "support/diagnostics.h"

#include <gloo/rendezvous/context.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/transport/unbound_buffer.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include <pthread.h>
#include <signal.h>

namespace mpc {
namespace {

using Clock = std::chrono::steady_clock;

/// "2 s", "0.5 s": a timeout as the user gave it.
std::string secondsText(double seconds) {
  char text[32];
  std::snprintf(text, sizeof text, "%g s", seconds);
  return text;
}

std::chrono::milliseconds toMs(double seconds) {
  return std::chrono::milliseconds(int64_t(std::min(seconds, 1e9) * 1e3 + 0.5));
}

/// A timeout as Gloo takes it: at least 1 ms (0 is Gloo's "no timeout").
std::chrono::milliseconds glooMs(double seconds) {
  return std::max(toMs(seconds), std::chrono::milliseconds(1));
}

std::string rankList(const std::vector<int> &ranks) {
  std::string list = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i)
    list += (i ? ", " : "") + std::to_string(ranks[i]);
  return list;
}

/// Gloo's message without the "[file.cc:123] " it starts with.
std::string glooReason(const std::exception &e) {
  std::string m = e.what();
  if (!m.empty() && m[0] == '[') {
    size_t end = m.find("] ");
    if (end != std::string::npos)
      m = m.substr(end + 2);
  }
  while (!m.empty() && (m.back() == '\n' || m.back() == ' '))
    m.pop_back();
  return m;
}

std::vector<char> bytesOf(const std::string &s) {
  return std::vector<char>(s.begin(), s.end());
}

/// Gloo's view of the store: a mesh's keys (Gloo names them by rank)
/// under `prefix`, and a wait that names the ranks that did not publish.
class MeshStore final : public gloo::rendezvous::Store {
public:
  MeshStore(TcpStore &store, std::string prefix,
            std::chrono::milliseconds timeout)
      : store_(store), prefix_(std::move(prefix)), timeout_(timeout) {}
  void set(const std::string &key, const std::vector<char> &data) override {
    store_.set(prefix_ + key, data);
  }
  /// Gloo's stores block in get() until the key is set. Every wait is
  /// bounded by the rendezvous' time left, not by the timeout Gloo passes
  /// (the synchronous pairs' context carries the collective timeout).
  std::vector<char> get(const std::string &key) override {
    wait({key}, timeout_);
    return store_.get(prefix_ + key);
  }
  void wait(const std::vector<std::string> &keys) override {
    wait(keys, timeout_);
  }
  void wait(const std::vector<std::string> &keys,
            const std::chrono::milliseconds &timeout) override {
    std::vector<std::string> full;
    for (const std::string &k : keys)
      full.push_back(prefix_ + k);
    std::vector<std::string> missing = store_.waitFor(full, timeout_);
    if (missing.empty())
      return;
    // Gloo's keys end in the rank that publishes them ("rank_2", "2").
    std::vector<int> ranks;
    for (const std::string &k : missing) {
      size_t digits = k.find_last_not_of("0123456789") + 1;
      ranks.push_back(std::atoi(k.c_str() + digits));
    }
    throw Error("timed out waiting for " + rankList(ranks) + " to connect");
  }

private:
  TcpStore &store_;
  std::string prefix_;
  std::chrono::milliseconds timeout_;
};

/// While alive, a write to a connection the peer has closed is an error
/// (EPIPE) on this thread, not a SIGPIPE that ends the process: a
/// collective writes from the calling thread (the synchronous pairs'
/// messages, the event-loop pairs' notices), and a rank that died must be
/// named, not followed. A SIGPIPE raised meanwhile is consumed. A thread
/// started meanwhile (Gloo's event loop) keeps SIGPIPE blocked for good.
class SigpipeBlocked {
public:
  SigpipeBlocked() {
    sigemptyset(&pipe_);
    sigaddset(&pipe_, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_, &old_);
    sigset_t pending;
    sigpending(&pending);
    wasPending_ = sigismember(&pending, SIGPIPE) == 1;
  }
  ~SigpipeBlocked() {
    sigset_t pending;
    sigpending(&pending);
    if (!wasPending_ && sigismember(&pending, SIGPIPE) == 1) {
      const timespec now{0, 0};
      sigtimedwait(&pipe_, nullptr, &now);
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  SigpipeBlocked(const SigpipeBlocked &) = delete;
  SigpipeBlocked &operator=(const SigpipeBlocked &) = delete;

private:
  sigset_t pipe_, old_;
  bool wasPending_ = false;
};

/// Below this collective timeout every collective takes the event-loop
/// pairs: the synchronous pairs' connect waits for at most the collective
/// timeout too, too short a wait for a loaded machine.
constexpr double kSyncPairsMinTimeoutSeconds = 0.5;

class GlooWorld final : public Collective {
public:
  /// Messages up to this many bytes per peer take the synchronous pairs.
  /// Every rank sends all its messages of a collective, then reads its
  /// peers'. Small enough that one whole message always fits the sockets'
  /// buffers (128 KiB receive buffers by default): a send then blocks only
  /// while the peer has not read this rank's previous message, and that
  /// peer waits only on ranks at an earlier collective, so no cycle of
  /// blocked sends can form.
  static constexpr size_t kSmallBytes = size_t(32) << 10;

  GlooWorld(std::unique_ptr<TcpStoreServer> server,
            std::unique_ptr<TcpStore> store,
            std::shared_ptr<gloo::rendezvous::Context> context,
            double timeoutSeconds)
      : server_(std::move(server)), store_(std::move(store)),
        context_(std::move(context)), timeoutSeconds_(timeoutSeconds) {}

  /// Small collectives from now on take `fast`'s pairs (connected, every
  /// rank calling this at the same point), made synchronous here.
  void useSyncPairs(std::shared_ptr<gloo::rendezvous::Context> fast) {
    fast_ = std::move(fast);
    // Every pair's buffers are made once and registered for good: a peer
    // may send before this rank waits, into a buffer that is already
    // there, and no call pays for registering one.
    peers_.resize(size_t(size()));
    for (int q : peers()) {
      Peer &p = peers_[size_t(q)];
      p.sendMem.resize(kSmallBytes);
      p.recvMem.resize(kSmallBytes);
      auto &pair = fast_->getPair(q);
      pair->setSync(true, false);
      p.send = pair->createSendBuffer(kFastSlot, p.sendMem.data(), kSmallBytes);
      p.recv = pair->createRecvBuffer(kFastSlot, p.recvMem.data(), kSmallBytes);
    }
  }

  int rank() const override { return context_->rank; }
  int size() const override { return context_->size; }
  double timeoutSeconds() const override { return timeoutSeconds_; }

  void allGather(const void *send, size_t bytes, void *recv) override {
    auto *out = static_cast<char *>(recv);
    char *own = out + size_t(rank()) * bytes;
    if (send != own && bytes)
      std::memmove(own, send, bytes);
    Transfers t;
    for (int q : peers()) {
      t.recvs.push_back({q, out + size_t(q) * bytes});
      t.sends.push_back({q, own});
    }
    exchange(bytes, t);
  }

  void allToAll(const void *send, size_t bytes, void *recv) override {
    const auto *in = static_cast<const char *>(send);
    auto *out = static_cast<char *>(recv);
    // In place on the event-loop pairs, block q is sent while rank q's
    // block would land there: the peers' blocks land in staging and are
    // copied in once every send is done (the own block stays; the
    // synchronous path copies every block it sends already).
    if (in == out && bytes && !isSmall(bytes)) {
      if (staging_.size() < size_t(size()) * bytes)
        staging_.resize(size_t(size()) * bytes);
      Transfers t;
      for (int q : peers()) {
        t.recvs.push_back({q, staging_.data() + size_t(q) * bytes});
        t.sends.push_back({q, out + size_t(q) * bytes});
      }
      exchange(bytes, t);
      for (int q : peers())
        std::memcpy(out + size_t(q) * bytes,
                    staging_.data() + size_t(q) * bytes, bytes);
      return;
    }
    Transfers t;
    for (int q : peers()) {
      t.recvs.push_back({q, out + size_t(q) * bytes});
      t.sends.push_back({q, const_cast<char *>(in) + size_t(q) * bytes});
    }
    if (bytes && in != out)
      std::memmove(out + size_t(rank()) * bytes, in + size_t(rank()) * bytes,
                   bytes);
    exchange(bytes, t);
  }

  void broadcast(void *buf, size_t bytes, int root) override {
    Transfers t;
    if (rank() == root) {
      for (int q : peers())
        t.sends.push_back({q, static_cast<char *>(buf)});
    } else {
      t.recvs.push_back({root, static_cast<char *>(buf)});
    }
    exchange(bytes, t);
  }

  /// Every rank's rank number over the event-loop pairs, waiting up to
  /// `patience` for a peer (the rendezvous' time left): returns once every
  /// peer has connected both meshes at its end.
  void confirmConnected(std::chrono::milliseconds patience) {
    std::vector<int32_t> ranks(static_cast<size_t>(size()));
    ranks[size_t(rank())] = rank();
    const size_t bytes = sizeof(int32_t);
    auto *out = reinterpret_cast<char *>(ranks.data());
    Transfers t;
    for (int q : peers()) {
      t.recvs.push_back({q, out + size_t(q) * bytes});
      t.sends.push_back({q, out + size_t(rank()) * bytes});
    }
    joining_ = true;
    SigpipeBlocked quiet;
    exchangeLarge(bytes, nextSlot_++, t, patience);
    joining_ = false;
  }

  [[noreturn]] void abort(int code) override {
    std::fflush(stdout);
    std::fflush(stderr);
    // The process's end closes its connections: that is what tells the
    // other ranks, each of which then fails naming this rank.
    std::_Exit(code);
  }

private:
  /// The synchronous pairs' slot (one buffer each way per pair).
  static constexpr int kFastSlot = 0;
  /// The slot of the receives that probe which peers are gone after a
  /// failure (the collectives' slots count up from 0 and never get there).
  static constexpr uint64_t kProbeSlot = uint64_t(1) << 62;

  /// A synchronous pair's buffers, registered once.
  struct Peer {
    std::vector<char> sendMem, recvMem;
    std::unique_ptr<gloo::transport::Buffer> send, recv;
  };

  struct Transfer {
    int peer;
    char *at;
  };
  /// One collective's moves: `bytes` from each send's `at` to its peer,
  /// `bytes` from each receive's peer into its `at`.
  struct Transfers {
    std::vector<Transfer> sends, recvs;
  };

  bool isSmall(size_t bytes) const { return fast_ && bytes <= kSmallBytes; }

  void exchange(size_t bytes, Transfers &t) {
    // Every rank takes a slot per collective, even an empty or a small
    // one, so that the ranks' slots stay in step.
    const uint64_t slot = nextSlot_++;
    if (!bytes)
      return;
    SigpipeBlocked quiet;
    if (isSmall(bytes))
      exchangeSmall(bytes, t);
    else
      exchangeLarge(bytes, slot, t, toMs(timeoutSeconds_));
  }

  /// A small collective on the synchronous pairs: the calling thread
  /// writes each message to its peer's registered buffer (no ready-to-
  /// receive round trip) and reads its peers' messages off their sockets
  /// itself (no event-loop thread to wake). A read waits for at most the
  /// collective timeout (the sockets' receive timeout).
  void exchangeSmall(size_t bytes, const Transfers &t) {
    for (const Transfer &s : t.sends) {
      Peer &p = peers_[size_t(s.peer)];
      std::memcpy(p.sendMem.data(), s.at, bytes);
      try {
        p.send->send(0, bytes, 0);
        p.send->waitSend();
      } catch (const std::exception &e) {
        failedSmall(s.peer, e);
      }
    }
    for (const Transfer &r : t.recvs) {
      Peer &p = peers_[size_t(r.peer)];
      try {
        p.recv->waitRecv();
      } catch (const std::exception &e) {
        failedSmall(r.peer, e);
      }
      std::memcpy(r.at, p.recvMem.data(), bytes);
    }
  }

  /// Why a synchronous pair failed, as exchangeLarge says it: a timeout
  /// names the silent peer; a closed connection names it and every other
  /// peer whose connections closed too (probed on the event-loop pairs,
  /// which see a closed connection without being read).
  [[noreturn]] void failedSmall(int peer, const std::exception &e) {
    const std::string why = glooReason(e);
    if (why.find("Read timeout") != std::string::npos ||
        why.find("Write timeout") != std::string::npos)
      silent(peer);
    std::vector<Op> probes;
    std::vector<char> landing(static_cast<size_t>(size()));
    for (int q : peers())
      if (q != peer) {
        Op op{q, false, context_->createUnboundBuffer(&landing[size_t(q)], 1)};
        try {
          op.buf->recv(q, kProbeSlot, 0, 1);
        } catch (const std::exception &) {
        }
        probes.push_back(std::move(op));
      }
    lostWith(peer, probes, 0, why);
  }

  /// One transfer of a large collective, with its own Gloo buffer.
  struct Op {
    int peer;
    bool isSend;
    std::unique_ptr<gloo::transport::UnboundBuffer> buf;
  };

  /// A large collective on the event-loop pairs: every send and receive
  /// posted at once (Gloo's event loop moves them concurrently, so large
  /// blocks both ways cannot deadlock), then each waited for.
  void exchangeLarge(size_t bytes, uint64_t slot, const Transfers &t,
                     std::chrono::milliseconds patience) {
    std::vector<Op> ops;
    auto post = [&](int q, bool isSend, char *at) {
      Op op{q, isSend, context_->createUnboundBuffer(at, bytes)};
      try {
        if (isSend)
          op.buf->send(q, slot, 0, bytes);
        else
          op.buf->recv(q, slot, 0, bytes);
      } catch (const std::exception &e) {
        lost({q}, glooReason(e));
      }
      ops.push_back(std::move(op));
    };
    // Receives first: a peer's data arriving is what tells it is alive.
    for (const Transfer &r : t.recvs)
      post(r.peer, false, r.at);
    for (const Transfer &s : t.sends)
      post(s.peer, true, s.at);
    finish(ops, patience);
  }

  /// The other ranks, from the next one up: each rank waits on a different
  /// peer first.
  std::vector<int> peers() const {
    std::vector<int> ps;
    for (int k = 1; k < size(); ++k)
      ps.push_back((rank() + k) % size());
    return ps;
  }

  [[noreturn]] void lost(const std::vector<int> &peers,
                         const std::string &why) const {
    throw Error("lost the connection to " + rankList(peers) + " (" + why +
                "; it stopped: see its own error)");
  }

  [[noreturn]] void silent(int peer) const {
    if (joining_)
      throw Error(rankList({peer}) +
                  " did not answer while the ranks connected, within the "
                  "rendezvous timeout: stopped, hung or unreachable");
    throw Error(rankList({peer}) + " did not answer in a collective for " +
                secondsText(timeoutSeconds_) +
                " (--collective-timeout): stopped, hung or unreachable");
  }

  /// Whether `op`'s peer has closed its connection (without waiting):
  /// abortWait makes the wait return at once unless the buffer holds the
  /// pair's error, which it then throws.
  static bool failed(Op &op) {
    try {
      if (op.isSend) {
        op.buf->abortWaitSend();
        op.buf->waitSend(std::chrono::milliseconds(1));
      } else {
        op.buf->abortWaitRecv();
        op.buf->waitRecv(std::chrono::milliseconds(1));
      }
    } catch (const std::exception &) {
      return true;
    }
    return false;
  }

  /// `peer`'s connection closed: names it and each peer of ops[from..]
  /// whose connection is closed too, so that a rank that failed because
  /// another one died is not the only one named (a rank that exited
  /// closes its connections to every rank at once).
  [[noreturn]] void lostWith(int peer, std::vector<Op> &ops, size_t from,
                             const std::string &why) const {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    std::vector<int> gone = {peer};
    for (size_t j = from; j < ops.size(); ++j)
      if (std::find(gone.begin(), gone.end(), ops[j].peer) == gone.end() &&
          failed(ops[j]))
        gone.push_back(ops[j].peer);
    std::sort(gone.begin(), gone.end());
    lost(gone, why);
  }

  /// Waits for every transfer, in the order posted. The wait for a peer is
  /// bounded by `patience` counted from the last completion.
  void finish(std::vector<Op> &ops, std::chrono::milliseconds patience) {
    auto lastProgress = Clock::now();
    for (size_t i = 0; i < ops.size(); ++i) {
      Op &op = ops[i];
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          lastProgress + patience - Clock::now());
      if (left.count() < 1)
        left = std::chrono::milliseconds(1);
      try {
        if (op.isSend)
          op.buf->waitSend(left);
        else
          op.buf->waitRecv(left);
      } catch (const std::exception &e) {
        const std::string why = glooReason(e);
        if (why.find("Timed out waiting") != std::string::npos)
          silent(op.peer);
        lostWith(op.peer, ops, i + 1, why);
      }
      lastProgress = Clock::now();
    }
  }

  // Declared first, destroyed last: rank 0's store outlives the pairs.
  std::unique_ptr<TcpStoreServer> server_;
  std::unique_ptr<TcpStore> store_;
  /// The event-loop pairs (large collectives) and the synchronous pairs
  /// (small ones): two connections per pair of ranks.
  std::shared_ptr<gloo::rendezvous::Context> context_, fast_;
  double timeoutSeconds_;
  /// Indexed by rank (this rank's entry unused); destroyed before fast_'s
  /// pairs, which its buffers point into.
  std::vector<Peer> peers_;
  std::vector<char> staging_;
  /// Whether the exchange is joinGlooWorld's (its silences are the
  /// rendezvous', not a collective's).
  bool joining_ = false;
  /// Gloo's tag of the next collective (64 bits: Context::nextSlot's int
  /// would wrap in a long run).
  uint64_t nextSlot_ = 0;
};

/// Rank 0: every rank joined with rank 0's world size, else why not (or
/// "" when another process has already posted a verdict: two processes
/// joined as one rank).
std::string rootVerdict(TcpStore &store, const GlooRendezvous &w,
                        std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  std::vector<int> missing;
  for (int r = 1; r < w.size; ++r)
    missing.push_back(r);
  std::vector<char> v;
  for (;;) {
    std::vector<int> still;
    for (int r : missing) {
      if (!store.tryGet("rank/" + std::to_string(r), v)) {
        still.push_back(r);
        continue;
      }
      const std::string said(v.begin(), v.end());
      if (said != std::to_string(w.size))
        return "rank " + std::to_string(r) +
               " says WORLD_SIZE=" + said.substr(0, 32) + ", rank 0 says " +
               std::to_string(w.size);
    }
    missing = std::move(still);
    if (missing.empty())
      return "ok";
    if (store.tryGet("verdict", v))
      return "";
    if (Clock::now() >= deadline)
      return "timed out after " + secondsText(w.timeoutSeconds) +
             " waiting for " + rankList(missing) + " to join at port " +
             std::to_string(w.masterPort) +
             " (WORLD_SIZE=" + std::to_string(w.size) + ")";
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

/// Every rank: the store's verdict on the world ("ok"), or an Error.
void meet(TcpStore &store, const GlooRendezvous &w,
          std::chrono::milliseconds timeout) {
  if (w.rank == 0) {
    const std::string verdict = rootVerdict(store, w, timeout);
    // A second process as some rank may have posted its verdict first.
    if (!verdict.empty() && store.add("verdict", bytesOf(verdict)) &&
        verdict == "ok")
      return;
    std::vector<char> v = store.get("verdict");
    // The store dies with this process: give the ranks that joined a few
    // seconds to read why before it goes.
    std::vector<std::string> readers;
    std::vector<char> ignored;
    for (int r = 1; r < w.size; ++r)
      if (store.tryGet("rank/" + std::to_string(r), ignored))
        readers.push_back("read/" + std::to_string(r));
    store.waitFor(readers, std::chrono::seconds(3));
    throw Error(std::string(v.begin(), v.end()));
  }
  if (!store.add("rank/" + std::to_string(w.rank),
                 bytesOf(std::to_string(w.size)))) {
    const std::string why =
        "two processes joined as RANK=" + std::to_string(w.rank);
    store.add("verdict", bytesOf(why));
    throw Error(why);
  }
  // Rank 0 answers once every rank has joined, or says why not: it is
  // given a few seconds more than its own deadline to say so.
  const auto answerBy = timeout + std::chrono::seconds(5);
  if (!store.waitFor({"verdict"}, answerBy).empty())
    throw Error("rank 0 (MASTER_ADDR=" + w.masterAddr +
                ", MASTER_PORT=" + std::to_string(w.masterPort) +
                ") did not say whether the world met in " +
                secondsText(w.timeoutSeconds + 5));
  std::vector<char> v = store.get("verdict");
  const std::string verdict(v.begin(), v.end());
  if (verdict != "ok") {
    store.set("read/" + std::to_string(w.rank), {});
    throw Error("rank 0 refused the world: " + verdict);
  }
}

} // namespace

std::unique_ptr<Collective> joinGlooWorld(const GlooRendezvous &w) {
  if (w.size < 1 || w.rank < 0 || w.rank >= w.size)
    throw Error("RANK=" + std::to_string(w.rank) + " is not in 0 to " +
                std::to_string(w.size - 1) +
                " (WORLD_SIZE=" + std::to_string(w.size) + ")");
  if (w.masterPort < 1 || w.masterPort > 65535)
    throw Error("MASTER_PORT=" + std::to_string(w.masterPort) +
                " is not a port (1 to 65535)");
  if (!(w.timeoutSeconds > 0) || !(w.collectiveTimeoutSeconds > 0))
    throw Error("the rendezvous and collective timeouts must be positive");
  const auto start = Clock::now();
  const auto timeout = toMs(w.timeoutSeconds);
  auto left = [&] {
    auto l = std::chrono::duration_cast<std::chrono::milliseconds>(
        start + timeout - Clock::now());
    return std::max(l, std::chrono::milliseconds(1));
  };
  std::unique_ptr<TcpStoreServer> server;
  if (w.rank == 0 && w.size > 1)
    server = std::make_unique<TcpStoreServer>(w.masterPort, w.storeFd);
  auto context = std::make_shared<gloo::rendezvous::Context>(w.rank, w.size);
  std::unique_ptr<TcpStore> store;
  std::shared_ptr<gloo::transport::Device> device;
  if (w.size > 1) {
    const std::string root = "rank 0 (MASTER_ADDR=" + w.masterAddr +
                             ", MASTER_PORT=" + std::to_string(w.masterPort) +
                             ")";
    store = std::make_unique<TcpStore>(w.rank == 0 ? "127.0.0.1" : w.masterAddr,
                                       w.masterPort, timeout, root);
    // Gloo listens on the interface that reaches rank 0: the one the other
    // ranks can reach this rank on too. Made before the ranks meet, so that
    // an address Gloo cannot use fails this rank alone, at once.
    gloo::transport::tcp::attr attr;
    attr.hostname = w.rank == 0 && w.masterAddr != "localhost"
                        ? w.masterAddr
                        : store->localAddress();
    attr.ai_family = AF_INET;
    try {
      // Its event-loop thread, which writes too, starts here.
      SigpipeBlocked quiet;
      device = gloo::transport::tcp::CreateDevice(attr);
    } catch (const std::exception &e) {
      throw Error("MASTER_ADDR '" + attr.hostname +
                  "' is not an address of this host Gloo can listen on (" +
                  glooReason(e) + ")");
    }
    meet(*store, w, left());
    try {
      context->setTimeout(left());
      MeshStore mesh(*store, "mesh/", left());
      context->connectFullMesh(mesh, device);
    } catch (const Error &) {
      throw;
    } catch (const std::exception &e) {
      throw Error("connecting the ranks: " + glooReason(e));
    }
  }
  TcpStore *meeting = store.get();
  auto world = std::make_unique<GlooWorld>(std::move(server), std::move(store),
                                           context, w.collectiveTimeoutSeconds);
  if (w.size > 1) {
    context->setTimeout(left());
    if (w.collectiveTimeoutSeconds >= kSyncPairsMinTimeoutSeconds) {
      // The synchronous pairs, a second mesh: its sockets wait for at most
      // the collective timeout (their receive and send timeouts are the
      // context's), connecting included, so the ranks start it together.
      world->confirmConnected(left());
      try {
        auto fast = std::make_shared<gloo::rendezvous::Context>(w.rank, w.size);
        fast->setTimeout(glooMs(w.collectiveTimeoutSeconds));
        MeshStore fastMesh(*meeting, "fast/", left());
        fast->connectFullMesh(fastMesh, device);
        world->useSyncPairs(std::move(fast));
      } catch (const Error &) {
        throw;
      } catch (const std::exception &e) {
        throw Error("connecting the ranks: " + glooReason(e));
      }
    }
    // Gloo's connectFullMesh returns when this rank's pairs are connected
    // at its end: one exchange over every pair makes sure they are at both
    // ends before any rank goes on (and may end, closing them). The
    // exchange is on the event-loop pairs, after this rank connected both
    // meshes; a peer answers after connecting both too.
    world->confirmConnected(left());
    context->setTimeout(glooMs(w.collectiveTimeoutSeconds));
  }
  return world;
}

} // namespace mpc

// LeakSanitizer's suppressions for the processes that join a Gloo world
// (make test-asan): Debian's Gloo (0.0~git20220518) loses the getaddrinfo
// list gloo::transport::tcp::CreateDeviceAttr resolves the device's address
// with, 64 bytes once per device: Gloo's leak, not mpc's, which would fail
// every sanitized run that joins a world. Here, beside joinGlooWorld, so
// every binary that can join one links it; only sanitized builds define it.
#if defined(__SANITIZE_ADDRESS__)
#define MPC_LSAN_HOOK 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MPC_LSAN_HOOK 1
#endif
#endif

#ifdef MPC_LSAN_HOOK
extern "C" const char *__lsan_default_suppressions() {
  return "leak:gloo::transport::tcp::CreateDeviceAttr\n";
}
#endif
