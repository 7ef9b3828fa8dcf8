// The TCP world (tcp_world.h): the rendezvous at rank 0, one connection per
// pair of ranks, and the collectives as concurrent non-blocking transfers.
//
// Rendezvous: rank 0 listens on MASTER_PORT; every other rank listens on a
// port of its own, connects to rank 0 and says who it is (rank, world size,
// its port). Rank 0 checks the answers (one world size, each rank once) and
// sends every rank the table of addresses (each as rank 0 saw it connect)
// and ports; rank r then connects to every rank in 1 .. r-1 and accepts the
// ranks above it. A handshake that breaks or does not finish in time is an
// Error naming the ranks that are missing.
//
// Collectives: every transfer of a call is polled at once; the wait is
// bounded by the collective timeout counted from the last byte that moved,
// so a slow but moving transfer never fails and a silent rank fails the
// call within the timeout, named.
#include "runtime/world/tcp_world.h"

#include "support/diagnostics.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <functional>
#include <thread>
#include <vector>

namespace mpc {
namespace {

constexpr uint32_t kMagic = 0x4d504357; // "MPCW"
constexpr uint32_t kVersion = 1;

using Clock = std::chrono::steady_clock;

/// An owned socket.
class Fd {
public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd &&o) noexcept : fd_(o.release()) {}
  Fd &operator=(Fd &&o) noexcept {
    reset(o.release());
    return *this;
  }
  Fd(const Fd &) = delete;
  Fd &operator=(const Fd &) = delete;
  ~Fd() { reset(); }
  int get() const { return fd_; }
  int release() {
    int f = fd_;
    fd_ = -1;
    return f;
  }
  void reset(int f = -1) {
    if (fd_ >= 0)
      ::close(fd_);
    fd_ = f;
  }

private:
  int fd_ = -1;
};

std::string errnoText(int err) { return std::strerror(err); }

int msLeft(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - Clock::now());
  return left.count() <= 0 ? 0 : int(std::min<int64_t>(left.count(), 1 << 30));
}

