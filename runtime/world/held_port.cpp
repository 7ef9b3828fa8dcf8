// A port held by a listening socket from the moment it is chosen
// (held_port.h).
#include "runtime/world/held_port.h"

#include "runtime/world/tcp_store.h"
#include "support/diagnostics.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace mpc {

HeldPort::HeldPort() : fd_(listenOnEveryInterface(0)) {
  sockaddr_in a{};
  socklen_t len = sizeof a;
  if (::getsockname(fd_, reinterpret_cast<sockaddr *>(&a), &len) != 0) {
    const int err = errno;
    ::close(fd_);
    throw Error(std::string("the port just listened on: ") +
                std::strerror(err));
  }
  port_ = ntohs(a.sin_port);
}

HeldPort::~HeldPort() { ::close(fd_); }

} // namespace mpc
