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

// cb::Error becomes comm_bench's NativeError (a RuntimeError subclass) in every module.
inline void register_error(py::module_& m) {
  static py::exception<Error> exc(m, "NativeError", PyExc_RuntimeError);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const Error& e) {
      PyErr_SetString(exc.ptr(), e.what());
    }
  });
}

}  // namespace cb
