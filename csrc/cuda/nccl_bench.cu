// NCCL collectives and point-to-point ops, timed in native code; each op's facts and calls
// are its entry in nccl_ops.cuh. (Over 400 lines: the data init/check kernels for every op
// and dtype belong with the ops they check.)
//
// libnccl is loaded at run time (nccl_loader.h). time_us is nccl-tests' figure, taken
// its way (nccl-tests src/common.cu, BenchTime): one op and a stream synchronize, a
// barrier of the ranks, then a host clock spans `iters` launches and the stream
// synchronize after them (polling cudaStreamQuery, as testStreamSynchronize does);
// time = that / iters. With -G N the `iters` launches are captured into one CUDA graph
// and the clock spans N graph launches and the synchronize, / (iters x N). A second
// batch of the same launches between two events gives the GPU time (host minus GPU =
// launch overhead); a third pass with an event after each launch gives the spread.
// Buffers come from ncclMemAlloc where the library has it (nccl-tests' allocator), sized
// once for the sweep's largest op (reserve); iteration i runs at the next offset in them.
// Data are checked on the GPU against the values of comm_bench/ops.py:
// value(rank, i) = ((rank % 4) + 1) * ((i % 5) + 1).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>

#include "cuda_bench.h"
#include "cuda_util.cuh"
#include "event_timing.cuh"
#include "nccl_loader.h"
#include "nccl_ops.cuh"

namespace cb {
namespace cuda {

using namespace cb::nccl;

enum DType { DT_F32, DT_F64, DT_F16, DT_BF16, DT_I32, DT_I64, DT_I8, DT_U8, DT_U32, DT_U64 };
struct DTypeInfo {
  const char* name;
  DType code;
  ncclDataType_t nccl;
  size_t size;
};
static const DTypeInfo kDTypes[] = {
    {"float32", DT_F32, ncclFloat32, 4}, {"float64", DT_F64, ncclFloat64, 8},
    {"float16", DT_F16, ncclFloat16, 2}, {"bfloat16", DT_BF16, ncclBfloat16, 2},
    {"int32", DT_I32, ncclInt32, 4},     {"int64", DT_I64, ncclInt64, 8},
    {"int8", DT_I8, ncclInt8, 1},        {"uint8", DT_U8, ncclUint8, 1},
    {"uint32", DT_U32, ncclUint32, 4},   {"uint64", DT_U64, ncclUint64, 8},
};
static const DTypeInfo& dtype_info(const std::string& d) {
  for (const auto& t : kDTypes)
    if (d == t.name) return t;
  throw Error("unknown dtype '" + d + "'");
}
size_t dtype_size(const std::string& d) {
  for (const auto& t : kDTypes)
    if (d == t.name) return t.size;
  return 0;
}

static ncclRedOp_t redop_code(const std::string& r) {
  if (r == "sum") return ncclSum;
  if (r == "prod") return ncclProd;
  if (r == "max") return ncclMax;
  if (r == "min") return ncclMin;
  if (r == "avg") return ncclAvg;
  throw Error("unknown reduction '" + r + "' (sum, prod, max, min, avg)");
}

// ---------------------------------------------------------------------------
// data: init and check kernels
__host__ __device__ __forceinline__ long long value_of(int rank, size_t i) {
  return (long long)((rank % 4) + 1) * (long long)((i % 5) + 1);
}

template <typename T> __device__ __forceinline__ T from_ll(long long v) { return T(v); }
template <> __device__ __forceinline__ __half from_ll<__half>(long long v) { return __float2half(float(v)); }
template <> __device__ __forceinline__ __nv_bfloat16 from_ll<__nv_bfloat16>(long long v) {
  return __float2bfloat16(float(v));
}
template <typename T> __device__ __forceinline__ double to_d(T x) { return double(x); }
template <> __device__ __forceinline__ double to_d<__half>(__half x) { return double(__half2float(x)); }
template <> __device__ __forceinline__ double to_d<__nv_bfloat16>(__nv_bfloat16 x) {
  return double(__bfloat162float(x));
}

struct CheckSpec {
  int op, rank, n, root, peer, redop;
  size_t chunk;  // elements per rank chunk (all_gather send count, reduce_scatter recv count, alltoall chunk)
};

__device__ __forceinline__ long long reduce_vals(int redop, long long a, long long b) {
  switch (redop) {
    case 1: return a * b;
    case 2: return a > b ? a : b;
    case 3: return a < b ? a : b;
    default: return a + b;
  }
}

__device__ __forceinline__ long long reduce_all(const CheckSpec& c, size_t idx) {
  long long acc = value_of(0, idx);
  for (int r = 1; r < c.n; ++r) acc = reduce_vals(c.redop, acc, value_of(r, idx));
  return acc;
}

// By op code, not through the op table (nccl_ops.cuh): a kernel cannot read the host's table.
__device__ long long expected_of(const CheckSpec& c, size_t i) {
  switch (c.op) {
    case OP_ALL_REDUCE:
    case OP_REDUCE: return reduce_all(c, i);
    case OP_BROADCAST: return value_of(c.root, i);
    case OP_ALL_GATHER:
    case OP_GATHER: return value_of(int(i / c.chunk), i % c.chunk);
    case OP_SCATTER: return value_of(c.root, size_t(c.rank) * c.chunk + i);
    case OP_REDUCE_SCATTER: return reduce_all(c, size_t(c.rank) * c.chunk + i);
    case OP_ALLTOALL: return value_of(int(i / c.chunk), size_t(c.rank) * c.chunk + i % c.chunk);
    case OP_SENDRECV: return value_of((c.rank - 1 + c.n) % c.n, i);
    case OP_RECV: return value_of(c.peer, i);
  }
  return 0;
}

template <typename T>
__global__ void init_kernel(T* p, size_t count, int rank) {
  size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride)
    p[i] = from_ll<T>(value_of(rank, i));
}

template <typename T>
__global__ void check_kernel(const T* p, size_t count, CheckSpec c, unsigned long long* wrong) {
  size_t stride = size_t(gridDim.x) * blockDim.x;
  unsigned long long local = 0;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride) {
    long long e = expected_of(c, i);
    if (!(to_d(p[i]) == to_d(from_ll<T>(e)))) ++local;
  }
  if (local) atomicAdd(wrong, local);
}

