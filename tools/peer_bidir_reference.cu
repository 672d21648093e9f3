// The reference for comm-bench's peer copies: nvbandwidth's method written out on its own
// (not comm-bench code), one process, two GPUs with peer access.
//   write (one direction): GPU 0's copy engine writes GPU 0 -> GPU 1 (cudaMemcpyAsync on a
//   stream of GPU 0), `iters` copies between two events, after a blocking kernel released
//   once everything is queued; GB/s = bytes x iters / time.
//   bidir: the same on both GPUs at once (GPU 0 writes to GPU 1 on its stream, GPU 1 writes
//   to GPU 0 on its own), both streams held by one host flag and released together; each
//   direction's GB/s from its own stream's events, and their sum.
// Prints: "write <GB/s>" and "bidir <GB/s dir 0->1> <GB/s dir 1->0> <total>".
// With a third argument "ipc": one process per GPU, as comm-bench runs, each writing into the
// other's buffer opened through CUDA IPC, released together by a flag in shared host memory.
//
//   nvcc -O2 -std=c++17 tools/peer_bidir_reference.cu -o peer_bidir_reference
//   ./peer_bidir_reference 512 20 [ipc|ipc-devgate|ipc-2x64|ipc-2x]   # MiB per copy, copies per direction
#include <cuda_runtime.h>

#include <pthread.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#define CHECK(x)                                                                         \
  do {                                                                                   \
    cudaError_t e = (x);                                                                 \
    if (e != cudaSuccess) {                                                              \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e)); \
      std::exit(1);                                                                      \
    }                                                                                    \
  } while (0)

__global__ void hold(volatile int* flag) {
  while (*flag == 0) {
  }
}

// One process per GPU: each child writes into the other's buffer through CUDA IPC.
static int run_ipc(size_t bytes, int iters, bool device_gate, size_t dst_alloc) {
  struct Shared {
    pthread_barrier_t bar;
    cudaIpcMemHandle_t handle[2];
    cudaIpcMemHandle_t gate_handle;
    volatile int flag;
    double gbps[2];
  };
  auto* sh = static_cast<Shared*>(mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  std::memset(sh, 0, 4096);
  pthread_barrierattr_t attr;
  pthread_barrierattr_init(&attr);
  pthread_barrierattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
  pthread_barrier_init(&sh->bar, &attr, 3);
  auto sync = [&]() { pthread_barrier_wait(&sh->bar); };
  for (int d = 0; d < 2; ++d) {
    if (fork() != 0) continue;
    CHECK(cudaSetDevice(d));
    void *src, *dst, *peer;
    CHECK(cudaMalloc(&src, bytes));
    CHECK(cudaMalloc(&dst, dst_alloc));  // the copies write its first `bytes`
    CHECK(cudaMemset(src, d + 1, bytes));
    CHECK(cudaIpcGetMemHandle(&sh->handle[d], dst));
    CHECK(cudaHostRegister(sh, 4096, cudaHostRegisterMapped | cudaHostRegisterPortable));
    int* dflag;
    CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&dflag), const_cast<int*>(&sh->flag), 0));
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    cudaEvent_t t0, t1;
    CHECK(cudaEventCreate(&t0));
    CHECK(cudaEventCreate(&t1));
    sync();  // both handles written
    CHECK(cudaIpcOpenMemHandle(&peer, sh->handle[1 - d], cudaIpcMemLazyEnablePeerAccess));
    // device_gate (comm-bench's gate): a word in GPU 0's memory that both hold kernels poll,
    // GPU 1's through the peer mapping; process 0 opens it with a 4-byte copy on a second stream
    int* gate = nullptr;
    cudaStream_t s_open;
    CHECK(cudaStreamCreateWithFlags(&s_open, cudaStreamNonBlocking));
    if (device_gate) {
      if (d == 0) {
        CHECK(cudaMalloc(&gate, 64));
        CHECK(cudaMemset(gate, 0, 64));
        CHECK(cudaIpcGetMemHandle(&sh->gate_handle, gate));
      }
      sync();
      if (d == 1) CHECK(cudaIpcOpenMemHandle(reinterpret_cast<void**>(&gate), sh->gate_handle,
                                             cudaIpcMemLazyEnablePeerAccess));
    }
    static int one = 1;
    for (int round = 0; round < 2; ++round) {  // the first is a warm-up
      if (device_gate && d == 0) {
        CHECK(cudaMemsetAsync(gate, 0, sizeof(int), s_open));
        CHECK(cudaStreamSynchronize(s_open));
      }
      sync();  // the parent has closed the flag (and process 0 its gate)
      hold<<<1, 1, 0, s>>>(device_gate ? gate : dflag);
      CHECK(cudaEventRecord(t0, s));
      for (int i = 0; i < iters; ++i) CHECK(cudaMemcpyAsync(peer, src, bytes, cudaMemcpyDefault, s));
      CHECK(cudaEventRecord(t1, s));
      sync();  // queued; the parent opens the flag
      if (device_gate && d == 0) CHECK(cudaMemcpyAsync(gate, &one, sizeof(int), cudaMemcpyHostToDevice, s_open));
      CHECK(cudaEventSynchronize(t1));
      float ms = 0;
      CHECK(cudaEventElapsedTime(&ms, t0, t1));
      sh->gbps[d] = double(bytes) * iters / (ms * 1e6);
      sync();  // both measured
    }
    _exit(0);
  }
  sync();
  if (device_gate) sync();  // the gate's handle is out
  for (int round = 0; round < 2; ++round) {
    sh->flag = 0;
    sync();
    sync();
    __sync_synchronize();
    sh->flag = 1;
    sync();
  }
  int status = 0, bad = 0;
  for (int d = 0; d < 2; ++d) {
    wait(&status);
    bad |= !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  std::printf("%s (destination allocation %zu B) %.1f %.1f %.1f\n", device_gate ? "ipc-devgate-bidir" : "ipc-bidir",
              dst_alloc, sh->gbps[0], sh->gbps[1], sh->gbps[0] + sh->gbps[1]);
  return bad;
}

