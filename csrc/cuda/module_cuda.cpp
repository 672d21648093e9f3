// comm_bench._cuda: CUDA copies (cuda_copy.cu) and NCCL (nccl_bench.cu, libnccl
// loaded at run time). Every call that waits on the GPU or on peers releases the GIL.
#include <pybind11/pybind11.h>
#include <pybind11/functional.h>
#include <pybind11/stl.h>

#include "cuda_bench.h"
#include "pybind_common.h"

namespace py = pybind11;
using namespace cb::cuda;

static py::dict info_dict(const DeviceInfo& d) {
  py::dict o;
  o["index"] = d.index;
  o["name"] = d.name;
  o["pci_bus_id"] = d.pci_bus_id;
  o["numa_node"] = d.numa_node;
  o["sm_count"] = d.sm_count;
  o["compute_capability"] = std::to_string(d.major) + "." + std::to_string(d.minor);
  o["total_mem"] = d.total_mem;
  o["async_engines"] = d.async_engines;
  o["l2_bytes"] = d.l2_bytes;
  o["mem_bus_width"] = d.mem_bus_width;
  return o;
}

PYBIND11_MODULE(_cuda, m) {
  m.doc() = "comm-bench CUDA copies and NCCL (libnccl loaded at run time)";
  cb::register_error(m);

  m.def("device_count", []() {
    std::string why;
    int n;
    {
      py::gil_scoped_release nogil;
      n = device_count(&why);
    }
    return py::make_tuple(n, why);
  }, "(number of CUDA devices, why none) without raising");
  m.def("device_info", [](int dev) { return info_dict(device_info(dev)); }, py::arg("device"));
  m.def("driver_version", &driver_version);
  m.def("runtime_version", &runtime_version);
  m.def("can_access_peer", &can_access_peer, py::arg("device"), py::arg("peer"));
  m.def("numa_node_count", &numa_node_count);
  m.def("dtype_size", &dtype_size);
  m.def("count_unequal", &count_unequal, py::arg("device"), py::arg("a"), py::arg("b"), py::arg("count"),
        py::arg("elem_size"), py::call_guard<py::gil_scoped_release>(),
        "elements whose bits differ between device arrays at addresses a and b (Numba's -c check)");

  py::class_<CopyBench>(m, "CopyBench")
      .def(py::init<int, int>(), py::arg("device"), py::arg("numa_node") = -1,
           py::call_guard<py::gil_scoped_release>())
      .def_property_readonly("device", &CopyBench::device)
      .def("export_peer_buffer",
           [](CopyBench& b, size_t bytes) {
             std::string h;
             {
               py::gil_scoped_release nogil;
               h = b.export_peer_buffer(bytes);
             }
             return py::bytes(h);
           },
           py::arg("bytes"))
      .def("open_peer",
           [](CopyBench& b, py::bytes handle, int peer_device, size_t bytes) {
             std::string h = handle;
             py::gil_scoped_release nogil;
             return b.open_peer(h, peer_device, bytes);
           },
           py::arg("handle"), py::arg("peer_device"), py::arg("bytes"))
      .def("run",
           [](CopyBench& b, const std::string& kind, const std::string& method, const std::string& host_mem,
              size_t nbytes, int iters, int warmup, bool check, int peer_slot, double timeout,
              int gate_role, py::object sync) {
             // the handshake of a concurrent pair runs in Python (the rendezvous store)
             std::function<void(int)> step;
             if (!sync.is_none())
               step = [sync](int k) {
                 py::gil_scoped_acquire gil;
                 sync(k);
               };
             CopyResult r;
             {
               py::gil_scoped_release nogil;
               r = b.run(kind, method, host_mem, nbytes, iters, warmup, check, peer_slot, timeout, gate_role, step);
             }
             py::dict o;
             o["mean_us"] = r.mean_us;
             o["samples_us"] = r.samples_us;
             o["wrong"] = r.wrong;
             o["blocking_timed_out"] = r.blocking_timed_out;
             o["numa_node"] = r.numa_node;
             return o;
           },
           py::arg("kind"), py::arg("method") = "ce", py::arg("host_mem") = "pinned", py::arg("nbytes"),
           py::arg("iters"), py::arg("warmup") = 5, py::arg("check") = false, py::arg("peer_slot") = -1,
           py::arg("timeout") = 600.0, py::arg("gate_role") = 0,
           py::arg("sync") = py::none())
      .def("release_buffers", &CopyBench::release_buffers, py::call_guard<py::gil_scoped_release>());

  m.def("nccl_load",
        [](const std::vector<std::string>& candidates) {
          NcclLib l;
          {
            py::gil_scoped_release nogil;
            l = nccl_load(candidates);
          }
          return py::make_tuple(l.path, l.version);
        },
        py::arg("candidates"), "load the first libnccl that works: (path, version code)");
  m.def("nccl_loaded", &nccl_loaded);
  m.def("nccl_unique_id", []() { return py::bytes(nccl_unique_id()); });

  py::class_<NcclBench>(m, "NcclBench")
      .def(py::init([](int device, int nranks, int rank, py::bytes uid, double timeout, int register_mode) {
             std::string id = uid;
             py::gil_scoped_release nogil;
             return new NcclBench(device, nranks, rank, id, timeout, register_mode);
           }),
           py::arg("device"), py::arg("nranks"), py::arg("rank"), py::arg("unique_id"),
           py::arg("timeout") = 600.0, py::arg("register_mode") = 0)
      .def_property_readonly("rank", &NcclBench::rank)
      .def_property_readonly("nranks", &NcclBench::nranks)
      .def("run",
           [](NcclBench& b, const std::string& op, size_t in_count, size_t out_count, const std::string& dtype,
              const std::string& redop, int root, int peer, int iters, int warmup, bool in_place, int graph,
              bool check, double timeout) {
             NcclResult r;
             {
               py::gil_scoped_release nogil;
               r = b.run(op, in_count, out_count, dtype, redop, root, peer, iters, warmup, in_place, graph, check,
                         timeout);
             }
             py::dict o;
             o["mean_us"] = r.mean_us;
             o["gpu_us"] = r.gpu_us;
             o["samples_us"] = r.samples_us;
             o["wrong"] = r.wrong;
             o["api"] = r.api;
             o["alloc"] = r.alloc;
             return o;
           },
           py::arg("op"), py::arg("in_count"), py::arg("out_count"), py::arg("dtype") = "float32",
           py::arg("redop") = "sum",
           py::arg("root") = 0, py::arg("peer") = -1, py::arg("iters") = 20, py::arg("warmup") = 5,
           py::arg("in_place") = false, py::arg("graph") = 0, py::arg("check") = false,
           py::arg("timeout") = 600.0)
      .def("reserve", &NcclBench::reserve, py::arg("bytes"), py::call_guard<py::gil_scoped_release>())
      .def("destroy", &NcclBench::destroy, py::call_guard<py::gil_scoped_release>());
}
