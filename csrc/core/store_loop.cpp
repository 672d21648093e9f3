// The rendezvous store's loop: accepting, reading whole frames, sending replies, deadlines.
// Mirrors what store_server.py's docstring promises: a connection holds at most one request
// in and one reply out; replies not wholly sent are capped in total; descriptors run short
// without the loop stopping; one connection's failure drops that connection only.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>

#include "store_server.h"
#include "store_wire.h"

namespace cb::store {

double now_s() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return double(ts.tv_sec) + ts.tv_nsec * 1e-9;
}

namespace {

int open_reserve() { return ::open("/dev/null", O_RDONLY | O_CLOEXEC); }

std::string peer_name(const sockaddr_storage& a) {
  char host[INET6_ADDRSTRLEN] = "?";
  if (a.ss_family == AF_INET6) {
    auto* v6 = reinterpret_cast<const sockaddr_in6*>(&a);
    inet_ntop(AF_INET6, &v6->sin6_addr, host, sizeof host);
    return "[" + std::string(host) + "]:" + std::to_string(ntohs(v6->sin6_port));
  }
  auto* v4 = reinterpret_cast<const sockaddr_in*>(&a);
  inet_ntop(AF_INET, &v4->sin_addr, host, sizeof host);
  return std::string(host) + ":" + std::to_string(ntohs(v4->sin_port));
}

std::string random_bytes(size_t n) {
  std::string out(n, '\0');
  size_t got = 0;
  while (got < n) {
    ssize_t k = getrandom(out.data() + got, n - got, 0);
    if (k < 0 && errno != EINTR) throw std::runtime_error("getrandom failed");
    if (k > 0) got += size_t(k);
  }
  return out;
}

}  // namespace

Server::Server(int listen_fd, std::string secret, Limits limits)
    : listen_fd_(listen_fd), secret_(std::move(secret)), limits_(limits), buf_(1 << 20) {
  // Test hook: a SET of this key raises inside the server, as a bug in one request would
  // (tests/test_store_requests.py sees that only that connection is dropped).
  if (const char* k = std::getenv("COMM_BENCH_TEST_STORE_FAULT")) fault_key_ = k;
  fcntl(listen_fd_, F_SETFL, fcntl(listen_fd_, F_GETFL) | O_NONBLOCK);
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  if (epoll_fd_ < 0) throw std::runtime_error("epoll_create1 failed");
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.ptr = nullptr;          // the listener
  if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, listen_fd_, &ev) < 0) throw std::runtime_error("epoll_ctl failed");
  reserve_fd_ = open_reserve();
  if (int helpers = SendPool::helpers_for_this_host()) pool_ = std::make_unique<SendPool>(helpers);
}

void Server::run() {
  std::vector<epoll_event> ready(1024);
  for (;;) {
    int n = epoll_wait(epoll_fd_, ready.data(), int(ready.size()), again_.empty() ? next_timeout_ms() : 0);
    for (int i = 0; i < n; ++i) {
      Conn* c = static_cast<Conn*>(ready[i].data.ptr);
      try {
        if (c == nullptr) {
          accept_burst();
          continue;
        }
        if (!c->open) continue;     // closed earlier in this turn
        if (ready[i].events & EPOLLOUT) write(c);
        if (ready[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP)) c->unread = true;   // an edge: news to read
        pump(c);
      } catch (const std::exception& e) {   // one connection's failure is not the store's
        drop(c, e.what());
      }
    }
    expire();
    std::vector<Conn*> again;
    again.swap(again_);
    woken_.insert(woken_.end(), again.begin(), again.end());
    while (!woken_.empty()) {
      std::vector<Conn*> woken;
      woken.swap(woken_);
      for (Conn* c : woken) {
        if (!c->open) continue;
        try {
          pump(c);
        } catch (const std::exception& e) {
          drop(c, e.what());
        }
      }
    }
    closed_.clear();
    publish();
  }
}

void Server::publish() {
  indexed_groups.store(int64_t(groups_.size()), std::memory_order_relaxed);
  indexed_keys.store(int64_t(waiting_.size()), std::memory_order_relaxed);
  connections.store(int64_t(conns_.size()), std::memory_order_relaxed);
}