static int blocks_for(size_t count) {
  return int(std::max<size_t>(1, std::min<size_t>((count + 255) / 256, 4096)));
}

template <typename T>
static void init_t(void* p, size_t count, int rank, cudaStream_t s) {
  init_kernel<T><<<blocks_for(count), 256, 0, s>>>(static_cast<T*>(p), count, rank);
}
template <typename T>
static void check_t(const void* p, size_t count, const CheckSpec& c, unsigned long long* w, cudaStream_t s) {
  check_kernel<T><<<blocks_for(count), 256, 0, s>>>(static_cast<const T*>(p), count, c, w);
}

#define CB_DISPATCH(code, F, ...)                             \
  switch (code) {                                             \
    case DT_F32: F<float>(__VA_ARGS__); break;                \
    case DT_F64: F<double>(__VA_ARGS__); break;               \
    case DT_F16: F<__half>(__VA_ARGS__); break;               \
    case DT_BF16: F<__nv_bfloat16>(__VA_ARGS__); break;       \
    case DT_I32: F<int32_t>(__VA_ARGS__); break;              \
    case DT_I64: F<int64_t>(__VA_ARGS__); break;              \
    case DT_I8: F<int8_t>(__VA_ARGS__); break;                \
    case DT_U8: F<uint8_t>(__VA_ARGS__); break;               \
    case DT_U32: F<uint32_t>(__VA_ARGS__); break;             \
    case DT_U64: F<uint64_t>(__VA_ARGS__); break;             \
  }

// ---------------------------------------------------------------------------
NcclLib nccl_load(const std::vector<std::string>& candidates) {
  Api& a = load(candidates);
  NcclLib l;
  l.path = a.path;
  l.version = a.version;
  return l;
}

bool nccl_loaded() { return api().handle != nullptr; }

std::string nccl_unique_id() {
  Api& a = api();
  if (!a.handle) throw Error("libnccl is not loaded");
  ncclUniqueId id;
  ncclResult_t r = a.GetUniqueId(&id);
  if (r != ncclSuccess) throw Error("ncclGetUniqueId: " + a.error(r));
  return std::string(id.internal, sizeof(id.internal));
}

