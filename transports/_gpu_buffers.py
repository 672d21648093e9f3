"""GPU buffers for the host-side transports (mpi, gloo, grpc, tcp): `--buffer cuda[:LIB]`.

One rank per GPU (cuda.pick_gpu). The array library (CuPy, Numba or torch) allocates the
rank's send/receive buffers on its GPU; a transport either hands them to its library
directly (CUDA-aware MPI, Gloo's CUDA collectives) or stages them through pinned host
memory: device -> pinned host -> wire -> pinned host -> device. Every record says which
(extra.buffer). The staging copies are also timed in a pass of their own (each copy issued
and waited for, as the staged loop makes it, on the host's clock), so a record shows the
share of its time spent in device/host copies. Data checks compare on the GPU.

Imports of CuPy, Numba and torch happen here only when asked for: importing comm_bench
never needs them.
"""
from __future__ import annotations

import functools
import statistics
import time

from ..errors import TransportUnavailable
from .base import TEST_CORRUPT_CHECK, Option

LIBRARIES = ("cupy", "torch", "numba")      # `--buffer cuda` takes the first that works here
BUFFER_OPTION = Option(
    "--buffer", str, "host",
    "where this rank's buffers live: host, or cuda[:cupy|:numba|:torch] (its GPU, allocated by "
    "that array library; cuda alone: the first of cupy, torch, numba that works here)",
    choices=("host", "cuda") + tuple(f"cuda:{lib}" for lib in LIBRARIES))
GPU_PATH_OPTION = Option(
    "--gpu-path", str, "auto",
    "GPU buffers: direct (the library reads GPU memory), staged (through pinned host memory) "
    "or auto (direct where the library supports it, else staged)",
    choices=("auto", "direct", "staged"))
OPTIONS = (BUFFER_OPTION, GPU_PATH_OPTION)
HOST = {"kind": "host"}
STAGED_ONLY = ("--gpu-path direct: {name} sends from host memory only, so GPU buffers are staged "
               "through pinned host memory: use --gpu-path staged or auto")


@functools.cache
def library_status(lib: str) -> tuple:
    """(ok, why not): `lib` imports and sees a CUDA GPU. Never raises."""
    try:
        if lib == "cupy":
            import cupy
            n = cupy.cuda.runtime.getDeviceCount()
        elif lib == "torch":
            import torch
            n = torch.cuda.device_count() if torch.cuda.is_available() else 0
        else:
            from numba import cuda
            n = len(cuda.gpus) if cuda.is_available() else 0
            from ..system.native import load
            native, why = load("_cuda")
            if n and native is None:   # its kernel checks Numba arrays (count_wrong)
                return False, f"numba buffers need comm_bench._cuda: {why}"
    except ImportError:
        return False, f"{lib} is not installed (pip install {'cupy-cuda12x or cupy-cuda13x' if lib == 'cupy' else lib})"
    except Exception as exc:  # noqa: BLE001 - a driver or runtime error means "no GPU through it"
        return False, f"{lib} sees no CUDA GPU ({str(exc).splitlines()[0] if str(exc) else type(exc).__name__})"
    return (True, "") if n else (False, f"{lib} sees no CUDA GPU (a CPU build, or no GPU/driver here)")


def buffer_kinds() -> list:
    """[(kind, ok, why not)] for `list` and `doctor`: host, then each cuda:LIB."""
    return [("host", True, "")] + [(f"cuda:{lib}", *library_status(lib)) for lib in LIBRARIES]


def library_for(buffer: str | None, prefer=LIBRARIES) -> str | None:
    """The array library `--buffer` asks for (None: host), or TransportUnavailable (one line)."""
    if not buffer or buffer == "host":
        return None
    if ":" in buffer:
        lib = buffer.split(":", 1)[1]
        ok, why = library_status(lib)
        if not ok:
            raise TransportUnavailable(f"--buffer {buffer}: {why}")
        return lib
    whys = []
    for lib in prefer:
        ok, why = library_status(lib)
        if ok:
            return lib
        whys.append(why)
    raise TransportUnavailable(f"--buffer cuda: no GPU array library works here ({'; '.join(whys)})")


