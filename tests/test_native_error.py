"""One NativeError class for every native module: an `except` on one module's name
catches what another raises (the GPU tests catch comm_bench._cuda.NativeError around
calls that comm_bench._C's translator used to turn into a class of its own)."""
import subprocess
import sys

import pytest

from comm_bench.system import native as _native


def test_every_built_module_shares_the_class():
    mods = [m for m in (_native.load(name)[0] for name in ("_C", "_cuda", "_ibverbs")) if m is not None]
    if not mods:
        pytest.skip("no native module built")
    assert all(m.NativeError is _native.NativeError for m in mods)
    assert issubclass(_native.NativeError, RuntimeError)


def test_a_native_failure_is_caught_by_any_module_name():
    cuda, why = _native.load("_cuda")
    core, why_core = _native.load("_C")
    if cuda is None or core is None:
        pytest.skip(why or why_core)
    # a fresh process: nccl_load keeps the library an earlier test of this process loaded
    code = ("from comm_bench.system import native\n"
            "cuda, core = native.load('_cuda')[0], native.load('_C')[0]\n"
            "try:\n    cuda.nccl_load(['/nonexistent/libnccl.so.2'])\n"
            "except core.NativeError as e:\n    print('caught:', str(e).splitlines()[0])\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "caught: cannot load libnccl" in out.stdout, out.stdout + out.stderr