Fd newSocket() {
  Fd s(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (s.get() < 0)
    throw Error("socket: " + errnoText(errno));
  return s;
}

/// A listening socket on `port` (0: a free one) of every IPv4 interface.
Fd listenOn(int port) {
  Fd s = newSocket();
  int one = 1;
  ::setsockopt(s.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_ANY);
  a.sin_port = htons(uint16_t(port));
  if (::bind(s.get(), reinterpret_cast<sockaddr *>(&a), sizeof a) != 0 ||
      ::listen(s.get(), 1024) != 0)
    throw Error("cannot listen on port " + std::to_string(port) + ": " +
                errnoText(errno));
  return s;
}

int portOf(const Fd &s) {
  sockaddr_in a{};
  socklen_t len = sizeof a;
  if (::getsockname(s.get(), reinterpret_cast<sockaddr *>(&a), &len) != 0)
    throw Error("getsockname: " + errnoText(errno));
  return ntohs(a.sin_port);
}

/// The IPv4 address of `host` (a name or a dotted quad), network order.
uint32_t resolve(const std::string &host) {
  addrinfo hints{}, *found = nullptr;
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  int rc = ::getaddrinfo(host.c_str(), nullptr, &hints, &found);
  if (rc != 0 || !found)
    throw Error("MASTER_ADDR '" + host + "' is not an IPv4 host (" +
                ::gai_strerror(rc) + ")");
  uint32_t ip =
      reinterpret_cast<sockaddr_in *>(found->ai_addr)->sin_addr.s_addr;
  ::freeaddrinfo(found);
  return ip;
}

/// "2 s", "0.5 s": a timeout as the user gave it.
std::string secondsText(double seconds) {
  char text[32];
  std::snprintf(text, sizeof text, "%g s", seconds);
  return text;
}

std::chrono::milliseconds toMs(double seconds) {
  return std::chrono::milliseconds(int64_t(std::min(seconds, 1e9) * 1e3 + 0.5));
}

std::string addressText(uint32_t ip, int port) {
  char text[INET_ADDRSTRLEN] = "?";
  in_addr a{};
  a.s_addr = ip;
  ::inet_ntop(AF_INET, &a, text, sizeof text);
  return std::string(text) + ":" + std::to_string(port);
}

/// Connects to ip:port, retrying until `deadline` while nobody listens
/// there yet (rank 0 may start after the others).
Fd connectTo(uint32_t ip, int port, Clock::time_point deadline,
             const std::string &who) {
  for (;;) {
    Fd s = newSocket();
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = ip;
    a.sin_port = htons(uint16_t(port));
    // Non-blocking, so that a host that drops the connection's packets
    // holds this rank until the deadline, not the kernel's minutes of SYN
    // retries.
    const int flags = ::fcntl(s.get(), F_GETFL);
    ::fcntl(s.get(), F_SETFL, flags | O_NONBLOCK);
    int err = 0;
    if (::connect(s.get(), reinterpret_cast<sockaddr *>(&a), sizeof a) != 0) {
      err = errno;
      if (err == EINPROGRESS) {
        pollfd p{s.get(), POLLOUT, 0};
        int r;
        do
          r = ::poll(&p, 1, std::max(1, msLeft(deadline)));
        while (r < 0 && errno == EINTR);
        socklen_t len = sizeof err;
        if (r == 0)
          err = ETIMEDOUT;
        else if (r < 0 ||
                 ::getsockopt(s.get(), SOL_SOCKET, SO_ERROR, &err, &len) != 0)
          err = errno;
      }
    }
    if (err == 0) {
      ::fcntl(s.get(), F_SETFL, flags);
      return s;
    }
    bool transient = err == ECONNREFUSED || err == ETIMEDOUT ||
                     err == EHOSTUNREACH || err == ENETUNREACH ||
                     err == ECONNRESET || err == EINTR || err == EAGAIN;
    if (!transient)
      throw Error("cannot connect to " + who + " at " + addressText(ip, port) +
                  ": " + errnoText(err));
    if (Clock::now() >= deadline)
      throw Error("timed out connecting to " + who + " at " +
                  addressText(ip, port) + " (" + errnoText(err) + ")");
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

/// One connection accepted before `deadline`; `missing()` says who did not
/// come when none does.
Fd acceptBefore(const Fd &listener, Clock::time_point deadline,
                sockaddr_in &peer,
                const std::function<std::string()> &missing) {
  pollfd p{listener.get(), POLLIN, 0};
  for (;;) {
    int r = ::poll(&p, 1, msLeft(deadline));
    if (r < 0 && errno == EINTR)
      continue;
    if (r < 0)
      throw Error("poll: " + errnoText(errno));
    if (r == 0)
      throw Error(missing());
    socklen_t len = sizeof peer;
    int fd = ::accept4(listener.get(), reinterpret_cast<sockaddr *>(&peer),
                       &len, SOCK_CLOEXEC);
    if (fd >= 0)
      return Fd(fd);
    if (errno != EINTR && errno != ECONNABORTED)
      throw Error("accept: " + errnoText(errno));
  }
}

/// The handshake's blocking transfers of whole messages.
void sendAll(const Fd &s, const void *data, size_t n, const std::string &who) {
  const auto *p = static_cast<const uint8_t *>(data);
  while (n) {
    ssize_t k = ::send(s.get(), p, n, MSG_NOSIGNAL);
    if (k < 0 && errno == EINTR)
      continue;
    if (k <= 0)
      throw Error("lost the connection to " + who + " (" + errnoText(errno) +
                  ")");
    p += k;
    n -= size_t(k);
  }
}

void recvAll(const Fd &s, void *data, size_t n, Clock::time_point deadline,
             const std::string &who) {
  auto *p = static_cast<uint8_t *>(data);
  pollfd f{s.get(), POLLIN, 0};
  while (n) {
    int r = ::poll(&f, 1, msLeft(deadline));
    if (r < 0 && errno == EINTR)
      continue;
    if (r == 0)
      throw Error("timed out waiting for " + who);
    ssize_t k = ::recv(s.get(), p, n, 0);
    if (k < 0 && (errno == EINTR || errno == EAGAIN))
      continue;
    if (k == 0)
      throw Error(who + " closed the connection");
    if (k < 0)
      throw Error("lost the connection to " + who + " (" + errnoText(errno) +
                  ")");
    p += k;
    n -= size_t(k);
  }
}

/// Fixed-size handshake records: 32-bit words in network order.
void sendWords(const Fd &s, std::vector<uint32_t> words,
               const std::string &who) {
  for (uint32_t &w : words)
    w = htonl(w);
  sendAll(s, words.data(), words.size() * 4, who);
}

std::vector<uint32_t> recvWords(const Fd &s, size_t n,
                                Clock::time_point deadline,
                                const std::string &who) {
  std::vector<uint32_t> words(n);
  recvAll(s, words.data(), n * 4, deadline, who);
  for (uint32_t &w : words)
    w = ntohl(w);
  return words;
}

std::string rankName(int r) { return "rank " + std::to_string(r); }

/// "ranks 1, 3" of the ranks in [from, to) that `joined` lacks.
std::string missingRanks(const std::vector<bool> &joined, int from, int to) {
  std::string list;
  int count = 0;
  for (int r = from; r < to; ++r)
    if (!joined[size_t(r)]) {
      list += (count++ ? ", " : "") + std::to_string(r);
    }
  return (count == 1 ? "rank " : "ranks ") + list;
}

class TcpWorld final : public Collective {
public:
  TcpWorld(int rank, int size, std::vector<Fd> links, double timeoutSeconds)
      : rank_(rank), size_(size), timeoutSeconds_(timeoutSeconds),
        links_(std::move(links)) {
    for (int q = 0; q < size_; ++q) {
      if (q == rank_)
        continue;
      int fd = links_[size_t(q)].get();
      ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
      int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    }
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  double timeoutSeconds() const override { return timeoutSeconds_; }

  void allGather(const void *send, size_t bytes, void *recv) override {
    auto *out = static_cast<uint8_t *>(recv);
    uint8_t *own = out + size_t(rank_) * bytes;
    if (send != own && bytes)
      std::memcpy(own, send, bytes);
    std::vector<Transfer> ts;
    for (int q = 0; q < size_; ++q)
      if (q != rank_)
        ts.push_back({q, own, bytes, out + size_t(q) * bytes, bytes});
    exchange(ts);
  }

  void allToAll(const void *send, size_t bytes, void *recv) override {
    const auto *in = static_cast<const uint8_t *>(send);
    auto *out = static_cast<uint8_t *>(recv);
    // In place, block q is sent while rank q's block lands there: send a
    // copy.
    if (in == out) {
      staging_.assign(in, in + size_t(size_) * bytes);
      in = staging_.data();
    }
    if (bytes)
      std::memcpy(out + size_t(rank_) * bytes, in + size_t(rank_) * bytes,
                  bytes);
    std::vector<Transfer> ts;
    for (int q = 0; q < size_; ++q)
      if (q != rank_)
        ts.push_back(
            {q, in + size_t(q) * bytes, bytes, out + size_t(q) * bytes, bytes});
    exchange(ts);
  }

  void broadcast(void *buf, size_t bytes, int root) override {
    auto *p = static_cast<uint8_t *>(buf);
    std::vector<Transfer> ts;
    if (rank_ == root) {
      for (int q = 0; q < size_; ++q)
        if (q != rank_)
          ts.push_back({q, p, bytes, nullptr, 0});
    } else {
      ts.push_back({root, nullptr, 0, p, bytes});
    }
    exchange(ts);
  }

  [[noreturn]] void abort(int code) override {
    std::fflush(stdout);
    std::fflush(stderr);
    // Closing the connections is what tells the other ranks: each fails at
    // its next transfer with a line naming this rank.
    links_.clear();
    std::_Exit(code);
  }

private:
  /// One peer's part of a collective: bytes to send and to receive.
  struct Transfer {
    int peer;
    const uint8_t *send;
    size_t sendLeft;
    uint8_t *recv;
    size_t recvLeft;
  };

  [[noreturn]] void lost(int peer, const std::string &why) const {
    throw Error("lost the connection to " + rankName(peer) + " (" + why +
                "; it stopped: see its own error)");
  }

  /// The error for the ranks whose transfers did not finish while nothing
  /// moved for the timeout.
  [[noreturn]] void silent(const std::vector<Transfer *> &pending) const {
    std::vector<int> peers;
    for (const Transfer *t : pending)
      if (std::find(peers.begin(), peers.end(), t->peer) == peers.end())
        peers.push_back(t->peer);
    std::sort(peers.begin(), peers.end());
    std::string who = peers.size() == 1 ? "rank " : "ranks ";
    for (size_t i = 0; i < peers.size(); ++i)
      who += (i ? ", " : "") + std::to_string(peers[i]);
    throw Error(who + " did not answer in a collective for " +
                secondsText(timeoutSeconds_) +
                " (--collective-timeout): stopped, hung or unreachable");
  }

  /// Every transfer at once, until all are done: each connection is
  /// written while it accepts bytes and read while bytes arrive, so two
  /// ranks that send each other large blocks both progress. The wait ends
  /// with an error when no byte has moved for the timeout.
  void exchange(std::vector<Transfer> &ts) {
    std::vector<pollfd> fds;
    std::vector<Transfer *> of;
    const auto patience = toMs(timeoutSeconds_);
    auto deadline = Clock::now() + patience;
    for (;;) {
      fds.clear();
      of.clear();
      for (Transfer &t : ts) {
        short events =
            short((t.sendLeft ? POLLOUT : 0) | (t.recvLeft ? POLLIN : 0));
        if (events) {
          fds.push_back({links_[size_t(t.peer)].get(), events, 0});
          of.push_back(&t);
        }
      }
      if (fds.empty())
        return;
      const int ready = ::poll(fds.data(), fds.size(), msLeft(deadline));
      if (ready < 0) {
        if (errno == EINTR)
          continue;
        throw Error("poll: " + errnoText(errno));
      }
      if (ready == 0) {
        if (Clock::now() >= deadline)
          silent(of);
        continue;
      }
      bool moved = false;
      for (size_t i = 0; i < fds.size(); ++i) {
        Transfer &t = *of[i];
        const short got = fds[i].revents;
        const int fd = fds[i].fd;
        if (t.recvLeft && (got & (POLLIN | POLLHUP | POLLERR))) {
          ssize_t k = ::recv(fd, t.recv, t.recvLeft, 0);
          if (k == 0)
            lost(t.peer, "it closed the connection");
          if (k < 0 && errno != EAGAIN && errno != EINTR)
            lost(t.peer, errnoText(errno));
          if (k > 0) {
            t.recv += k;
            t.recvLeft -= size_t(k);
            moved = true;
          }
        }
        if (t.sendLeft && (got & (POLLOUT | POLLHUP | POLLERR))) {
          ssize_t k = ::send(fd, t.send, t.sendLeft, MSG_NOSIGNAL);
          if (k < 0 && errno != EAGAIN && errno != EINTR)
            lost(t.peer, errnoText(errno));
          if (k > 0) {
            t.send += k;
            t.sendLeft -= size_t(k);
            moved = true;
          }
        }
        if (got & POLLNVAL)
          lost(t.peer, "the connection is not open");
      }
      if (moved)
        deadline = Clock::now() + patience;
      else if (Clock::now() >= deadline)
        silent(of);
    }
  }

  int rank_, size_;
  double timeoutSeconds_;
  std::vector<Fd> links_; ///< links_[q]: the connection to rank q
  std::vector<uint8_t> staging_;
};

/// Rank 0's side: accept every other rank, check, send the table.
std::vector<Fd> rendezvousAsRoot(const TcpRendezvous &w,
                                 Clock::time_point deadline) {
  Fd listener = listenOn(w.masterPort);
  std::vector<Fd> links(size_t(w.size));
  std::vector<uint32_t> ips(size_t(w.size)), ports(size_t(w.size));
  std::vector<bool> joined(size_t(w.size), false);
  joined[0] = true;
  // A refusal reaches the ranks that joined (and the one refused), so each
  // says why the world did not meet rather than that rank 0 left.
  auto tell = [](const Fd &s, const std::string &why) {
    try {
      sendWords(s, {1, uint32_t(why.size())}, "a joining rank");
      sendAll(s, why.data(), why.size(), "a joining rank");
    } catch (const Error &) {
    }
  };
  auto refuse = [&](const Fd &s, const std::string &why) {
    tell(s, why);
    throw Error(why);
  };
  const std::string where = "port " + std::to_string(w.masterPort);
  try {
    for (int n = 1; n < w.size; ++n) {
      sockaddr_in peer{};
      Fd s = acceptBefore(listener, deadline, peer, [&] {
        return "timed out after " + std::to_string(int(w.timeoutSeconds)) +
               " s waiting for " + missingRanks(joined, 1, w.size) +
               " to join at " + where +
               " (WORLD_SIZE=" + std::to_string(w.size) + ")";
      });
      std::vector<uint32_t> hello = recvWords(s, 5, deadline, "a joining rank");
      if (hello[0] != kMagic || hello[1] != kVersion)
        refuse(s, "something that is not an mpc-run rank of this version "
                  "connected to " +
                      where);
      const int r = int(int32_t(hello[2])), size = int(int32_t(hello[3]));
      if (size != w.size)
        refuse(s, rankName(r) + " says WORLD_SIZE=" + std::to_string(size) +
                      ", rank 0 says " + std::to_string(w.size));
      if (r <= 0 || r >= w.size)
        refuse(s, "a rank joined as RANK=" + std::to_string(r) + ", not 1 to " +
                      std::to_string(w.size - 1));
      if (joined[size_t(r)])
        refuse(s, "two processes joined as RANK=" + std::to_string(r));
      joined[size_t(r)] = true;
      ips[size_t(r)] = peer.sin_addr.s_addr;
      ports[size_t(r)] = hello[4];
      links[size_t(r)] = std::move(s);
    }
  } catch (const Error &e) {
    for (int r = 1; r < w.size; ++r)
      if (links[size_t(r)].get() >= 0)
        tell(links[size_t(r)], e.what());
    throw;
  }
  std::vector<uint32_t> table = {0};
  for (int r = 0; r < w.size; ++r) {
    table.push_back(ntohl(ips[size_t(r)]));
    table.push_back(ports[size_t(r)]);
  }
  for (int r = 1; r < w.size; ++r)
    sendWords(links[size_t(r)], table, rankName(r));
  return links;
}

/// Rank r's side: join at rank 0, then connect the mesh.
std::vector<Fd> rendezvousAsRank(const TcpRendezvous &w,
                                 Clock::time_point deadline) {
  Fd listener = listenOn(0);
  std::vector<Fd> links(size_t(w.size));
  const std::string root = "rank 0 (MASTER_ADDR=" + w.masterAddr +
                           ", MASTER_PORT=" + std::to_string(w.masterPort) +
                           ")";
  links[0] = connectTo(resolve(w.masterAddr), w.masterPort, deadline, root);
  sendWords(links[0],
            {kMagic, kVersion, uint32_t(w.rank), uint32_t(w.size),
             uint32_t(portOf(listener))},
            root);
  // Rank 0 answers once every rank has joined, or says why not: it is
  // given a few seconds more than its own deadline to say so.
  const auto answerBy = deadline + std::chrono::seconds(5);
  std::vector<uint32_t> status = recvWords(links[0], 1, answerBy, root);
  if (status[0] != 0) {
    uint32_t n = recvWords(links[0], 1, answerBy, root)[0];
    std::string why(std::min<uint32_t>(n, 4096), '\0');
    recvAll(links[0], why.data(), why.size(), answerBy, root);
    throw Error("rank 0 refused the world: " + why);
  }
  std::vector<uint32_t> table =
      recvWords(links[0], 2 * size_t(w.size), answerBy, root);
  auto ipOf = [&](int q) { return htonl(table[2 * size_t(q)]); };
  auto portAt = [&](int q) { return int(table[2 * size_t(q) + 1]); };
  for (int q = 1; q < w.rank; ++q) {
    links[size_t(q)] = connectTo(ipOf(q), portAt(q), deadline, rankName(q));
    sendWords(links[size_t(q)], {kMagic, uint32_t(w.rank)}, rankName(q));
  }
  std::vector<bool> joined(size_t(w.size), true);
  for (int q = w.rank + 1; q < w.size; ++q)
    joined[size_t(q)] = false;
  for (int n = w.rank + 1; n < w.size; ++n) {
    sockaddr_in peer{};
    Fd s = acceptBefore(listener, deadline, peer, [&] {
      return "timed out waiting for " + missingRanks(joined, 0, w.size) +
             " to connect";
    });
    std::vector<uint32_t> hello = recvWords(s, 2, deadline, "a higher rank");
    const int q = int(int32_t(hello[1]));
    if (hello[0] != kMagic || q <= w.rank || q >= w.size || joined[size_t(q)])
      throw Error("an unexpected connection came to " + rankName(w.rank) +
                  "'s port");
    joined[size_t(q)] = true;
    links[size_t(q)] = std::move(s);
  }
  return links;
}

} // namespace

std::unique_ptr<Collective> joinTcpWorld(const TcpRendezvous &w) {
  if (w.size < 1 || w.rank < 0 || w.rank >= w.size)
    throw Error("RANK=" + std::to_string(w.rank) + " is not in 0 to " +
                std::to_string(w.size - 1) +
                " (WORLD_SIZE=" + std::to_string(w.size) + ")");
  if (w.masterPort < 1 || w.masterPort > 65535)
    throw Error("MASTER_PORT=" + std::to_string(w.masterPort) +
                " is not a port (1 to 65535)");
  const auto deadline =
      Clock::now() + std::chrono::milliseconds(int64_t(w.timeoutSeconds * 1e3));
  std::vector<Fd> links;
  if (w.size > 1)
    links = w.rank == 0 ? rendezvousAsRoot(w, deadline)
                        : rendezvousAsRank(w, deadline);
  else
    links.resize(1);
  return std::make_unique<TcpWorld>(w.rank, w.size, std::move(links),
                                    w.collectiveTimeoutSeconds);
}

} // namespace mpc