void Server::drop(Conn* c, const std::string& what_raw) {
  int64_t n = dropped.fetch_add(1) + 1;
  std::string what;
  for (char ch : what_raw.substr(0, 200)) what += (ch == '\n' || static_cast<unsigned char>(ch) >= 0x80) ? '?' : ch;
  std::string line;
  if (c == nullptr) {
    line = "comm-bench store: accepting a connection failed (" + what + "); the store goes on";
  } else {
    line = "comm-bench store: dropped the connection from " + c->peer + " (a request failed: " + what +
           "); the store goes on";
    try {
      close(c);
    } catch (const std::exception&) {   // half-closed state: forget it, keep serving the rest
      c->open = false;
    }
  }
  if (n <= limits_.max_logged) {
    if (n == limits_.max_logged) line += " (further dropped connections are counted, not named)";
    std::fprintf(stderr, "%s\n", line.c_str());
    std::fflush(stderr);
  }
}

int Server::next_timeout_ms() const {
  double now = now_s(), due = now + 1.0;
  if (!deadlines_.empty()) due = std::min(due, deadlines_.top().first);
  if (!hellos_.empty()) due = std::min(due, hellos_.begin()->second->born + limits_.auth_window_s);
  return int(std::ceil(std::max(0.0, due - now) * 1e3));
}

void Server::accept_burst() {
  for (int i = 0; i < 64; ++i) {   // a burst of arrivals, then the loop serves the others again
    if (limits_.max_conns >= 0 && int64_t(conns_.size()) >= limits_.max_conns) {
      make_room();
      if (int64_t(conns_.size()) >= limits_.max_conns) return;   // every one proved itself: the rest wait
      continue;
    }
    sockaddr_storage addr{};
    socklen_t len = sizeof addr;
    int fd = accept4(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        make_room();
        continue;
      }
      if (errno == ECONNABORTED || errno == EPROTO || errno == EPERM || errno == EINTR) continue;
      return;          // EAGAIN, or anything else: try again on the next readiness
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    auto conn = std::make_unique<Conn>();
    Conn* c = conn.get();
    c->fd = fd;
    c->peer = peer_name(addr);
    c->challenge = random_bytes(32);
    c->born = now_s();
    c->hello_seq = next_id_++;
    conns_[fd] = std::move(conn);
    hellos_[c->hello_seq] = c;
    send(c, make_frame(OK, {c->challenge}));
    update(c);
  }
}

void Server::make_room() {
  // Out of descriptors: drop the oldest connection that has not proved itself; if there is
  // none, accept one pending connection on the reserve descriptor and close it.
  if (!hellos_.empty()) {
    refused_hellos.fetch_add(1);
    close(hellos_.begin()->second);
    return;
  }
  if (reserve_fd_ >= 0) {
    ::close(reserve_fd_);
    int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd >= 0) ::close(fd);
    reserve_fd_ = open_reserve();
  }
}

void Server::close(Conn* c) {
  if (!c->open) return;
  c->open = false;
  auto it = conns_.find(c->fd);
  if (it != conns_.end() && it->second.get() == c) {
    closed_.push_back(std::move(it->second));      // freed at the end of this turn
    conns_.erase(it);
  }
  hellos_.erase(c->hello_seq);
  if (c->held) {
    held_.erase(std::remove(held_.begin(), held_.end(), c), held_.end());
    c->held = false;
  }
  again_.erase(std::remove(again_.begin(), again_.end(), c), again_.end());
  release(c);
  if (c->waiter) forget(c->waiter);
  if (c->events) epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, c->fd, nullptr);
  c->events = 0;
  ::close(c->fd);
}

// -- bytes in -------------------------------------------------------------------------
size_t Server::wanted(const Conn* c) const {
  // at most what completes the frame being read, so the inbox never holds much more
  if (c->inbox.empty()) return size_t(std::min<int64_t>(limit(c), 1 << 16));
  if (c->inbox.size() < 4) return 4 - c->inbox.size();
  int64_t size = read_be32(c->inbox.data());
  return size_t(std::max<int64_t>(1, std::min<int64_t>(4 + size - int64_t(c->inbox.size()), 1 << 20)));
}

