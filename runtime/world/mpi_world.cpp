// The MPI transport of the data-parallel world: the plugin
// libmpc_mpi_world.so (runtime/world/mpi_world_abi.h), built where CMake
// finds MPI (Debian's libopenmpi-dev).
//
// It moves bytes only: allGather, allToAll and broadcast as non-blocking
// point-to-point messages (chunks that fit MPI's int counts), one per pair
// of ranks, like the Gloo world. The reduction is the mpc.AllReduce kernel's,
// on every rank, so the result does not depend on the MPI library's
// algorithms. Point to point rather than MPI's collectives so that every
// wait is bounded and names whom it waits for: MPI has no timeouts, so the
// messages are tested until the collective timeout passes with none
// completing; then the line names the ranks whose messages are missing and
// MPI_Abort ends every rank (mpirun kills a stopped one too). MPI errors
// abort every rank as well (MPI_ERRORS_ARE_FATAL, the default): a rank
// that cannot communicate must not leave the others waiting.
#include "runtime/world/mpi_world_abi.h"

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

/// Bytes per MPI message: far below INT_MAX, large enough to stream at
/// memory speed.
constexpr size_t kChunk = size_t(1) << 28;

/// The collectives' messages; a tag of its own keeps them apart from
/// anything else on MPI_COMM_WORLD.
constexpr int kTag = 0x6d7063; // "mpc"

using Clock = std::chrono::steady_clock;

class MpiWorld final : public mpc::Collective {
public:
  explicit MpiWorld(double timeoutSeconds) : timeoutSeconds_(timeoutSeconds) {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
  }
  ~MpiWorld() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized)
      MPI_Finalize();
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  double timeoutSeconds() const override { return timeoutSeconds_; }

  void allGather(const void *send, size_t bytes, void *recv) override {
    auto *out = static_cast<uint8_t *>(recv);
    uint8_t *own = out + size_t(rank_) * bytes;
    if (send != own && bytes)
      std::memcpy(own, send, bytes);
    for (int q = 0; q < size_; ++q)
      if (q != rank_) {
        post(q, own, bytes, out + size_t(q) * bytes, bytes);
      }
    waitAll();
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
    for (int q = 0; q < size_; ++q)
      if (q != rank_)
        post(q, in + size_t(q) * bytes, bytes, out + size_t(q) * bytes, bytes);
    waitAll();
  }

  void broadcast(void *buf, size_t bytes, int root) override {
    auto *p = static_cast<uint8_t *>(buf);
    if (rank_ == root) {
      for (int q = 0; q < size_; ++q)
        if (q != rank_)
          post(q, p, bytes, nullptr, 0);
    } else {
      post(root, nullptr, 0, p, bytes);
    }
    waitAll();
  }

  [[noreturn]] void abort(int code) override {
    MPI_Abort(MPI_COMM_WORLD, code);
    std::_Exit(code); // MPI_Abort does not return; this says so to the compiler
  }

private:
  /// Starts the messages to and from `peer`: `sendBytes` from `send`,
  /// `recvBytes` into `recv`, each in chunks.
  void post(int peer, const uint8_t *send, size_t sendBytes, uint8_t *recv,
            size_t recvBytes) {
    for (size_t off = 0; off < recvBytes; off += kChunk) {
      requests_.emplace_back();
      peers_.push_back(peer);
      MPI_Irecv(recv + off, int(std::min(kChunk, recvBytes - off)), MPI_BYTE,
                peer, kTag, MPI_COMM_WORLD, &requests_.back());
    }
    for (size_t off = 0; off < sendBytes; off += kChunk) {
      requests_.emplace_back();
      peers_.push_back(peer);
      MPI_Isend(send + off, int(std::min(kChunk, sendBytes - off)), MPI_BYTE,
                peer, kTag, MPI_COMM_WORLD, &requests_.back());
    }
  }

  /// Tests the posted messages until all are done; none completing for the
  /// timeout ends every rank with a line naming the silent ones.
  void waitAll() {
    const auto patience = std::chrono::milliseconds(
        int64_t(std::min(timeoutSeconds_, 1e9) * 1e3 + 0.5));
    auto last = Clock::now();
    std::vector<int> done(requests_.size());
    int left = int(requests_.size());
    for (int idle = 0; left > 0;) {
      int count = 0;
      MPI_Testsome(int(requests_.size()), requests_.data(), &count, done.data(),
                   MPI_STATUSES_IGNORE);
      if (count == MPI_UNDEFINED) // every request is inactive
        break;
      if (count > 0) {
        left -= count;
        last = Clock::now();
        idle = 0;
        continue;
      }
      if (Clock::now() - last >= patience)
        silent();
      // Spin briefly (a step's messages usually complete at once), then
      // poll at 1 ms so that a long wait does not burn a core.
      if (++idle > 1000)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      else
        std::this_thread::yield();
    }
    requests_.clear();
    peers_.clear();
  }

  [[noreturn]] void silent() {
    std::vector<int> missing;
    for (size_t i = 0; i < requests_.size(); ++i)
      if (requests_[i] != MPI_REQUEST_NULL &&
          std::find(missing.begin(), missing.end(), peers_[i]) == missing.end())
        missing.push_back(peers_[i]);
    std::sort(missing.begin(), missing.end());
    std::string who = missing.size() == 1 ? "rank " : "ranks ";
    for (size_t i = 0; i < missing.size(); ++i)
      who += (i ? ", " : "") + std::to_string(missing[i]);
    char seconds[32];
    std::snprintf(seconds, sizeof seconds, "%g s", timeoutSeconds_);
    std::string line = "mpc-run: rank " + std::to_string(rank_) + ": " + who +
                       " did not answer in a collective for " + seconds +
                       " (--collective-timeout): stopped, hung or "
                       "unreachable\n";
    std::fwrite(line.data(), 1, line.size(), stderr);
    std::fflush(stdout);
    std::fflush(stderr);
    abort(1);
  }

  int rank_ = 0, size_ = 1;
  double timeoutSeconds_;
  std::vector<MPI_Request> requests_;
  std::vector<int> peers_; ///< peers_[i]: the rank of requests_[i]
  std::vector<uint8_t> staging_;
};

} // namespace

extern "C" __attribute__((visibility("default"))) mpc::Collective *
mpc_mpi_world_join(int abi, double collectiveTimeoutSeconds, char *why,
                   size_t whySize) {
  if (abi != MPC_MPI_WORLD_ABI) {
    std::snprintf(why, whySize,
                  "the MPI world plugin is of another build (interface %d, "
                  "mpc-run expects %d)",
                  MPC_MPI_WORLD_ABI, abi);
    return nullptr;
  }
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized && MPI_Init(nullptr, nullptr) != MPI_SUCCESS) {
    std::snprintf(why, whySize, "MPI_Init failed");
    return nullptr;
  }
  return new MpiWorld(collectiveTimeoutSeconds);
}
