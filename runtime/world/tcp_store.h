// A small key-value store over TCP, for the ranks' rendezvous.
//
// Gloo connects the ranks (runtime/world/gloo_world.h) once each has
// published its address under a key the others can read; Gloo ships a
// file store and a Redis store but no TCP store (PyTorch's lives in c10d),
// and torchrun's env:// rendezvous gives only MASTER_ADDR:MASTER_PORT. So
// rank 0 serves this store there (TcpStoreServer) and every rank, rank 0
// included, talks to it through a TcpStore, which is Gloo's
// rendezvous::Store.
//
// Everything is bounded: every wait has a deadline, a key is at most
// kMaxKeyBytes and a value kMaxValueBytes (checked before anything is
// allocated, on both sides), the server holds at most kMaxKeys keys and
// kMaxClients connections, and a client that stops mid-request is dropped
// after a few seconds instead of holding the server. IPv4 only.
#pragma once

#include <gloo/rendezvous/store.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace mpc {

constexpr size_t kMaxKeyBytes = 1024;
constexpr size_t kMaxValueBytes = size_t(1) << 20;

/// A socket (close-on-exec) listening on `port` of every IPv4 interface (0:
/// a port the kernel chooses). Throws Error naming the port when it cannot.
int listenOnEveryInterface(int port);

/// Rank 0's side: listens on `port` of every IPv4 interface from the
/// constructor on and answers on a thread of its own until destroyed.
/// Throws Error when the port cannot be listened on. With `listeningFd`
/// (a socket already listening on `port`, held by whoever chose the port:
/// held_port.h) it serves on a copy of that socket instead, and throws
/// Error when it is not one.
class TcpStoreServer {
public:
  explicit TcpStoreServer(int port, int listeningFd = -1);
  ~TcpStoreServer();
  TcpStoreServer(const TcpStoreServer &) = delete;
  TcpStoreServer &operator=(const TcpStoreServer &) = delete;

  static constexpr size_t kMaxKeys = 65536;
  static constexpr size_t kMaxClients = 4096;

private:
  void serve();
  int listener_ = -1;
  int wake_[2] = {-1, -1}; ///< a pipe whose write end stops serve()
  std::thread thread_;
};

/// A rank's connection to the store at host:port. Every call that hears
/// nothing from the store for `timeout` throws Error, as does a store that
/// closes the connection. set/get/wait are Gloo's Store interface (its
/// connectFullMesh uses them); add() and tryGet() are the rendezvous's own.
class TcpStore final : public gloo::rendezvous::Store {
public:
  /// Connects, retrying while nobody listens yet (rank 0 may start after
  /// the others), until `timeout` has passed. `who` names the store in
  /// errors ("rank 0 (MASTER_ADDR=..., MASTER_PORT=...)").
  TcpStore(const std::string &host, int port, std::chrono::milliseconds timeout,
           std::string who);
  ~TcpStore() override;

  void set(const std::string &key, const std::vector<char> &data) override;
  std::vector<char> get(const std::string &key) override;
  void wait(const std::vector<std::string> &keys) override;
  void wait(const std::vector<std::string> &keys,
            const std::chrono::milliseconds &timeout) override;

  /// Sets `key` unless it is set already; whether it did.
  bool add(const std::string &key, const std::vector<char> &data);
  /// The value of `key`, or false when it is not set (now).
  bool tryGet(const std::string &key, std::vector<char> &data);
  /// The keys of `keys` not set yet once every one is set or `timeout`
  /// has passed (empty: all are set).
  std::vector<std::string> waitFor(const std::vector<std::string> &keys,
                                   std::chrono::milliseconds timeout);

  /// This end's IPv4 address (dotted quad): the interface that reaches
  /// rank 0, on which the other ranks can reach this one.
  std::string localAddress() const;

private:
  std::vector<char> request(char op, const std::string &key,
                            const std::vector<char> *data);
  int fd_ = -1;
  std::chrono::milliseconds timeout_;
  std::string who_;
};

} // namespace mpc
