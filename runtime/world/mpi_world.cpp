// The MPI transport of the data-parallel world: the plugin
// libmpc_mpi_world.so (runtime/world/mpi_world_abi.h), built where CMake
// finds MPI (Debian's libopenmpi-dev).
//
// It moves bytes only: allGather, allToAll and broadcast in chunks that fit
// MPI's int counts. The reduction is the mpc.AllReduce kernel's, on every rank,
// so the result does not depend on the algorithm the MPI library picks. MPI
// errors abort every rank (MPI_ERRORS_ARE_FATAL, the default): a rank that
// cannot communicate must not leave the others waiting.
#include "runtime/world/mpi_world_abi.h"

#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

/// Bytes per MPI call: far below INT_MAX, large enough to stream at memory
/// speed.
constexpr size_t kChunk = size_t(1) << 28;

class MpiWorld final : public mpc::Collective {
public:
  MpiWorld() {
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

  void allGather(const void *send, size_t bytes, void *recv) override {
    auto *out = static_cast<uint8_t *>(recv);
    if (bytes <= kChunk) {
      if (send == out + size_t(rank_) * bytes)
        MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, out, int(bytes),
                      MPI_BYTE, MPI_COMM_WORLD);
      else
        MPI_Allgather(send, int(bytes), MPI_BYTE, out, int(bytes), MPI_BYTE,
                      MPI_COMM_WORLD);
      return;
    }
    // In place too: chunk c of this rank's block is read into the exchange
    // before the copies write it back with the same bytes.
    // Chunk by chunk through a staging buffer: rank r's chunk c lands at
    // r * bytes + c's offset.
    std::vector<uint8_t> staging(kChunk * size_t(size_));
    for (size_t off = 0; off < bytes; off += kChunk) {
      size_t n = std::min(kChunk, bytes - off);
      MPI_Allgather(static_cast<const uint8_t *>(send) + off, int(n), MPI_BYTE,
                    staging.data(), int(n), MPI_BYTE, MPI_COMM_WORLD);
      for (int r = 0; r < size_; ++r)
        std::memcpy(out + size_t(r) * bytes + off,
                    staging.data() + size_t(r) * n, n);
    }
  }

  void allToAll(const void *send, size_t bytes, void *recv) override {
    const auto *in = static_cast<const uint8_t *>(send);
    auto *out = static_cast<uint8_t *>(recv);
    if (bytes <= kChunk) {
      if (in == out)
        MPI_Alltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, out, int(bytes),
                     MPI_BYTE, MPI_COMM_WORLD);
      else
        MPI_Alltoall(in, int(bytes), MPI_BYTE, out, int(bytes), MPI_BYTE,
                     MPI_COMM_WORLD);
      return;
    }
    // Chunk c of every block, packed, exchanged, unpacked (in place too:
    // chunk c is packed before the unpacking writes it).
    std::vector<uint8_t> packed(kChunk * size_t(size_)),
        got(kChunk * size_t(size_));
    for (size_t off = 0; off < bytes; off += kChunk) {
      size_t n = std::min(kChunk, bytes - off);
      for (int q = 0; q < size_; ++q)
        std::memcpy(packed.data() + size_t(q) * n, in + size_t(q) * bytes + off,
                    n);
      MPI_Alltoall(packed.data(), int(n), MPI_BYTE, got.data(), int(n),
                   MPI_BYTE, MPI_COMM_WORLD);
      for (int q = 0; q < size_; ++q)
        std::memcpy(out + size_t(q) * bytes + off, got.data() + size_t(q) * n,
                    n);
    }
  }

  void broadcast(void *buf, size_t bytes, int root) override {
    auto *p = static_cast<uint8_t *>(buf);
    for (size_t off = 0; off < bytes; off += kChunk)
      MPI_Bcast(p + off, int(std::min(kChunk, bytes - off)), MPI_BYTE, root,
                MPI_COMM_WORLD);
  }

  [[noreturn]] void abort(int code) override {
    MPI_Abort(MPI_COMM_WORLD, code);
    std::_Exit(code); // MPI_Abort does not return; this says so to the compiler
  }

private:
  int rank_ = 0, size_ = 1;
};

} // namespace

extern "C" __attribute__((visibility("default"))) mpc::Collective *
mpc_mpi_world_join(int abi, char *why, size_t whySize) {
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
  return new MpiWorld();
}
