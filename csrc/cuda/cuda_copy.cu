// CUDA copies as nvbandwidth measures them: host<->device, both at once,
// device-local and GPU->GPU (peer, through CUDA IPC between ranks), each by a
// copy engine (cudaMemcpyAsync) or by an SM copy kernel, with pinned or
// pageable host memory placed on the GPU's NUMA node.
//
// Timing: a blocking kernel holds the stream while the host queues the copies; the
// host then releases it, so the copies run back to back. The figure is the GPU time
// between an event before and an event after `iters` copies, / iters (nvbandwidth);
// a second pass with an event after each copy gives the per-iteration spread.
// peer_bidir is nvbandwidth's bidirectional write: both GPUs of a pair write to each
// other at once, each rank timing its own direction, started together by a gate.
// Pageable copies cannot be queued behind a blocked stream (the driver stages
// them through the host), so they are timed with events and no blocking kernel.
// (Over 400 lines: the buffers, the gate of concurrent pairs and run() share one Impl;
// device queries and data patterns are in device_query.cu and data_pattern.cu.)
#include <cuda_runtime.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cuda_bench.h"
#include "cuda_util.cuh"
#include "event_timing.cuh"

namespace cb {
namespace cuda {

// ---------------------------------------------------------------------------
// kernels
__global__ void spin_kernel(volatile int* flag, volatile int* timed_out, uint64_t timeout_ns) {
  uint64_t start = global_ns();
  while (*flag == 0) {
    if (global_ns() - start > timeout_ns) {
      *timed_out = 1;
      break;
    }
  }
}

// 16-byte copies, four loads in flight per thread before the stores.
__global__ void __launch_bounds__(512) copy16_kernel(int4* __restrict__ dst, const int4* __restrict__ src,
                                                     size_t n) {
  size_t stride = size_t(gridDim.x) * blockDim.x;
  size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  for (; i + 3 * stride < n; i += 4 * stride) {
    int4 a = src[i], b = src[i + stride], c = src[i + 2 * stride], d = src[i + 3 * stride];
    dst[i] = a;
    dst[i + stride] = b;
    dst[i + 2 * stride] = c;
    dst[i + 3 * stride] = d;
  }
  for (; i < n; i += stride) dst[i] = src[i];
}

__global__ void copy_bytes_kernel(uint8_t* dst, const uint8_t* src, size_t n) {
  size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) dst[i] = src[i];
}

// ---------------------------------------------------------------------------
// host memory on a NUMA node: mmap, mbind (MPOL_PREFERRED) before first touch,
// then pin with cudaHostRegister where asked.
struct HostBuffer {
  void* p = nullptr;
  size_t bytes = 0;
  bool pinned = false;
  int node = -1;