struct NcclBench::Impl {
  int dev = 0, nranks = 1, rank = 0;
  int reg = 0;  // nccl-tests' -R: 0 none, 1 ncclCommRegister, 2 symmetric windows
  ncclComm_t comm = nullptr;
  cudaStream_t s = nullptr;
  void* send = nullptr;
  void* recv = nullptr;
  void* send_reg = nullptr;  // registration handle / window of each buffer
  void* recv_reg = nullptr;
  size_t send_cap = 0, recv_cap = 0;
  float* bar = nullptr;  // the barrier's one element
  unsigned long long* counter = nullptr;
  std::vector<cudaEvent_t> ev;
  bool broken = false;

  void use() { CB_CUDA(cudaSetDevice(dev), "selecting GPU " + std::to_string(dev)); }
  void check_async() {
    ncclResult_t st = ncclSuccess;
    ncclResult_t r = api().CommGetAsyncError(comm, &st);
    if (r != ncclSuccess || (st != ncclSuccess && st != ncclInProgress)) {
      broken = true;
      throw Error("rank " + std::to_string(rank) + ": NCCL reported " + api().error(r != ncclSuccess ? r : st, comm));
    }
  }
  void nccl(ncclResult_t r, const char* what) { nccl_ok(r, what, rank, comm, broken); }
  void unregister(void*& h) {
    if (!h) return;
    if (reg == 2)
      api().CommWindowDeregister(comm, static_cast<ncclWindow_t>(h));
    else
      api().CommDeregister(comm, h);
    h = nullptr;
  }
  void release(void*& p, void*& h) {
    if (!p) return;
    unregister(h);
    if (api().MemAlloc)
      api().MemFree(p);
    else
      cudaFree(p);
    p = nullptr;
  }
  // Every rank grows its buffers at the same calls (same counts), so the collective
  // window registration of -R 2 is entered by all ranks together.
  void ensure(void*& p, void*& h, size_t& cap, size_t n) {
    if (p && cap >= n) return;
    if (p) {
      cudaStreamSynchronize(s);
      release(p, h);
    }
    cap = std::max<size_t>((n + 255) / 256 * 256, 256);
    const std::string what = "allocating " + std::to_string(cap) + " bytes for NCCL on GPU " + std::to_string(dev);
    if (api().MemAlloc)
      nccl(api().MemAlloc(&p, cap), what.c_str());
    else
      CB_CUDA(cudaMalloc(&p, cap), what);
    if (reg == 2) {
      ncclWindow_t w = nullptr;
      nccl(api().CommWindowRegister(comm, p, cap, &w, NCCL_WIN_COLL_SYMMETRIC), "ncclCommWindowRegister");
      h = w;
    } else if (reg == 1) {
      nccl(api().CommRegister(comm, p, cap, &h), "ncclCommRegister");
    }
  }
  void ensure_events(size_t n) {
    while (ev.size() < n) {
      cudaEvent_t e;
      CB_CUDA(cudaEventCreate(&e), "creating an event");
      ev.push_back(e);
    }
  }
  void wait(cudaEvent_t e, uint64_t deadline, const std::string& what) {
    try {
      wait_event(e, deadline, "rank " + std::to_string(rank) + " " + what, [this] { check_async(); });
    } catch (...) {
      broken = true;
      throw;
    }
  }
  // nccl-tests' testStreamSynchronize: poll the stream, check NCCL's async error, yield
  // the CPU between polls (no sleep: the timed figure includes this wait).
  void sync(uint64_t deadline, const std::string& what) {
    while (true) {
      cudaError_t e = cudaStreamQuery(s);
      if (e == cudaSuccess) return;
      if (e != cudaErrorNotReady) {
        broken = true;
        throw Error("rank " + std::to_string(rank) + " " + what + ": " + cuda_err(e));
      }
      check_async();
      if (now_ns() > deadline) {
        broken = true;
        throw Error("rank " + std::to_string(rank) + " " + what +
                    ": did not complete before the deadline (the run's timeout)");
      }
      std::this_thread::yield();
    }
  }
  // The ranks' barrier before the clock starts: a one-element all-reduce, waited for
  // (it completes on a rank only once every rank has launched it). A pair pattern's two
  // ranks (the others idle) use one op of their own instead: `pair_op`.
  template <typename F>
  void barrier(uint64_t deadline, F pair_op) {
    if (nranks < 2) return;
    if (pair_op)
      (*pair_op)();
    else
      nccl(api().AllReduce(bar, bar, 1, ncclFloat32, ncclSum, comm, s), "ncclAllReduce (barrier)");
    sync(deadline, "barrier");
  }
};

