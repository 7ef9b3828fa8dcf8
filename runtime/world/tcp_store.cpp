// The rendezvous store over TCP (tcp_store.h).
//
// Wire format, every number a 32-bit word in network order:
//   request: op (one byte: 'S' set, 'A' add, 'G' get), key length, key,
//            and for S and A the value's length and the value;
//   reply:   one status byte (S: 1; A: 1 when set, 0 when the key was
//            there; G: 1 and the value's length and value, or 0).
// The server answers one request at a time: requests are a few hundred
// bytes, read with a deadline, so a rank stopped mid-request costs the
// others at most that deadline (its connection is dropped), never a hang.
#include "runtime/world/tcp_store.h"

#include "support/diagnostics.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <map>

namespace mpc {
namespace {

using Clock = std::chrono::steady_clock;

/// How long the server waits for the rest of a request that has begun.
constexpr auto kRequestPatience = std::chrono::seconds(5);

std::string errnoText(int err) { return std::strerror(err); }

int msLeft(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - Clock::now());
  return left.count() <= 0 ? 0 : int(std::min<int64_t>(left.count(), 1 << 30));
}

/// Why a transfer stopped: the peer closed, the deadline passed, or errno.
enum class Io { Ok, Closed, Timeout, Failed };

/// All `n` bytes, or why not; waits no later than `deadline`.
Io recvAll(int fd, void *data, size_t n, Clock::time_point deadline) {
  auto *p = static_cast<char *>(data);
  while (n) {
    pollfd f{fd, POLLIN, 0};
    int r = ::poll(&f, 1, msLeft(deadline));
    if (r < 0 && errno == EINTR)
      continue;
    if (r < 0)
      return Io::Failed;
    if (r == 0)
      return Io::Timeout;
    ssize_t k = ::recv(fd, p, n, 0);
    if (k < 0 && (errno == EINTR || errno == EAGAIN))
      continue;
    if (k == 0)
      return Io::Closed;
    if (k < 0)
      return Io::Failed;
    p += k;
    n -= size_t(k);
  }
  return Io::Ok;
}

Io sendAll(int fd, const void *data, size_t n, Clock::time_point deadline) {
  const auto *p = static_cast<const char *>(data);
  while (n) {
    pollfd f{fd, POLLOUT, 0};
    int r = ::poll(&f, 1, msLeft(deadline));
    if (r < 0 && errno == EINTR)
      continue;
    if (r < 0)
      return Io::Failed;
    if (r == 0)
      return Io::Timeout;
    ssize_t k = ::send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (k < 0 && (errno == EINTR || errno == EAGAIN))
      continue;
    if (k <= 0)
      return Io::Failed;
    p += k;
    n -= size_t(k);
  }
  return Io::Ok;
}

void putWord(std::vector<char> &out, uint32_t w) {
  w = htonl(w);
  const char *b = reinterpret_cast<const char *>(&w);
  out.insert(out.end(), b, b + 4);
}

Io getWord(int fd, uint32_t &w, Clock::time_point deadline) {
  Io io = recvAll(fd, &w, 4, deadline);
  w = ntohl(w);
  return io;
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

/// One server-side request from `fd`, answered; false drops the client
/// (it closed, stalled, or sent what is not a request of this store).
bool answer(int fd, std::map<std::string, std::vector<char>> &kv) {
  const auto deadline = Clock::now() + kRequestPatience;
  char op = 0;
  if (recvAll(fd, &op, 1, deadline) != Io::Ok)
    return false;
  if (op != 'S' && op != 'A' && op != 'G')
    return false;
  uint32_t keyLen = 0;
  if (getWord(fd, keyLen, deadline) != Io::Ok || keyLen > kMaxKeyBytes)
    return false;
  std::string key(keyLen, '\0');
  if (recvAll(fd, key.data(), keyLen, deadline) != Io::Ok)
    return false;
  std::vector<char> reply;
  if (op == 'G') {
    auto it = kv.find(key);
    reply.push_back(it == kv.end() ? 0 : 1);
    if (it != kv.end()) {
      putWord(reply, uint32_t(it->second.size()));
      reply.insert(reply.end(), it->second.begin(), it->second.end());
    }
  } else {
    uint32_t valLen = 0;
    if (getWord(fd, valLen, deadline) != Io::Ok || valLen > kMaxValueBytes)
      return false;
    std::vector<char> value(valLen);
    if (recvAll(fd, value.data(), valLen, deadline) != Io::Ok)
      return false;
    const bool present = kv.count(key) != 0;
    if (!present && kv.size() >= TcpStoreServer::kMaxKeys)
      return false;
    if (op == 'S' || !present)
      kv[key] = std::move(value);
    reply.push_back(op == 'A' && present ? 0 : 1);
  }
  return sendAll(fd, reply.data(), reply.size(), deadline) == Io::Ok;
}

} // namespace

int listenOnEveryInterface(int port) {
  int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s < 0)
    throw Error("socket: " + errnoText(errno));
  int one = 1;
  ::setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_ANY);
  a.sin_port = htons(uint16_t(port));
  if (::bind(s, reinterpret_cast<sockaddr *>(&a), sizeof a) != 0 ||
      ::listen(s, 1024) != 0) {
    int err = errno;
    ::close(s);
    throw Error("cannot listen on port " + std::to_string(port) + ": " +
                errnoText(err));
  }
  return s;
}

