// Interface between the CUDA sources (cuda_copy.cu, nccl_bench.cu, compiled by nvcc)
// and the pybind11 module (module_cuda.cpp, compiled by the host compiler).
// No CUDA or NCCL types appear here, so the module needs neither header set.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace cb {
namespace cuda {

struct DeviceInfo {
  int index = 0;
  std::string name;
  std::string pci_bus_id;   // lower case, as sysfs writes it: 0000:1b:00.0
  int numa_node = -1;       // from /sys/bus/pci/devices/<bus id>/numa_node; -1 unknown
  int sm_count = 0;
  int major = 0, minor = 0;
  size_t total_mem = 0;
  int async_engines = 0;
  int l2_bytes = 0;
  int mem_bus_width = 0;
};

// 0 when no usable device; *why says what the runtime answered.
int device_count(std::string* why);
DeviceInfo device_info(int dev);
int driver_version();
int runtime_version();
bool can_access_peer(int dev, int peer);
int numa_node_count();
// Elements (elem_size bytes: 1, 2, 4 or 8) among the `count` at a and at b, device memory of
// `dev`, whose bits differ: the GPU-side data check of array libraries that have no
// element-wise compare of their own (Numba, whose JIT is not needed for it). On the legacy
// default stream, so it follows the caller's copies; returns when the count is read back.
uint64_t count_unequal(int dev, uintptr_t a, uintptr_t b, size_t count, int elem_size);

struct CopyResult {
  double mean_us = 0;              // pass 1: events around `iters` copies / iters
  std::vector<double> samples_us;  // pass 2: an event after each copy
  uint64_t wrong = 0;            // wrong bytes found by the data check
  bool blocking_timed_out = false;  // the blocking kernel released itself before the host
  int numa_node = -1;            // node the host buffers were placed on (-1: not placed)
};

// One rank's copy benchmark: its GPU, its host and device buffers, the buffer
// peers write into (exported through CUDA IPC), and the peers' buffers it opened.
class CopyBench {
 public:
  CopyBench(int device, int numa_node);
  ~CopyBench();
  CopyBench(const CopyBench&) = delete;
  CopyBench& operator=(const CopyBench&) = delete;

  int device() const;
  // Allocates the peer-visible buffer (2 x bytes: a write half and a read half)
  // and returns its CUDA IPC handle (64 bytes).
  std::string export_peer_buffer(size_t bytes);
  // Opens a peer's exported buffer (from another process); returns a slot for run().
  int open_peer(const std::string& handle, int peer_device, size_t bytes);
  // kind: h2d d2h bidir d2d peer peer_read peer_bidir; method: ce | sm;
  // host_mem: pinned | pageable. peer_bidir is one direction of a concurrent pair:
  // gate_role 1 (leader) or 2 (follower), both ranks run it at once, and sync(step)
  // is the handshake between them (see cuda_copy.cu).
  CopyResult run(const std::string& kind, const std::string& method, const std::string& host_mem,
                 size_t nbytes, int iters, int warmup, bool check, int peer_slot,
                 double timeout_s, int gate_role = 0,
                 const std::function<void(int)>& sync = {});
  // Frees host and device buffers (not the exported one).
  void release_buffers();

 private:
  struct Impl;
  Impl* impl_;
};

// ---- NCCL (loaded at run time, see nccl_loader.h) -------------------------
struct NcclLib {
  std::string path;
  int version = 0;        // e.g. 22809
};
// Tries each candidate (a path, or a bare soname for the system's loader) in order.
NcclLib nccl_load(const std::vector<std::string>& candidates);
bool nccl_loaded();
std::string nccl_unique_id();  // 128 bytes

struct NcclResult {
  double mean_us = 0;               // pass 1: host clock around the launches + synchronize / ops
  double gpu_us = 0;                // pass 1b: events around a batch of the same launches / ops
  std::vector<double> samples_us;   // pass 2: an event after each launch
  uint64_t wrong = 0;               // wrong elements found by the data check
  std::string api;                  // the NCCL call(s) that ran the op
  std::string alloc;                // ncclMemAlloc or cudaMalloc
};

class NcclBench {
 public:
  // register_mode: nccl-tests' -R (0 none, 1 ncclCommRegister, 2 symmetric windows)
  NcclBench(int device, int nranks, int rank, const std::string& unique_id, double timeout_s,
            int register_mode = 0);
  ~NcclBench();
  NcclBench(const NcclBench&) = delete;
  NcclBench& operator=(const NcclBench&) = delete;
  // op: all_reduce all_gather reduce_scatter broadcast reduce alltoall gather scatter
  //     sendrecv send recv (pair patterns: to / from `peer`)
  // in_count / out_count: elements of this rank's input and output buffers, as
  // comm_bench.ops counts them for the size column S (one definition, in Python)
  NcclResult run(const std::string& op, size_t in_count, size_t out_count, const std::string& dtype,
                 const std::string& redop, int root, int peer, int iters, int warmup,
                 bool in_place, int graph, bool check, double timeout_s);
  // Allocates (and registers, with -R) both buffers at `bytes` once, as nccl-tests
  // allocates for its largest size; run() grows them only if asked for more.
  void reserve(size_t bytes);
  int rank() const;
  int nranks() const;
  void destroy();   // ncclCommDestroy (ncclCommAbort after a failure); also on destruction

 private:
  struct Impl;
  Impl* impl_;
};

size_t dtype_size(const std::string& dtype);  // 0 when unknown

}  // namespace cuda
}  // namespace cb
