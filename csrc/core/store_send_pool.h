// Sends a batch of replies from several threads at once: the rendezvous store's barrier ends
// with one small reply to each of N waiters, and on loopback each send also runs the
// receiver's TCP path and wakes it, microseconds of kernel time per send. Spread over a few
// cores, N sends take a fraction of the one thread's time (TCPStore's libuv loop has one).
#pragma once
#include <sys/types.h>

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <thread>
#include <vector>

namespace cb::store {

class SendPool {
 public:
  struct Job {
    int fd;
    const char* data;
    size_t size;
    ssize_t sent = 0;    // bytes the socket took (non-blocking: may be short)
    int err = 0;         // errno of a failed send, 0 if none
  };
  explicit SendPool(int helpers);
  // One non-blocking send per job, on the helpers and the calling thread; returns when all
  // are done. The caller owns the sockets' state: the helpers touch only their jobs.
  void run(std::vector<Job>& jobs);
  // Helpers worth having on this machine (0: send on the loop's thread alone).
  static int helpers_for_this_host();

 private:
  void helper();
  void take_jobs();

  std::mutex mutex_;
  std::condition_variable start_, finished_;
  std::vector<Job>* jobs_ = nullptr;
  std::atomic<size_t> next_{0};
  uint64_t round_ = 0;
  int running_ = 0;
  std::vector<std::thread> threads_;
};

}  // namespace cb::store
