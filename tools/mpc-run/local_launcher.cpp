// The local launcher (local_launcher.h): fork and exec the ranks, wait.
#include "tools/mpc-run/local_launcher.h"

#include "passes/support/diagnostics.h"
#include "runtime/plugin_path.h"
#include "runtime/world/tcp_world.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace mpc {
namespace {

std::vector<pid_t> gRanks; ///< for the SIGTERM handler

void passOn(int sig) {
  for (pid_t p : gRanks)
    if (p > 0)
      ::kill(p, sig);
}

} // namespace

int launchLocalRanks(int ranks, const std::vector<std::string> &args) {
  std::string self = executablePath();
  if (self.empty())
    throw Error(std::string("cannot find this executable (/proc/self/exe): ") +
                std::strerror(errno));
  const std::string port = std::to_string(freeLocalPort());
  std::vector<std::string> argvStrings = {self};
  argvStrings.insert(argvStrings.end(), args.begin(), args.end());

  // The launcher passes SIGINT and SIGTERM on and waits. Ctrl-C from a
  // terminal also reaches the ranks directly (the whole process group):
  // a second request to stop is the first's.
  ::signal(SIGINT, passOn);
  ::signal(SIGTERM, passOn);
  std::fflush(stdout);
  std::fflush(stderr);
  gRanks.assign(size_t(ranks), -1);
  const pid_t parent = ::getpid();
  for (int r = 0; r < ranks; ++r) {
    pid_t pid = ::fork();
    if (pid < 0) {
      passOn(SIGKILL);
      throw Error(std::string("cannot start rank ") + std::to_string(r) + ": " +
                  std::strerror(errno));
    }
    if (pid == 0) {
      ::signal(SIGINT, SIG_DFL);
      ::signal(SIGTERM, SIG_DFL);
      // A launcher that dies (kill -9) stops its ranks too, as SIGTERM
      // does: they agree on a step, save with --save, and end.
      ::prctl(PR_SET_PDEATHSIG, SIGTERM);
      if (::getppid() != parent)
        std::_Exit(1); // it died before the line above
      const std::string rank = std::to_string(r);
      ::setenv("RANK", rank.c_str(), 1);
      ::setenv("LOCAL_RANK", rank.c_str(), 1);
      ::setenv("WORLD_SIZE", std::to_string(ranks).c_str(), 1);
      ::setenv("MASTER_ADDR", "127.0.0.1", 1);
      ::setenv("MASTER_PORT", port.c_str(), 1);
      // Not a torchrun agent's ranks (its store would hold MASTER_PORT).
      ::unsetenv("TORCHELASTIC_USE_AGENT_STORE");
      ::unsetenv("MPC_MASTER_PORT");
      std::vector<char *> argv;
      for (std::string &s : argvStrings)
        argv.push_back(s.data());
      argv.push_back(nullptr);
      ::execv(self.c_str(), argv.data());
      std::fprintf(stderr, "mpc-run: rank %d: cannot start %s: %s\n", r,
                   self.c_str(), std::strerror(errno));
      std::_Exit(127);
    }
    gRanks[size_t(r)] = pid;
  }

  int code = 0, running = ranks;
  while (running > 0) {
    int status = 0;
    pid_t pid = ::waitpid(-1, &status, 0);
    if (pid < 0) {
      if (errno == EINTR)
        continue;
      break;
    }
    for (pid_t &p : gRanks)
      if (p == pid)
        p = -1;
    --running;
    int rc = WIFEXITED(status)     ? WEXITSTATUS(status)
             : WIFSIGNALED(status) ? 128 + WTERMSIG(status)
                                   : 1;
    if (rc != 0 && code == 0) {
      code = rc;
      // The others would wait for this rank (at most the rendezvous
      // timeout): end them. A stop every rank agreed on (130) ends them all
      // anyway.
      if (rc != 130)
        passOn(SIGKILL);
    }
  }
  return code;
}

} // namespace mpc
