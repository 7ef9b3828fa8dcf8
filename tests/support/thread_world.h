// ThreadWorld: a data-parallel world of N threads in one process, for the
// tests of mpc.AllReduce and of data-parallel training without mpirun.
//
// Each thread holds its rank's Collective (rank(r)); the collectives meet at
// a barrier, read each other's buffers directly, and meet again before any
// rank may reuse its buffer. The bytes moved are the MPI plugin's
// (runtime/world/mpi_world.cpp): what differs is only the transport.
#pragma once

#include "kernels/collective.h"

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace mpc {
namespace test {

class ThreadWorld {
public:
  explicit ThreadWorld(int size) : size_(size), posted_(size_t(size)) {
    for (int r = 0; r < size; ++r)
      ranks_.push_back(std::make_unique<Rank>(*this, r));
  }
  Collective &rank(int r) { return *ranks_[size_t(r)]; }
  int size() const { return size_; }
  /// allToAll calls so far, summed over the ranks (mpc.AllReduce makes one
  /// per rank each time its ranks communicate).
  int allToAllCalls() const { return allToAllCalls_; }

  /// Runs body(rank) on one thread per rank and waits for all; an exception
  /// on a rank is rethrown here (the first rank's that threw).
  void run(const std::function<void(int)> &body) {
    std::vector<std::exception_ptr> errors(static_cast<size_t>(size_));
    std::vector<std::thread> threads;
    for (int r = 0; r < size_; ++r)
      threads.emplace_back([&, r] {
        try {
          body(r);
        } catch (...) {
          errors[size_t(r)] = std::current_exception();
        }
      });
    for (std::thread &t : threads)
      t.join();
    for (const std::exception_ptr &e : errors)
      if (e)
        std::rethrow_exception(e);
  }

private:
  class Rank final : public Collective {
  public:
    Rank(ThreadWorld &w, int r) : w_(w), r_(r) {}
    int rank() const override { return r_; }
    int size() const override { return w_.size_; }
    void allGather(const void *send, size_t bytes, void *recv) override {
      w_.posted_[size_t(r_)] = send;
      w_.barrier();
      for (int q = 0; q < w_.size_; ++q)
        if (bytes && static_cast<uint8_t *>(recv) + size_t(q) * bytes !=
                         w_.posted_[size_t(q)]) // in place: already there
          std::memcpy(static_cast<uint8_t *>(recv) + size_t(q) * bytes,
                      w_.posted_[size_t(q)], bytes);
      w_.barrier(); // every rank has read every buffer
    }
    void allToAll(const void *send, size_t bytes, void *recv) override {
      ++w_.allToAllCalls_;
      // In place, the other ranks read this rank's blocks while it writes
      // its own: they read a copy.
      std::vector<uint8_t> copy;
      if (send == recv) {
        const auto *p = static_cast<const uint8_t *>(send);
        copy.assign(p, p + bytes * size_t(w_.size_));
        send = copy.data();
      }
      w_.posted_[size_t(r_)] = send;
      w_.barrier();
      for (int q = 0; q < w_.size_; ++q)
        if (bytes)
          std::memcpy(static_cast<uint8_t *>(recv) + size_t(q) * bytes,
                      static_cast<const uint8_t *>(w_.posted_[size_t(q)]) +
                          size_t(r_) * bytes,
                      bytes);
      w_.barrier();
    }
    void broadcast(void *buf, size_t bytes, int root) override {
      w_.posted_[size_t(r_)] = buf;
      w_.barrier();
      if (r_ != root && bytes)
        std::memcpy(buf, w_.posted_[size_t(root)], bytes);
      w_.barrier();
    }
    [[noreturn]] void abort(int code) override { std::abort(); }

  private:
    ThreadWorld &w_;
    int r_;
  };

  void barrier() {
    std::unique_lock<std::mutex> lock(mutex_);
    uint64_t generation = generation_;
    if (++arrived_ == size_) {
      arrived_ = 0;
      ++generation_;
      cv_.notify_all();
      return;
    }
    cv_.wait(lock, [&] { return generation_ != generation; });
  }

  int size_;
  std::vector<const void *> posted_;
  std::vector<std::unique_ptr<Rank>> ranks_;
  std::mutex mutex_;
  std::condition_variable cv_;
  int arrived_ = 0;
  uint64_t generation_ = 0;
  std::atomic<int> allToAllCalls_{0};
};

} // namespace test
} // namespace mpc
