// Helpers shared by the pybind11 modules: Stats <-> dict, error translation.
#pragma once
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "harness.h"

namespace cb {
namespace py = pybind11;

inline py::dict stats_to_dict(const Stats& s) {
  py::dict d;
  d["n"] = s.n; d["min"] = s.min; d["max"] = s.max; d["avg"] = s.avg; d["stdev"] = s.stdev;
  d["median"] = s.median; d["p99"] = s.p99; d["p999"] = s.p999; d["sum"] = s.sum;
  return d;
}

// cb::Error becomes comm_bench.system.native.NativeError (a RuntimeError subclass): one class,
// shared by every native module (each module's NativeError attribute is that class),
// so `except comm_bench._cuda.NativeError` also catches what comm_bench._C raises.
inline void register_error(py::module_& m) {
  static PyObject* cls = nullptr;  // owned for the life of the process (never released)
  if (!cls) cls = py::object(py::module_::import("comm_bench.system.native").attr("NativeError")).release().ptr();
  m.attr("NativeError") = py::handle(cls);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const Error& e) {
      PyErr_SetString(cls, e.what());
    }
  });
}

}  // namespace cb
