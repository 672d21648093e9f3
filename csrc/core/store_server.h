// The rendezvous store's server (comm_bench/control/store_server.py starts it; its docstring
// holds the promises): one thread, one epoll loop, every connection non-blocking. The wire
// is store_wire.py's. C++ because a barrier is 2N small messages through this loop, and the
// Python loop it replaces spent about twice TCPStore's time per message
// (docs/benchmarks/store.md).
#pragma once
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <queue>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "store_send_pool.h"

namespace cb::store {

// The caps, all chosen by store_server.py (its module constants are the one list).
struct Limits {
  int64_t max_message, max_hello, max_stored, max_wait_keys, max_outbound, max_wait_ms, max_list_keys,
      max_logged, max_conns;  // max_conns < 0: no cap
  double auth_window_s;
};

using Reply = std::shared_ptr<const std::string>;   // one reply may be sent on many connections

// A request refused with this reason; its connection goes on.
struct Refused : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct Conn;
struct Group;

struct Waiter {          // a GET or WAIT blocked on keys not yet set
  uint64_t id;
  Conn* conn;
  std::shared_ptr<Group> group;
  bool get;              // a GET answers with reply_key's value; a WAIT with OK alone
  std::string reply_key;
};

// The waiters on one list of keys, and which of them are not set since the first began
// waiting; a later wait on the same list joins it while no key was deleted in between.
struct Group {
  std::string name;
  std::unordered_set<std::string> missing;
  std::unordered_set<Waiter*> members;
  int64_t deletes;
};

struct Conn {
  int fd;
  std::string peer;
  std::string inbox;
  Reply out;             // the reply being sent, from out_at on
  size_t out_at = 0;
  bool authed = false, open = true, held = false;
  bool unread = false;   // bytes may wait in the socket (its last read was not short)
  std::string challenge;
  double born;
  uint64_t hello_seq = 0;
  Waiter* waiter = nullptr;
  uint32_t events = 0;   // what epoll watches for it now (0: not registered)
};

class Server {
 public:
  Server(int listen_fd, std::string secret, Limits limits);
  void run();            // the loop; never returns

  // Read from other threads (Python's): counters the loop publishes.
  std::atomic<int64_t> refused_hellos{0}, dropped{0}, indexed_groups{0}, indexed_keys{0}, connections{0};

 private:
  // store_loop.cpp: the loop, connections, bytes in and out
  void accept_burst();
  void make_room();
  void close(Conn* c);
  void drop(Conn* c, const std::string& what);
  void pump(Conn* c);
  bool reading(const Conn* c) const;
  size_t wanted(const Conn* c) const;
  bool frame_in_hand(const Conn* c) const;
  int64_t limit(const Conn* c) const { return c->authed ? limits_.max_message + 4 : limits_.max_hello + 4; }
  void serve(Conn* c);
  void send(Conn* c, Reply data);
  void keep(Conn* c, Reply data, size_t sent);
  void send_wakeups();
  void write(Conn* c);
  void release(Conn* c);
  void update(Conn* c);
  void expire();
  int next_timeout_ms() const;
  void publish();

  // store_requests.cpp: what each request does
  Reply answer(Conn* c, int op, const std::vector<std::string_view>& f);
  Reply keyed(int op, const std::vector<std::string_view>& f);
  Reply add(const std::vector<std::string_view>& f);
  Reply multi_set(const std::vector<std::string_view>& f);
  Reply multi_get(std::string_view joined);
  std::string set(std::string_view key, std::string_view value);   // "" or why it is refused
  Reply block(Conn* c, std::string_view name, const std::vector<std::string_view>& keys, int64_t timeout_ms,
              bool get);
  Reply ready_reply(bool get, const std::string& key) const;
  void forget(Waiter* w);
  void wake(Waiter* w, bool ok);

  int listen_fd_, epoll_fd_, reserve_fd_;
  std::string secret_;
  Limits limits_;
  std::unordered_map<std::string, std::string> data_;
  int64_t stored_ = 0, deletes_ = 0, version_ = 0, outbound_ = 0;
  std::unordered_map<std::string, std::unordered_set<std::shared_ptr<Group>>> waiting_;  // key -> groups
  std::unordered_map<std::string, std::shared_ptr<Group>> groups_;   // joined keys -> group new waits join
  std::unordered_map<uint64_t, std::unique_ptr<Waiter>> waiters_;    // id -> waiter not yet answered
  using Deadline = std::pair<double, uint64_t>;
  std::priority_queue<Deadline, std::vector<Deadline>, std::greater<Deadline>> deadlines_;
  uint64_t next_id_ = 1;
  std::string gather_name_;                  // the last MULTI_GET's keys, the store's version then, its reply
  int64_t gather_version_ = -1;
  Reply gather_reply_;
  std::unordered_map<const std::string*, int64_t> holders_;   // unsent reply -> connections sending it
  std::unordered_map<int, std::unique_ptr<Conn>> conns_;
  std::vector<std::unique_ptr<Conn>> closed_;                 // freed once the loop's turn is over
  std::map<uint64_t, Conn*> hellos_;                          // not yet authenticated, oldest first
  std::vector<Conn*> held_;                                   // waiting for room for replies
  std::vector<Conn*> woken_;                                  // serve again this turn
  std::vector<Conn*> again_;                                  // read again next turn
  std::vector<char> buf_;
  bool batching_ = false;                                     // wake-ups wait in wakeups_ to be sent at once
  std::vector<std::pair<Conn*, Reply>> wakeups_;
  std::unique_ptr<SendPool> pool_;                            // null on a machine of few cores
  std::string fault_key_;                                     // test hook, see store_loop.cpp
};

double now_s();
Reply make_frame(int head, std::initializer_list<std::string_view> fields);

}  // namespace cb::store