def check_options(options: dict, prefer=LIBRARIES) -> str | None:
    """Before any rank starts: the array library --buffer asks for (None: host), refusing a
    library that does not work here, and a --gpu or --gpu-path with host buffers, which would
    be silently ignored (one line, exit 2)."""
    lib = library_for(options.get("buffer"), prefer)
    gpu, path = options.get("gpu"), options.get("gpu_path")
    if lib is None and gpu is not None and int(gpu) >= 0:
        raise TransportUnavailable(f"--gpu {gpu} picks the GPU of --buffer cuda; with --buffer host "
                                   "there is none to pick")
    if lib is None and path not in (None, "auto"):
        raise TransportUnavailable(f"--gpu-path {path} says how GPU buffers travel; with --buffer host "
                                   "there are none")
    return lib


def check_staged_only(options: dict, name: str) -> None:
    """check_options of a transport that only stages (tcp, grpc): a direct path is refused."""
    if check_options(options) and options.get("gpu_path") == "direct":
        raise TransportUnavailable(STAGED_ONLY.format(name=name))


def open_for(ctx, options: dict, prefer=LIBRARIES) -> tuple:
    """In a rank's setup: (array library or None for host buffers, its adapter or None)."""
    lib = library_for(options["buffer"], prefer)
    return lib, (open_buffers(lib, ctx, options["gpu"]) if lib else None)


def describe(lib: str | None, path: str, **more) -> dict:
    """extra.buffer of a record: kind, array library, direct or staged (+ what decided it)."""
    return dict(HOST) if lib is None else {"kind": "cuda", "library": lib, "path": path, **more}


def open_buffers(lib: str, ctx, requested_gpu):
    """This rank's GPU (one per rank) through `lib`'s adapter."""
    from .cuda import pick_gpu

    adapter = {"cupy": _Cupy, "torch": _Torch, "numba": _Numba}[lib]
    return adapter(pick_gpu(ctx, requested_gpu, adapter.count()))


class _Adapter:
    """The few things a transport does with GPU arrays, for one library. Arrays are 1-D."""
    lib = ""

    def __init__(self, dev: int):
        self.dev = dev

    def info(self) -> dict:
        return {"device": f"cuda:{self.dev}", "buffer_library": self.lib}

    def current(self):
        """A context that makes this GPU current in the calling thread (a server thread)."""
        raise NotImplementedError

    def from_host(self, host):
        """A device copy of the numpy array `host` (untimed: data fill)."""
        raise NotImplementedError

    def empty(self, count: int, np_dtype):
        raise NotImplementedError

    def pinned(self, count: int, np_dtype):
        """A numpy array over page-locked host memory."""
        raise NotImplementedError

    def _copy(self, direction, dev, host):
        """One synchronous copy (d2h or h2d) of min(dev, host) bytes."""
        raise NotImplementedError

    def d2h(self, host, dev):
        """host[:] = dev, finished on return."""
        self._copy("d2h", dev, host)

    def h2d(self, dev, host):
        """dev[:] = host, finished on return."""
        self._copy("h2d", dev, host)
        self.sync()

    def sync(self):
        raise NotImplementedError

    def copy_us(self, direction: str, dev, host, iters: int) -> float:
        """Time (us) of one `direction` ("d2h"/"h2d") copy made as the staged path makes it
        (d2h / h2d: issued and waited for, one at a time), on the host's clock: the copy plus
        its launch and wait, which is what a staged iteration pays. The median of at least 20
        copies after an untimed one: a short -n must not let one slow call stand for all."""
        copy, args = (self.d2h, (host, dev)) if direction == "d2h" else (self.h2d, (dev, host))
        copy(*args)
        times = []
        for _ in range(max(iters, 20)):
            t0 = time.perf_counter_ns()
            copy(*args)
            times.append(time.perf_counter_ns() - t0)
        return statistics.median(times) / 1e3

    def count_wrong(self, got, want) -> int:
        """Elements of the device array `got` (first want.size) that differ from the int64
        numpy `want` cast like the data: compared on the GPU."""
        raise NotImplementedError

    @staticmethod
    def count() -> int:
        """The GPUs this library sees."""
        raise NotImplementedError


