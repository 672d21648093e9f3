// Helpers shared by the CUDA sources: error checks, waits with a deadline,
// the blocking kernel, byte patterns for data checks.
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <thread>

#include "harness.h"

namespace cb {
namespace cuda {

inline std::string cuda_err(cudaError_t e) {
  return std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e);
}

#define CB_CUDA(call, what)                                                            \
  do {                                                                                 \
    cudaError_t e_ = (call);                                                           \
    if (e_ != cudaSuccess) throw ::cb::Error(std::string(what) + ": " + ::cb::cuda::cuda_err(e_)); \
  } while (0)

#define CB_LAUNCHED(what)                                                              \
  do {                                                                                 \
    cudaError_t e_ = cudaGetLastError();                                               \
    if (e_ != cudaSuccess) throw ::cb::Error(std::string(what) + ": " + ::cb::cuda::cuda_err(e_)); \
  } while (0)

// Polls an event until it completes or the deadline passes (never a blocking sync).
// `on_poll` may throw (e.g. NCCL's asynchronous error check).
template <typename F>
inline void wait_event(cudaEvent_t ev, uint64_t deadline_ns, const std::string& what, F on_poll) {
  unsigned spins = 0;
  while (true) {
    cudaError_t e = cudaEventQuery(ev);
    if (e == cudaSuccess) return;
    if (e != cudaErrorNotReady) throw Error(what + ": " + cuda_err(e));
    on_poll();
    if (now_ns() > deadline_ns)
      throw Error(what + ": did not complete before the deadline (the run's timeout)");
    if (++spins > 64) std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
}
inline void wait_event(cudaEvent_t ev, uint64_t deadline_ns, const std::string& what) {
  wait_event(ev, deadline_ns, what, [] {});
}

// Blocks for `work` items of `threads` each, at most max_blocks (grid-stride loops do the rest).
inline int grid_for(size_t work, int threads, int max_blocks) {
  size_t blocks = (work + threads - 1) / threads;
  return int(std::max<size_t>(1, std::min<size_t>(blocks, size_t(max_blocks))));
}

inline uint64_t deadline_after(double seconds) {
  if (seconds <= 0) seconds = 600;
  return now_ns() + uint64_t(seconds * 1e9);
}

__device__ __forceinline__ uint64_t global_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// nvbandwidth's blocking kernel: holds the stream until the host has queued all
// the timed work, so launch gaps are not measured. It releases itself after
// timeout_ns (and says so) in case the host could not queue everything.
__global__ void spin_kernel(volatile int* flag, volatile int* timed_out, uint64_t timeout_ns);

// 64-bit word pattern: word w of a buffer with seed s.
__host__ __device__ __forceinline__ uint64_t pattern_word(uint64_t w, uint64_t seed) {
  uint64_t z = w + seed * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
__host__ __device__ __forceinline__ uint8_t pattern_byte(uint64_t i, uint64_t seed) {
  return uint8_t(pattern_word(i >> 3, seed) >> (8 * (i & 7)));
}

// Fill `n` bytes at p (device-accessible) with the pattern, or its complement (poison).
void fill_pattern_device(void* p, size_t n, uint64_t seed, bool complement, cudaStream_t s);
// Count bytes of p differing from the pattern; result read back (waits with deadline).
uint64_t check_pattern_device(const void* p, size_t n, uint64_t seed, cudaStream_t s,
                              uint64_t* counter_dev, uint64_t deadline_ns);
void fill_pattern_host(void* p, size_t n, uint64_t seed, bool complement);
uint64_t check_pattern_host(const void* p, size_t n, uint64_t seed);

// Test hook of the GPU data checks (nccl, cuda): with COMM_BENCH_TEST_CORRUPT_GPU set, one
// byte in the middle of each checked result is flipped after it arrived and before the
// check runs, so a test sees the check count it (tests/test_gpu_transports.py). The
// variable is read once; the hook runs after the timed passes.
void corrupt_for_test(void* p, size_t n, bool on_host, cudaStream_t s);

}  // namespace cuda
}  // namespace cb
