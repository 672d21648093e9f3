"""The data checks see corrupted data: real ranks over loopback, one byte flipped
after it arrived (a test hook in the transport), and the record counts it."""
import pytest

from cbtest import load_results, run_cli


@pytest.mark.parametrize("mode", ["bw", "lat"])
def test_tcp_check_counts_a_flipped_byte(tmp_results, mode):
    p = run_cli("sweep", "-t", "tcp", "--nprocs", "2", "--mode", mode, "-b", "8", "-e", "64K", "-f", "64",
                "-n", "5", "-w", "1", "-c", "--no-progress", "-o", tmp_results, timeout=240,
                env={"COMM_BENCH_TEST_CORRUPT_TCP": "1"})
    doc = load_results(tmp_results)
    assert [r["wrong"] for r in doc["results"]] == [1, 1, 1], (p.returncode, p.stderr[-2000:])


@pytest.mark.parametrize("transport", ["gloo", "mpi"])
@pytest.mark.parametrize("mode, wrong", [("bw", 1), ("lat", 2)])  # lat: both ends check
def test_framework_check_counts_a_changed_element(tmp_results, transport, mode, wrong):
    p = run_cli("sweep", "-t", transport, "--nprocs", "2", "--op", "sendrecv", "--pattern", "pair",
                "--mode", mode, "-b", "64", "-e", "4K", "-f", "64", "-n", "5", "-w", "1", "-c",
                "--no-progress", "-o", tmp_results, timeout=240,
                env={"COMM_BENCH_TEST_CORRUPT_CHECK": "1"})
    doc = load_results(tmp_results)
    assert [r["wrong"] for r in doc["results"]] == [wrong, wrong], (p.returncode, p.stderr[-2000:])


@pytest.mark.parametrize("op, mode", [("sendrecv", "bw"), ("sendrecv", "lat"), ("bidir", "bw")])
def test_grpc_check_counts_a_changed_byte(tmp_results, op, mode):
    pytest.importorskip("grpc")
    p = run_cli("sweep", "-t", "grpc", "--nprocs", "2", "--op", op, "--mode", mode, "-b", "1K", "-e", "64K",
                "-f", "64", "-n", "4", "-w", "1", "-c", "--no-progress", "-o", tmp_results, timeout=240,
                env={"COMM_BENCH_TEST_CORRUPT_CHECK": "1"})
    doc = load_results(tmp_results)
    wrong = [r["wrong"] for r in doc["results"]]
    assert len(wrong) == 2 and all(w > 0 for w in wrong), (wrong, p.returncode, p.stderr[-2000:])