class _Cupy(_Adapter):
    lib = "cupy"

    @staticmethod
    def count():
        import cupy
        return cupy.cuda.runtime.getDeviceCount()

    def __init__(self, dev):
        import cupy
        import cupyx
        super().__init__(dev)
        self.cp, self.cpx = cupy, cupyx
        cupy.cuda.Device(dev).use()

    def current(self):
        return self.cp.cuda.Device(self.dev)

    def from_host(self, host):
        a = self.cp.asarray(host)
        self.sync()
        return a

    def empty(self, count, np_dtype):
        return self.cp.zeros(count, dtype=np_dtype)

    def pinned(self, count, np_dtype):
        return self.cpx.zeros_pinned(count, dtype=np_dtype)

    def _copy(self, direction, dev, host):
        rt = self.cp.cuda.runtime
        n = min(dev.nbytes, host.nbytes)
        if direction == "d2h":
            args = (host.ctypes.data, dev.data.ptr, n, rt.memcpyDeviceToHost)
        else:
            args = (dev.data.ptr, host.ctypes.data, n, rt.memcpyHostToDevice)
        rt.memcpy(*args)

    def sync(self):
        self.cp.cuda.Device(self.dev).synchronize()

    def count_wrong(self, got, want):
        w = self.cp.asarray(want).astype(got.dtype)
        return int((got.reshape(-1)[: w.size] != w).sum())


class _Torch(_Adapter):
    lib = "torch"

    @staticmethod
    def count():
        import torch
        return torch.cuda.device_count()

    def __init__(self, dev):
        import torch
        super().__init__(dev)
        self.torch = torch
        torch.cuda.set_device(dev)
        self.device = torch.device("cuda", dev)

    def current(self):
        return self.torch.cuda.device(self.dev)

    def _t(self, host):
        return self.torch.from_numpy(host)

    def from_host(self, host):
        t = self._t(host).to(self.device)
        self.sync()
        return t

    def empty(self, count, np_dtype):
        import numpy as np
        return self._t(np.zeros(0, np_dtype)).new_zeros(count, device=self.device)

    def pinned(self, count, np_dtype):
        import numpy as np
        nbytes = count * np.dtype(np_dtype).itemsize
        t = self.torch.zeros(nbytes, dtype=self.torch.uint8).pin_memory()
        return t.numpy().view(np_dtype)     # the numpy view keeps the pinned tensor alive

    def _copy(self, direction, dev, host):
        d = dev.reshape(-1).view(self.torch.uint8)
        h = self._t(host.reshape(-1).view("uint8"))
        n = min(d.numel(), h.numel())
        if direction == "d2h":
            h[:n].copy_(d[:n])
        else:
            d[:n].copy_(h[:n])

    def sync(self):
        self.torch.cuda.synchronize(self.device)

    def count_wrong(self, got, want):
        w = self._t(want).to(self.device).to(got.dtype)
        return int((got.reshape(-1)[: w.numel()] != w).sum().item())


