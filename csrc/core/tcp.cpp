#include "tcp.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "harness.h"

namespace cb {
namespace {

std::string errstr() { return std::strerror(errno); }

void set_timeouts(int fd, double timeout_s) {
  timeval tv;
  tv.tv_sec = time_t(timeout_s);
  tv.tv_usec = suseconds_t((timeout_s - double(tv.tv_sec)) * 1e6);
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

sockaddr_storage resolve(const std::string& host, int port, socklen_t* len) {
  addrinfo hints{}, *res = nullptr;
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  int rc = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res);
  if (rc != 0 || !res) throw Error("cannot resolve '" + host + "': " + gai_strerror(rc));
  sockaddr_storage ss{};
  std::memcpy(&ss, res->ai_addr, res->ai_addrlen);
  *len = res->ai_addrlen;
  freeaddrinfo(res);
  return ss;
}

}  // namespace

void fill_pattern(char* buf, size_t n, uint64_t seed) {
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (size_t i = 0; i < n; ++i) {
    x ^= x << 13; x ^= x >> 7; x ^= x << 17;  // xorshift64
    buf[i] = char(x);
  }
}

int64_t count_pattern_errors(const char* buf, size_t n, uint64_t seed) {
  std::vector<char> want(n);
  fill_pattern(want.data(), n, seed);
  int64_t wrong = 0;
  for (size_t i = 0; i < n; ++i) wrong += buf[i] != want[i];
  return wrong;
}

double harness_overhead_ns(size_t iters) {
  TimedLoop loop{iters};
  loop.start();
  for (size_t i = 0; i < iters; ++i) loop.mark(i);
  return double(loop.total_ns()) / double(iters);
}

std::vector<double> harness_timed_waits_us(size_t iters, uint64_t wait_ns) {
  TimedLoop loop{iters};
  loop.start();
  for (size_t i = 0; i < iters; ++i) {
    const uint64_t until = now_ns() + wait_ns;
    while (now_ns() < until) {
    }
    loop.mark(i);
  }
  return loop.samples_us();
}

TcpMesh::TcpMesh(int rank, const std::string& bind_addr, int port, double timeout_s,
                 size_t max_bytes)
    : rank_(rank), timeout_s_(timeout_s), buf_(std::max<size_t>(max_bytes, 1)),
      corrupt_check_(std::getenv("COMM_BENCH_TEST_CORRUPT_TCP") != nullptr) {
  socklen_t len;
  sockaddr_storage ss = resolve(bind_addr, port, &len);
  listen_fd_ = socket(ss.ss_family, SOCK_STREAM, 0);
  if (listen_fd_ < 0) throw Error("socket(): " + errstr());
  int one = 1;
  setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(listen_fd_, reinterpret_cast<sockaddr*>(&ss), len) != 0)
    throw Error("rank " + std::to_string(rank) + ": cannot listen on " + bind_addr + ":" +
                std::to_string(port) + ": " + errstr());
  if (listen(listen_fd_, 1024) != 0) throw Error("listen(): " + errstr());
  sockaddr_storage bound{};
  socklen_t blen = sizeof bound;
  getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&bound), &blen);
  port_ = ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                            : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
}

TcpMesh::~TcpMesh() {
  for (auto& kv : fds_) close(kv.second);
  if (listen_fd_ >= 0) close(listen_fd_);
}

void TcpMesh::connect_all(const std::vector<PeerAddr>& peers) {
  const uint64_t deadline = now_ns() + uint64_t(timeout_s_ * 1e9);
  int expected_accepts = 0;
  for (const auto& p : peers) {
    if (p.rank == rank_) continue;
    if (p.rank > rank_) { ++expected_accepts; continue; }
    // Connect to lower ranks, retrying until the deadline (they may still be starting).
    socklen_t len;
    sockaddr_storage ss = resolve(p.host, p.port, &len);
    int fd = -1;
    while (true) {
      fd = socket(ss.ss_family, SOCK_STREAM, 0);
      if (connect(fd, reinterpret_cast<sockaddr*>(&ss), len) == 0) break;
      std::string why = errstr();
      close(fd);
      if (now_ns() > deadline)
        throw Error("rank " + std::to_string(rank_) + ": cannot connect to rank " +
                    std::to_string(p.rank) + " at " + p.host + ":" + std::to_string(p.port) +
                    ": " + why);
      usleep(20000);
    }
    set_timeouts(fd, timeout_s_);
    int32_t me = rank_;
    if (::send(fd, &me, sizeof me, MSG_NOSIGNAL) != sizeof me)
      throw Error("rank " + std::to_string(rank_) + ": hello to rank " + std::to_string(p.rank) +
                  " failed: " + errstr());
    fds_[p.rank] = fd;
  }
  while (expected_accepts > 0) {
    pollfd pfd{listen_fd_, POLLIN, 0};
    int left_ms = int((int64_t(deadline) - int64_t(now_ns())) / 1000000);
    if (left_ms <= 0 || poll(&pfd, 1, left_ms) <= 0) {
      std::string missing;
      for (const auto& p : peers)
        if (p.rank > rank_ && !fds_.count(p.rank)) missing += " " + std::to_string(p.rank);
      throw Error("rank " + std::to_string(rank_) + ": rank(s)" + missing +
                  " did not connect within " + std::to_string(int(timeout_s_)) + " s");
    }
    int fd = accept(listen_fd_, nullptr, nullptr);
    if (fd < 0) continue;
    set_timeouts(fd, timeout_s_);
    int32_t who = -1;
    if (recv(fd, &who, sizeof who, MSG_WAITALL) != sizeof who) { close(fd); continue; }
    fds_[who] = fd;
    --expected_accepts;
  }
}

