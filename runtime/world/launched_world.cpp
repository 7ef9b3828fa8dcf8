// Joins the launcher's world: through the MPI plugin under mpirun, over Gloo
// under torchrun's variables (launched_world.h).
#include "runtime/world/launched_world.h"

#include "runtime/plugin_path.h"
#include "runtime/world/gloo_world.h"
#include "runtime/world/mpi_world_abi.h"
#include "support/diagnostics.h"

#include <cstdlib>
#include <dlfcn.h>
#include <initializer_list>
#include <string>
#include <unistd.h>

namespace mpc {
namespace {

constexpr const char *kPluginFile = "libmpc_mpi_world.so";

/// The first of the launcher variables `names` that is set, as a whole
/// number from `min` to 2^20 (`what` names it in the error), else `dflt`.
int launcherNumber(std::initializer_list<const char *> names, long min,
                   const char *what, int dflt) {
  for (const char *name : names) {
    const char *v = std::getenv(name);
    if (!v || !*v)
      continue;
    char *end = nullptr;
    long n = std::strtol(v, &end, 10);
    if (*end != '\0' || n < min || n > 1 << 20)
      throw LaunchError(std::string(name) + ": expected " + what + ", got '" +
                        v + "'");
    return int(n);
  }
  return dflt;
}

/// Whether an MPI launcher (Open MPI's or MPICH's) started this process.
bool mpiLaunched() {
  for (const char *name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"})
    if (const char *v = std::getenv(name); v && *v)
      return true;
  return false;
}

/// torchrun's env:// variables: the Gloo world of `size` ranks.
std::unique_ptr<Collective>
joinTorchrunLaunch(int size, double collectiveTimeoutSeconds) {
  const char *hint = " (torchrun's env:// rendezvous: RANK, WORLD_SIZE, "
                     "MASTER_ADDR and MASTER_PORT)";
  GlooRendezvous w;
  w.size = size;
  w.rank = launcherNumber({"RANK"}, 0, "a rank", -1);
  if (w.rank < 0)
    throw LaunchError("WORLD_SIZE=" + std::to_string(size) +
                      " but RANK is not set" + hint);
  const char *addr = std::getenv("MASTER_ADDR");
  if (!addr || !*addr)
    throw LaunchError("WORLD_SIZE=" + std::to_string(size) +
                      " but MASTER_ADDR is not set" + hint);
  w.masterAddr = addr;
  w.masterPort = launcherNumber({"MASTER_PORT"}, 1, "a port", 0);
  if (w.masterPort == 0)
    throw LaunchError("WORLD_SIZE=" + std::to_string(size) +
                      " but MASTER_PORT is not set" + hint);
  // torchrun's agent holds MASTER_PORT for its own store (PyTorch's ranks
  // talk to it in c10d's protocol): rank 0 listens on the next port.
  // MPC_MASTER_PORT chooses another.
  const char *agentStore = std::getenv("TORCHELASTIC_USE_AGENT_STORE");
  if (agentStore && std::string(agentStore) == "True")
    ++w.masterPort;
  w.masterPort = launcherNumber({"MPC_MASTER_PORT"}, 1, "a port", w.masterPort);
  if (w.masterPort > 65535)
    throw LaunchError("MASTER_PORT: expected a port, got '" +
                      std::to_string(w.masterPort) + "'");
  w.timeoutSeconds =
      launcherNumber({"MPC_RENDEZVOUS_TIMEOUT"}, 1, "seconds", 300);
  w.collectiveTimeoutSeconds = collectiveTimeoutSeconds;
  // mpc-run --nproc-per-node hands rank 0 the socket it chose the port
  // with (held_port.h); the store serves on a copy, so this one is closed
  // whatever happens.
  if (w.rank == 0)
    w.storeFd = launcherNumber({"MPC_STORE_FD"}, 0, "a file descriptor", -1);
  struct CloseAfter {
    int fd;
    ~CloseAfter() {
      if (fd > 2)
        ::close(fd);
    }
  } inherited{w.storeFd};
  try {
    return joinGlooWorld(w);
  } catch (const Error &e) {
    throw LaunchError("rank " + std::to_string(w.rank) + ": " + e.what());
  }
}

} // namespace

int launchedWorldSize() {
  return launcherNumber({"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "WORLD_SIZE"}, 1,
                        "the number of ranks", 1);
}

int launchedLocalRank() {
  return launcherNumber(
      {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "LOCAL_RANK"}, 0,
      "a local rank", 0);
}

std::unique_ptr<Collective> joinLaunchedWorld(double collectiveTimeoutSeconds) {
  int size = launchedWorldSize();
  if (size == 1)
    return nullptr;
  if (!mpiLaunched())
    return joinTorchrunLaunch(size, collectiveTimeoutSeconds);
  std::string path = pluginPath("MPC_MPI_WORLD_PLUGIN", kPluginFile);
  // RTLD_GLOBAL: Open MPI loads its own components, which resolve symbols
  // of libmpi against the global scope.
  void *handle = dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
  if (!handle) {
    const char *err = dlerror();
    throw LaunchError("launched as one of " + std::to_string(size) +
                      " ranks, but the MPI world plugin does not load (" +
                      (err ? err : path) +
                      "); build mpc where libopenmpi-dev is installed");
  }
  auto join =
      reinterpret_cast<MpcMpiWorldJoinFn>(dlsym(handle, MPC_MPI_WORLD_SYMBOL));
  if (!join)
    throw LaunchError(path + " is not an mpc MPI world plugin (no " +
                      MPC_MPI_WORLD_SYMBOL + ")");
  char why[256] = {0};
  Collective *world =
      join(MPC_MPI_WORLD_ABI, collectiveTimeoutSeconds, why, sizeof why);
  if (!world)
    throw LaunchError(path + ": " + why);
  if (world->size() != size) {
    int got = world->size();
    delete world;
    throw LaunchError("the launcher says " + std::to_string(size) +
                      " ranks, MPI's world has " + std::to_string(got));
  }
  return std::unique_ptr<Collective>(world);
}

} // namespace mpc