  void alloc(size_t n, bool pin, int numa) {
    free();
    size_t len = std::max<size_t>(n, 4096);
    void* q = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (q == MAP_FAILED) throw Error("cannot map " + std::to_string(len) + " bytes of host memory");
    node = -1;
    if (numa >= 0 && numa < 1024) {
      unsigned long mask[1024 / (8 * sizeof(unsigned long))] = {0};
      mask[numa / (8 * sizeof(unsigned long))] = 1ul << (numa % (8 * sizeof(unsigned long)));
      const long MPOL_PREFERRED_ = 1;
      if (syscall(SYS_mbind, q, len, MPOL_PREFERRED_, mask, 1024, 0) == 0) node = numa;
    }
    std::memset(q, 0, len);  // first touch: places (and faults in) the pages now
    if (pin) {
      cudaError_t e = cudaHostRegister(q, len, cudaHostRegisterPortable | cudaHostRegisterMapped);
      if (e != cudaSuccess) {
        munmap(q, len);
        cudaGetLastError();
        throw Error("cannot pin " + std::to_string(len) + " bytes of host memory: " + cuda_err(e));
      }
    }
    p = q;
    bytes = len;
    pinned = pin;
  }
  void free() {
    if (!p) return;
    if (pinned) cudaHostUnregister(p);
    munmap(p, bytes);
    p = nullptr;
    bytes = 0;
  }
  ~HostBuffer() { free(); }
};

struct DeviceBuffer {
  void* p = nullptr;
  size_t bytes = 0;
  void alloc(size_t n) {
    free();
    CB_CUDA(cudaMalloc(&p, std::max<size_t>(n, 256)), "allocating " + std::to_string(n) + " bytes on the GPU");
    bytes = std::max<size_t>(n, 256);
  }
  void free() {
    if (p) cudaFree(p);
    p = nullptr;
    bytes = 0;
  }
  ~DeviceBuffer() { free(); }
};

// An exported buffer: a write half, a read half, then the gate word of concurrent
// (peer_bidir) batches that this rank leads.
constexpr size_t kGateBytes = 256;
constexpr size_t kExportGranule = size_t(2) << 20;  // the GPU's large page

struct Peer {
  void* base = nullptr;  // the peer's exported buffer, mapped here
  size_t bytes = 0;      // per half
  int device = -1;
  int* gate() const { return reinterpret_cast<int*>(static_cast<char*>(base) + 2 * bytes); }
};

struct CopyBench::Impl {
  int dev = 0;
  int numa = -1;
  int sm_count = 1;
  cudaStream_t s0 = nullptr, s1 = nullptr;
  int* flags = nullptr;  // mapped pinned: [0] release flag, [1] timed-out flag
  int* flags_dev = nullptr;
  uint64_t* counter = nullptr;
  HostBuffer hsrc, hdst;   // host source (h2d) and destination (d2h)
  DeviceBuffer dsrc, ddst;  // device source and destination
  void* exported = nullptr;
  size_t exported_half = 0;
  std::vector<Peer> peers;
  std::vector<cudaEvent_t> ev0, ev1;

  void use() { CB_CUDA(cudaSetDevice(dev), "selecting GPU " + std::to_string(dev)); }
  volatile int* gate() {
    if (!exported) throw Error("no peer buffer exported for a concurrent copy");
    return reinterpret_cast<volatile int*>(static_cast<char*>(exported) + 2 * exported_half);
  }

