// Batches made one ahead on a background thread: while a step runs on
// batch i, the next batch the run will ask for is cut (read from mapped
// files, checked) beside it.
//
// Bounded: at most one batch is made ahead. A batch is a pure function of
// its index, so one made ahead and not asked for is dropped and the asked
// one made afresh; an error making a batch ahead is kept and thrown on the
// caller's thread, as its one line, only when that batch is asked for (a
// bad sample past the run's last step is never reported). The thread is
// joined when the prefetcher is destroyed, on every way out of a run.
#pragma once

#include "ir/tensor.h"

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace mpc {

class BatchPrefetcher {
public:
  using Batch = std::vector<std::pair<std::string, Tensor>>;
  /// `make` cuts batch `index`; it is called from one thread at a time
  /// (the caller's or the background one), never from two at once.
  /// After batch i the next asked for is i + `stride` (runtime/run_length.h:
  /// the ranks' batches interleave).
  BatchPrefetcher(std::function<Batch(int64_t)> make, int64_t stride);
  ~BatchPrefetcher();
  BatchPrefetcher(const BatchPrefetcher &) = delete;
  BatchPrefetcher &operator=(const BatchPrefetcher &) = delete;

  /// Batch `index` (the one made ahead when it is that one), then starts
  /// making batch index + stride. Throws what making it threw.
  Batch get(int64_t index);

private:
  void work();

  std::function<Batch(int64_t)> make_;
  const int64_t stride_;
  std::mutex mutex_;
  std::condition_variable changed_;
  bool stop_ = false;
  /// The batch asked of the thread (-1: none), and whether it is made.
  int64_t ahead_ = -1;
  bool ready_ = false;
  Batch batch_;
  std::exception_ptr error_;
  std::thread thread_;
};

} // namespace mpc
