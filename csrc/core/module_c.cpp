// comm_bench._C: the timing/statistics harness and the raw TCP transport.
#include "pybind_common.h"
#include "mpi_loop.h"
#include "store_client.h"
#include "tcp.h"

namespace py = pybind11;
using cb::TcpMesh;

PYBIND11_MODULE(_C, m) {
  m.doc() = "comm-bench core: timing/statistics harness and raw TCP sockets";
  cb::register_error(m);

  m.def("stats", [](std::vector<double> samples) { return cb::stats_to_dict(cb::compute_stats(samples)); },
        "min/max/avg/stdev/median/p99/p999 of per-iteration times");
  m.def("harness_overhead_ns", &cb::harness_overhead_ns, py::arg("iters"),
        py::call_guard<py::gil_scoped_release>(), "mean cost of one timed iteration with an empty body");
  m.def("harness_timed_waits_us", &cb::harness_timed_waits_us, py::arg("iters"), py::arg("wait_ns"),
        py::call_guard<py::gil_scoped_release>(),
        "per-iteration times of iterations that each wait wait_ns on CLOCK_MONOTONIC");

  m.def("mpi_pair_loop", [](uintptr_t send, uintptr_t recv, intptr_t byte_type, intptr_t comm, int peer,
                            py::buffer inp, py::buffer out, py::buffer ack, int nbytes, bool src, bool lat,
                            int iters, int warmup) {
    py::buffer_info i = inp.request(), o = out.request(true), a = ack.request(true);
    if (size_t(i.size * i.itemsize) < size_t(nbytes) || size_t(o.size * o.itemsize) < size_t(nbytes) ||
        a.size * a.itemsize < 1)
      throw cb::Error("mpi_pair_loop: a buffer is smaller than the message");
    cb::MpiPair p{reinterpret_cast<cb::MpiSendFn>(send), reinterpret_cast<cb::MpiRecvFn>(recv), byte_type,
                  comm, peer};
    py::gil_scoped_release release;
    return cb::mpi_pair_loop(p, static_cast<char*>(i.ptr), static_cast<char*>(o.ptr),
                             static_cast<char*>(a.ptr), nbytes, src, lat, iters, warmup);
  }, "per-iteration times (us) of a pair's MPI send/recv loop (MPI_Send/MPI_Recv at these addresses)");

  // pybind11, not ctypes: a store call is a barrier's unit of work, and ctypes' argument
  // conversion and the copy out of its buffer cost about as much as the send itself
  m.def("store_exchange", [](int fd, const py::bytes& request, bool answered, int timeout_ms) -> py::object {
    char* req = nullptr;
    Py_ssize_t len = 0;
    if (PyBytes_AsStringAndSize(request.ptr(), &req, &len) < 0) throw py::error_already_set();
    thread_local std::string answer(size_t(1) << 16, '\0');   // the start of each answer lands here
    long got;
    {
      py::gil_scoped_release release;
      got = cb::store::exchange(fd, req, long(len), answered, timeout_ms, answer.data(), long(answer.size()));
    }
    if (got < 0) return py::int_(got);
    return py::bytes(answer.data(), size_t(got));
  }, "sends a store request and reads the start of its answer: the bytes read (b'' for a quiet SET "
     "with nothing back), or -errno (-ETIMEDOUT, -ECONNRESET for a closed connection)");

  py::class_<cb::PeerAddr>(m, "PeerAddr")
      .def(py::init<int, std::string, int>(), py::arg("rank"), py::arg("host"), py::arg("port"));

  py::class_<TcpMesh>(m, "TcpMesh")
      .def(py::init<int, const std::string&, int, double, size_t>(), py::arg("rank"),
           py::arg("bind_addr"), py::arg("port"), py::arg("timeout_s"), py::arg("max_bytes"))
      .def_property_readonly("port", &TcpMesh::port)
      .def("connect_all", &TcpMesh::connect_all, py::call_guard<py::gil_scoped_release>())
      .def("stream_send", &TcpMesh::stream_send, py::call_guard<py::gil_scoped_release>())
      .def("stream_recv", &TcpMesh::stream_recv, py::call_guard<py::gil_scoped_release>())
      .def("pingpong", [](TcpMesh& self, int peer, size_t nbytes, int iters, int warmup,
                          bool initiator, bool check) {
        int64_t wrong = 0;
        std::vector<double> us;
        {
          py::gil_scoped_release release;
          us = self.pingpong(peer, nbytes, iters, warmup, initiator, check, &wrong);
        }
        return py::make_tuple(us, wrong);
      })
      .def("send_bytes", [](TcpMesh& self, int peer, py::buffer buf) {
        py::buffer_info info = buf.request();
        py::gil_scoped_release release;
        self.send_bytes(peer, static_cast<const char*>(info.ptr), size_t(info.size * info.itemsize));
      }, "send a whole C-contiguous buffer to peer (untimed)")
      .def("recv_bytes", [](TcpMesh& self, int peer, py::buffer buf) {
        py::buffer_info info = buf.request(true);
        py::gil_scoped_release release;
        self.recv_bytes(peer, static_cast<char*>(info.ptr), size_t(info.size * info.itemsize));
      }, "receive exactly len(buffer) bytes from peer into a writable buffer (untimed)");
}
