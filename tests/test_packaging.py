"""The package as users get it: a built wheel in a bare environment (no torch, no
optional libraries) imports, lists its transports and says what is missing."""
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_wheel_installs_and_imports_without_optional_parts(tmp_path):
    env_vars = {"COMM_BENCH_NO_CUDA": "1", "COMM_BENCH_NO_IBVERBS": "1", "PATH": "/usr/bin:/bin"}
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-build-isolation", "--no-deps",
                    "-w", str(tmp_path / "dist"), str(ROOT)], check=True, env=env_vars, cwd=tmp_path)
    wheel = next((tmp_path / "dist").glob("comm_bench-*.whl"))
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = next(venv.glob("lib/python*/site-packages"))
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(site),
                    str(wheel)], check=True)
    # click/rich/numpy come from the test interpreter's site-packages; torch must stay invisible
    deps = [str(Path(m.__file__).parent.parent) for m in (__import__("click"),)]
    code = (
        "import sys; sys.modules['torch'] = None\n"   # make `import torch` fail like a bare machine
        "import comm_bench, comm_bench._C, comm_bench.transports.tcp, comm_bench.topology\n"
        "from comm_bench import registry\n"
        "t = registry.transports()\n"
        "assert {'tcp', 'gloo', 'mpi'} <= set(t), t\n"
        "ok, why = t['gloo'].probe(); assert not ok and 'torch' in why, why\n"
        "import os, comm_bench.select.rules as R\n"        # the selection model and its data files
        "assert os.path.exists(R.DEFAULT_PATH), R.DEFAULT_PATH\n"
        "import comm_bench.validate.findings, comm_bench.commands.check\n"   # diagnosis ships too
        "import comm_bench.fabric_sim.run, comm_bench.commands.simulate\n"   # and the simulated fabric
        "print(comm_bench.transports.tcp.__file__)\n"
    )
    proc = subprocess.run([str(venv / "bin/python"), "-c", code], capture_output=True, text=True,
                          cwd=tmp_path, env={"PYTHONPATH": ":".join(deps), "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr
    assert str(site) in proc.stdout  # installed under comm_bench/transports in site-packages


def test_source_folder_is_not_importable_as_top_level_packages():
    for name in ("transports", "topology"):
        proc = subprocess.run([sys.executable, "-c", f"import {name}"], cwd=ROOT, capture_output=True, text=True)
        assert proc.returncode != 0 and "comm_bench." in proc.stderr, (name, proc.stderr)


def test_editable_install_maps_transports_under_comm_bench():
    import comm_bench.transports.tcp as tcp

    assert Path(tcp.__file__).parent.name == "transports"
    assert tcp.TcpTransport.name == "tcp"
