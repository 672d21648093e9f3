"""gloo and mpi --mode lat report the one-way latency, half a round trip, like every
other transport: checked against a plain torch.distributed / mpi4py ping-pong
measured in the same test, in alternating rounds (tools/bench_framework_lat.py).
Minimums: on a loaded 2-core machine a median can jump to a scheduler tick (4 ms) in
either program."""
import json
import statistics
import subprocess
import sys
from pathlib import Path

TOOL = Path(__file__).resolve().parents[1] / "tools" / "bench_framework_lat.py"


def rounds(transport):
    out = subprocess.run([sys.executable, str(TOOL), "--transports", transport, "--rounds", "3",
                          "--iters", "1000", "--json"],
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout)[transport]


def test_gloo_lat_is_half_a_plain_round_trip():
    """torch.distributed has only a Python API: comm-bench's loop makes the plain program's
    calls. On the quiet 16-core machine comm-bench reads 0.86x half the plain round trip
    (docs/benchmarks/framework-lat.md); on the shared 2-core CI VM both programs' minimums
    move with the load (1.3x seen), so this holds it to what catches a whole round trip
    (2.0x, the old bug) or the 3.5x that issue 24 reported."""
    got = rounds("gloo")
    assert 0.5 < statistics.median(r["min_half_ratio"] for r in got) < 1.7, got


def test_mpi_lat_loop_runs_in_cpp():
    """The mpi pair loop calls MPI_Send/MPI_Recv from C++ (comm_bench._C.mpi_pair_loop): below
    half the mpi4py ping-pong's round trip, which pays a Python call per message (~0.5 us
    each here, where an MPI message over shared memory takes ~0.4 us)."""
    got = rounds("mpi")
    assert 0.1 < statistics.median(r["min_half_ratio"] for r in got) < 0.8, got
