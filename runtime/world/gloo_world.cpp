// The Gloo world (gloo_world.h): the rendezvous through rank 0's store, the
// pairs through Gloo's connectFullMesh, the collectives as Gloo pair sends
// and receives.
//
// Rendezvous, in the store: rank r > 0 adds "rank/r" (its WORLD_SIZE),
// which fails when another process took that rank first; rank 0 waits for
// every "rank/r", checks the sizes and adds "verdict": "ok", or the reason
// the world does not meet, which every rank then reports. Only after an
// "ok" do the ranks publish their Gloo addresses ("mesh/r") and connect, so
// a world that does not meet never half-connects.
//
// Collectives: each call takes the next Gloo slot (the ranks call the same
// collectives in the same order), posts every send and receive at once
// (Gloo's event loop moves them concurrently, so large blocks both ways
// cannot deadlock), then waits for each, one buffer per peer so that an
// error or a silence is the peer's. The wait for a peer is bounded by the
// collective timeout counted from the last completion, so a slow but moving
// collective never fails and a silent rank fails it, named.
#include "runtime/world/gloo_world.h"

#include "runtime/world/tcp_store.h"
#include "support/diagnostics.h"

#include <gloo/rendezvous/context.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/transport/unbound_buffer.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

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

/// Gloo's view of the store: the mesh's keys (Gloo names them by rank)
/// under "mesh/", and a wait that names the ranks that did not publish.
class MeshStore final : public gloo::rendezvous::Store {
public:
  MeshStore(TcpStore &store, std::chrono::milliseconds timeout)
      : store_(store), timeout_(timeout) {}
  void set(const std::string &key, const std::vector<char> &data) override {
    store_.set("mesh/" + key, data);
  }
  /// Gloo's stores block in get() until the key is set.
  std::vector<char> get(const std::string &key) override {
    wait({key}, timeout_);
    return store_.get("mesh/" + key);
  }
  void wait(const std::vector<std::string> &keys) override {
    wait(keys, timeout_);
  }
  void wait(const std::vector<std::string> &keys,
            const std::chrono::milliseconds &timeout) override {
    std::vector<std::string> full;
    for (const std::string &k : keys)
      full.push_back("mesh/" + k);
    std::vector<std::string> missing =
        store_.waitFor(full, std::min(timeout, timeout_));
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
  std::chrono::milliseconds timeout_;
};

class GlooWorld final : public Collective {
public:
  GlooWorld(std::unique_ptr<TcpStoreServer> server,
            std::unique_ptr<TcpStore> store,
            std::shared_ptr<gloo::rendezvous::Context> context,
            double timeoutSeconds)
      : server_(std::move(server)), store_(std::move(store)),
        context_(std::move(context)), timeoutSeconds_(timeoutSeconds) {}

  int rank() const override { return context_->rank; }
  int size() const override { return context_->size; }
  double timeoutSeconds() const override { return timeoutSeconds_; }

  void allGather(const void *send, size_t bytes, void *recv) override {
    auto *out = static_cast<char *>(recv);
    char *own = out + size_t(rank()) * bytes;
    if (send != own && bytes)
      std::memmove(own, send, bytes);
    Exchange x = begin(bytes);
    for (int q : peers()) {
      x.recvFrom(q, out + size_t(q) * bytes);
      x.sendTo(q, own);
    }
    finish(x);
  }

  void allToAll(const void *send, size_t bytes, void *recv) override {
    const auto *in = static_cast<const char *>(send);
    auto *out = static_cast<char *>(recv);
    // In place, block q is sent while rank q's block lands there: send a
    // copy.
    if (in == out && bytes) {
      staging_.assign(in, in + size_t(size()) * bytes);
      in = staging_.data();
    }
    if (bytes)
      std::memmove(out + size_t(rank()) * bytes, in + size_t(rank()) * bytes,
                   bytes);
    Exchange x = begin(bytes);
    for (int q : peers()) {
      x.recvFrom(q, out + size_t(q) * bytes);
      x.sendTo(q, const_cast<char *>(in) + size_t(q) * bytes);
    }
    finish(x);
  }

  void broadcast(void *buf, size_t bytes, int root) override {
    Exchange x = begin(bytes);
    if (rank() == root) {
      for (int q : peers())
        x.sendTo(q, static_cast<char *>(buf));
    } else {
      x.recvFrom(root, static_cast<char *>(buf));
    }
    finish(x);
  }

