// The reference for comm-bench's NCCL figures: nccl-tests' timing method, written
// out on its own (not comm-bench code): one thread per GPU as `nccl-tests -g 1 -t N`,
// or with -p 1 one process per GPU as `mpirun -np N nccl-tests -g 1` (comm-bench's
// model: NCCL connects processes differently from threads of one process).
//
// Per size: warm-up launches, a barrier of the threads, then the GPU time between an
// event before and an event after `iters` launches queued back to back, / iters; with
// -G N the `iters` launches are captured into one CUDA graph launched N times between
// the two events, / (iters x N). The threads' times are averaged, as nccl-tests does.
// Out-of-place, float32, sum, root 0. Prints one line per size: op size time_us.
//
//   nvcc -O2 -std=c++17 tools/nccl_reference.cu -o nccl_reference -lnccl -lpthread
//   ./nccl_reference -t 2 -o all_reduce -b 8 -e 2G -f 2 -n 20 -w 5 [-G 10] [-p 1]
#include <cuda_runtime.h>
#include <nccl.h>

#include <pthread.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#define CHECK_CUDA(x)                                                                   \
  do {                                                                                  \
    cudaError_t e = (x);                                                                \
    if (e != cudaSuccess) {                                                             \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e)); \
      std::exit(1);                                                                     \
    }                                                                                   \
  } while (0)
#define CHECK_NCCL(x)                                                                   \
  do {                                                                                  \
    ncclResult_t rc_ = (x);                                                             \
    if (rc_ != ncclSuccess) {                                                           \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, ncclGetErrorString(rc_)); \
      std::exit(1);                                                                     \
    }                                                                                   \
  } while (0)

static size_t parse_size(const char* s) {
  char* end = nullptr;
  double v = std::strtod(s, &end);
  switch (*end) {
    case 'K': case 'k': v *= 1024; break;
    case 'M': case 'm': v *= 1024 * 1024; break;
    case 'G': case 'g': v *= 1024.0 * 1024 * 1024; break;
  }
  return size_t(v);
}

struct Args {
  int nthreads = 1, iters = 20, warmup = 5, graph = 0, processes = 0;
  size_t minb = 8, maxb = 8, step = 2;
  std::string op = "all_reduce";
};

// One launch of `op` on S bytes (S as nccl-tests' size column: per rank for all_reduce,
// broadcast, sendrecv; the whole gathered/scattered buffer for the others).
static void launch(const Args& a, int rank, int n, size_t bytes, float* send, float* recv, ncclComm_t comm,
                   cudaStream_t s) {
  size_t count = bytes / sizeof(float);
  size_t chunk = count / n;
  if (a.op == "all_reduce") {
    CHECK_NCCL(ncclAllReduce(send, recv, count, ncclFloat, ncclSum, comm, s));
  } else if (a.op == "all_gather") {
    CHECK_NCCL(ncclAllGather(send, recv, chunk, ncclFloat, comm, s));
  } else if (a.op == "reduce_scatter") {
    CHECK_NCCL(ncclReduceScatter(send, recv, chunk, ncclFloat, ncclSum, comm, s));
  } else if (a.op == "broadcast") {
    CHECK_NCCL(ncclBroadcast(send, recv, count, ncclFloat, 0, comm, s));
  } else if (a.op == "reduce") {
    CHECK_NCCL(ncclReduce(send, recv, count, ncclFloat, ncclSum, 0, comm, s));
  } else if (a.op == "alltoall") {
    CHECK_NCCL(ncclGroupStart());
    for (int p = 0; p < n; ++p) {
      CHECK_NCCL(ncclSend(send + p * chunk, chunk, ncclFloat, p, comm, s));
      CHECK_NCCL(ncclRecv(recv + p * chunk, chunk, ncclFloat, p, comm, s));
    }
    CHECK_NCCL(ncclGroupEnd());
  } else if (a.op == "sendrecv") {
    CHECK_NCCL(ncclGroupStart());
    CHECK_NCCL(ncclSend(send, count, ncclFloat, (rank + 1) % n, comm, s));
    CHECK_NCCL(ncclRecv(recv, count, ncclFloat, (rank - 1 + n) % n, comm, s));
    CHECK_NCCL(ncclGroupEnd());
  } else {
    std::fprintf(stderr, "unknown op %s\n", a.op.c_str());
    std::exit(2);
  }
}

