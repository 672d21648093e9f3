// The ibverbs engine behind the "rdma" transport.
//
// One Engine per rank: it opens one device port, one protection domain, and
// per peer a Conn (N RC queue pairs, a send and a receive completion queue and
// one page-aligned registered buffer split into a source half `sbuf` and a
// sink half `rbuf`). Connection data travels through the run's rendezvous
// store (Python side); this file only turns it into QP state transitions and
// runs the hot post/poll loops, stamping each iteration with cb::TimedLoop.
//
// Data placement: writes, sends and write-with-immediate land in the peer's
// rbuf; reads fetch the peer's sbuf into the local rbuf. perftest does the same
// (one buffer reused by every iteration).
#pragma once
#include <infiniband/verbs.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "harness.h"

namespace cb {

enum class Op { Write, Read, Send, WriteImm };
Op parse_op(const std::string& name);

struct PortInfo {
  std::string device;
  int port = 1;
  std::string link_layer;  // "InfiniBand" or "Ethernet"
  std::string state;       // "ACTIVE", "DOWN", ...
  int lid = 0;
  int gid_index = -1;      // -1: address by LID (InfiniBand without GRH)
  std::string gid;         // hex, 32 digits
  int active_mtu = 0;      // bytes
  int max_inline = 0;
  int max_qp_rd_atom = 0;
};

// What a peer needs to reach one of our Conns (exchanged as JSON by Python).
struct ConnInfo {
  std::vector<uint32_t> qpns;
  uint32_t psn = 0;
  int lid = 0;
  std::string gid;  // hex; empty when addressing by LID
  uint32_t rkey = 0;
  uint64_t sbuf = 0, rbuf = 0;
};

struct ConnConfig {
  int qps = 1;
  int tx_depth = 128;
  int rx_depth = 512;
  int cq_mod = 100;        // signal one send in cq_mod (selective signalling)
  int inline_size = 0;     // request this much inline data in the QP caps
  size_t buf_bytes = 4096; // size of each half (sbuf, rbuf)
  int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
};

// The result of one timed native loop.
struct LoopResult {
  std::vector<double> samples_us;  // bw: time between completions; lat: per-iteration round trips
  double first_post_to_last_completion_us = 0;
  double peak_gbps = 0;            // best window of tx_depth consecutive completions
};

struct Conn;

class Engine {
 public:
  Engine(const std::string& device, int port, int gid_index, double timeout_s, int rank);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  const PortInfo& port_info() const { return info_; }
  ConnInfo add_peer(int peer, const ConnConfig& cfg);
  void connect(int peer, const ConnInfo& remote);

  // Per-run preparation: fill sbuf with the check pattern, clear rbuf, reset
  // the ping-pong counter, pre-post `recvs` receives (send/write_imm sinks; a
  // negative count puts them all on QP 0, for ping-pong) and set the inline threshold.
  void prepare(int peer, size_t nbytes, uint32_t seed, bool fill, int64_t recvs, int inline_size);
  int64_t count_wrong(int peer, size_t nbytes, uint32_t seed, bool last_byte_is_counter) const;

  // Streaming: post `sends` ops (0 on a passive side), and wait for `recvs`
  // incoming messages (send/write_imm sinks, counted from prepare()).
  LoopResult stream(int peer, Op op, size_t nbytes, int64_t sends, int64_t recvs_total,
                    bool timed);
  // Ping-pong: `initiator` starts each round trip; the other side answers.
  // Read has no answering side (the peer's CPU is not involved).
  LoopResult pingpong(int peer, Op op, size_t nbytes, int64_t iters, bool initiator, bool timed);

 private:
  Conn& conn(int peer) const;
  [[noreturn]] void fail(int peer, const std::string& step, const std::string& why) const;
  // Every 65536th idle spin of a wait loop: true, after failing if the loop has
  // been idle longer than the timeout.
  bool idle_check(IdleClock& idle, int peer, const char* step) const;
  void post_recvs(Conn& c, int peer, size_t nbytes);
  int poll_send(Conn& c, int peer, const char* step, int64_t* ops_done);
  int poll_recv(Conn& c, int peer, size_t nbytes, const char* step);
  void post_op(Conn& c, int peer, int qp, Op op, size_t nbytes, bool signaled, uint64_t wr_id);

  PortInfo info_;
  int rank_;
  uint64_t timeout_ns_;
  ibv_context* ctx_ = nullptr;
  ibv_pd* pd_ = nullptr;
  std::map<int, std::unique_ptr<Conn>> conns_;
};

uint8_t pattern_byte(size_t i, uint32_t seed);

}  // namespace cb
