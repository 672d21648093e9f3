// The ibverbs engine: device/port/GID, RC QPs, and the timed post/poll loops. (Over 400
// lines: the loops share the connection state and its error paths; ibverbs.h is the model.)
// See ibverbs.h for the model. Every wait has a "no progress" deadline and
// fails with a cb::Error naming this rank, the peer and the step.
#include "ibverbs.h"

#include <arpa/inet.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <random>
#include <sstream>

namespace cb {

Op parse_op(const std::string& name) {
  if (name == "write") return Op::Write;
  if (name == "read") return Op::Read;
  if (name == "send") return Op::Send;
  if (name == "write_imm") return Op::WriteImm;
  throw Error("rdma: unknown op '" + name + "' (write, read, send, write_imm)");
}

uint8_t pattern_byte(size_t i, uint32_t seed) {
  uint32_t x = uint32_t(i) * 0x9E3779B1u + seed * 0x85EBCA77u + uint32_t(i >> 32);
  return uint8_t(x >> 24);
}

namespace {

std::string gid_hex(const ibv_gid& g) {
  static const char* d = "0123456789abcdef";
  std::string s;
  for (int i = 0; i < 16; ++i) { s += d[g.raw[i] >> 4]; s += d[g.raw[i] & 15]; }
  return s;
}

ibv_gid gid_from_hex(const std::string& s) {
  ibv_gid g{};
  for (int i = 0; i < 16 && size_t(2 * i + 1) < s.size(); ++i)
    g.raw[i] = uint8_t(std::stoi(s.substr(2 * i, 2), nullptr, 16));
  return g;
}

bool gid_is_zero(const ibv_gid& g) {
  for (uint8_t b : g.raw) if (b) return false;
  return true;
}

const char* port_state_name(ibv_port_state s) {
  switch (s) {
    case IBV_PORT_ACTIVE: return "ACTIVE";
    case IBV_PORT_DOWN: return "DOWN";
    case IBV_PORT_INIT: return "INIT";
    case IBV_PORT_ARMED: return "ARMED";
    case IBV_PORT_ACTIVE_DEFER: return "ACTIVE_DEFER";
    default: return "NOP";
  }
}

int quota(int64_t total, int nqp, int q) {  // ops i with i % nqp == q
  return int(total / nqp + (q < total % nqp ? 1 : 0));
}

std::string memlock_hint() {
  rlimit rl{};
  getrlimit(RLIMIT_MEMLOCK, &rl);
  std::string lim = rl.rlim_cur == RLIM_INFINITY ? "unlimited" : std::to_string(rl.rlim_cur / 1024) + " KiB";
  return "locked-memory limit is " + lim + "; raise it (`ulimit -l unlimited`, or memlock in "
         "/etc/security/limits.conf / the container's --ulimit memlock=-1)";
}

}  // namespace

struct Conn {
  ConnConfig cfg;
  int max_inline = 0;               // what the QPs were created with
  int inline_now = 0;               // this run's threshold (<= max_inline)
  ibv_cq* scq = nullptr;
  ibv_cq* rcq = nullptr;
  std::vector<ibv_qp*> qps;
  void* mem = nullptr;
  size_t mem_bytes = 0;
  ibv_mr* mr = nullptr;
  uint8_t* sbuf = nullptr;
  uint8_t* rbuf = nullptr;
  uint32_t psn = 0;
  ConnInfo remote;
  bool connected = false;
  // per-run state
  std::vector<int64_t> send_out;    // posted, not yet completed, per QP
  std::vector<int> unsignaled;      // posted since the last signalled one, per QP
  std::vector<int64_t> recv_left;   // receives still to post this run, per QP
  std::vector<int64_t> recv_out;    // receives posted, not yet completed, per QP
  int64_t recv_done = 0;
  uint8_t counter = 0;              // ping-pong value of the last round trip