bool Server::frame_in_hand(const Conn* c) const {
  // a whole frame, or a length serve() will refuse: read no further
  if (c->inbox.size() < 4) return false;
  int64_t size = read_be32(c->inbox.data());
  return !(1 <= size && size <= limit(c) - 4) || int64_t(c->inbox.size()) >= 4 + size;
}

bool Server::reading(const Conn* c) const {
  // what update() registers EPOLLIN for: no reply unsent, and no frame in hand while it waits
  return c->open && !c->out && ((!c->waiter && !c->held) || !frame_in_hand(c));
}

void Server::pump(Conn* c) {
  // Serve what is in hand, then read once more if bytes may be waiting. Connections are
  // edge-triggered, so each arrival is queued in the order it came (a quiet SET on one
  // connection is served before a later read on another; level-triggered epoll re-queued a
  // connection just served ahead of them). One read per turn, then the others' turn.
  serve(c);
  if (c->open && c->unread && reading(c)) {
    size_t want = std::min(wanted(c), buf_.size());
    ssize_t n = ::recv(c->fd, buf_.data(), want, 0);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      c->unread = false;
    } else if (n < 0 && errno == EINTR) {
      again_.push_back(c);
    } else if (n <= 0) {
      close(c);
      return;
    } else {
      c->inbox.append(buf_.data(), size_t(n));
      c->unread = size_t(n) == want;          // a short read emptied the socket
      serve(c);
      if (c->unread) again_.push_back(c);
    }
  }
  update(c);
}

void Server::serve(Conn* c) {
  // Answer the inbox's whole frames in turn until one must wait or a reply is still being
  // sent: a connection has one request in hand at a time.
  while (c->open && !c->waiter && !c->out && c->inbox.size() >= 4) {
    if (outbound_ > limits_.max_outbound && c->authed) {
      if (!c->held) held_.push_back(c);      // served again once replies have drained
      c->held = true;
      break;
    }
    int64_t size = read_be32(c->inbox.data());
    if (!(1 <= size && size <= limit(c) - 4)) {
      close(c);                              // a bad or oversized frame ends that connection only
      return;
    }
    if (int64_t(c->inbox.size()) < 4 + size) break;
    std::string body = c->inbox.substr(4, size_t(size));
    c->inbox.erase(0, 4 + size_t(size));
    Reply reply;
    try {
      std::vector<std::string_view> fields;
      if (!split_fields(body, fields)) throw Refused("a malformed request");
      reply = answer(c, static_cast<unsigned char>(body[0]), fields);
    } catch (const Refused& why) {
      reply = refusal(body, why.what());
    }
    if (reply) send(c, reply);
  }
}

// -- bytes out ------------------------------------------------------------------------
void Server::send(Conn* c, Reply data) {
  size_t sent = 0;
  if (c->out) {
    auto joined = std::make_shared<std::string>(c->out->substr(c->out_at));
    *joined += *data;
    release(c);
    data = joined;
  } else {
    // the usual reply goes whole into the socket at once: then nothing is held or counted
    ssize_t n = ::send(c->fd, data->data(), data->size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      close(c);
      return;
    }
    sent = n > 0 ? size_t(n) : 0;
    if (sent == data->size()) return;
  }
  keep(c, std::move(data), sent);
  write(c);
}

void Server::keep(Conn* c, Reply data, size_t sent) {
  // the rest of a reply the socket did not take; one reply sent on many connections (a
  // shared gather) is memory held once
  if (holders_[data.get()]++ == 0) outbound_ += int64_t(data->size());
  c->out = std::move(data);
  c->out_at = sent;
}

