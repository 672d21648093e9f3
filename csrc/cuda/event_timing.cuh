// The GPU timing both benchmarks share (nccl_bench.cu, cuda_copy.cu): nccl-tests' and
// nvbandwidth's method.
//   Pass 1, the figure: an event before and one after `n` launches queued back to back on
//   one stream, nothing in between; time per launch = GPU time between them / n.
//   Pass 2, the spread: an event after each launch; sample i = ev[i + 1] - ev[i]. The
//   events add a little time per launch, which is why the figure comes from pass 1.
#pragma once
#include <cuda_runtime.h>

#include <vector>

#include "cuda_util.cuh"

namespace cb {
namespace cuda {

// Pass 1: `launch(i)` for i < n between the events `before` and `after` on stream s.
template <typename Launch>
inline void record_batch(cudaStream_t s, cudaEvent_t before, cudaEvent_t after, int n, Launch launch) {
  CB_CUDA(cudaEventRecord(before, s), "recording an event");
  for (int i = 0; i < n; ++i) launch(i);
  CB_CUDA(cudaEventRecord(after, s), "recording an event");
}

// Pass 2: ev[0] before the first launch, ev[i + 1] after launch i (ev holds n + 1 events).
template <typename Launch>
inline void record_each(cudaStream_t s, const cudaEvent_t* ev, int n, Launch launch) {
  CB_CUDA(cudaEventRecord(ev[0], s), "recording an event");
  for (int i = 0; i < n; ++i) {
    launch(i);
    CB_CUDA(cudaEventRecord(ev[i + 1], s), "recording an event");
  }
}

inline double elapsed_us(cudaEvent_t a, cudaEvent_t b) {
  float ms = 0;
  CB_CUDA(cudaEventElapsedTime(&ms, a, b), "reading event times");
  return double(ms) * 1e3;
}

// The n samples of a completed pass 2, appended to out.
inline void append_gaps_us(const cudaEvent_t* ev, int n, std::vector<double>& out) {
  for (int i = 0; i < n; ++i) out.push_back(elapsed_us(ev[i], ev[i + 1]));
}

// `n` launches captured into one CUDA graph (no event nodes between them), instantiated.
template <typename Launch>
inline cudaGraphExec_t capture_graph(cudaStream_t s, int n, Launch launch, const std::string& what) {
  cudaGraph_t g = nullptr;
  cudaGraphExec_t ge = nullptr;
  CB_CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), "starting CUDA graph capture");
  for (int i = 0; i < n; ++i) launch(i);
  cudaError_t e = cudaStreamEndCapture(s, &g);
  if (e != cudaSuccess) throw Error("capturing " + what + " into a CUDA graph: " + cuda_err(e));
  e = cudaGraphInstantiate(&ge, g, 0);
  cudaGraphDestroy(g);
  if (e != cudaSuccess) throw Error("instantiating the CUDA graph of " + what + ": " + cuda_err(e));
  return ge;
}

}  // namespace cuda
}  // namespace cb
