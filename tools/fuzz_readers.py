#!/usr/bin/env python3
"""Every reader against harmed copies of a real results document: each case sets one to
three random fields (of the document, its hosts' topologies, its records) to a value of
the wrong type, an absurd number, or deletes it, writes the copy, and runs the commands
on it in this process. A reader must end with exit 0, 1 or 3 (the harm did not matter)
or 2 with one line on stderr; exit 70 (an internal error), a traceback or a hang past
--timeout is a failure, printed with the command and the harmed file (kept).

    python tools/fuzz_readers.py run.json --cases 200 --seed 1
    python tools/fuzz_readers.py run.json --commands validate,report,heatmap --cases 100

Figures: docs/benchmarks/readers.md ("Harmed documents").
"""
import argparse
import contextlib
import copy
import io
import json
import os
import random
import signal
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.pop("COMM_BENCH_DEBUG", None)      # internal errors as the user sees them: exit 70

from comm_bench.cli import main

HARMS = [None, "x", -1, 0, 1e308, -1e308, float("nan"), float("inf"), [], {}, True, "9" * 400, 2 ** 70,
         -0.0, 1e-320, "", [1, 2], {"a": 1}]
COMMANDS = {
    "validate": lambda f, good, out: ["validate", f],
    "validate-json": lambda f, good, out: ["validate", f, "--json"],
    "report": lambda f, good, out: ["report", f],
    "compare": lambda f, good, out: ["compare", good, f],
    "baseline": lambda f, good, out: ["validate", good, "--baseline", f],
    "heatmap": lambda f, good, out: ["heatmap", f, "-o", str(out / "h.png")],
    "plot": lambda f, good, out: ["plot", f, "-o", str(out / "p.png")],
}


class Hang(Exception):
    pass


def paths(obj, at=()):
    """Every field's path, lists sampled at their first six items."""
    yield at
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from paths(v, at + (k,))
    elif isinstance(obj, list):
        for i, v in enumerate(obj[:6]):
            yield from paths(v, at + (i,))


def harm(doc, where, rnd):
    for _ in range(rnd.choice([1, 1, 2, 3])):
        *head, last = rnd.choice(where)
        obj = doc
        try:
            for k in head:
                obj = obj[k]
            if rnd.random() < 0.2 and isinstance(obj, dict):
                obj.pop(last, None)
            else:
                obj[last] = copy.deepcopy(rnd.choice(HARMS))
        except (KeyError, IndexError, TypeError):
            pass                     # an earlier harm of this case replaced the field's parent
    return doc


def run(argv, timeout):
    """(exit code or 'hang', stderr lines) of `comm-bench argv` in this process."""
    err = io.StringIO()
    signal.alarm(timeout)
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
            main(argv)
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except Hang:
        code = "hang"
    finally:
        signal.alarm(0)
    return code, [ln for ln in err.getvalue().splitlines() if ln.strip()]


def main_():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("document", help="a valid comm-bench results document (inline records)")
    ap.add_argument("--commands", default="validate,validate-json,report,compare,baseline",
                    help=f"comma-separated, of: {', '.join(COMMANDS)}")
    ap.add_argument("--cases", type=int, default=100)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--timeout", type=int, default=60, help="seconds per command")
    ap.add_argument("--keep", default=None, help="folder for the harmed documents (default: a temporary one)")
    a = ap.parse_args()
    good = json.loads(Path(a.document).read_text())
    where = [p for p in paths(good) if p]
    commands = a.commands.split(",")
    out = Path(a.keep or tempfile.mkdtemp(prefix="fuzz-readers-"))
    out.mkdir(parents=True, exist_ok=True)
    signal.signal(signal.SIGALRM, lambda *_: (_ for _ in ()).throw(Hang()))
    rnd = random.Random(a.seed)
    codes, failures = {}, 0
    for i in range(a.cases):
        f = out / f"case{a.seed}-{i}.json"
        f.write_text(json.dumps(harm(copy.deepcopy(good), where, rnd)))
        for c in commands:
            code, lines = run(COMMANDS[c](str(f), a.document, out), a.timeout)
            codes[code] = codes.get(code, 0) + 1
            if code not in (0, 1, 2, 3) or (code == 2 and len(lines) != 1):
                failures += 1
                print(f"FAIL {c} {f}: exit {code}: {' | '.join(lines[-2:])}", flush=True)
    print(f"{a.cases} harmed documents x {len(commands)} commands: exit codes "
          f"{', '.join(f'{k}: {v}' for k, v in sorted(codes.items(), key=str))}; failures {failures}")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main_()