void Server::send_wakeups() {
  // The replies to the waits one SET ended (a barrier's release: one per rank), sent at once
  // from the send pool's threads where there are many.
  std::vector<std::pair<Conn*, Reply>> batch;
  batch.swap(wakeups_);
  constexpr size_t kWorthSharing = 64;
  if (!pool_ || batch.size() < kWorthSharing) {
    for (auto& [c, reply] : batch) {
      if (c->open) send(c, reply);
    }
  } else {
    std::vector<SendPool::Job> jobs;
    std::vector<size_t> whose;            // jobs[i] is batch[whose[i]]'s
    for (size_t i = 0; i < batch.size(); ++i) {
      auto& [c, reply] = batch[i];
      if (!c->open) continue;
      if (c->out) {
        send(c, reply);                   // behind a reply still being sent: joins it
        continue;
      }
      jobs.push_back({c->fd, reply->data(), reply->size()});
      whose.push_back(i);
    }
    pool_->run(jobs);
    for (size_t i = 0; i < jobs.size(); ++i) {
      auto& [c, reply] = batch[whose[i]];
      if (jobs[i].err) close(c);
      else if (size_t(jobs[i].sent) < jobs[i].size) keep(c, reply, size_t(jobs[i].sent));
    }
  }
  for (auto& [c, reply] : batch) {
    if (c->open && (!c->inbox.empty() || c->unread || c->out || c->events != EPOLLIN))
      woken_.push_back(c);     // served again by the loop: no recursion through serve
  }
}

void Server::release(Conn* c) {
  if (!c->out) return;
  auto it = holders_.find(c->out.get());
  if (--it->second == 0) {
    outbound_ -= int64_t(c->out->size());
    holders_.erase(it);
  }
  c->out.reset();
  c->out_at = 0;
}

void Server::write(Conn* c) {
  if (!c->out || !c->open) return;
  ssize_t n = ::send(c->fd, c->out->data() + c->out_at, c->out->size() - c->out_at, MSG_NOSIGNAL | MSG_DONTWAIT);
  if (n < 0) {
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return;
    close(c);
    return;
  }
  c->out_at += size_t(n);
  if (c->out_at < c->out->size()) return;
  // a reply is freed (and counted as freed) only once its last byte is sent
  release(c);
  if (!held_.empty() && outbound_ <= limits_.max_outbound / 2) {
    for (Conn* h : held_) {
      h->held = false;
      woken_.push_back(h);
    }
    held_.clear();
  }
}

void Server::update(Conn* c) {
  // Wait to write while a reply is unsent; else to read, unless the connection waits (a
  // GET, a WAIT, room for replies) with a whole frame in hand already. A waiting connection
  // stays registered, so its peer closing ends its wait at once.
  if (!c->open) return;
  uint32_t events;
  if (c->out) events = EPOLLOUT;
  else if (!c->waiter && !c->held) events = EPOLLIN;
  else events = frame_in_hand(c) ? 0 : EPOLLIN;
  if (events == c->events) return;
  epoll_event ev{};
  ev.events = events | EPOLLET;
  ev.data.ptr = c;
  int op = !c->events ? EPOLL_CTL_ADD : !events ? EPOLL_CTL_DEL : EPOLL_CTL_MOD;
  if (epoll_ctl(epoll_fd_, op, c->fd, &ev) < 0) throw std::runtime_error("epoll_ctl failed");
  c->events = events;
}

void Server::expire() {
  double now = now_s();
  while (!deadlines_.empty() && deadlines_.top().first <= now) {
    uint64_t id = deadlines_.top().second;
    deadlines_.pop();
    auto it = waiters_.find(id);
    if (it == waiters_.end()) continue;          // answered before its deadline
    Conn* c = it->second->conn;
    try {
      wake(it->second.get(), false);
    } catch (const std::exception& e) {
      drop(c, e.what());
    }
  }
  if (deadlines_.size() > 4 * (conns_.size() + 16)) {
    // answered waits stay in the heap until their deadline: drop them in bulk
    std::vector<Deadline> live;
    while (!deadlines_.empty()) {
      if (waiters_.count(deadlines_.top().second)) live.push_back(deadlines_.top());
      deadlines_.pop();
    }
    deadlines_ = decltype(deadlines_)(std::greater<Deadline>(), std::move(live));
  }
  while (!hellos_.empty()) {
    Conn* oldest = hellos_.begin()->second;
    if (now - oldest->born <= limits_.auth_window_s) break;
    refused_hellos.fetch_add(1);
    close(oldest);
  }
}

}  // namespace cb::store
