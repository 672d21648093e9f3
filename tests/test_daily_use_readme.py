"""Issue 42: the README's output is what the commands print now. Each block of README.md
that starts with `$ comm-bench ...` is run from the repository's root, into a pipe as the
README shows it, and must print the lines below it (trailing spaces aside)."""
import shlex
from pathlib import Path

from cbtest import run_cli

ROOT = Path(__file__).resolve().parents[1]


def _examples():
    """[(argv, expected lines)] of the README's indented `$ comm-bench` blocks."""
    out, lines = [], (ROOT / "README.md").read_text().splitlines()
    for i, ln in enumerate(lines):
        if ln.startswith("    $ comm-bench "):
            shown = []
            for nxt in lines[i + 1:]:
                if nxt and not nxt.startswith("    "):
                    break
                shown.append(nxt[4:].rstrip())
            while shown and not shown[-1]:
                shown.pop()
            out.append((shlex.split(ln[len("    $ comm-bench "):]), shown))
    return out


def test_readme_shows_what_the_commands_print():
    examples = _examples()
    assert examples, "no `$ comm-bench` example in README.md"
    for argv, shown in examples:
        p = run_cli(*argv, cwd=ROOT, timeout=300)
        assert p.returncode == 0, (argv, p.stderr[-1000:])
        printed = [ln.rstrip() for ln in p.stdout.rstrip("\n").splitlines()]
        assert printed == shown, (argv, [(a, b) for a, b in zip(printed, shown) if a != b][:3],
                                  len(printed), len(shown))