  [[noreturn]] void abort(int code) override {
    std::fflush(stdout);
    std::fflush(stderr);
    // The process's end closes its connections: that is what tells the
    // other ranks, each of which then fails naming this rank.
    std::_Exit(code);
  }

private:
  /// One transfer of a collective, with its own Gloo buffer.
  struct Op {
    int peer;
    bool isSend;
    std::unique_ptr<gloo::transport::UnboundBuffer> buf;
  };

  /// The transfers of one collective, posted as they are added.
  struct Exchange {
    GlooWorld *world;
    size_t bytes;
    uint64_t slot;
    std::vector<Op> ops;
    void recvFrom(int q, char *at) { post(q, false, at); }
    void sendTo(int q, char *from) { post(q, true, from); }
    void post(int q, bool isSend, char *at) {
      if (!bytes)
        return;
      Op op{q, isSend, world->context_->createUnboundBuffer(at, bytes)};
      try {
        if (isSend)
          op.buf->send(q, slot, 0, bytes);
        else
          op.buf->recv(q, slot, 0, bytes);
      } catch (const std::exception &e) {
        world->lost({q}, glooReason(e));
      }
      ops.push_back(std::move(op));
    }
  };

  Exchange begin(size_t bytes) {
    Exchange x{this, bytes, 0, {}};
    // Every rank takes a slot per collective, even an empty one, so that
    // the ranks' slots stay in step.
    x.slot = nextSlot_++;
    return x;
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

  /// Waits for every transfer; receives first (a peer's data arriving is
  /// what tells it is alive), then sends.
  void finish(Exchange &x) {
    std::stable_partition(x.ops.begin(), x.ops.end(),
                          [](const Op &op) { return !op.isSend; });
    const auto patience = toMs(timeoutSeconds_);
    auto lastProgress = Clock::now();
    for (size_t i = 0; i < x.ops.size(); ++i) {
      Op &op = x.ops[i];
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
        // A rank that exited closes its connections to every rank at
        // once: name each pending peer whose connection is closed too, so
        // that a rank that failed because another one died is not the
        // only one named.
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        std::vector<int> gone = {op.peer};
        for (size_t j = i + 1; j < x.ops.size(); ++j)
          if (std::find(gone.begin(), gone.end(), x.ops[j].peer) ==
                  gone.end() &&
              failed(x.ops[j]))
            gone.push_back(x.ops[j].peer);
        std::sort(gone.begin(), gone.end());
        lost(gone, why);
      }
      lastProgress = Clock::now();
    }
  }

  // Declared first, destroyed last: rank 0's store outlives the pairs.
  std::unique_ptr<TcpStoreServer> server_;
  std::unique_ptr<TcpStore> store_;
  std::shared_ptr<gloo::rendezvous::Context> context_;
  double timeoutSeconds_;
  std::vector<char> staging_;
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
    server = std::make_unique<TcpStoreServer>(w.masterPort);
  auto context = std::make_shared<gloo::rendezvous::Context>(w.rank, w.size);
  std::unique_ptr<TcpStore> store;
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
    std::shared_ptr<gloo::transport::Device> device;
    try {
      device = gloo::transport::tcp::CreateDevice(attr);
    } catch (const std::exception &e) {
      throw Error("MASTER_ADDR '" + attr.hostname +
                  "' is not an address of this host Gloo can listen on (" +
                  glooReason(e) + ")");
    }
    meet(*store, w, left());
    try {
      context->setTimeout(left());
      MeshStore mesh(*store, left());
      context->connectFullMesh(mesh, device);
    } catch (const Error &) {
      throw;
    } catch (const std::exception &e) {
      throw Error("connecting the ranks: " + glooReason(e));
    }
  }
  auto world = std::make_unique<GlooWorld>(std::move(server), std::move(store),
                                           context, w.collectiveTimeoutSeconds);
  if (w.size > 1) {
    // Gloo's connectFullMesh returns when this rank's pairs are connected
    // at its end: one exchange over every pair makes sure they are at both
    // ends before any rank goes on (and may end, closing them).
    std::vector<int32_t> ranks(size_t(w.size));
    const int32_t mine = w.rank;
    context->setTimeout(left());
    world->allGather(&mine, sizeof mine, ranks.data());
    context->setTimeout(toMs(w.collectiveTimeoutSeconds));
  }
  return world;
}

} // namespace mpc
