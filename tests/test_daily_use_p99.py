"""Issue 42: a default run does not warn about its own default. With fewer samples than a
percentile needs, the bandwidth table's tail column is the maximum and says so in its
header; a latency table leaves p99/p99.9 out and says it once per run, not once per op."""
from cbtest import load_results, run_cli


def _headers(text):
    return [line.split() for line in text.splitlines() if line.startswith("#") and "busbw" in line]


def test_default_gloo_all_ops_names_the_tail_column_once_per_table_and_warns_never(tmp_path):
    out = tmp_path / "g.json"
    proc = run_cli("sweep", "-t", "gloo", "--op", "all", "--nprocs", "2", "-e", "4K", "-f", "8",
                   "--no-progress", "-o", out, timeout=300, check_rc=0)
    ops = {r["op"] for r in load_results(out)["results"]}
    heads = _headers(proc.stdout)
    assert len(heads) == len(ops) >= 5
    assert all("max" in h and "p99" not in h for h in heads), heads
    assert "samples per size" not in proc.stdout and "left out" not in proc.stdout
    report = run_cli("report", out, check_rc=0).stdout
    assert all("max" in h and "p99" not in h for h in _headers(report))


def test_enough_samples_give_p99(tmp_path):
    proc = run_cli("sweep", "-t", "tcp", "--nprocs", "2", "-b", "1K", "-e", "1K", "-n", "100", "-w", "1",
                   "--no-progress", "-o", tmp_path / "t.json", timeout=300, check_rc=0)
    (head,) = _headers(proc.stdout)
    assert "p99" in head and "max" not in head


def test_latency_percentiles_left_out_said_once(tmp_path):
    out = tmp_path / "l.json"
    proc = run_cli("sweep", "-t", "gloo", "--mode", "lat", "--op", "sendrecv", "--nprocs", "3",
                   "--pattern", "pairwise", "--confirm", "0", "-b", "8", "-e", "64", "-f", "8", "-n", "20",
                   "-w", "1", "--no-progress", "--no-verdict", "-o", out, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.count("left out") == 1
    assert "p99, p99.9 left out: with -n 20 each is the max" in proc.stdout
    head = next(line for line in proc.stdout.splitlines() if line.startswith("#") and "median" in line).split()
    assert "p99" not in head and "p99.9" not in head and "max" in head
