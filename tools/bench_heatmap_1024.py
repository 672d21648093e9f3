"""The 1,024-rank heatmap and validate (128 nodes x 8 GPUs: every intra-node pair and every
rail pair, one size, rank 517's inter-node links at 12 of 45 GB/s): wall and CPU seconds of
each, over several alternating runs, in one process per run as a user would start them.
Target (the old timed test tests/test_heatmap.py::test_1024_ranks..., now this script): the
heatmap under 10 s. Figures: docs/benchmarks/readers.md.

    .venv/bin/python tools/bench_heatmap_1024.py [--runs 3]
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from test_heatmap import _write_1024  # noqa: E402

STEP = """
import sys, time
t, c = time.monotonic(), time.process_time()
if sys.argv[1] == "heatmap":
    from comm_bench.views import heatmap_output
    heatmap_output.make(sys.argv[2], sys.argv[3])
else:
    from comm_bench.validate import checks
    checks.run(sys.argv[2])
print(time.monotonic() - t, time.process_time() - c)
"""


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        doc = Path(tmp) / "r1024.json"
        count = _write_1024(doc)
        print(f"{count} pair records; load {os.getloadavg()[0]:.1f}, {os.cpu_count()} cores")
        got = {"heatmap": [], "validate": []}
        for _ in range(a.runs):
            for what in got:           # alternate: both see the same machine state
                out = subprocess.run([sys.executable, "-c", STEP, what, str(doc), str(Path(tmp) / "h.png")],
                                     capture_output=True, text=True, check=True).stdout.split()
                got[what].append(tuple(map(float, out)))
        print("| step | wall s (median, min-max) | CPU s (median) | runs |")
        print("|---|---|---|---|")
        for what, runs in got.items():
            wall = [w for w, _ in runs]
            print(f"| {what} | {statistics.median(wall):.2f} ({min(wall):.2f}-{max(wall):.2f}) | "
                  f"{statistics.median(c for _, c in runs):.2f} | {len(runs)} |")
        print(f"load {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
