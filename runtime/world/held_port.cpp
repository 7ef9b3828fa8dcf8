// A port held by a listening socket from the moment it is chosen
// (held_port.h).
#include "runtime/world/held_port.h"

#include "support/diagnostics.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace mpc {

HeldPort::HeldPort() {
  fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd_ < 0)
    throw Error(std::string("socket: ") + std::strerror(errno));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_ANY);
  socklen_t len = sizeof a;
  if (::bind(fd_, reinterpret_cast<sockaddr *>(&a), sizeof a) != 0 ||
      ::listen(fd_, 1024) != 0 ||
      ::getsockname(fd_, reinterpret_cast<sockaddr *>(&a), &len) != 0) {
    const int err = errno;
    ::close(fd_);
    throw Error(std::string("cannot listen on a free port: ") +
                std::strerror(err));
  }
  port_ = ntohs(a.sin_port);
}

HeldPort::~HeldPort() { ::close(fd_); }

} // namespace mpc