  void ensure_host(HostBuffer& b, size_t n, bool pinned) {
    if (b.p && b.bytes >= n && b.pinned == pinned) return;
    b.alloc(n, pinned, numa);
  }
  void ensure_dev(DeviceBuffer& b, size_t n) {
    if (b.p && b.bytes >= n) return;
    b.alloc(n);
  }
  void ensure_events(size_t n) {
    while (ev0.size() < n) {
      cudaEvent_t a, b;
      CB_CUDA(cudaEventCreate(&a), "creating an event");
      CB_CUDA(cudaEventCreate(&b), "creating an event");
      ev0.push_back(a);
      ev1.push_back(b);
    }
  }
  void* host_dev_ptr(void* p) {  // device view of pinned host memory
    void* d = nullptr;
    CB_CUDA(cudaHostGetDevicePointer(&d, p, 0), "mapping pinned host memory");
    return d;
  }
  void sm_copy(void* dst, const void* src, size_t n, cudaStream_t s) {
    size_t n16 = n / 16;
    if (n16) {
      int threads = 512;
      int blocks = grid_for(n16, threads, sm_count * 4);
      copy16_kernel<<<blocks, threads, 0, s>>>(static_cast<int4*>(dst), static_cast<const int4*>(src), n16);
    }
    size_t tail = n - n16 * 16;
    if (tail)
      copy_bytes_kernel<<<1, 32, 0, s>>>(static_cast<uint8_t*>(dst) + n16 * 16,
                                         static_cast<const uint8_t*>(src) + n16 * 16, tail);
    CB_LAUNCHED("launching the SM copy kernel");
  }
  void copy(void* dst, const void* src, size_t n, bool sm, cudaStream_t s) {
    if (sm)
      sm_copy(dst, src, n, s);
    else
      CB_CUDA(cudaMemcpyAsync(dst, src, n, cudaMemcpyDefault, s), "cudaMemcpyAsync");
  }
};

CopyBench::CopyBench(int device, int numa_node) : impl_(new Impl) {
  impl_->dev = device;
  impl_->use();
  cudaDeviceProp p;
  CB_CUDA(cudaGetDeviceProperties(&p, device), "reading GPU properties");
  impl_->sm_count = p.multiProcessorCount;
  if (numa_node == -1) {  // auto: the GPU's node, where the machine has several
    DeviceInfo d = device_info(device);
    impl_->numa = numa_node_count() > 1 ? d.numa_node : -1;
  } else {
    impl_->numa = numa_node;  // -2 or less: do not place
    if (impl_->numa < -1) impl_->numa = -1;
  }
  CB_CUDA(cudaStreamCreateWithFlags(&impl_->s0, cudaStreamNonBlocking), "creating a stream");
  CB_CUDA(cudaStreamCreateWithFlags(&impl_->s1, cudaStreamNonBlocking), "creating a stream");
  CB_CUDA(cudaHostAlloc(reinterpret_cast<void**>(&impl_->flags), 64, cudaHostAllocMapped | cudaHostAllocPortable),
          "allocating the blocking kernel's flag");
  std::memset(impl_->flags, 0, 64);
  CB_CUDA(cudaHostGetDevicePointer(reinterpret_cast<void**>(&impl_->flags_dev), impl_->flags, 0),
          "mapping the blocking kernel's flag");
  CB_CUDA(cudaMalloc(&impl_->counter, sizeof(uint64_t)), "allocating the check counter");
}

CopyBench::~CopyBench() {
  Impl* m = impl_;
  cudaSetDevice(m->dev);
  cudaStreamSynchronize(m->s0);
  cudaStreamSynchronize(m->s1);
  for (auto& p : m->peers)
    if (p.base) cudaIpcCloseMemHandle(p.base);
  for (auto e : m->ev0) cudaEventDestroy(e);
  for (auto e : m->ev1) cudaEventDestroy(e);
  m->hsrc.free();
  m->hdst.free();
  m->dsrc.free();
  m->ddst.free();
  if (m->exported) cudaFree(m->exported);
  if (m->counter) cudaFree(m->counter);
  if (m->flags) cudaFreeHost(m->flags);
  cudaStreamDestroy(m->s0);
  cudaStreamDestroy(m->s1);
  delete m;
}

int CopyBench::device() const { return impl_->dev; }

void CopyBench::release_buffers() {
  impl_->use();
  cudaStreamSynchronize(impl_->s0);
  cudaStreamSynchronize(impl_->s1);
  impl_->hsrc.free();
  impl_->hdst.free();
  impl_->dsrc.free();
  impl_->ddst.free();
}

std::string CopyBench::export_peer_buffer(size_t bytes) {
  Impl& m = *impl_;
  m.use();
  bytes = std::max<size_t>((bytes + 255) / 256 * 256, 256);
  if (m.exported) cudaFree(m.exported);
  // A whole number of 2 MiB pages: an exported allocation of any other size (2 x 512 MiB +
  // the gate, say) is written by a peer's copy engine at 0.75x the rate when both GPUs write
  // at once (291 vs 392 GB/s per direction on 2 x H200, tools/peer_bidir_reference.cu ipc-2x64).
  const size_t total = (2 * bytes + kGateBytes + kExportGranule - 1) / kExportGranule * kExportGranule;
  CB_CUDA(cudaMalloc(&m.exported, total), "allocating the buffer peers copy into");
  CB_CUDA(cudaMemset(m.exported, 0, total), "clearing the buffer peers copy into");
  m.exported_half = bytes;
  cudaIpcMemHandle_t h;
  CB_CUDA(cudaIpcGetMemHandle(&h, m.exported), "exporting the peer buffer (cudaIpcGetMemHandle)");
  return std::string(reinterpret_cast<const char*>(&h), sizeof(h));
}

int CopyBench::open_peer(const std::string& handle, int peer_device, size_t bytes) {
  Impl& m = *impl_;
  m.use();
  if (handle.size() != sizeof(cudaIpcMemHandle_t)) throw Error("peer buffer handle has the wrong size");
  cudaIpcMemHandle_t h;
  std::memcpy(&h, handle.data(), sizeof(h));
  Peer p;
  CB_CUDA(cudaIpcOpenMemHandle(&p.base, h, cudaIpcMemLazyEnablePeerAccess),
          "opening GPU " + std::to_string(peer_device) + "'s buffer on GPU " + std::to_string(m.dev) +
              " (cudaIpcOpenMemHandle)");
  p.bytes = std::max<size_t>((bytes + 255) / 256 * 256, 256);
  p.device = peer_device;
  m.peers.push_back(p);
  return int(m.peers.size() - 1);
}

// The copy kinds, one entry each: CopyBench::run reads only this table. A kind is its
// copies: (dst0 <- src0) on stream 0 and, for a kind that copies both ways at once,
// (dst1 <- src1) on stream 1; each copy is issued by the run's method (ce or sm). A peer's
// exported buffer has a half peers write to and a half they read from. The NUMA node
// recorded is that of the first host buffer among src0, dst0.
enum Buf { NONE, HOST_SRC, HOST_DST, DEV_SRC, DEV_DST, PEER_WRITE, PEER_READ };
struct CopyKind {
  const char* name;
  Buf src0, dst0, src1, dst1;
  bool uses(Buf b) const { return src0 == b || dst0 == b || src1 == b || dst1 == b; }
  bool uses_host() const { return uses(HOST_SRC) || uses(HOST_DST); }
  bool uses_peer() const { return uses(PEER_WRITE) || uses(PEER_READ); }
};
static const CopyKind COPY_KINDS[] = {
    {"h2d", HOST_SRC, DEV_DST, NONE, NONE},
    {"d2h", DEV_SRC, HOST_DST, NONE, NONE},
    {"bidir", HOST_SRC, DEV_DST, DEV_SRC, HOST_DST},
    {"d2d", DEV_SRC, DEV_DST, NONE, NONE},
    {"peer", DEV_SRC, PEER_WRITE, NONE, NONE},
    {"peer_bidir", DEV_SRC, PEER_WRITE, NONE, NONE},  // the peer rank writes the other way
    {"peer_read", PEER_READ, DEV_DST, NONE, NONE},
};
static const CopyKind* copy_kind(const std::string& name) {
  for (const CopyKind& k : COPY_KINDS)
    if (name == k.name) return &k;
  return nullptr;
}

CopyResult CopyBench::run(const std::string& kind, const std::string& method, const std::string& host_mem,
                          size_t nbytes, int iters, int warmup, bool check, int peer_slot, double timeout_s,
                          int gate_role, const std::function<void(int)>& sync) {
  Impl& m = *impl_;
  m.use();
  const bool sm = method == "sm";
  if (!sm && method != "ce") throw Error("unknown copy method '" + method + "' (ce or sm)");
  const bool pinned = host_mem != "pageable";
  const CopyKind* k = copy_kind(kind);
  if (!k) throw Error("unknown copy '" + kind + "'");
  const bool uses_host = k->uses_host();
  if (sm && uses_host && !pinned)
    throw Error("an SM copy kernel cannot read pageable host memory: use pinned host memory");
  if (iters < 1) iters = 1;
  const uint64_t deadline = deadline_after(timeout_s);
  const uint64_t seed = nbytes * 0x100000001b3ull + uint64_t(kind.size());

  // the copies of one iteration: (dst, src) on stream 0 and, for the bidirectional ones, stream 1
  void *dst0 = nullptr, *src0 = nullptr, *dst1 = nullptr, *src1 = nullptr;
  bool host_src0 = false, host_dst0 = false, host_src1 = false, host_dst1 = false;
  Peer* peer = nullptr;
  if (k->uses_peer()) {
    if (peer_slot < 0 || peer_slot >= int(m.peers.size())) throw Error("no peer buffer opened for this copy");
    peer = &m.peers[peer_slot];
    if (nbytes > peer->bytes)
      throw Error("copy of " + std::to_string(nbytes) + " bytes is larger than the peer's buffer (" +
                  std::to_string(peer->bytes) + "); raise --maxbytes at setup");
    if (sm && !can_access_peer(m.dev, peer->device))
      throw Error("GPU " + std::to_string(m.dev) + " cannot access GPU " + std::to_string(peer->device) +
                  " directly, so an SM copy kernel cannot reach it (use --copy ce)");
  }
  uint8_t* peer_w = peer ? static_cast<uint8_t*>(peer->base) : nullptr;            // peer's write half
  uint8_t* peer_r = peer ? static_cast<uint8_t*>(peer->base) + peer->bytes : nullptr;  // its read half

  // the table's buffers, allocated on first use: (pointer, whether it is host memory)
  auto buffer = [&](Buf b, void*& p, bool& on_host) {
    switch (b) {
      case HOST_SRC: m.ensure_host(m.hsrc, nbytes, pinned); p = m.hsrc.p; on_host = true; break;
      case HOST_DST: m.ensure_host(m.hdst, nbytes, pinned); p = m.hdst.p; on_host = true; break;
      case DEV_SRC: m.ensure_dev(m.dsrc, nbytes); p = m.dsrc.p; break;
      case DEV_DST: m.ensure_dev(m.ddst, nbytes); p = m.ddst.p; break;
      case PEER_WRITE: p = peer_w; break;
      case PEER_READ: p = peer_r; break;
      case NONE: break;
    }
  };
  buffer(k->src0, src0, host_src0);
  buffer(k->dst0, dst0, host_dst0);
  buffer(k->src1, src1, host_src1);
  buffer(k->dst1, dst1, host_dst1);
  const bool two = src1 != nullptr;
  // kernels address pinned host memory through its device mapping
  void* k_src0 = (sm && host_src0) ? m.host_dev_ptr(src0) : src0;
  void* k_dst0 = (sm && host_dst0) ? m.host_dev_ptr(dst0) : dst0;
  void* k_dst1 = (sm && host_dst1) ? m.host_dev_ptr(dst1) : dst1;
  void* k_src1 = (sm && host_src1) ? m.host_dev_ptr(src1) : src1;

  CopyResult res;
  res.numa_node = uses_host ? (host_src0 ? m.hsrc.node : m.hdst.node) : -1;

  // data check: sources hold the pattern, destinations its complement
  auto fill = [&](void* p, bool on_host, bool complement) {
    if (on_host)
      fill_pattern_host(p, nbytes, seed, complement);
    else
      fill_pattern_device(p, nbytes, seed, complement, m.s0);
  };
  if (check) {
    fill(src0, host_src0, false);
    fill(dst0, host_dst0, true);
    if (two) {
      fill(src1, host_src1, false);
      fill(dst1, host_dst1, true);
    }
    CB_CUDA(cudaStreamSynchronize(m.s0), "preparing the data check");
  }

  auto enqueue = [&](cudaStream_t s, int which) {
    if (which == 0)
      m.copy(k_dst0, k_src0, nbytes, sm, s);
    else
      m.copy(k_dst1, k_src1, nbytes, sm, s);
  };

  // warm-up (untimed)
  m.ensure_events(2);
  for (int w = 0; w < warmup; ++w) {
    enqueue(m.s0, 0);
    if (two) enqueue(m.s1, 1);
  }
  cudaEventRecord(m.ev0[0], m.s0);
  cudaEventRecord(m.ev1[0], m.s1);
  wait_event(m.ev0[0], deadline, "GPU " + std::to_string(m.dev) + " " + kind + " warm-up");
  wait_event(m.ev1[0], deadline, "GPU " + std::to_string(m.dev) + " " + kind + " warm-up");

  // The stream is held by a blocking kernel while the host queues a batch, so launch gaps
  // are not timed (nvbandwidth). A gated batch (peer_bidir) waits on a gate both ranks of
  // the pair watch: the leader's own, in its exported buffer; the follower watches the
  // leader's through the peer mapping (or its own host flag where it has no P2P access).
  const bool blocking = pinned || !uses_host;
  volatile int* gate = nullptr;
  bool own_host_gate = true;
  if (gate_role == 1) {
    gate = m.gate();
    own_host_gate = false;
  } else if (gate_role == 2 && can_access_peer(m.dev, peer->device)) {
    gate = reinterpret_cast<volatile int*>(peer->gate());
    own_host_gate = false;
  }
  // sync(2b): the leader has closed its gate for batch b (leader posts, follower waits);
  // sync(2b + 1): the follower has queued batch b (follower posts, leader waits).
  auto hold = [&](int b) {
    if (gate_role == 1) {  // close the gate before the follower may queue behind it
      CB_CUDA(cudaMemsetAsync(const_cast<int*>(gate), 0, sizeof(int), m.s1), "closing the gate");
      CB_CUDA(cudaStreamSynchronize(m.s1), "closing the gate");
    }
    if (gate_role) sync(2 * b);
    if (!blocking) return;
    m.flags[0] = 0;
    m.flags[1] = 0;
    std::atomic_thread_fence(std::memory_order_seq_cst);
    volatile int* flag = own_host_gate ? m.flags_dev : gate;
    spin_kernel<<<1, 1, 0, m.s0>>>(flag, m.flags_dev + 1, uint64_t(2e9));
    CB_LAUNCHED("launching the blocking kernel");
  };
  auto release = [&](int b) {
    if (gate_role) sync(2 * b + 1);
    if (gate_role == 1) {
      m.flags[2] = 1;
      CB_CUDA(cudaMemcpyAsync(const_cast<int*>(gate), m.flags + 2, sizeof(int), cudaMemcpyHostToDevice, m.s1),
              "opening the gate");
    }
    if (blocking && own_host_gate) {
      std::atomic_thread_fence(std::memory_order_seq_cst);
      *reinterpret_cast<volatile int*>(&m.flags[0]) = 1;
    }
  };

  // Pass 1, the figure (event_timing.cuh): a start event, `iters` copies queued back to
  // back on each stream, an end event per stream; time = the slower stream's span / iters.
  hold(0);
  record_batch(m.s0, m.ev0[0], m.ev0[1], iters, [&](int i) {
    if (two && i == 0) CB_CUDA(cudaStreamWaitEvent(m.s1, m.ev0[0], 0), "joining streams");  // start together
    enqueue(m.s0, 0);
    if (two) enqueue(m.s1, 1);
  });
  if (two) CB_CUDA(cudaEventRecord(m.ev1[1], m.s1), "recording an event");
  release(0);
  wait_event(m.ev0[1], deadline, "GPU " + std::to_string(m.dev) + " " + kind + " copies");
  if (two) wait_event(m.ev1[1], deadline, "GPU " + std::to_string(m.dev) + " " + kind + " copies");
  if (blocking && *reinterpret_cast<volatile int*>(&m.flags[1])) res.blocking_timed_out = true;
  res.mean_us = std::max(elapsed_us(m.ev0[0], m.ev0[1]), two ? elapsed_us(m.ev0[0], m.ev1[1]) : 0.0) / iters;

  // Pass 2, the spread: batches with an event after each iteration.
  const int batch = 64;
  m.ensure_events(batch + 1);
  res.samples_us.reserve(iters);
  for (int done = 0, b = 1; done < iters; ++b) {
    int nb = std::min(batch, iters - done);
    hold(b);
    record_each(m.s0, m.ev0.data(), nb, [&](int i) {
      if (two) {  // both directions start together; the iteration ends when both have
        CB_CUDA(cudaStreamWaitEvent(m.s1, m.ev0[i], 0), "joining streams");
        enqueue(m.s0, 0);
        enqueue(m.s1, 1);
        cudaEventRecord(m.ev1[i + 1], m.s1);
        CB_CUDA(cudaStreamWaitEvent(m.s0, m.ev1[i + 1], 0), "joining streams");
      } else {
        enqueue(m.s0, 0);
      }
    });
    release(b);
    wait_event(m.ev0[nb], deadline, "GPU " + std::to_string(m.dev) + " " + kind + " copies");
    if (blocking && *reinterpret_cast<volatile int*>(&m.flags[1])) res.blocking_timed_out = true;
    append_gaps_us(m.ev0.data(), nb, res.samples_us);
    done += nb;
  }

  if (check) {
    auto verify = [&](void* p, bool on_host) -> uint64_t {
      corrupt_for_test(p, nbytes, on_host, m.s0);
      if (on_host) return check_pattern_host(p, nbytes, seed);
      return check_pattern_device(p, nbytes, seed, m.s0, m.counter, deadline);
    };
    res.wrong = verify(dst0, host_dst0);
    if (two) res.wrong += verify(dst1, host_dst1);
  }
  return res;
}

}  // namespace cuda
}  // namespace cb
