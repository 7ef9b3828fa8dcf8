// BatchPrefetcher (runtime/data/batch_prefetch.h).
#include "runtime/data/batch_prefetch.h"

namespace mpc {

BatchPrefetcher::BatchPrefetcher(std::function<Batch(int64_t)> make,
                                 int64_t stride)
    : make_(std::move(make)), stride_(stride) {
  thread_ = std::thread([this] { work(); });
}

BatchPrefetcher::~BatchPrefetcher() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

void BatchPrefetcher::work() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    changed_.wait(lock, [&] { return stop_ || (ahead_ >= 0 && !ready_); });
    if (stop_)
      return;
    const int64_t index = ahead_;
    lock.unlock();
    Batch made;
    std::exception_ptr error;
    try {
      made = make_(index);
    } catch (...) {
      error = std::current_exception();
    }
    lock.lock();
    batch_ = std::move(made);
    error_ = error;
    ready_ = true;
    changed_.notify_all();
  }
}

BatchPrefetcher::Batch BatchPrefetcher::get(int64_t index) {
  std::unique_lock<std::mutex> lock(mutex_);
  // Whatever the thread is making, it must be done before the caller may
  // make a batch itself (`make` is not for two threads at once).
  changed_.wait(lock, [&] { return ahead_ < 0 || ready_; });
  Batch out;
  std::exception_ptr error;
  const bool hit = ahead_ == index;
  if (hit) {
    out = std::move(batch_);
    error = error_;
  }
  batch_.clear();
  error_ = nullptr;
  ahead_ = -1;
  ready_ = false;
  if (!hit) {
    lock.unlock();
    out = make_(index); // throws on the caller's thread, nothing ahead
    lock.lock();
  }
  if (error)
    std::rethrow_exception(error);
  ahead_ = index + stride_;
  changed_.notify_all();
  return out;
}

} // namespace mpc