int TcpMesh::fd_for(int peer) const {
  auto it = fds_.find(peer);
  if (it == fds_.end()) throw Error("rank " + std::to_string(rank_) + ": no connection to rank " +
                                    std::to_string(peer));
  return it->second;
}

void TcpMesh::send_all(int peer, const char* buf, size_t n, const char* step) {
  int fd = fd_for(peer);
  while (n > 0) {
    ssize_t k = ::send(fd, buf, n, MSG_NOSIGNAL);
    if (k <= 0) {
      if (k < 0 && errno == EINTR) continue;
      bool timed_out = k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
      throw Error("rank " + std::to_string(rank_) + ": " + step + ": sending to rank " +
                  std::to_string(peer) + " failed: " +
                  (timed_out ? "no progress for " + std::to_string(int(timeout_s_)) + " s"
                             : errstr()));
    }
    buf += k;
    n -= size_t(k);
  }
}

void TcpMesh::recv_all(int peer, char* buf, size_t n, const char* step) {
  int fd = fd_for(peer);
  while (n > 0) {
    ssize_t k = ::recv(fd, buf, n, MSG_WAITALL);
    if (k <= 0) {
      if (k < 0 && errno == EINTR) continue;
      std::string why = k == 0 ? "connection closed (rank " + std::to_string(peer) + " gone?)"
                        : (errno == EAGAIN || errno == EWOULDBLOCK)
                            ? "nothing received for " + std::to_string(int(timeout_s_)) + " s"
                            : errstr();
      throw Error("rank " + std::to_string(rank_) + ": " + step + ": receiving from rank " +
                  std::to_string(peer) + " failed: " + why);
    }
    buf += k;
    n -= size_t(k);
  }
}

int64_t TcpMesh::checked_transfer(int peer, size_t nbytes, bool sender) {
  // One untimed message with a size-dependent pattern, verified by the receiver.
  check_buf_.assign(nbytes, 0);
  if (sender) {
    fill_pattern(check_buf_.data(), nbytes, nbytes);
    send_all(peer, check_buf_.data(), nbytes, "data check");
    return 0;
  }
  recv_all(peer, check_buf_.data(), nbytes, "data check");
  if (corrupt_check_ && nbytes) check_buf_[nbytes / 2] ^= 0x5a;
  return count_pattern_errors(check_buf_.data(), nbytes, nbytes);
}

std::vector<double> TcpMesh::stream_send(int peer, size_t nbytes, int iters, int warmup,
                                         bool check) {
  char ack = 0;
  for (int i = 0; i < warmup; ++i) send_all(peer, buf_.data(), nbytes, "warmup");
  recv_all(peer, &ack, 1, "warmup acknowledgement");
  TimedLoop loop{size_t(iters)};
  loop.start();
  for (int i = 0; i < iters; ++i) {
    send_all(peer, buf_.data(), nbytes, "stream");
    loop.mark(size_t(i));
  }
  recv_all(peer, &ack, 1, "stream acknowledgement");  // the receiver has every byte
  loop.extend_last();
  if (check) checked_transfer(peer, nbytes, true);
  return loop.samples_us();
}

int64_t TcpMesh::stream_recv(int peer, size_t nbytes, int iters, int warmup, bool check) {
  char ack = 1;
  for (int i = 0; i < warmup; ++i) recv_all(peer, buf_.data(), nbytes, "warmup");
  send_all(peer, &ack, 1, "warmup acknowledgement");
  for (int i = 0; i < iters; ++i) recv_all(peer, buf_.data(), nbytes, "stream");
  send_all(peer, &ack, 1, "stream acknowledgement");
  return check ? checked_transfer(peer, nbytes, false) : 0;
}

std::vector<double> TcpMesh::pingpong(int peer, size_t nbytes, int iters, int warmup,
                                      bool initiator, bool check, int64_t* wrong) {
  char* b = buf_.data();
  auto one = [&](const char* step) {
    if (initiator) { send_all(peer, b, nbytes, step); recv_all(peer, b, nbytes, step); }
    else { recv_all(peer, b, nbytes, step); send_all(peer, b, nbytes, step); }
  };
  for (int i = 0; i < warmup; ++i) one("warmup");
  TimedLoop loop{size_t(iters)};
  loop.start();
  for (int i = 0; i < iters; ++i) { one("ping-pong"); loop.mark(size_t(i)); }
  *wrong = check ? checked_transfer(peer, nbytes, initiator) : 0;
  return initiator ? loop.samples_us() : std::vector<double>{};
}

}  // namespace cb
