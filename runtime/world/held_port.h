// A port for a world whose ranks all run on this machine, held from the
// moment the kernel chooses it until rank 0's store serves on it.
//
// Choosing a free port and binding it later is a race: between the two,
// any process on the machine may take it (a kernel-chosen port is in the
// range every other socket's port comes from), and rank 0 then fails, or
// worse, a rank of this world meets another world's store. A HeldPort
// listens from the start; rank 0's store serves on its socket
// (GlooRendezvous::storeFd), and connections made before then wait in its
// backlog.
#pragma once

namespace mpc {

class HeldPort {
public:
  /// Listens on a port the kernel chooses, on every IPv4 interface (as
  /// rank 0's store does). Throws Error when no socket can be had.
  HeldPort();
  ~HeldPort();
  HeldPort(const HeldPort &) = delete;
  HeldPort &operator=(const HeldPort &) = delete;

  int port() const { return port_; }
  /// The listening socket (close-on-exec): rank 0's storeFd.
  int fd() const { return fd_; }

private:
  int fd_ = -1;
  int port_ = -1;
};

} // namespace mpc
