"""Time to the first table line (issue 26 item 9): a host transport's run never imports torch
(1-3 s of every rank's start), and a tcp run never imports numpy. Checked by what is
imported, not by a clock: a `torch` (or `numpy`) package placed first on the path that
records its import and refuses it. The timing itself is tools/first_line.py, recorded in
docs/benchmarks/startup.md."""
import json
import os

import pytest

from cbtest import run_cli


def refusing(tmp_path, name):
    """PYTHONPATH with a package `name` that writes a marker and raises ImportError."""
    site = tmp_path / f"refuse-{name}"
    (site / name).mkdir(parents=True)
    marker = tmp_path / f"{name}-imported"
    (site / name / "__init__.py").write_text(
        f"import os\nopen({str(marker)!r}, 'a').write(str(os.getpid()) + '\\n')\n"
        f"raise ImportError('{name} is refused by the test')\n")
    path = os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")]))
    return {"PYTHONPATH": path}, marker


@pytest.mark.parametrize("transport", ["tcp", "grpc"])
def test_a_host_transport_run_never_imports_torch(tmp_path, transport):
    env, marker = refusing(tmp_path, "torch")
    out = tmp_path / "r.json"
    proc = run_cli("sweep", "-t", transport, "-b", "1K", "-e", "4K", "-o", out, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr[-1500:]
    assert not marker.exists(), "torch was imported by " + marker.read_text()
    assert json.loads(out.read_text())["status"] == "ok"


def test_the_refusing_package_works(tmp_path):
    """The control: gloo hands its store to torch.distributed, so the same run fails there."""
    env, marker = refusing(tmp_path, "torch")
    proc = run_cli("sweep", "-t", "gloo", "-b", "1K", "-e", "1K", "-o", tmp_path / "r.json", env=env,
                   timeout=120)
    assert proc.returncode != 0 and marker.exists()


def test_a_tcp_run_never_imports_numpy(tmp_path):
    """tcp fills and checks its buffers in C++: neither the launcher nor its ranks need numpy
    (a tenth of a second of each process's start). The confirm phase and the closing verdict
    are left out: after the first pass rank 0 finds suspects with validate's numpy columns
    (validate/pair_obs.py), and after the run it validates the file with them."""
    env, marker = refusing(tmp_path, "numpy")
    proc = run_cli("sweep", "-t", "tcp", "-b", "1K", "-e", "4K", "--confirm", "0", "--no-verdict",
                   "-o", tmp_path / "r.json", env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr[-1500:]
    assert not marker.exists(), "numpy was imported by " + marker.read_text()