class _Numba(_Adapter):
    lib = "numba"

    @staticmethod
    def count():
        from numba import cuda
        return len(cuda.gpus)

    def __init__(self, dev):
        from numba import cuda
        super().__init__(dev)
        self.cuda = cuda
        cuda.select_device(dev)

    def current(self):
        return self.cuda.gpus[self.dev]

    def from_host(self, host):
        return self.cuda.to_device(host)

    def empty(self, count, np_dtype):
        import numpy as np
        return self.cuda.to_device(np.zeros(count, np_dtype))

    def pinned(self, count, np_dtype):
        return self.cuda.pinned_array(count, dtype=np_dtype)

    def _copy(self, direction, dev, host):
        n = min(dev.size, host.size)     # slice only where needed: a Numba slice costs ~10 us
        d, h = (dev, host) if dev.size == host.size else (dev[:n], host[:n])
        if direction == "d2h":
            d.copy_to_host(h)
        else:
            d.copy_to_device(h)

    def sync(self):
        self.cuda.synchronize()

    def count_wrong(self, got, want):
        """Compared on the GPU by comm-bench's own kernel (comm_bench._cuda.count_unequal), not
        a Numba JIT kernel: Numba arrays have no element-wise compare, and Numba's JIT breaks
        where numba-cuda and numpy disagree (the H200 machine's: np.row_stack is gone)."""
        from ..system.native import require
        w = want.astype(got.dtype)
        n = min(w.size, got.size)      # the kernel reads n elements of each: never past `got`
        missing = w.size - n           # elements that did not arrive are wrong
        if not n:
            return missing
        ref = self.cuda.to_device(w[:n])
        return missing + int(require("_cuda").count_unequal(self.dev, _address(got), _address(ref), n, w.itemsize))


def _address(dev_array) -> int:
    """The device address of a Numba array's first element (__cuda_array_interface__)."""
    return dev_array.__cuda_array_interface__["data"][0]


def staged_pair_steps(g, send, recv, inp, out, mirrors: dict, ack, peer, role, mode, down, up):
    """A framework transport's pair steps on device buffers staged through host mirrors
    (staged_pair, _framework.pair_steps), and the copies this rank makes in them: a bw
    stream copies out at the source and in at the destination. (steps, down, up)"""
    from . import _framework as fw

    s, r = staged_pair(g, send, recv, mirrors)
    steps = fw.pair_steps(s, r, inp, out, ack, peer, role, mode)
    if mode == "bw":
        down, up = (down, []) if role == "src" else ([], up)
    return steps, down, up


def staged_step(g, host_step, down, up):
    """One iteration of the staged path: the device->host copies `down` [(host, dev)], the
    library's own call on host memory, the host->device copies `up` [(dev, host)]."""
    def step():
        for h, d in down:
            g.d2h(h, d)
        host_step()
        for d, h in up:
            g.h2d(d, h)
    return step


def staged_pair(g, send, recv, mirrors: dict):
    """A library's blocking send(buf, peer) / recv(buf, peer) on device buffers, staged
    through their host mirrors (id(device array) -> (numpy host array, what the library
    takes)); other buffers (a host acknowledgement) pass through."""
    def s(buf, peer):
        m = mirrors.get(id(buf))
        if m is not None:
            g.d2h(m[0], buf)
        send(buf if m is None else m[1], peer)

    def r(buf, peer):
        m = mirrors.get(id(buf))
        recv(buf if m is None else m[1], peer)
        if m is not None:
            g.h2d(buf, m[0])
    return s, r