int main(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string k = argv[i];
    const char* v = argv[i + 1];
    if (k == "-t") a.nthreads = std::atoi(v);
    else if (k == "-o") a.op = v;
    else if (k == "-b") a.minb = parse_size(v);
    else if (k == "-e") a.maxb = parse_size(v);
    else if (k == "-f") a.step = parse_size(v);
    else if (k == "-n") a.iters = std::atoi(v);
    else if (k == "-w") a.warmup = std::atoi(v);
    else if (k == "-G") a.graph = std::atoi(v);
    else if (k == "-p") a.processes = std::atoi(v);
    else { std::fprintf(stderr, "unknown option %s\n", k.c_str()); return 2; }
  }
  const int n = a.nthreads;
  if (n < 1 || n > 64) return 2;
  // what the ranks share (threads or forked processes): a barrier, the NCCL id, their times
  struct Shared {
    pthread_barrier_t bar;
    ncclUniqueId id;
    double times[64];
  };
  auto* sh = static_cast<Shared*>(
      mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  pthread_barrierattr_t attr;
  pthread_barrierattr_init(&attr);
  pthread_barrierattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
  pthread_barrier_init(&sh->bar, &attr, n);
  auto sync = [&]() { pthread_barrier_wait(&sh->bar); };
  double* times = sh->times;
  std::vector<ncclComm_t> comms(n);
  std::vector<size_t> sizes;
  for (size_t b = a.minb; b <= a.maxb; b *= a.step) {
    size_t unit = sizeof(float) * ((a.op == "all_gather" || a.op == "reduce_scatter" || a.op == "alltoall") ? n : 1);
    sizes.push_back(std::max(unit, b / unit * unit));
    if (a.step < 2) break;
  }
  auto worker = [&](int rank) {
    CHECK_CUDA(cudaSetDevice(rank));
    cudaStream_t s;
    CHECK_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    float *send, *recv;
    CHECK_CUDA(cudaMalloc(&send, a.maxb + 256));
    CHECK_CUDA(cudaMalloc(&recv, a.maxb + 256));
    CHECK_CUDA(cudaMemset(send, 0, a.maxb + 256));
    cudaEvent_t t0, t1;
    CHECK_CUDA(cudaEventCreate(&t0));
    CHECK_CUDA(cudaEventCreate(&t1));
    for (size_t bytes : sizes) {
      for (int w = 0; w < a.warmup; ++w) launch(a, rank, n, bytes, send, recv, comms[rank], s);
      CHECK_CUDA(cudaStreamSynchronize(s));
      cudaGraphExec_t ge = nullptr;
      if (a.graph > 0) {
        cudaGraph_t g;
        CHECK_CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
        for (int i = 0; i < a.iters; ++i) launch(a, rank, n, bytes, send, recv, comms[rank], s);
        CHECK_CUDA(cudaStreamEndCapture(s, &g));
        CHECK_CUDA(cudaGraphInstantiate(&ge, g, 0));
        CHECK_CUDA(cudaGraphDestroy(g));
        CHECK_CUDA(cudaGraphLaunch(ge, s));  // upload, untimed
        CHECK_CUDA(cudaStreamSynchronize(s));
      }
      sync();
      CHECK_CUDA(cudaEventRecord(t0, s));
      if (ge) {
        for (int l = 0; l < a.graph; ++l) CHECK_CUDA(cudaGraphLaunch(ge, s));
      } else {
        for (int i = 0; i < a.iters; ++i) launch(a, rank, n, bytes, send, recv, comms[rank], s);
      }
      CHECK_CUDA(cudaEventRecord(t1, s));
      CHECK_CUDA(cudaEventSynchronize(t1));
      float ms = 0;
      CHECK_CUDA(cudaEventElapsedTime(&ms, t0, t1));
      times[rank] = double(ms) * 1e3 / (double(a.iters) * (ge ? a.graph : 1));
      if (ge) CHECK_CUDA(cudaGraphExecDestroy(ge));
      sync();
      if (rank == 0) {
        double sum = 0;
        for (int i = 0; i < n; ++i) sum += times[i];
        std::printf("%s %zu %.3f\n", a.op.c_str(), bytes, sum / n);
        std::fflush(stdout);
      }
      sync();
    }
    cudaFree(send);
    cudaFree(recv);
  };
  if (a.processes) {  // one process per GPU; CUDA is first touched in the children
    for (int r = 0; r < n; ++r) {
      if (fork() == 0) {
        if (r == 0) CHECK_NCCL(ncclGetUniqueId(&sh->id));
        sync();
        CHECK_CUDA(cudaSetDevice(r));
        CHECK_NCCL(ncclCommInitRank(&comms[r], n, sh->id, r));
        worker(r);
        ncclCommDestroy(comms[r]);
        std::fflush(stdout);
        _exit(0);
      }
    }
    int status = 0, bad = 0;
    for (int r = 0; r < n; ++r) {
      wait(&status);
      bad |= !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    return bad;
  }
  std::vector<int> devs(n);
  for (int i = 0; i < n; ++i) devs[i] = i;
  CHECK_NCCL(ncclCommInitAll(comms.data(), n, devs.data()));
  std::vector<std::thread> th;
  for (int r = 0; r < n; ++r) th.emplace_back(worker, r);
  for (auto& t : th) t.join();
  for (auto c : comms) ncclCommDestroy(c);
  return 0;
}
