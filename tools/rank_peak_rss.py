"""Run a command that starts ranks (comm-bench sweep under the local spawner, say) and
report one rank's peak resident memory: the VmHWM of the descendant process whose
environment says RANK=<rank>, read every --every seconds until it exits (VmHWM is a
high-water mark, so a sample misses only growth in the last interval before exit).
/usr/bin/time -v reports the largest process of the tree instead; this names the rank.

    ulimit -Sn 256
    python tools/rank_peak_rss.py --rank 0 -- comm-bench sweep -t tcp --nprocs 200 \
        --oversubscribe --pattern matchings --matchings 1 -b 64K -e 64K -n 2 -w 1 -o r.json

Prints the command's exit code, wall time and the rank's peak; exits with the command's code.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import time


def children_of(pid: int) -> list:
    out = []
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            out = [int(c) for c in f.read().split()]
    except OSError:
        pass
    return out


def descendants(root: int) -> list:
    seen, todo = [], [root]
    while todo:
        pid = todo.pop()
        for c in children_of(pid):
            seen.append(c)
            todo.append(c)
    return seen


def rank_of(pid: int):
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            env = f.read().split(b"\0")
    except OSError:
        return None
    for item in env:
        if item.startswith(b"RANK="):
            return item[5:].decode()
    return None


def hwm_kib(pid: int):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rank", default="0")
    ap.add_argument("--every", type=float, default=0.1, help="seconds between samples")
    ap.add_argument("command", nargs=argparse.REMAINDER)
    args = ap.parse_args(argv)
    cmd = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not cmd:
        ap.error("give the command after --")
    start = time.monotonic()
    proc = subprocess.Popen(cmd)
    pid, peak, samples = None, 0, 0
    while proc.poll() is None:
        if pid is None:     # the rank's process appears once the spawner has started it
            pid = next((p for p in descendants(proc.pid) if rank_of(p) == args.rank), None)
        if pid is not None:
            kib = hwm_kib(pid)
            if kib is not None:
                peak, samples = max(peak, kib), samples + 1
        time.sleep(args.every)
    wall = time.monotonic() - start
    where = f"pid {pid}, {samples} samples every {args.every} s" if pid else "never seen"
    print(f"# exit {proc.returncode}, wall {wall:.1f} s, rank {args.rank} peak VmHWM "
          f"{peak / 1024:.1f} MiB ({where})", file=sys.stderr)
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
