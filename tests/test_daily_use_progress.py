"""Issue 42: one progress bar whose total counts every record the run writes (each pair of
a concurrent round, the confirm phase's and check's pair rounds too), never running past
it, with a time-left estimate on runs longer than a few seconds. Real runs on a
pseudo-terminal (the bar is drawn only on a terminal)."""
import os
import pty
import re
import select
import subprocess

from cbtest import COMM_BENCH, load_results


def on_terminal(*args, timeout=300):
    """Run comm-bench with stdout and stderr on a pseudo-terminal: (exit code, what it drew)."""
    master, slave = pty.openpty()
    env = dict(os.environ, COLUMNS="120")
    env.pop("COMM_BENCH_DEBUG", None)
    proc = subprocess.Popen([COMM_BENCH, *map(str, args)], stdout=slave, stderr=slave, env=env)
    os.close(slave)
    chunks = []
    while True:
        ready, _, _ = select.select([master], [], [], timeout)
        if not ready:
            proc.kill()
            raise AssertionError(f"no output for {timeout} s")
        try:
            data = os.read(master, 65536)
        except OSError:         # the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    return proc.wait(timeout=60), b"".join(chunks).decode("utf-8", "replace")


def _counts(text):
    return [(int(a), int(b)) for a, b in re.findall(r"(\d+)/(\d+)(?![\d.])", text)
            if 0 < int(b) < 10_000]


def test_bar_counts_every_pair_of_concurrent_rounds_and_the_confirm_phase(tmp_path):
    out = tmp_path / "r.json"
    rc, text = on_terminal("sweep", "-t", "tcp", "--nprocs", "4", "--pattern", "pairwise-concurrent",
                           "-b", "1K", "-e", "256K", "-f", "4", "-n", "20", "-w", "1", "-o", out)
    assert rc in (0, 1, 3), text[-3000:]
    records = len(load_results(out)["results"])
    counts = _counts(text)
    assert counts, text[-2000:]
    assert all(done <= total for done, total in counts), [c for c in counts if c[0] > c[1]]
    assert max(total for _, total in counts) == records        # the confirm phase's records included


def test_check_grows_the_bar_by_its_pair_rounds(tmp_path):
    out = tmp_path / "c.json"
    rc, text = on_terminal("check", "-t", "gloo", "--nprocs", "4", "-b", "64K", "-e", "256K", "-n", "5", "-w", "1",
                           "--localize", "always", "-o", out)
    assert rc in (0, 1, 3), text[-3000:]
    records = len(load_results(out)["results"])
    counts = _counts(text)
    assert counts and all(done <= total for done, total in counts), counts
    assert max(total for _, total in counts) == records


def test_time_left_on_a_longer_run(tmp_path):
    rc, text = on_terminal("sweep", "-t", "tcp", "--nprocs", "2", "-b", "1M", "-e", "16M", "-n", "1200", "-w", "1",
                           "-c", "0", "--pattern", "pairwise", "--confirm", "0", "-o", tmp_path / "l.json",
                           timeout=300)
    rc2, short = on_terminal("sweep", "-t", "tcp", "--nprocs", "2", "-b", "8", "-e", "64", "-n", "5", "-w", "1",
                             "-o", tmp_path / "s.json")
    assert rc == 0 and rc2 == 0
    assert re.search(r"\d+:\d\d left", text), text[-2000:]
    assert " left" not in short
    # the bar is drawn, not printed as escaped codes ("\u001b[91m", stdout's escaping of text)
    assert "\\u001b" not in text and "\x1b[" in text