  ~Conn() {
    for (ibv_qp* qp : qps) if (qp) ibv_destroy_qp(qp);
    if (scq) ibv_destroy_cq(scq);
    if (rcq) ibv_destroy_cq(rcq);
    if (mr) ibv_dereg_mr(mr);
    free(mem);
  }
  int cq_mod() const { return std::max(1, std::min(cfg.cq_mod, cfg.tx_depth)); }
};

Engine::Engine(const std::string& device, int port, int gid_index, double timeout_s, int rank)
    : rank_(rank), timeout_ns_(uint64_t(timeout_s * 1e9)) {
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (!list || n == 0) {
    if (list) ibv_free_device_list(list);
    throw Error("no RDMA device found (ibv_get_device_list is empty)");
  }
  ibv_device* dev = nullptr;
  std::string names;
  for (int i = 0; i < n; ++i) {
    std::string nm = ibv_get_device_name(list[i]);
    names += (i ? ", " : "") + nm;
    if (nm == device || (device.empty() && !dev)) dev = list[i];
  }
  if (!dev) {
    ibv_free_device_list(list);
    throw Error("unknown RDMA device '" + device + "'; devices here: " + names);
  }
  info_.device = ibv_get_device_name(dev);
  info_.port = port;
  ctx_ = ibv_open_device(dev);
  ibv_free_device_list(list);
  if (!ctx_) throw Error("cannot open RDMA device " + info_.device + ": " + strerror(errno));

  ibv_device_attr dattr{};
  if (ibv_query_device(ctx_, &dattr)) throw Error("ibv_query_device(" + info_.device + ") failed");
  info_.max_qp_rd_atom = dattr.max_qp_rd_atom;
  if (port < 1 || port > dattr.phys_port_cnt)
    throw Error(info_.device + " has no port " + std::to_string(port) + " (ports 1.." +
                std::to_string(dattr.phys_port_cnt) + ")");
  ibv_port_attr pattr{};
  if (ibv_query_port(ctx_, uint8_t(port), &pattr))
    throw Error("ibv_query_port(" + info_.device + ":" + std::to_string(port) + ") failed");
  info_.state = port_state_name(pattr.state);
  info_.link_layer = pattr.link_layer == IBV_LINK_LAYER_ETHERNET ? "Ethernet" : "InfiniBand";
  info_.lid = pattr.lid;
  info_.active_mtu = 128 << int(pattr.active_mtu);
  if (pattr.state != IBV_PORT_ACTIVE)
    throw Error("port " + std::to_string(port) + " of " + info_.device + " is " + info_.state +
                ", not ACTIVE (check the cable/link: `ibv_devinfo -d " + info_.device + "`)");

  if (gid_index < 0 && info_.link_layer == "Ethernet")
    throw Error(info_.device + " is an Ethernet (RoCE) port: a GID index is required");
  if (gid_index >= 0) {
    ibv_gid gid{};
    if (gid_index >= pattr.gid_tbl_len || ibv_query_gid(ctx_, uint8_t(port), gid_index, &gid) ||
        gid_is_zero(gid)) {
      std::string valid;
      for (int i = 0; i < pattr.gid_tbl_len && i < 256; ++i) {
        ibv_gid g{};
        if (!ibv_query_gid(ctx_, uint8_t(port), i, &g) && !gid_is_zero(g))
          valid += (valid.empty() ? "" : ", ") + std::to_string(i);
      }
      throw Error("GID index " + std::to_string(gid_index) + " is missing on " + info_.device +
                  " port " + std::to_string(port) + " (valid: " + (valid.empty() ? "none" : valid) +
                  "; see `show_gids` or /sys/class/infiniband/" + info_.device + "/ports/" +
                  std::to_string(port) + "/gids)");
    }
    info_.gid_index = gid_index;
    info_.gid = gid_hex(gid);
  }
  pd_ = ibv_alloc_pd(ctx_);
  if (!pd_) throw Error("ibv_alloc_pd(" + info_.device + ") failed: " + strerror(errno));
}

Engine::~Engine() {
  conns_.clear();
  if (pd_) ibv_dealloc_pd(pd_);
  if (ctx_) ibv_close_device(ctx_);
}

Conn& Engine::conn(int peer) const {
  auto it = conns_.find(peer);
  if (it == conns_.end()) throw Error("rdma rank " + std::to_string(rank_) + ": no connection to peer " + std::to_string(peer));
  return *it->second;
}

void Engine::fail(int peer, const std::string& step, const std::string& why) const {
  throw Error("rdma rank " + std::to_string(rank_) + " <-> peer " + std::to_string(peer) + " (" +
              info_.device + ":" + std::to_string(info_.port) + "): " + step + ": " + why);
}

bool Engine::idle_check(IdleClock& idle, int peer, const char* step) const {
  if (!idle.due()) return false;
  if (idle.idle_ns() > timeout_ns_) {
    std::ostringstream why;
    why << "no progress for " << timeout_ns_ / 1e9 << " s (did the peer exit or hang?)";
    fail(peer, step, why.str());
  }
  return true;
}

ConnInfo Engine::add_peer(int peer, const ConnConfig& cfg) {
  auto c = std::make_unique<Conn>();
  c->cfg = cfg;
  const int nq = std::max(1, cfg.qps);
  c->cfg.qps = nq;
  long page = sysconf(_SC_PAGESIZE);
  size_t half = ((std::max<size_t>(cfg.buf_bytes, 64) + page - 1) / page) * page;
  c->mem_bytes = 2 * half;
  if (posix_memalign(&c->mem, size_t(page), c->mem_bytes)) fail(peer, "allocate buffers", "out of memory");
  memset(c->mem, 0, c->mem_bytes);
  c->sbuf = static_cast<uint8_t*>(c->mem);
  c->rbuf = c->sbuf + half;
  c->mr = ibv_reg_mr(pd_, c->mem, c->mem_bytes, cfg.access);
  if (!c->mr) {
    int err = errno;
    std::string why = std::string(strerror(err));
    if (err == ENOMEM || err == EPERM || err == EAGAIN) why += "; " + memlock_hint();
    fail(peer, "register " + std::to_string(c->mem_bytes) + " bytes (ibv_reg_mr)", why);
  }
  c->scq = ibv_create_cq(ctx_, std::max(1, nq * cfg.tx_depth), nullptr, nullptr, 0);
  c->rcq = ibv_create_cq(ctx_, std::max(1, nq * cfg.rx_depth), nullptr, nullptr, 0);
  if (!c->scq || !c->rcq) fail(peer, "create completion queues", strerror(errno));

  std::mt19937 rng(uint32_t(now_ns()) ^ uint32_t(rank_ * 7919 + peer));
  c->psn = rng() & 0xffffff;
  ConnInfo info;
  for (int q = 0; q < nq; ++q) {
    ibv_qp_init_attr ia{};
    ia.send_cq = c->scq;
    ia.recv_cq = c->rcq;
    ia.qp_type = IBV_QPT_RC;
    ia.cap.max_send_wr = uint32_t(cfg.tx_depth);
    ia.cap.max_recv_wr = uint32_t(cfg.rx_depth);
    ia.cap.max_send_sge = 1;
    ia.cap.max_recv_sge = 1;
    ia.cap.max_inline_data = uint32_t(std::max(0, cfg.inline_size));
    ibv_qp* qp = ibv_create_qp(pd_, &ia);
    if (!qp) {
      std::ostringstream why;
      why << strerror(errno) << " (tx depth " << cfg.tx_depth << ", rx depth " << cfg.rx_depth
          << ", inline " << cfg.inline_size << ")";
      fail(peer, "create QP " + std::to_string(q), why.str());
    }
    c->qps.push_back(qp);
    c->max_inline = int(ia.cap.max_inline_data);
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.pkey_index = 0;
    a.port_num = uint8_t(info_.port);
    a.qp_access_flags = cfg.access & ~IBV_ACCESS_LOCAL_WRITE;
    if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
      fail(peer, "QP " + std::to_string(q) + " RESET->INIT", strerror(errno));
    info.qpns.push_back(qp->qp_num);
  }
  c->send_out.assign(nq, 0);
  c->unsignaled.assign(nq, 0);
  c->recv_left.assign(nq, 0);
  c->recv_out.assign(nq, 0);
  info.psn = c->psn;
  info.lid = info_.lid;
  info.gid = info_.gid;
  info.rkey = c->mr->rkey;
  info.sbuf = reinterpret_cast<uintptr_t>(c->sbuf);
  info.rbuf = reinterpret_cast<uintptr_t>(c->rbuf);
  conns_[peer] = std::move(c);
  return info;
}

void Engine::connect(int peer, const ConnInfo& remote) {
  Conn& c = conn(peer);
  if (remote.qpns.size() != c.qps.size())
    fail(peer, "connect", "peer has " + std::to_string(remote.qpns.size()) + " QPs for us, we have " +
                              std::to_string(c.qps.size()) + " (use the same --qps on every rank)");
  ibv_mtu mtu = IBV_MTU_1024;
  switch (info_.active_mtu) {
    case 256: mtu = IBV_MTU_256; break;
    case 512: mtu = IBV_MTU_512; break;
    case 1024: mtu = IBV_MTU_1024; break;
    case 2048: mtu = IBV_MTU_2048; break;
    default: mtu = IBV_MTU_4096; break;
  }
  const uint8_t rd_atom = uint8_t(std::max(1, std::min(info_.max_qp_rd_atom, 255)));
  for (size_t q = 0; q < c.qps.size(); ++q) {
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = mtu;
    a.dest_qp_num = remote.qpns[q];
    a.rq_psn = remote.psn;
    a.max_dest_rd_atomic = rd_atom;
    a.min_rnr_timer = 12;  // 0.64 ms: a sender that outruns the receives waits, it does not fail
    a.ah_attr.port_num = uint8_t(info_.port);
    a.ah_attr.dlid = uint16_t(remote.lid);
    if (!remote.gid.empty() && info_.gid_index >= 0) {
      a.ah_attr.is_global = 1;
      a.ah_attr.grh.dgid = gid_from_hex(remote.gid);
      a.ah_attr.grh.sgid_index = uint8_t(info_.gid_index);
      a.ah_attr.grh.hop_limit = 64;
    }
    if (ibv_modify_qp(c.qps[q], &a,
                      IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                          IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
      fail(peer, "QP " + std::to_string(q) + " INIT->RTR (remote QPN " + std::to_string(remote.qpns[q]) + ")",
           strerror(errno));
    ibv_qp_attr s{};
    s.qp_state = IBV_QPS_RTS;
    s.timeout = 14;    // 4.096 us * 2^14 = 67 ms per retry
    s.retry_cnt = 7;
    s.rnr_retry = 7;   // retry forever on receiver-not-ready (the deadline catches a dead peer)
    s.sq_psn = c.psn;
    s.max_rd_atomic = rd_atom;
    if (ibv_modify_qp(c.qps[q], &s,
                      IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                          IBV_QP_MAX_QP_RD_ATOMIC))
      fail(peer, "QP " + std::to_string(q) + " RTR->RTS", strerror(errno));
  }
  c.remote = remote;
  c.connected = true;
}

void Engine::prepare(int peer, size_t nbytes, uint32_t seed, bool fill, int64_t recvs, int inline_size) {
  Conn& c = conn(peer);
  c.inline_now = std::min(inline_size, c.max_inline);
  if (nbytes > c.mem_bytes / 2) fail(peer, "prepare", "size " + std::to_string(nbytes) + " exceeds the buffer");
  if (fill) for (size_t i = 0; i < nbytes; ++i) c.sbuf[i] = pattern_byte(i, seed);
  memset(c.rbuf, 0, std::max<size_t>(nbytes, 1));
  c.counter = 0;
  c.recv_done = 0;
  const int nq = int(c.qps.size());
  // Receives of a ping-pong all go to QP 0; streaming spreads ops i over QP i % nq.
  for (int q = 0; q < nq; ++q) c.recv_left[q] = recvs < 0 ? (q == 0 ? -recvs : 0) : quota(recvs, nq, q);
  post_recvs(c, peer, nbytes);
}

void Engine::post_recvs(Conn& c, int peer, size_t nbytes) {
  for (size_t q = 0; q < c.qps.size(); ++q) {
    while (c.recv_left[q] > 0 && c.recv_out[q] < c.cfg.rx_depth) {
      ibv_sge sge{reinterpret_cast<uintptr_t>(c.rbuf), uint32_t(nbytes), c.mr->lkey};
      ibv_recv_wr wr{};
      ibv_recv_wr* bad = nullptr;
      wr.wr_id = q;
      wr.sg_list = &sge;
      wr.num_sge = nbytes ? 1 : 0;
      if (int ret = ibv_post_recv(c.qps[q], &wr, &bad)) fail(peer, "post receive", strerror(ret));
      --c.recv_left[q];
      ++c.recv_out[q];
    }
  }
}

void Engine::post_op(Conn& c, int peer, int q, Op op, size_t nbytes, bool signaled, uint64_t wr_id) {
  ibv_sge sge{reinterpret_cast<uintptr_t>(op == Op::Read ? c.rbuf : c.sbuf), uint32_t(nbytes), c.mr->lkey};
  ibv_send_wr wr{};
  ibv_send_wr* bad = nullptr;
  wr.wr_id = wr_id;
  wr.sg_list = &sge;
  wr.num_sge = nbytes ? 1 : 0;
  wr.send_flags = signaled ? IBV_SEND_SIGNALED : 0;
  if (op != Op::Read && nbytes > 0 && int(nbytes) <= c.inline_now) wr.send_flags |= IBV_SEND_INLINE;
  switch (op) {
    case Op::Write: wr.opcode = IBV_WR_RDMA_WRITE; break;
    case Op::WriteImm: wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM; wr.imm_data = htonl(uint32_t(nbytes)); break;
    case Op::Read: wr.opcode = IBV_WR_RDMA_READ; break;
    case Op::Send: wr.opcode = IBV_WR_SEND; break;
  }
  wr.wr.rdma.remote_addr = op == Op::Read ? c.remote.sbuf : c.remote.rbuf;
  wr.wr.rdma.rkey = c.remote.rkey;
  if (int ret = ibv_post_send(c.qps[q], &wr, &bad)) fail(peer, "post send (QP " + std::to_string(q) + ")", strerror(ret));
  ++c.send_out[q];
  c.unsignaled[q] = signaled ? 0 : c.unsignaled[q] + 1;
}

// Polls the send CQ once; returns how many ops the signalled completions cover.
int Engine::poll_send(Conn& c, int peer, const char* step, int64_t* ops_done) {
  ibv_wc wc[16];
  int n = ibv_poll_cq(c.scq, 16, wc);
  if (n < 0) fail(peer, step, "ibv_poll_cq failed");
  int covered = 0;
  for (int i = 0; i < n; ++i) {
    if (wc[i].status != IBV_WC_SUCCESS) {
      std::ostringstream why;
      why << "completion error: " << ibv_wc_status_str(wc[i].status) << " (status " << int(wc[i].status)
          << ", vendor_err 0x" << std::hex << wc[i].vendor_err << std::dec
          << "); the peer may have exited or its memory key/QP is wrong";
      fail(peer, step, why.str());
    }
    int q = int(wc[i].wr_id >> 32);
    int k = int(wc[i].wr_id & 0xffffffffu);
    c.send_out[q] -= k;
    covered += k;
  }
  if (ops_done) *ops_done += covered;
  return covered;
}

// Polls the receive CQ once, reposts receives; returns how many arrived.
int Engine::poll_recv(Conn& c, int peer, size_t nbytes, const char* step) {
  ibv_wc wc[16];
  int n = ibv_poll_cq(c.rcq, 16, wc);
  if (n < 0) fail(peer, step, "ibv_poll_cq failed");
  for (int i = 0; i < n; ++i) {
    if (wc[i].status != IBV_WC_SUCCESS) {
      std::ostringstream why;
      why << "receive completion error: " << ibv_wc_status_str(wc[i].status) << " (status "
          << int(wc[i].status) << ", vendor_err 0x" << std::hex << wc[i].vendor_err << std::dec << ")";
      fail(peer, step, why.str());
    }
    --c.recv_out[wc[i].wr_id];
  }
  if (n > 0) {
    c.recv_done += n;
    post_recvs(c, peer, nbytes);
  }
  return n;
}

LoopResult Engine::stream(int peer, Op op, size_t nbytes, int64_t sends, int64_t recvs_total, bool timed) {
  Conn& c = conn(peer);
  const int nq = int(c.qps.size());
  // Signal at least every 8 MiB, so a slow link (Soft-RoCE under load) still completes
  // something well within the deadline; large messages hardly notice the extra CQEs.
  const int cq_mod = std::max(1, std::min(c.cq_mod(), int((size_t(8) << 20) / std::max<size_t>(nbytes, 1))));
  std::vector<int> left(nq);
  for (int q = 0; q < nq; ++q) left[q] = quota(sends, nq, q);
  // Completion batches (ops completed so far, time): the samples and the peak come from them.
  CompletionBatches batches;
  if (timed) batches.reserve(size_t(sends / cq_mod + nq + 2));
  int64_t posted = 0, done = 0;
  const char* step = sends ? "streaming sends" : "waiting for the peer's messages";
  IdleClock idle;
  const uint64_t t0 = now_ns();
  batches.emplace_back(0, t0);
  while (done < sends || c.recv_done < recvs_total) {
    bool progress = false;
    for (int q = 0; q < nq && posted < sends; ++q) {
      while (left[q] > 0 && c.send_out[q] < c.cfg.tx_depth) {
        bool sig = c.unsignaled[q] + 1 >= cq_mod || left[q] == 1;
        post_op(c, peer, q, op, nbytes, sig, (uint64_t(q) << 32) | uint32_t(c.unsignaled[q] + 1));
        --left[q];
        ++posted;
        progress = true;
      }
    }
    if (done < sends && poll_send(c, peer, step, &done)) {
      progress = true;
      if (timed) batches.emplace_back(done, now_ns());
    }
    if (c.recv_done < recvs_total && poll_recv(c, peer, nbytes, step)) progress = true;
    if (progress) {
      idle.progress();
    } else {
      idle_check(idle, peer, step);
    }
  }
  LoopResult r;
  if (!timed || sends == 0) return r;
  r.first_post_to_last_completion_us = (batches.back().second - t0) / 1e3;
  r.samples_us = per_op_samples_us(batches, sends);
  // Peak: the best rate over any run of at least tx_depth x qps consecutive completions.
  r.peak_gbps = peak_window_gbps(batches, std::min<int64_t>(sends, int64_t(c.cfg.tx_depth) * nq), nbytes);
  return r;
}

LoopResult Engine::pingpong(int peer, Op op, size_t nbytes, int64_t iters, bool initiator, bool timed) {
  Conn& c = conn(peer);
  const int cq_mod = c.cq_mod();
  LoopResult r;
  if (op == Op::Write && nbytes == 0) fail(peer, "write latency", "needs at least 1 byte");
  TimedLoop loop(size_t(timed ? iters : 0));
  volatile uint8_t* poll_byte = c.rbuf + (nbytes ? nbytes - 1 : 0);
  uint8_t* post_byte = c.sbuf + (nbytes ? nbytes - 1 : 0);
  const char* step_wait = op == Op::Read ? "read latency: waiting for the read" :
                          initiator ? "latency: waiting for the peer's reply" :
                                      "latency: waiting for the peer's message";
  // Posts one op (signalled every cq_mod) and keeps the send queue from overflowing.
  auto post = [&](bool force_signal) {
    IdleClock idle;
    while (c.send_out[0] >= c.cfg.tx_depth) {
      if (!poll_send(c, peer, "latency: send queue drain", nullptr)) idle_check(idle, peer, "latency: send queue drain");
    }
    bool sig = force_signal || c.unsignaled[0] + 1 >= cq_mod;
    post_op(c, peer, 0, op, nbytes, sig, uint32_t(c.unsignaled[0] + 1));  // QP 0
  };
  auto wait_recv = [&]() {
    IdleClock idle;
    int64_t want = c.recv_done + 1;
    while (c.recv_done < want) {
      if (!poll_recv(c, peer, nbytes, step_wait)) idle_check(idle, peer, step_wait);
    }
  };
  auto wait_byte = [&](uint8_t v) {
    IdleClock idle;
    while (*poll_byte != v) {
      if (idle_check(idle, peer, step_wait))
        poll_send(c, peer, step_wait, nullptr);  // surfaces a completion error of our own writes
    }
  };
  if (timed) loop.start();
  for (int64_t it = 0; it < iters; ++it) {
    c.counter = uint8_t(c.counter % 255 + 1);
    const uint8_t v = c.counter;
    if (op == Op::Read) {
      post(true);
      IdleClock idle;
      int64_t got = 0;
      while (got == 0) {
        if (!poll_send(c, peer, step_wait, &got)) idle_check(idle, peer, step_wait);
      }
    } else if (op == Op::Write) {
      if (!initiator) wait_byte(v);
      if (nbytes) *post_byte = v;
      post(it + 1 == iters);
      if (initiator) wait_byte(v);
    } else {  // send and write_imm: the receive completion is the arrival
      if (!initiator) wait_recv();
      post(it + 1 == iters);
      if (initiator) wait_recv();
    }
    if (timed) loop.mark(size_t(it));
  }
  // The last post of the run was signalled: drain so the next run starts with an empty send queue.
  IdleClock idle;
  while (c.send_out[0] > 0) {
    if (!poll_send(c, peer, "latency: final completions", nullptr)) idle_check(idle, peer, "latency: final completions");
  }
  if (!timed) return r;
  r.samples_us = loop.samples_us();  // round trips: the record halves them (but a read's)
  r.first_post_to_last_completion_us = loop.total_ns() / 1e3;
  return r;
}

int64_t Engine::count_wrong(int peer, size_t nbytes, uint32_t seed, bool last_byte_is_counter) const {
  const Conn& c = conn(peer);
  int64_t wrong = 0;
  size_t n = last_byte_is_counter && nbytes ? nbytes - 1 : nbytes;
  for (size_t i = 0; i < n; ++i) wrong += c.rbuf[i] != pattern_byte(i, seed);
  if (last_byte_is_counter && nbytes) wrong += c.rbuf[nbytes - 1] != c.counter;
  return wrong;
}

}  // namespace cb
