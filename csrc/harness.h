// The shared timing and statistics harness of every native transport.
//
// Hot loops record one timestamp per iteration into a preallocated vector
// (TimedLoop), so the harness costs one clock read and one store per
// iteration. Statistics are computed afterwards from the per-iteration times.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <ctime>
#include <stdexcept>
#include <string>
#include <vector>

namespace cb {

inline uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

// Per-iteration stamps: stamps[0] is the start, stamps[i+1] the end of iteration i.
class TimedLoop {
 public:
  explicit TimedLoop(size_t iters) : stamps_(iters + 1, 0) {}
  void start() { stamps_[0] = now_ns(); }
  void mark(size_t i) { stamps_[i + 1] = now_ns(); }
  // Adds extra time (e.g. waiting for the final acknowledgement) to the last iteration.
  void extend_last() { stamps_.back() = now_ns(); }
  std::vector<double> samples_us() const {
    std::vector<double> us(stamps_.size() - 1);
    for (size_t i = 0; i + 1 < stamps_.size(); ++i) us[i] = (stamps_[i + 1] - stamps_[i]) / 1e3;
    return us;
  }
  uint64_t total_ns() const { return stamps_.back() - stamps_.front(); }

 private:
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

}  // namespace cb
