// Raw TCP socket transport: the baseline every other transport is compared with.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace cb {

struct PeerAddr {
  int rank;
  std::string host;
  int port;
};

class TcpMesh {
 public:
  // Listens on bind_addr (port 0 = any free port); timeout bounds every wait, in seconds.
  TcpMesh(int rank, const std::string& bind_addr, int port, double timeout_s, size_t max_bytes);
  ~TcpMesh();
  int port() const { return port_; }
  // Lower ranks accept, higher ranks connect; each connection starts with the connector's rank.
  void connect_all(const std::vector<PeerAddr>& peers);

  // Streams `iters` messages of nbytes to peer; returns per-iteration send times (us),
  // the last one including the wait for the receiver's acknowledgement.
  std::vector<double> stream_send(int peer, size_t nbytes, int iters, int warmup, bool check);
  // The other side of stream_send; returns the number of wrong bytes in the checked message.
  int64_t stream_recv(int peer, size_t nbytes, int iters, int warmup, bool check);
  // Ping-pong; the initiator returns per-iteration round trips (us; the record halves them).
  std::vector<double> pingpong(int peer, size_t nbytes, int iters, int warmup, bool initiator,
                               bool check, int64_t* wrong);
  // One untimed message from / into caller memory (a GPU buffer's pinned host mirror in
  // the staged data check of transports/tcp.py).
  void send_bytes(int peer, const char* buf, size_t n) { send_all(peer, buf, n, "data check"); }
  void recv_bytes(int peer, char* buf, size_t n) { recv_all(peer, buf, n, "data check"); }

 private:
  int fd_for(int peer) const;
  void send_all(int peer, const char* buf, size_t n, const char* step);
  void recv_all(int peer, char* buf, size_t n, const char* step);
  int64_t checked_transfer(int peer, size_t nbytes, bool sender);

  int rank_;
  int listen_fd_ = -1;
  int port_ = 0;
  double timeout_s_;
  std::map<int, int> fds_;
  std::vector<char> buf_;
  std::vector<char> check_buf_;
  // Test hook: COMM_BENCH_TEST_CORRUPT_TCP set flips one received byte of each data
  // check, so a test can see the check count it (tests/test_data_checks.py).
  bool corrupt_check_ = false;
};

// Fills buf with a pattern that depends on seed, so a misplaced or stale byte is caught.
void fill_pattern(char* buf, size_t n, uint64_t seed);
int64_t count_pattern_errors(const char* buf, size_t n, uint64_t seed);

// The harness's own cost per timed iteration: an empty TimedLoop body, mean ns.
double harness_overhead_ns(size_t iters);
// Per-iteration times (us) of a TimedLoop whose iterations each wait `wait_ns` on
// CLOCK_MONOTONIC: checks the time-stamp conversion against the system clock.
std::vector<double> harness_timed_waits_us(size_t iters, uint64_t wait_ns);

}  // namespace cb