int main(int argc, char** argv) {
  size_t bytes = size_t(argc > 1 ? std::atoi(argv[1]) : 512) << 20;
  int iters = argc > 2 ? std::atoi(argv[2]) : 20;
  // ipc-2x64: the destination is one allocation of 2 x bytes + 64 (comm-bench's exported buffer:
  // a write half, a read half and the gate word), written in its first half
  size_t shaped = 2 * bytes + 64;
  if (argc > 3 && std::strcmp(argv[3], "ipc") == 0) return run_ipc(bytes, iters, false, bytes);
  if (argc > 3 && std::strcmp(argv[3], "ipc-devgate") == 0) return run_ipc(bytes, iters, true, bytes);
  if (argc > 3 && std::strcmp(argv[3], "ipc-2x64") == 0) return run_ipc(bytes, iters, false, shaped);
  if (argc > 3 && std::strcmp(argv[3], "ipc-2x") == 0) return run_ipc(bytes, iters, false, 2 * bytes);
  int n = 0;
  CHECK(cudaGetDeviceCount(&n));
  if (n < 2) {
    std::fprintf(stderr, "needs 2 GPUs\n");
    return 2;
  }
  void *src[2], *dst[2];
  cudaStream_t s[2];
  cudaEvent_t t0[2], t1[2];
  int* flag;
  CHECK(cudaHostAlloc(&flag, sizeof(int), cudaHostAllocMapped | cudaHostAllocPortable));
  for (int d = 0; d < 2; ++d) {
    CHECK(cudaSetDevice(d));
    CHECK(cudaDeviceEnablePeerAccess(1 - d, 0));
    CHECK(cudaMalloc(&src[d], bytes));
    CHECK(cudaMalloc(&dst[d], bytes));
    CHECK(cudaMemset(src[d], d + 1, bytes));
    CHECK(cudaStreamCreateWithFlags(&s[d], cudaStreamNonBlocking));
    CHECK(cudaEventCreate(&t0[d]));
    CHECK(cudaEventCreate(&t1[d]));
  }
  auto run = [&](int ndirs, double* gbps) {
    *flag = 0;
    for (int d = 0; d < ndirs; ++d) {
      CHECK(cudaSetDevice(d));
      int* dflag;
      CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&dflag), flag, 0));
      hold<<<1, 1, 0, s[d]>>>(dflag);
      CHECK(cudaEventRecord(t0[d], s[d]));
      for (int i = 0; i < iters; ++i) CHECK(cudaMemcpyAsync(dst[1 - d], src[d], bytes, cudaMemcpyDefault, s[d]));
      CHECK(cudaEventRecord(t1[d], s[d]));
    }
    __sync_synchronize();
    *reinterpret_cast<volatile int*>(flag) = 1;
    for (int d = 0; d < ndirs; ++d) {
      CHECK(cudaEventSynchronize(t1[d]));
      float ms = 0;
      CHECK(cudaEventElapsedTime(&ms, t0[d], t1[d]));
      gbps[d] = double(bytes) * iters / (ms * 1e6);
    }
  };
  double g[2];
  run(1, g);  // warm-up
  run(1, g);
  std::printf("write %.1f\n", g[0]);
  run(2, g);
  run(2, g);
  std::printf("bidir %.1f %.1f %.1f\n", g[0], g[1], g[0] + g[1]);
  return 0;
}
