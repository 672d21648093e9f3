"""ruff and mypy over the project, as configured in pyproject.toml (issue 43).

mypy checks the installed shape: setup.py maps the top-level transports/ and topology/
into comm_bench, which mypy cannot follow, so it runs in a scratch tree whose comm_bench/
links every entry of the repository's comm_bench/ and the two folders beside them.
"""
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MAPPED = ("transports", "topology")     # setup.py's package_dir


def _run(cmd, cwd):
    p = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=900)
    return p.returncode, (p.stdout + p.stderr)[-20000:]


def _missing(module):
    """Skipped without the tool, except under CI (CI=true), where tools/install.sh --test put it."""
    if os.environ.get("CI"):
        return False
    return subprocess.run([sys.executable, "-c", f"import {module}"], capture_output=True).returncode != 0


@pytest.mark.skipif(_missing("ruff"), reason="ruff is not installed (tools/install.sh --test installs it)")
def test_ruff():
    code, out = _run([sys.executable, "-m", "ruff", "check", "--no-cache", "."], ROOT)
    assert code == 0, out


def installed_shape(tmp):
    """tmp/comm_bench: the package as installed, made of links into the repository."""
    pkg = os.path.join(tmp, "comm_bench")
    os.mkdir(pkg)
    src = os.path.join(ROOT, "comm_bench")
    for name in os.listdir(src):
        if name not in MAPPED and name != "__pycache__":
            os.symlink(os.path.join(src, name), os.path.join(pkg, name))
    for name in MAPPED:
        os.symlink(os.path.join(ROOT, name), os.path.join(pkg, name))
    return tmp


@pytest.mark.skipif(_missing("mypy"), reason="mypy is not installed (tools/install.sh --test installs it)")
def test_mypy(tmp_path):
    tree = installed_shape(str(tmp_path))
    code, out = _run([sys.executable, "-m", "mypy", "--config-file", os.path.join(ROOT, "pyproject.toml"),
                      "--cache-dir", os.path.join(tree, ".mypy_cache"), "comm_bench"], tree)
    assert code == 0, out