NcclBench::NcclBench(int device, int nranks, int rank, const std::string& unique_id, double timeout_s,
                     int register_mode)
    : impl_(new Impl) {
  Api& a = api();
  if (!a.handle) throw Error("libnccl is not loaded");
  if (register_mode < 0 || register_mode > 2) throw Error("-R takes 0, 1 or 2");
  if (register_mode == 1 && !a.CommRegister)
    throw Error("-R 1: the loaded libnccl has no ncclCommRegister (NCCL 2.19 or newer is needed)");
  if (register_mode == 2 && !(a.CommWindowRegister && a.MemAlloc))
    throw Error("-R 2: the loaded libnccl has no ncclCommWindowRegister (NCCL 2.27 or newer is needed)");
  if (unique_id.size() != sizeof(ncclUniqueId)) throw Error("NCCL unique id has the wrong size");
  Impl& m = *impl_;
  m.dev = device;
  m.nranks = nranks;
  m.rank = rank;
  m.use();
  CB_CUDA(cudaStreamCreateWithFlags(&m.s, cudaStreamNonBlocking), "creating a stream");
  CB_CUDA(cudaMalloc(&m.counter, sizeof(unsigned long long)), "allocating the check counter");
  CB_CUDA(cudaMalloc(&m.bar, sizeof(float)), "allocating the barrier element");
  m.reg = register_mode;

  // ncclCommInitRank blocks until every rank has joined: run it on a thread and
  // give up at the deadline (the thread is left behind; the run fails anyway).
  struct Shared {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    ncclResult_t r = ncclSuccess;
    ncclComm_t comm = nullptr;
  };
  auto sh = std::make_shared<Shared>();
  ncclUniqueId id;
  std::memcpy(id.internal, unique_id.data(), sizeof(id.internal));
  std::thread([sh, id, nranks, rank, device]() {
    cudaSetDevice(device);
    ncclComm_t c = nullptr;
    ncclResult_t r;
    if (api().version >= 22800 && api().CommInitRankConfig) {
      // nccl-tests' communicator (src/common.cu initComms): the default config with
      // nvlinkCentricSched = 1 from NCCL 2.28 on
      ncclConfig_v22800 config;
      config.nvlinkCentricSched = 1;
      r = api().CommInitRankConfig(&c, nranks, id, rank, &config);
    } else {
      r = api().CommInitRank(&c, nranks, id, rank);
    }
    std::lock_guard<std::mutex> lock(sh->mu);
    sh->r = r;
    sh->comm = c;
    sh->done = true;
    sh->cv.notify_all();
  }).detach();
  std::unique_lock<std::mutex> lock(sh->mu);
  double t = timeout_s > 0 ? timeout_s : 600;
  if (!sh->cv.wait_for(lock, std::chrono::duration<double>(t), [&] { return sh->done; }))
    throw Error("rank " + std::to_string(rank) + ": ncclCommInitRank did not complete within " +
                std::to_string(int(t)) + " s (a rank did not join, or NCCL could not connect)");
  if (sh->r != ncclSuccess)
    throw Error("rank " + std::to_string(rank) + ": ncclCommInitRank: " + a.error(sh->r));
  m.comm = sh->comm;
}

NcclBench::~NcclBench() {
  Impl* m = impl_;
  if (m->comm) {
    cudaSetDevice(m->dev);
    if (!m->broken) {  // registrations belong to the communicator: undo them first
      m->release(m->send, m->send_reg);
      m->release(m->recv, m->recv_reg);
    }
    if (m->broken)
      api().CommAbort(m->comm);
    else
      api().CommDestroy(m->comm);
    m->comm = nullptr;
  }
  for (auto e : m->ev) cudaEventDestroy(e);
  m->send_reg = m->recv_reg = nullptr;  // gone with the communicator
  m->release(m->send, m->send_reg);
  m->release(m->recv, m->recv_reg);
  if (m->counter) cudaFree(m->counter);
  if (m->bar) cudaFree(m->bar);
  if (m->s) cudaStreamDestroy(m->s);
  delete m;
}

