// comm_bench._ibverbs: the ibverbs engine of the "rdma" transport (see ibverbs.h).
// Connection data crosses as plain dicts (JSON through the rendezvous store).
#include "ibverbs.h"
#include "pybind_common.h"

namespace py = pybind11;
using cb::ConnConfig;
using cb::ConnInfo;
using cb::Engine;
using cb::LoopResult;

namespace {

py::dict conn_info_to_dict(const ConnInfo& c) {
  py::dict d;
  d["qpns"] = c.qpns; d["psn"] = c.psn; d["lid"] = c.lid; d["gid"] = c.gid;
  d["rkey"] = c.rkey; d["sbuf"] = c.sbuf; d["rbuf"] = c.rbuf;
  return d;
}

ConnInfo conn_info_from_dict(const py::dict& d) {
  ConnInfo c;
  c.qpns = d["qpns"].cast<std::vector<uint32_t>>();
  c.psn = d["psn"].cast<uint32_t>();
  c.lid = d["lid"].cast<int>();
  c.gid = d["gid"].cast<std::string>();
  c.rkey = d["rkey"].cast<uint32_t>();
  c.sbuf = d["sbuf"].cast<uint64_t>();
  c.rbuf = d["rbuf"].cast<uint64_t>();
  return c;
}

py::dict loop_to_dict(const LoopResult& r) {
  py::dict d;
  d["samples_us"] = r.samples_us;
  d["total_us"] = r.first_post_to_last_completion_us;
  d["peak_gbps"] = r.peak_gbps;
  d["stats"] = cb::stats_to_dict(cb::compute_stats(r.samples_us));
  return d;
}

// Runs a timed loop without the GIL (the watchdog thread keeps beating), then
// converts its result with the GIL held again.
template <class Loop>
py::dict loop_without_gil(Loop&& loop) {
  LoopResult r;
  {
    py::gil_scoped_release release;
    r = loop();
  }
  return loop_to_dict(r);
}

}  // namespace

PYBIND11_MODULE(_ibverbs, m) {
  m.doc() = "comm-bench ibverbs engine: RC queue pairs and timed post/poll loops";
  cb::register_error(m);
  m.attr("ACCESS_LOCAL_WRITE") = int(IBV_ACCESS_LOCAL_WRITE);
  m.attr("ACCESS_REMOTE_WRITE") = int(IBV_ACCESS_REMOTE_WRITE);
  m.attr("ACCESS_REMOTE_READ") = int(IBV_ACCESS_REMOTE_READ);

  m.def("device_names", []() {
    std::vector<std::string> names;
    int n = 0;
    ibv_device** list = ibv_get_device_list(&n);
    for (int i = 0; list && i < n; ++i) names.push_back(ibv_get_device_name(list[i]));
    if (list) ibv_free_device_list(list);
    return names;
  }, "names of the RDMA devices libibverbs sees");

  py::class_<Engine>(m, "Engine")
      .def(py::init<const std::string&, int, int, double, int>(), py::arg("device"), py::arg("port"),
           py::arg("gid_index"), py::arg("timeout_s"), py::arg("rank"))
      .def("port_info", [](const Engine& e) {
        const cb::PortInfo& p = e.port_info();
        py::dict d;
        d["device"] = p.device; d["port"] = p.port; d["link_layer"] = p.link_layer; d["state"] = p.state;
        d["lid"] = p.lid; d["gid_index"] = p.gid_index; d["gid"] = p.gid; d["active_mtu"] = p.active_mtu;
        d["max_qp_rd_atom"] = p.max_qp_rd_atom;
        return d;
      })
      .def("add_peer", [](Engine& e, int peer, int qps, int tx_depth, int rx_depth, int cq_mod,
                          int inline_size, size_t buf_bytes, int access) {
        ConnConfig cfg;
        cfg.qps = qps; cfg.tx_depth = tx_depth; cfg.rx_depth = rx_depth; cfg.cq_mod = cq_mod;
        cfg.inline_size = inline_size; cfg.buf_bytes = buf_bytes; cfg.access = access;
        return conn_info_to_dict(e.add_peer(peer, cfg));
      }, py::arg("peer"), py::arg("qps"), py::arg("tx_depth"), py::arg("rx_depth"), py::arg("cq_mod"),
         py::arg("inline_size"), py::arg("buf_bytes"), py::arg("access"))
      .def("connect", [](Engine& e, int peer, const py::dict& remote) {
        ConnInfo info = conn_info_from_dict(remote);
        py::gil_scoped_release release;
        e.connect(peer, info);
      })
      .def("prepare", &Engine::prepare, py::arg("peer"), py::arg("nbytes"), py::arg("seed"),
           py::arg("fill"), py::arg("recvs"), py::arg("inline_size"), py::call_guard<py::gil_scoped_release>(),
           "fill sbuf, clear rbuf, pre-post receives (negative: all on QP 0)")
      .def("count_wrong", &Engine::count_wrong, py::arg("peer"), py::arg("nbytes"), py::arg("seed"),
           py::arg("last_byte_is_counter"), py::call_guard<py::gil_scoped_release>())
      .def("stream", [](Engine& e, int peer, const std::string& op, size_t nbytes, int64_t sends,
                        int64_t recvs_total, bool timed) {
        cb::Op o = cb::parse_op(op);
        return loop_without_gil([&] { return e.stream(peer, o, nbytes, sends, recvs_total, timed); });
      }, py::arg("peer"), py::arg("op"), py::arg("nbytes"), py::arg("sends"), py::arg("recvs_total"),
         py::arg("timed"))
      .def("pingpong", [](Engine& e, int peer, const std::string& op, size_t nbytes, int64_t iters,
                          bool initiator, bool timed) {
        cb::Op o = cb::parse_op(op);
        return loop_without_gil([&] { return e.pingpong(peer, o, nbytes, iters, initiator, timed); });
      }, py::arg("peer"), py::arg("op"), py::arg("nbytes"), py::arg("iters"), py::arg("initiator"),
         py::arg("timed"));
}
