#include "store_send_pool.h"

#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>

namespace cb::store {

SendPool::SendPool(int helpers) {
  for (int i = 0; i < helpers; ++i) threads_.emplace_back([this] { helper(); });
}

int SendPool::helpers_for_this_host() {
  // COMM_BENCH_STORE_SEND_THREADS, else a quarter of the cores, at most 4: the ranks on
  // rank 0's host need the rest
  if (const char* set = std::getenv("COMM_BENCH_STORE_SEND_THREADS")) return std::clamp(std::atoi(set), 0, 64);
  int cores = int(std::thread::hardware_concurrency());
  return std::clamp(cores / 4, 0, 4);
}

void SendPool::take_jobs() {
  std::vector<Job>& jobs = *jobs_;
  constexpr size_t kChunk = 16;
  for (;;) {
    size_t first = next_.fetch_add(kChunk);
    if (first >= jobs.size()) return;
    for (size_t i = first; i < std::min(first + kChunk, jobs.size()); ++i) {
      Job& j = jobs[i];
      ssize_t n;
      do n = ::send(j.fd, j.data, j.size, MSG_NOSIGNAL | MSG_DONTWAIT);
      while (n < 0 && errno == EINTR);
      j.sent = n > 0 ? n : 0;
      j.err = n < 0 && errno != EAGAIN && errno != EWOULDBLOCK ? errno : 0;
    }
  }
}

void SendPool::helper() {
  uint64_t seen = 0;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      start_.wait(lock, [&] { return round_ != seen; });
      seen = round_;
    }
    take_jobs();
    std::lock_guard<std::mutex> lock(mutex_);
    if (--running_ == 0) finished_.notify_one();
  }
}

void SendPool::run(std::vector<Job>& jobs) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    jobs_ = &jobs;
    next_ = 0;
    running_ = int(threads_.size());
    ++round_;
  }
  start_.notify_all();
  take_jobs();
  std::unique_lock<std::mutex> lock(mutex_);
  finished_.wait(lock, [&] { return running_ == 0; });   // jobs outlive every helper's use
  jobs_ = nullptr;
}

}  // namespace cb::store
