"""Transport options are declared once (type, range, choices on Option) and checked once,
before any rank starts: a bad value or another transport's option is one line and exit 2,
and nothing is written."""
import os

import pytest

from comm_bench import registry
from comm_bench.errors import UsageError
from comm_bench.transports.base import Option

from cbtest import assert_no_traceback, load_results, run_cli


@pytest.mark.parametrize("args, message", [
    (["-t", "grpc", "--streams", "0"], "--streams 0: must be 1 to 1024"),
    (["-t", "grpc", "--streams", "100000"], "--streams 100000: must be 1 to 1024"),
    (["-t", "grpc", "--grpc-port", "70000"], "--grpc-port 70000: must be 0 to 65535"),
    (["-t", "grpc", "--grpc-keepalive", "nan"], "--grpc-keepalive nan: not a finite number"),
    (["-t", "grpc", "--grpc-compression", "zip"], "--grpc-compression 'zip': choose one of none, gzip, deflate"),
    (["-t", "tcp", "--qps", "4"], "--qps is an option of rdma, not of -t tcp"),
    (["-t", "rdma", "--gpu", "1"], "--gpu is an option of cuda, gloo, grpc, mpi, nccl, tcp, torch-nccl, not of -t rdma"),
    (["-t", "tcp", "--buffer", "gpu"], "--buffer 'gpu': choose one of host, cuda, cuda:cupy, cuda:torch, cuda:numba"),
    (["-t", "gloo", "--gpu-path", "fast"], "--gpu-path 'fast': choose one of auto, direct, staged"),
    (["-t", "gloo", "--gpu", "1"], "--gpu 1 picks the GPU of --buffer cuda; with --buffer host there is none to pick"),
    (["-t", "mpi", "--gpu-path", "direct"], "--gpu-path direct says how GPU buffers travel; with --buffer host there are none"),
])
def test_bad_option_is_one_line_before_any_rank(tmp_path, args, message):
    out = tmp_path / "r.json"
    proc = run_cli("sweep", *args, "--nprocs", "2", "-b", "8", "-e", "8", "-n", "2", "--no-progress",
                   "-o", out, timeout=60)
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert_no_traceback(proc)
    assert proc.stderr.strip().splitlines() == [f"comm-bench: {message}"]
    assert not os.path.exists(out)  # refused before a rank or a results file existed


def test_choices_are_case_blind_and_defaults_of_others_are_fine(tmp_path):
    out = tmp_path / "r.json"
    run_cli("sweep", "-t", "grpc", "--grpc-compression", "GZIP", "--nprocs", "2", "-b", "1K", "-e", "1K",
            "-n", "3", "-c", "1", "--no-progress", "-o", out, timeout=120, check_rc=0,
            env={"COMM_BENCH_QPS": "4"})  # another transport's default from the environment: no error
    doc = load_results(out)
    assert doc["options"]["transport_options"]["grpc_compression"] == "gzip"
    assert [r["wrong"] for r in doc["results"]] == [0]


def test_every_declared_range_and_choice_is_enforced():
    """Each option with a range or choices refuses a value just outside it and keeps one inside."""
    for opt, _ in registry.all_options():
        if opt.choices:
            assert opt.checked(opt.choices[0].upper()) == opt.choices[0]
            with pytest.raises(UsageError):
                opt.checked("no-such-" + opt.choices[0])
        if opt.low is not None:
            assert opt.checked(opt.low) == opt.low
            with pytest.raises(UsageError, match=opt.flag):
                opt.checked(opt.low - 1)
        if opt.high is not None:
            assert opt.checked(opt.high) == opt.high
            with pytest.raises(UsageError, match=opt.flag):
                opt.checked(opt.high + 1)


def test_option_types():
    assert Option("--x", int).checked("12") == 12
    with pytest.raises(UsageError, match="--x 'a': not an int"):
        Option("--x", int).checked("a")
    with pytest.raises(UsageError, match="not a finite number"):
        Option("--y", float, low=0).checked("inf")
    assert Option("--z", bool).checked(None) is False
