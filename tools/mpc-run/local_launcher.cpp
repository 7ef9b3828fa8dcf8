// The local launcher (local_launcher.h): fork and exec the ranks, wait.
#include "tools/mpc-run/local_launcher.h"

#include "runtime/plugin_path.h"
#include "runtime/world/held_port.h"
#include "support/diagnostics.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace mpc {
namespace {

std::vector<pid_t> gRanks; ///< for the SIGTERM handler

/// Set once SIGINT or SIGTERM reached the launcher: a rank those end is
/// the stop asked for, not a failure to report.
volatile sig_atomic_t gStopping = 0;

void passOn(int sig) {
  if (sig == SIGINT || sig == SIGTERM)
    gStopping = 1;
  for (pid_t p : gRanks)
    if (p > 0)
      ::kill(p, sig);
}

/// Whether `pid` is already ending on its own (the kernel's PF_EXITING in
/// /proc/PID/stat's flags): its status is about to say why, which a
/// SIGKILL sent now would hide.
bool exiting(pid_t pid) {
  std::FILE *f =
      std::fopen(("/proc/" + std::to_string(pid) + "/stat").c_str(), "r");
  if (!f)
    return false;
  char buf[1024];
  size_t n = std::fread(buf, 1, sizeof buf - 1, f);
  std::fclose(f);
  buf[n] = '\0';
  const char *p = std::strrchr(buf, ')'); // the name may hold spaces
  unsigned long flags = 0;
  char state = 0;
  if (!p ||
      std::sscanf(p + 1, " %c %*d %*d %*d %*d %*d %lu", &state, &flags) != 2)
    return false;
  constexpr unsigned long kPfExiting = 0x4;
  return state == 'Z' || state == 'X' || (flags & kPfExiting);
}

} // namespace

int launchLocalRanks(int ranks, const std::vector<std::string> &args) {
  std::string self = executablePath();
  if (self.empty())
    throw Error(std::string("cannot find this executable (/proc/self/exe): ") +
                std::strerror(errno));
  // Held (listening) until rank 0's store serves on it: no other process
  // can take the port in between. Rank 0 inherits the socket; the
  // launcher's copy closes once every rank has started, so that ranks
  // connecting after rank 0 ended are refused rather than left waiting.
  auto held = std::make_unique<HeldPort>();
  const std::string port = std::to_string(held->port());
  const std::string heldFd = std::to_string(held->fd());
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
      // Rank 0 inherits the held socket (the others' closes on exec).
      if (r == 0 && ::fcntl(held->fd(), F_SETFD, 0) == 0)
        ::setenv("MPC_STORE_FD", heldFd.c_str(), 1);
      else
        ::unsetenv("MPC_STORE_FD");
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
  held.reset();

  // Every rank is reaped before the launcher returns: none outlives it.
  // After the first failure the others get at most kGrace to end on their
  // own (a rank killed by a signal leaves them a closed connection, which
  // they name in their own line) before SIGKILL, which also ends a rank
  // that is stopped (SIGSTOP) and cannot answer anything else.
  const auto kGrace = std::chrono::seconds(2);
  // When the others get SIGKILL (armed after the first failure).
  bool armed = false;
  std::chrono::steady_clock::time_point killAt;
  bool killing = false; // the launcher sent SIGKILL: those deaths are its own
  int code = 0, running = ranks;
  // One rank's end: its line when a signal the launcher did not send ended
  // it, the launch's code, and what happens to the others.
  auto ended = [&](pid_t pid, int status) {
    int rank = -1;
    for (size_t r = 0; r < gRanks.size(); ++r)
      if (gRanks[r] == pid) {
        gRanks[r] = -1;
        rank = int(r);
      }
    if (rank < 0)
      return false; // not a rank (cannot happen: this process starts no other)
    --running;
    const int sig = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
    const bool asked = gStopping && (sig == SIGINT || sig == SIGTERM);
    const bool ours = killing && sig == SIGKILL;
    if (sig && !asked && !ours) {
      // The rank cannot say so itself: this line is its error.
      const char *name = ::strsignal(sig);
      std::fprintf(stderr, "mpc-run: rank %d was killed by signal %d (%s)\n",
                   rank, sig, name ? name : "?");
      std::fflush(stderr);
    }
    int rc = WIFEXITED(status) ? WEXITSTATUS(status) : asked ? 128 + sig : 1;
    if (rc != 0 && code == 0) {
      code = rc;
      // The others would wait for this rank (at most the collective
      // timeout): end them. A stop every rank agreed on (130) ends them
      // all anyway; a rank that said why it failed (its own line) needs no
      // echo from the others, which are ended at once.
      if (rc != 130) {
        if (sig && !asked)
          killAt = std::chrono::steady_clock::now() + kGrace;
        else
          killAt = std::chrono::steady_clock::now();
        armed = true;
      }
    }
    return true;
  };
  while (running > 0) {
    int status = 0;
    pid_t pid = ::waitpid(-1, &status, armed ? WNOHANG : 0);
    if (pid == 0) { // armed: some rank is still running
      if (std::chrono::steady_clock::now() >= killAt) {
        // Ranks that ended already are reaped first: what ended them is
        // theirs to report, not this SIGKILL.
        for (pid_t p : std::vector<pid_t>(gRanks))
          if (p > 0 && exiting(p) && ::waitpid(p, &status, 0) == p)
            ended(p, status);
        while ((pid = ::waitpid(-1, &status, WNOHANG)) > 0)
          ended(pid, status);
        killing = true;
        passOn(SIGKILL);
        armed = false; // SIGKILL ends them: wait without polling
      } else {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
      continue;
    }
    if (pid < 0) {
      if (errno == EINTR)
        continue;
      break; // no children left
    }
    ended(pid, status);
  }
  return code;
}

} // namespace mpc