namespace {

/// A copy of `fd`, which must be a socket listening on `port`.
int adoptListener(int fd, int port) {
  int listening = 0;
  socklen_t optLen = sizeof listening;
  sockaddr_in a{};
  socklen_t len = sizeof a;
  if (::getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &optLen) != 0 ||
      !listening ||
      ::getsockname(fd, reinterpret_cast<sockaddr *>(&a), &len) != 0 ||
      a.sin_family != AF_INET || ntohs(a.sin_port) != port)
    throw Error("descriptor " + std::to_string(fd) +
                " handed to rank 0's store is not a socket listening on "
                "port " +
                std::to_string(port));
  int s = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (s < 0)
    throw Error("descriptor " + std::to_string(fd) + ": " + errnoText(errno));
  return s;
}

} // namespace

TcpStoreServer::TcpStoreServer(int port, int listeningFd) {
  listener_ = listeningFd >= 0 ? adoptListener(listeningFd, port)
                               : listenOnEveryInterface(port);
  if (::pipe2(wake_, O_CLOEXEC) != 0) {
    int err = errno;
    ::close(listener_);
    throw Error("pipe: " + errnoText(err));
  }
  thread_ = std::thread([this] { serve(); });
}

TcpStoreServer::~TcpStoreServer() {
  char stop = 0;
  (void)!::write(wake_[1], &stop, 1);
  thread_.join();
  ::close(wake_[0]);
  ::close(wake_[1]);
  ::close(listener_);
}

void TcpStoreServer::serve() {
  std::map<std::string, std::vector<char>> kv;
  std::vector<int> clients;
  for (;;) {
    std::vector<pollfd> fds = {{wake_[0], POLLIN, 0}, {listener_, POLLIN, 0}};
    for (int c : clients)
      fds.push_back({c, POLLIN, 0});
    int r = ::poll(fds.data(), fds.size(), -1);
    if (r < 0 && errno == EINTR)
      continue;
    if (r < 0 || fds[0].revents)
      break;
    std::vector<int> keep;
    for (size_t i = 2; i < fds.size(); ++i) {
      const int c = fds[i].fd;
      if (!fds[i].revents || answer(c, kv))
        keep.push_back(c);
      else
        ::close(c);
    }
    clients = std::move(keep);
    if (fds[1].revents & POLLIN) {
      int c = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c >= 0 && clients.size() >= kMaxClients)
        ::close(c);
      else if (c >= 0)
        clients.push_back(c);
    }
  }
  for (int c : clients)
    ::close(c);
}

