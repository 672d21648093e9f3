"""Builds the native parts of comm_bench from csrc/: the parts and their folders are
comm_bench/system/native.py's PARTS (the one list; doctor reads it too). The core always;
_ibverbs where rdma-core's headers (infiniband/verbs.h) exist; _cuda where nvcc exists.

Each extension is built from every *.cpp (host compiler) and *.cu (nvcc) in its folder;
headers shared by all of them (harness.h, pybind_common.h) sit in csrc/. A new source
file in a folder is built without editing this file.

A part whose toolkit is missing is skipped with a message; comm_bench imports
without it and `comm-bench doctor` says why it is absent.
"""
import ast
import os
import shutil
import subprocess
import sys

from pybind11.setup_helpers import Pybind11Extension, build_ext
from setuptools import setup
from setuptools.errors import CompileError

CXX_FLAGS = ["-O3", "-std=c++17", "-Wall"]
HERE = os.path.dirname(os.path.abspath(__file__))


def note(msg):
    print(f"comm-bench build: {msg}", file=sys.stderr)


def sources(folder, suffix):
    path = os.path.join("csrc", folder)
    return sorted(os.path.join(path, f) for f in os.listdir(path) if f.endswith(suffix))


def native_parts():
    """{module: (csrc folder, what, why missing)} from comm_bench/system/native.py, read as a
    literal: the build runs before comm_bench can be imported."""
    path = os.path.join(HERE, "comm_bench", "system", "native.py")
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    node = next(n for n in tree.body if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", "") == "PARTS")
    return ast.literal_eval(node.value)


def host_extension(name, folder):
    """A part that links nothing beyond the C++ runtime (the core)."""
    return Pybind11Extension(
        f"comm_bench.{name}", sources(folder, ".cpp"),
        include_dirs=["csrc", f"csrc/{folder}"], extra_compile_args=CXX_FLAGS, libraries=["pthread"])


def has_header(path):
    return any(os.path.exists(os.path.join(d, path)) for d in ("/usr/include", "/usr/local/include"))


def ibverbs_extension(name, folder):
    if os.environ.get("COMM_BENCH_NO_IBVERBS"):
        note(f"skipping comm_bench.{name} (COMM_BENCH_NO_IBVERBS set)")
        return None
    if not has_header("infiniband/verbs.h"):
        note(f"skipping comm_bench.{name}: infiniband/verbs.h not found "
             "(install rdma-core's libibverbs-dev)")
        return None
    return Pybind11Extension(
        f"comm_bench.{name}", sources(folder, ".cpp"),
        include_dirs=["csrc", f"csrc/{folder}"], extra_compile_args=CXX_FLAGS, libraries=["ibverbs", "pthread"])


def find_nvcc():
    nvcc = shutil.which("nvcc")
    if nvcc:
        return nvcc
    for root in (os.environ.get("CUDA_HOME"), "/usr/local/cuda"):
        if root and os.path.exists(os.path.join(root, "bin", "nvcc")):
            return os.path.join(root, "bin", "nvcc")
    return None


def cuda_extension(name, folder):
    """CUDA sources (*.cu) are compiled by nvcc in CudaBuildExt; C++ sources by the host compiler."""
    if os.environ.get("COMM_BENCH_NO_CUDA"):
        note(f"skipping comm_bench.{name} (COMM_BENCH_NO_CUDA set)")
        return None
    nvcc = find_nvcc()
    if not nvcc:
        note("skipping comm_bench._cuda: nvcc not found (install the CUDA toolkit or set CUDA_HOME)")
        return None
    cu_sources = sources(folder, ".cu")
    # nvcc may be a wrapper script (/usr/local/bin/nvcc): take the first root holding the runtime
    roots = [os.environ.get("CUDA_HOME"), os.path.dirname(os.path.dirname(os.path.realpath(nvcc))),
             "/usr/local/cuda"]
    cuda_home = next((r for r in roots if r and os.path.exists(os.path.join(r, "include", "cuda_runtime.h"))),
                     roots[1])
    ext = Pybind11Extension(
        f"comm_bench.{name}", sources(folder, ".cpp"),
        include_dirs=["csrc", f"csrc/{folder}", os.path.join(cuda_home, "include")],
        library_dirs=[os.path.join(cuda_home, "lib64")],
        runtime_library_dirs=[os.path.join(cuda_home, "lib64")],
        libraries=["cudart", "dl", "pthread"], extra_compile_args=CXX_FLAGS)
    ext.cu_sources = cu_sources
    ext.optional = not os.environ.get("COMM_BENCH_REQUIRE_CUDA")
    ext.nvcc = nvcc
    return ext


class CudaBuildExt(build_ext):
    """build_ext that first compiles an extension's .cu files with nvcc."""

    def build_extension(self, ext):
        cu_sources = getattr(ext, "cu_sources", [])
        if cu_sources:
            out_dir = os.path.join(self.build_temp, "cuda")
            os.makedirs(out_dir, exist_ok=True)
            arch = os.environ.get("COMM_BENCH_CUDA_ARCH", "-gencode=arch=compute_90,code=sm_90 "
                                  "-gencode=arch=compute_80,code=sm_80 "
                                  "-gencode=arch=compute_90,code=compute_90").split()
            for src in cu_sources:
                obj = os.path.join(out_dir, os.path.basename(src) + ".o")
                cmd = [ext.nvcc, "-c", src, "-o", obj, "-O3", "-std=c++17", "-Icsrc", "-Icsrc/cuda",
                       "-Xcompiler", "-fPIC", *arch]
                note(" ".join(cmd))
                try:
                    subprocess.check_call(cmd)
                except (OSError, subprocess.CalledProcessError) as exc:
                    # ext.optional: the rest of comm-bench still installs and doctor reports
                    # _cuda as missing; COMM_BENCH_REQUIRE_CUDA=1 makes this fatal
                    note(f"comm_bench._cuda NOT BUILT: nvcc failed on {src} ({exc})")
                    raise CompileError(f"nvcc failed on {src}") from None
                ext.extra_objects.append(obj)
        super().build_extension(ext)


# the parts that link a library of their own, or need a toolkit; any other is a host_extension
BUILDERS = {"_ibverbs": ibverbs_extension, "_cuda": cuda_extension}
extensions = [e for e in (BUILDERS.get(name, host_extension)(name, folder)
                          for name, (folder, _what, _why) in native_parts().items()) if e]
# COMM_BENCH_ONLY=_ibverbs,_cuda rebuilds just those parts (handy while working on one).
_only = [n for n in os.environ.get("COMM_BENCH_ONLY", "").split(",") if n]
if _only:
    extensions = [e for e in extensions if e.name.split(".")[-1] in _only]

setup(
    packages=["comm_bench", "comm_bench.commands", "comm_bench.control", "comm_bench.run",
              "comm_bench.results", "comm_bench.views", "comm_bench.validate", "comm_bench.system",
              "comm_bench.fabric_sim", "comm_bench.select", "comm_bench.transports", "comm_bench.topology"],
    package_dir={"comm_bench.transports": "transports", "comm_bench.topology": "topology"},
    package_data={"comm_bench": ["data/*"], "comm_bench.topology": ["fixtures/**/*"]},
    ext_modules=extensions,
    cmdclass={"build_ext": CudaBuildExt},
)
