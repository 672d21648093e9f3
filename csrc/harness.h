// The shared timing and statistics harness of every native transport.
//
// Hot loops record one timestamp per iteration into a preallocated vector
// (TimedLoop), so the harness costs one time-stamp-counter read and one store
// per iteration. Statistics are computed afterwards from the per-iteration times.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <ctime>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace cb {

inline uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

// How long a spin-wait loop has gone without progress. The clock is read only
// every 65536 idle spins (from the first such spin on), never on the fast path:
// a clock read costs a microsecond or more where the clocksource is emulated
// (a VM on HPET), and would delay noticing the arrival being waited for.
struct IdleClock {
  uint32_t spins = 0;
  uint64_t since = 0;
  void progress() { spins = 0; since = 0; }
  bool due() { return (++spins & 0xffff) == 0; }
  uint64_t idle_ns() {
    uint64_t t = now_ns();
    if (!since) since = t;
    return t - since;
  }
};

#if defined(__x86_64__)
// Inline asm, not <x86intrin.h>: this header is also compiled by nvcc.
inline uint64_t rdtsc() {
  uint32_t lo, hi;
  asm volatile("rdtsc" : "=a"(lo), "=d"(hi));
  return (uint64_t(hi) << 32) | lo;
}
inline void cpuid(uint32_t leaf, uint32_t r[4]) {
  asm volatile("cpuid" : "=a"(r[0]), "=b"(r[1]), "=c"(r[2]), "=d"(r[3]) : "a"(leaf), "c"(0u));
}
#endif

// Hot-loop timestamps: the CPU's time-stamp counter where it runs at a constant
// rate (one instruction, as perftest's get_cycles), else CLOCK_MONOTONIC. The
// counter's rate is measured once per process against CLOCK_MONOTONIC.
class Ticks {
 public:
  static const Ticks& get() {
    static const Ticks t;
    return t;
  }
  double ns_per_tick() const { return ns_per_tick_; }
  uint64_t now() const {
#if defined(__x86_64__)
    if (tsc_) return rdtsc();
#endif
    return now_ns();
  }

 private:
  Ticks() {
#if defined(__x86_64__)
    uint32_t r[4];
    cpuid(0x80000000u, r);
    if (r[0] >= 0x80000007u) {
      cpuid(0x80000007u, r);
      tsc_ = r[3] & (1u << 8);  // invariant TSC: constant rate, ticks through sleep states
    }
    if (tsc_) {  // 20 ms against the monotonic clock: an error well under 0.1%
      uint64_t n0 = 0, t0 = 0, n1 = 0, t1 = 0;
      same_moment(n0, t0);
      do same_moment(n1, t1); while (n1 - n0 < 20000000ull);
      ns_per_tick_ = t1 > t0 ? double(n1 - n0) / double(t1 - t0) : 0;
      tsc_ = ns_per_tick_ > 0;
    }
#endif
    if (!tsc_) ns_per_tick_ = 1.0;
  }
#if defined(__x86_64__)
  // A clock reading and the TSC at one moment: the tightest of 8 tries, so a
  // preemption between the two reads (a loaded machine) cannot skew the rate.
  static void same_moment(uint64_t& ns, uint64_t& ticks) {
    uint64_t best = ~0ull;
    for (int i = 0; i < 8; ++i) {
      uint64_t a = rdtsc(), n = now_ns(), b = rdtsc();
      if (b - a < best) { best = b - a; ns = n; ticks = a + (b - a) / 2; }
    }
  }
#endif
  bool tsc_ = false;
  double ns_per_tick_ = 1.0;
};

// Per-iteration stamps: stamps[0] is the start, stamps[i+1] the end of iteration i.
class TimedLoop {
 public:
  explicit TimedLoop(size_t iters) : clock_(Ticks::get()), stamps_(iters + 1, 0) {}
  void start() { stamps_[0] = clock_.now(); }
  void mark(size_t i) { stamps_[i + 1] = clock_.now(); }
  // Adds extra time (e.g. waiting for the final acknowledgement) to the last iteration.
  void extend_last() { stamps_.back() = clock_.now(); }
  std::vector<double> samples_us() const {
    std::vector<double> us(stamps_.size() - 1);
    const double k = clock_.ns_per_tick() / 1e3;
    for (size_t i = 0; i + 1 < stamps_.size(); ++i) us[i] = double(stamps_[i + 1] - stamps_[i]) * k;
    return us;
  }
  uint64_t total_ns() const { return uint64_t(double(stamps_.back() - stamps_.front()) * clock_.ns_per_tick()); }

 private:
  const Ticks& clock_;
  std::vector<uint64_t> stamps_;
};

struct Stats {
  size_t n = 0;
  double min = 0, max = 0, avg = 0, stdev = 0, median = 0, p99 = 0, p999 = 0, sum = 0;
};

// Percentile by linear interpolation between closest ranks (numpy's default).
inline double percentile_sorted(const std::vector<double>& s, double q) {
  if (s.empty()) return 0;
  double pos = q / 100.0 * double(s.size() - 1);
  size_t lo = size_t(std::floor(pos));
  size_t hi = std::min(lo + 1, s.size() - 1);
  double frac = pos - double(lo);
  return s[lo] + (s[hi] - s[lo]) * frac;
}

inline Stats compute_stats(std::vector<double> v) {
  Stats st;
  st.n = v.size();
  if (v.empty()) return st;
  std::sort(v.begin(), v.end());
  double sum = 0;
  for (double x : v) sum += x;
  st.sum = sum;
  st.avg = sum / double(v.size());
  double ss = 0;
  for (double x : v) ss += (x - st.avg) * (x - st.avg);
  st.stdev = v.size() > 1 ? std::sqrt(ss / double(v.size() - 1)) : 0;
  st.min = v.front();
  st.max = v.back();
  st.median = percentile_sorted(v, 50);
  st.p99 = percentile_sorted(v, 99);
  st.p999 = percentile_sorted(v, 99.9);
  return st;
}

// Errors that reach Python as comm_bench's TransportError (one line, names the peer/step).
struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A streaming loop's signalled completions: (ops completed so far, time in ns), starting
// with (0, first post). One completion may cover many ops (perftest's cq-mod).
using CompletionBatches = std::vector<std::pair<int64_t, uint64_t>>;

// One sample per op: each completion's time since the previous one, shared evenly by the
// ops it covers, so the samples sum to last completion - first post.
inline std::vector<double> per_op_samples_us(const CompletionBatches& batches, int64_t ops) {
  std::vector<double> out;
  out.reserve(size_t(std::max<int64_t>(ops, 0)));
  for (size_t b = 1; b < batches.size(); ++b) {
    int64_t k = batches[b].first - batches[b - 1].first;
    double dt = (batches[b].second - batches[b - 1].second) / 1e3;
    for (int64_t j = 0; j < k; ++j) out.push_back(dt / double(k));
  }
  return out;
}

// The best rate (GB/s) over any run of at least `window` consecutive completed ops of
// `nbytes` each (perftest's peak bandwidth), 0 when the loop had fewer.
inline double peak_window_gbps(const CompletionBatches& batches, int64_t window, size_t nbytes) {
  double peak = 0;
  size_t i = 0;
  for (size_t j = 1; j < batches.size(); ++j) {
    while (i + 1 < j && batches[j].first - batches[i + 1].first >= window) ++i;
    int64_t ops = batches[j].first - batches[i].first;
    uint64_t dt = batches[j].second - batches[i].second;
    if (ops >= window && dt > 0) peak = std::max(peak, double(ops) * double(nbytes) / double(dt));
  }
  return peak;
}

}  // namespace cb