void NcclBench::reserve(size_t bytes) {
  Impl& m = *impl_;
  if (!m.comm) throw Error("the NCCL communicator is closed");
  m.use();
  m.ensure(m.send, m.send_reg, m.send_cap, bytes);
  m.ensure(m.recv, m.recv_reg, m.recv_cap, bytes);
}

int NcclBench::rank() const { return impl_->rank; }
int NcclBench::nranks() const { return impl_->nranks; }

void NcclBench::destroy() {
  Impl& m = *impl_;
  if (!m.comm) return;
  m.use();
  if (!m.broken) {
    m.release(m.send, m.send_reg);
    m.release(m.recv, m.recv_reg);
  }
  if (m.broken)  // a failed or timed-out op: destroying could wait on the GPU forever
    api().CommAbort(m.comm);
  else
    api().CommDestroy(m.comm);
  m.comm = nullptr;
}

NcclResult NcclBench::run(const std::string& op_name, size_t in_count, size_t out_count, const std::string& dtype,
                          const std::string& redop_name, int root, int peer, int iters, int warmup,
                          bool in_place, int graph, bool check, double timeout_s) {
  Impl& m = *impl_;
  Api& a = api();
  if (!m.comm) throw Error("the NCCL communicator is closed");
  if (m.broken) throw Error("rank " + std::to_string(m.rank) + ": the NCCL communicator failed earlier");
  m.use();
  const NcclOp& op = nccl_op(op_name);
  const DTypeInfo& dt = dtype_info(dtype);
  const ncclRedOp_t redop = redop_code(redop_name);
  const int n = m.nranks, r = m.rank;
  const size_t es = dt.size;
  // the whole per-rank vector: what all_reduce/broadcast/reduce/send/recv move, what
  // all_gather/gather gather into and reduce_scatter/scatter scatter from
  const size_t total = std::max(in_count, out_count);
  if (in_count == 0 || out_count == 0) throw Error("an NCCL op needs at least one element per rank");
  if (op.split && total % n)
    throw Error(std::to_string(total) + " elements do not split over " + std::to_string(n) + " ranks");
  if (op.pair && (peer < 0 || peer >= n || peer == r)) throw Error("send/recv needs a peer rank other than this one");
  if (root < 0 || root >= n) throw Error("root rank " + std::to_string(root) + " is out of range");
  if (iters < 1) iters = 1;
  const uint64_t deadline = deadline_after(timeout_s);
  const size_t chunk = total / n;

  const OpArgs args{a, m.comm, m.s, dt.nccl, redop, total, chunk, es, n, r, root, peer, m.broken};
  in_place = in_place && op.in_place != NOT_IN_PLACE;
  m.ensure(m.send, m.send_reg, m.send_cap, in_count * es);
  m.ensure(m.recv, m.recv_reg, m.recv_cap, out_count * es);
  char* sendp = static_cast<char*>(m.send);
  char* recvp = static_cast<char*>(m.recv);
  // in place as nccl-tests places it (InPlace in nccl_ops.cuh)
  const bool out_in_input = in_place && op.in_place == OUTPUT_IN_INPUT;
  if (in_place) {
    if (op.in_place == INPUT_IN_OUTPUT)
      sendp = args.at(recvp, r);
    else if (out_in_input)
      recvp = args.at(sendp, r);
    else
      sendp = recvp;
  }
  // Iteration i runs at offset span x (i % steps) of the buffers, as nccl-tests' startColl
  // shifts it ("to avoid cache effects"): a size that fits in L2 is not served from L2 by
  // the iteration before. steps = buffer size / the op's bytes (1: no room, no shift).
  const size_t span = std::max(in_count, out_count) * es;
  const size_t steps = std::max<size_t>(1, std::min(m.send_cap, m.recv_cap) / span);
  auto issue_at = [&](int iter) {
    const size_t shift = span * (size_t(iter) % steps);
    op.issue(args, sendp + shift, recvp + shift);
  };
  auto issue = [&]() { issue_at(0); };

  auto prepare_data = [&]() {
    // poison the output (0xff: NaN for floats, -1 / 255 for integers; no expected value is either)
    if (!out_in_input)
      CB_CUDA(cudaMemsetAsync(in_place ? m.recv : recvp, 0xff, out_count * es, m.s), "poisoning the output");
    if (op.has_input) CB_DISPATCH(dt.code, init_t, sendp, in_count, r, m.s);
    CB_LAUNCHED("launching the data init kernel");
  };

  NcclResult res;
  res.api = op.api(a);
  res.alloc = a.MemAlloc ? "ncclMemAlloc" : "cudaMalloc";
  m.ensure_events(size_t(iters) + 2);
  if (check) prepare_data();
  // warm-up (untimed; also sets up NCCL's connections for this op)
  for (int w = 0; w < warmup; ++w) issue_at(w);
  m.sync(deadline, op_name + " warm-up");
  auto launch = [&](int i) { issue_at(i); };
  auto barrier = [&]() { m.barrier(deadline, op.pair ? &issue : nullptr); };
  const double ops_timed = double(iters) * std::max(graph, 1);

  // Pass 1, time_us (nccl-tests' BenchTime): one op waited for, a barrier of the ranks,
  // then the host clock around the launches and the stream synchronize.
  cudaGraphExec_t ge = nullptr;
  try {
    issue();
    m.sync(deadline, op_name);
    barrier();
    if (graph > 0) {
      try {
        ge = capture_graph(m.s, iters, launch, "rank " + std::to_string(r) + " " + op_name);
      } catch (...) {
        m.broken = true;  // a failed capture leaves the stream unusable
        throw;
      }
      barrier();
      const uint64_t t0 = now_ns();
      for (int l = 0; l < graph; ++l) CB_CUDA(cudaGraphLaunch(ge, m.s), "launching the CUDA graph");
      m.sync(deadline, op_name + " (CUDA graph)");
      res.mean_us = double(now_ns() - t0) / 1e3 / ops_timed;
    } else {
      const uint64_t t0 = now_ns();
      for (int i = 0; i < iters; ++i) issue_at(i);
      m.sync(deadline, op_name);
      res.mean_us = double(now_ns() - t0) / 1e3 / ops_timed;
    }

    // Pass 1b, the GPU time of a batch of the same launches: an event before and after
    cudaEvent_t t0 = m.ev[iters], t1 = m.ev[iters + 1];
    barrier();
    if (ge)
      record_batch(m.s, t0, t1, graph, [&](int) { CB_CUDA(cudaGraphLaunch(ge, m.s), "launching the CUDA graph"); });
    else
      record_batch(m.s, t0, t1, iters, launch);
    m.wait(t1, deadline, op_name);
    res.gpu_us = elapsed_us(t0, t1) / ops_timed;
  } catch (...) {
    if (ge) cudaGraphExecDestroy(ge);
    throw;
  }
  if (ge) cudaGraphExecDestroy(ge);

  // Pass 2, the spread: the same launches with an event after each
  barrier();
  record_each(m.s, m.ev.data(), iters, launch);
  m.wait(m.ev[iters], deadline, op_name);
  res.samples_us.reserve(iters);
  append_gaps_us(m.ev.data(), iters, res.samples_us);

  if (check) {
    // fresh data, one op, then compare on the GPU (timed runs may have changed in-place data)
    prepare_data();
    issue();
    // (avg is not checked: the mean of the small integers is not exact in every dtype)
    const bool has_output = (op.output == EVERY_RANK || (op.output == ROOT_ONLY && r == root)) && redop != ncclAvg;
    if (has_output) {
      CheckSpec c{op.code, r, n, root, peer, int(redop), chunk};
      corrupt_for_test(recvp, out_count * es, false, m.s);
      CB_CUDA(cudaMemsetAsync(m.counter, 0, sizeof(unsigned long long), m.s), "clearing the check counter");
      CB_DISPATCH(dt.code, check_t, recvp, out_count, c, m.counter, m.s);
      CB_LAUNCHED("launching the data check kernel");
    }
    unsigned long long wrong = 0;
    CB_CUDA(cudaMemcpyAsync(&wrong, m.counter, sizeof(wrong), cudaMemcpyDeviceToHost, m.s), "reading the check counter");
    CB_CUDA(cudaEventRecord(m.ev[0], m.s), "recording an event");
    m.wait(m.ev[0], deadline, op_name + " data check");
    res.wrong = has_output ? wrong : 0;
  }
  return res;
}

}  // namespace cuda
}  // namespace cb