def measure_on_gpu(g, measure, steps, *, inp, out, result, values, dtype, out_count, down, up,
                   iters, buffer):
    """A framework transport's measurement on device buffers: `measure(steps, reset=, output=,
    compare=)` (its fw.measure) with the check's fresh data uploaded and the result compared
    on the GPU; a staged run's copies are timed after it (extra.buffer)."""
    import numpy as np

    zeros = np.zeros(out_count, dtype)

    def reset():
        g.h2d(inp, values.astype(dtype))
        g.h2d(out, zeros)

    def compare(want):
        if TEST_CORRUPT_CHECK and want.size:      # the test hook of base.py, on the device data
            host = g.pinned(want.size, dtype)
            g.d2h(host, result)
            host[want.size // 2] += 1
            g.h2d(result, host)
        return g.count_wrong(result, want)

    res = measure(steps, reset=reset, output=None, compare=compare)
    if down or up:
        buffer = dict(buffer, **copy_figures(g, down, up, iters, res.samples_us))
    res.extra = {"buffer": buffer, **g.info()}
    return res


def copy_figures(g, down, up, iters: int, samples_us: list) -> dict:
    """The staging copies this rank makes in one iteration, timed in a pass of their own:
    d2h_us (every buffer of `down` [(host, dev)]) where it copies out, h2d_us (`up` [(dev,
    host)]) where it copies in, and their share of the iteration's time (the mean of
    `samples_us`; None where this rank kept none: a pair's destination)."""
    fig = {}
    if down:
        fig["d2h_us"] = sum(g.copy_us("d2h", d, h, iters) for h, d in down)
    if up:
        fig["h2d_us"] = sum(g.copy_us("h2d", d, h, iters) for d, h in up)
    mean = sum(samples_us) / len(samples_us) if samples_us else 0.0
    fig["copy_share"] = sum(fig.values()) / mean if mean > 0 else None
    return fig


# -- the data check of the byte transports (grpc, tcp): device -> pinned host -> wire -> ...
def check_values(nbytes: int, esize: int, seed: int = 0):
    """(int64 values, their element type) of one checked message: the sendrecv fill plus a
    per-message offset, as integers of the dtype's width (bits are what travel; signed, which
    every array library has)."""
    import numpy as np

    from .. import ops as ops_mod
    values = ops_mod.get("sendrecv").fill(0, 2, nbytes // esize) + seed % 251
    return values, np.dtype(f"i{esize}")


def outbound(g, values, np_dtype):
    """The message as it leaves: built on the GPU, copied to pinned host memory."""
    host = g.pinned(values.size, np_dtype)
    g.d2h(host, g.from_host(values.astype(np_dtype)))
    return host


def inbound_wrong(g, got, values, np_dtype) -> int:
    """Wrong elements of an arrived message (bytes-like or a pinned array): copied to the
    GPU and compared there; a message of the wrong length is wrong in every element."""
    import numpy as np

    raw = np.frombuffer(got, np.uint8)
    if raw.size != values.size * np_dtype.itemsize:
        return max(1, values.size)
    host = g.pinned(values.size, np_dtype)
    host.view(np.uint8)[:] = raw
    if TEST_CORRUPT_CHECK and raw.size:           # the test hook of base.py
        host.view(np.uint8)[raw.size // 2] ^= 0x5A
    dev = g.empty(values.size, np_dtype)
    g.h2d(dev, host)
    return g.count_wrong(dev, values)


def byte_transport_buffer(lib, g, res, nbytes: int, iters: int) -> dict:
    """extra.buffer of a byte transport's (tcp, grpc) record; with GPU buffers the staging
    copies are added to res.samples_us (staged_samples) and their figures recorded."""
    buffer = describe(lib, "staged" if g is not None else "host")
    if g is not None:
        res.samples_us, figures = staged_samples(g, res.samples_us, nbytes, iters, res.round_trip)
        buffer.update(figures)
    return buffer


def staged_samples(g, samples_us: list, nbytes: int, iters: int, round_trip: bool) -> tuple:
    """A byte transport's wire samples with the staging copies added (samples, extra.buffer
    figures): device -> host before and host -> device after every message, both timed in a
    pass of their own (Adapter.copy_us: each copy issued and waited for), added to each
    wire sample (twice to a round trip: one staged message each way). Serial staging, as a
    program that copies, sends, receives and copies does it."""
    import numpy as np

    dev, host = g.empty(max(nbytes, 1), np.uint8), g.pinned(max(nbytes, 1), np.uint8)
    d2h, h2d = g.copy_us("d2h", dev, host, iters), g.copy_us("h2d", dev, host, iters)
    legs = 2 if round_trip else 1
    wire = sum(samples_us) / len(samples_us) / legs if samples_us else 0.0
    one_way = wire + d2h + h2d
    return ([s + legs * (d2h + h2d) for s in samples_us],
            {"d2h_us": d2h, "h2d_us": h2d, "wire_us": wire,
             "copy_share": (d2h + h2d) / one_way if one_way > 0 else None,
             "timing": "wire samples from the transport's own loop + the d2h and h2d copy times "
                       "of their own pass (each issued and waited for, host clock), per message"})
