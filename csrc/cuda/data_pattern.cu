// The byte pattern of the copy checks (fill, count wrong bytes; on the GPU and on the
// host) and the test hook that corrupts a checked result (cuda_util.cuh).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdlib>
#include <string>

#include "cuda_bench.h"
#include "cuda_util.cuh"

namespace cb {
namespace cuda {

__global__ void fill_pattern_kernel(uint8_t* p, size_t n, uint64_t seed, bool complement) {
  size_t words = n / 8;
  size_t stride = size_t(gridDim.x) * blockDim.x;
  uint64_t mask = complement ? ~0ull : 0ull;
  for (size_t w = size_t(blockIdx.x) * blockDim.x + threadIdx.x; w < words; w += stride)
    reinterpret_cast<uint64_t*>(p)[w] = pattern_word(w, seed) ^ mask;
  size_t t = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t < n - words * 8) {
    size_t i = words * 8 + t;
    p[i] = pattern_byte(i, seed) ^ uint8_t(mask);
  }
}

__device__ __forceinline__ unsigned diff_bytes(uint64_t x) {
  unsigned c = 0;
#pragma unroll
  for (int b = 0; b < 8; ++b) c += ((x >> (8 * b)) & 0xff) != 0;
  return c;
}

__global__ void check_pattern_kernel(const uint8_t* p, size_t n, uint64_t seed,
                                     unsigned long long* wrong) {
  size_t words = n / 8;
  size_t stride = size_t(gridDim.x) * blockDim.x;
  unsigned long long local = 0;
  for (size_t w = size_t(blockIdx.x) * blockDim.x + threadIdx.x; w < words; w += stride) {
    uint64_t x = reinterpret_cast<const uint64_t*>(p)[w] ^ pattern_word(w, seed);
    if (x) local += diff_bytes(x);
  }
  size_t t = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t < n - words * 8) {
    size_t i = words * 8 + t;
    local += p[i] != pattern_byte(i, seed);
  }
  if (local) atomicAdd(wrong, local);
}

template <typename T>
__global__ void count_unequal_kernel(const T* a, const T* b, size_t n, unsigned long long* wrong) {
  size_t stride = size_t(gridDim.x) * blockDim.x;
  unsigned long long local = 0;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    local += a[i] != b[i];
  if (local) atomicAdd(wrong, local);
}

template <typename T>
static void launch_count_unequal(uintptr_t a, uintptr_t b, size_t n, unsigned long long* wrong) {
  count_unequal_kernel<T><<<grid_for(n, 256, 4096), 256>>>(reinterpret_cast<const T*>(a),
                                                           reinterpret_cast<const T*>(b), n, wrong);
}

uint64_t count_unequal(int dev, uintptr_t a, uintptr_t b, size_t count, int elem_size) {
  if (!count) return 0;
  CB_CUDA(cudaSetDevice(dev), "selecting the GPU of the data check");
  unsigned long long* wrong = nullptr;
  CB_CUDA(cudaMalloc(&wrong, sizeof(*wrong)), "allocating the check counter");
  unsigned long long host = 0;
  try {
    CB_CUDA(cudaMemset(wrong, 0, sizeof(*wrong)), "clearing the check counter");
    switch (elem_size) {
      case 1: launch_count_unequal<uint8_t>(a, b, count, wrong); break;
      case 2: launch_count_unequal<uint16_t>(a, b, count, wrong); break;
      case 4: launch_count_unequal<uint32_t>(a, b, count, wrong); break;
      case 8: launch_count_unequal<uint64_t>(a, b, count, wrong); break;
      default: throw Error("count_unequal: element size " + std::to_string(elem_size) + " (1, 2, 4 or 8)");
    }
    CB_LAUNCHED("launching the element compare kernel");
    CB_CUDA(cudaMemcpy(&host, wrong, sizeof(host), cudaMemcpyDeviceToHost), "reading the check counter");
  } catch (...) {
    cudaFree(wrong);
    throw;
  }
  cudaFree(wrong);
  return host;
}

// pattern helpers

void fill_pattern_device(void* p, size_t n, uint64_t seed, bool complement, cudaStream_t s) {
  if (!n) return;
  fill_pattern_kernel<<<grid_for(n / 8 + 8, 256, 4096), 256, 0, s>>>(static_cast<uint8_t*>(p), n,
                                                                        seed, complement);
  CB_LAUNCHED("launching the pattern fill kernel");
}

uint64_t check_pattern_device(const void* p, size_t n, uint64_t seed, cudaStream_t s,
                              uint64_t* counter_dev, uint64_t deadline_ns) {
  if (!n) return 0;
  CB_CUDA(cudaMemsetAsync(counter_dev, 0, sizeof(uint64_t), s), "clearing the check counter");
  check_pattern_kernel<<<grid_for(n / 8 + 8, 256, 4096), 256, 0, s>>>(
      static_cast<const uint8_t*>(p), n, seed, reinterpret_cast<unsigned long long*>(counter_dev));
  CB_LAUNCHED("launching the pattern check kernel");
  uint64_t host = 0;
  CB_CUDA(cudaMemcpyAsync(&host, counter_dev, sizeof(host), cudaMemcpyDeviceToHost, s),
          "reading the check counter");
  cudaEvent_t ev;
  CB_CUDA(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming), "creating an event");
  cudaEventRecord(ev, s);
  try {
    wait_event(ev, deadline_ns, "data check");
  } catch (...) {
    cudaEventDestroy(ev);
    throw;
  }
  cudaEventDestroy(ev);
  return host;
}

void fill_pattern_host(void* p, size_t n, uint64_t seed, bool complement) {
  size_t words = n / 8;
  uint64_t mask = complement ? ~0ull : 0ull;
  uint64_t* w = static_cast<uint64_t*>(p);
  for (size_t i = 0; i < words; ++i) w[i] = pattern_word(i, seed) ^ mask;
  uint8_t* b = static_cast<uint8_t*>(p);
  for (size_t i = words * 8; i < n; ++i) b[i] = pattern_byte(i, seed) ^ uint8_t(mask);
}

__global__ void flip_byte_kernel(uint8_t* p) { *p ^= 0x5a; }

void corrupt_for_test(void* p, size_t n, bool on_host, cudaStream_t s) {
  static const bool enabled = std::getenv("COMM_BENCH_TEST_CORRUPT_GPU") != nullptr;
  if (!enabled || !n) return;
  uint8_t* b = static_cast<uint8_t*>(p) + n / 2;
  if (on_host) {
    CB_CUDA(cudaStreamSynchronize(s), "waiting for the copies before the test hook");
    *b ^= 0x5a;
    return;
  }
  flip_byte_kernel<<<1, 1, 0, s>>>(b);
  CB_LAUNCHED("launching the test hook's kernel");
}

uint64_t check_pattern_host(const void* p, size_t n, uint64_t seed) {
  size_t words = n / 8;
  const uint64_t* w = static_cast<const uint64_t*>(p);
  uint64_t wrong = 0;
  for (size_t i = 0; i < words; ++i) {
    uint64_t x = w[i] ^ pattern_word(i, seed);
    if (x)
      for (int b = 0; b < 8; ++b) wrong += ((x >> (8 * b)) & 0xff) != 0;
  }
  const uint8_t* b = static_cast<const uint8_t*>(p);
  for (size_t i = words * 8; i < n; ++i) wrong += b[i] != pattern_byte(i, seed);
  return wrong;
}

}  // namespace cuda
}  // namespace cb