TcpStore::TcpStore(const std::string &host, int port,
                   std::chrono::milliseconds timeout, std::string who)
    : timeout_(timeout), who_(std::move(who)) {
  const uint32_t ip = resolve(host);
  const auto deadline = Clock::now() + timeout;
  int lastErr = 0;
  for (;;) {
    int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (s < 0)
      throw Error("socket: " + errnoText(errno));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = ip;
    a.sin_port = htons(uint16_t(port));
    // Non-blocking, so that a host that drops the packets holds this rank
    // until the deadline, not the kernel's minutes of SYN retries.
    int err = 0;
    if (::connect(s, reinterpret_cast<sockaddr *>(&a), sizeof a) != 0) {
      err = errno;
      if (err == EINPROGRESS) {
        pollfd p{s, POLLOUT, 0};
        int r;
        do
          r = ::poll(&p, 1, std::max(1, msLeft(deadline)));
        while (r < 0 && errno == EINTR);
        socklen_t len = sizeof err;
        if (r == 0)
          err = ETIMEDOUT;
        else if (r < 0 || ::getsockopt(s, SOL_SOCKET, SO_ERROR, &err, &len))
          err = errno;
      }
    }
    if (err == 0) {
      int one = 1;
      ::setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      fd_ = s;
      return;
    }
    ::close(s);
    lastErr = err;
    const bool transient = err == ECONNREFUSED || err == ETIMEDOUT ||
                           err == EHOSTUNREACH || err == ENETUNREACH ||
                           err == ECONNRESET || err == EINTR || err == EAGAIN;
    if (!transient)
      throw Error("cannot connect to " + who_ + ": " + errnoText(err));
    if (Clock::now() >= deadline)
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  throw Error("timed out connecting to " + who_ + " (" + errnoText(lastErr) +
              ")");
}

TcpStore::~TcpStore() {
  if (fd_ >= 0)
    ::close(fd_);
}

std::vector<char> TcpStore::request(char op, const std::string &key,
                                    const std::vector<char> *data) {
  if (key.size() > kMaxKeyBytes)
    throw Error("rendezvous key of " + std::to_string(key.size()) +
                " bytes (at most " + std::to_string(kMaxKeyBytes) + ")");
  if (data && data->size() > kMaxValueBytes)
    throw Error("rendezvous value of " + std::to_string(data->size()) +
                " bytes for '" + key + "' (at most " +
                std::to_string(kMaxValueBytes) + ")");
  std::vector<char> msg(1, op);
  putWord(msg, uint32_t(key.size()));
  msg.insert(msg.end(), key.begin(), key.end());
  if (data) {
    putWord(msg, uint32_t(data->size()));
    msg.insert(msg.end(), data->begin(), data->end());
  }
  const auto deadline = Clock::now() + timeout_;
  auto fail = [&](Io io) {
    if (io == Io::Timeout)
      throw Error(who_ + " did not answer the rendezvous for " +
                  std::to_string(timeout_.count() / 1000) + " s");
    throw Error("lost the connection to " + who_ +
                (io == Io::Closed ? " (it closed the connection)"
                                  : " (" + errnoText(errno) + ")"));
  };
  if (Io io = sendAll(fd_, msg.data(), msg.size(), deadline); io != Io::Ok)
    fail(io);
  char status = 0;
  if (Io io = recvAll(fd_, &status, 1, deadline); io != Io::Ok)
    fail(io);
  std::vector<char> reply(1, status);
  if (op == 'G' && status == 1) {
    uint32_t n = 0;
    if (Io io = getWord(fd_, n, deadline); io != Io::Ok)
      fail(io);
    if (n > kMaxValueBytes)
      throw Error(who_ + " sent a rendezvous value of " + std::to_string(n) +
                  " bytes: not mpc-run's store");
    reply.resize(1 + size_t(n));
    if (Io io = recvAll(fd_, reply.data() + 1, n, deadline); io != Io::Ok)
      fail(io);
  }
  return reply;
}

void TcpStore::set(const std::string &key, const std::vector<char> &data) {
  request('S', key, &data);
}

bool TcpStore::add(const std::string &key, const std::vector<char> &data) {
  return request('A', key, &data)[0] == 1;
}

bool TcpStore::tryGet(const std::string &key, std::vector<char> &data) {
  std::vector<char> reply = request('G', key, nullptr);
  if (reply[0] != 1)
    return false;
  data.assign(reply.begin() + 1, reply.end());
  return true;
}

std::vector<char> TcpStore::get(const std::string &key) {
  std::vector<char> data;
  if (!tryGet(key, data))
    throw Error("rendezvous key '" + key + "' is not set at " + who_);
  return data;
}

std::vector<std::string> TcpStore::waitFor(const std::vector<std::string> &keys,
                                           std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  std::vector<std::string> missing = keys;
  std::vector<char> ignored;
  for (;;) {
    std::vector<std::string> still;
    for (const std::string &k : missing)
      if (!tryGet(k, ignored))
        still.push_back(k);
    missing = std::move(still);
    if (missing.empty() || Clock::now() >= deadline)
      return missing;
    std::this_thread::sleep_for(
        std::min(std::chrono::milliseconds(20),
                 std::chrono::duration_cast<std::chrono::milliseconds>(
                     deadline - Clock::now()) +
                     std::chrono::milliseconds(1)));
  }
}

void TcpStore::wait(const std::vector<std::string> &keys) {
  wait(keys, timeout_);
}

void TcpStore::wait(const std::vector<std::string> &keys,
                    const std::chrono::milliseconds &timeout) {
  std::vector<std::string> missing = waitFor(keys, timeout);
  if (missing.empty())
    return;
  std::string list;
  for (size_t i = 0; i < missing.size(); ++i)
    list += (i ? ", '" : "'") + missing[i] + "'";
  throw Error("timed out after " + std::to_string(timeout.count() / 1000) +
              " s waiting for " + list + " at " + who_);
}

std::string TcpStore::localAddress() const {
  sockaddr_in a{};
  socklen_t len = sizeof a;
  if (::getsockname(fd_, reinterpret_cast<sockaddr *>(&a), &len) != 0)
    throw Error("getsockname: " + errnoText(errno));
  char text[INET_ADDRSTRLEN] = "";
  ::inet_ntop(AF_INET, &a.sin_addr, text, sizeof text);
  return text;
}

} // namespace mpc
