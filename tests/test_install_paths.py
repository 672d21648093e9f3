"""tools/install.sh's paths: the GPU node's CUDA version read from nvidia-smi, --gpu refused
without a driver, bad options refused, and --into-env installing into an existing
environment without touching its torch (the GPU-machine run: docs/benchmarks/gpu-install.md)."""
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "tools", "install.sh")


def _fake_smi(tmp_path, version):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    smi = bin_dir / "nvidia-smi"
    smi.write_text("#!/bin/sh\necho '| NVIDIA-SMI 580.159.03   Driver Version: 580.159.03   "
                   f"CUDA Version: {version}     |'\n")
    smi.chmod(0o755)
    return str(bin_dir)


@pytest.mark.parametrize("version,major", [("12.4", "12"), ("13.0", "13")])
def test_cuda_major_from_nvidia_smi(tmp_path, version, major):
    bin_dir = _fake_smi(tmp_path, version)
    out = subprocess.run(["bash", "-c", f'eval "$(sed -n "/^cuda_major()/,/^}}/p" {SCRIPT})"; cuda_major'],
                         env=dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}"),
                         capture_output=True, text=True, check=True)
    assert out.stdout.strip() == major


def test_gpu_without_driver_and_bad_option(tmp_path):
    path = ":".join(p for p in os.environ["PATH"].split(":") if not os.path.exists(os.path.join(p, "nvidia-smi")))
    r = subprocess.run(["bash", SCRIPT, "--gpu"], env=dict(os.environ, PATH=path), capture_output=True, text=True)
    assert r.returncode == 1 and "no driver" in r.stderr
    r = subprocess.run(["bash", SCRIPT, "--gpus"], capture_output=True, text=True)
    assert r.returncode == 2 and "unknown option --gpus" in r.stderr


@pytest.mark.slow
def test_into_existing_environment_keeps_its_torch(tmp_path):
    """This test's own Python stands for an NGC container's: comm-bench installs into it
    with --no-deps from an empty wheel folder (nothing to add), and its torch is untouched."""
    before = subprocess.run([sys.executable, "-c", "import torch; print(torch.__version__, torch.__file__)"],
                            capture_output=True, text=True, check=True).stdout
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    r = subprocess.run(["bash", SCRIPT, "--into-env", sys.executable, "--wheels", str(wheels)],
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-2000:]
    after = subprocess.run([sys.executable, "-c", "import torch; print(torch.__version__, torch.__file__)"],
                           capture_output=True, text=True, check=True).stdout
    assert after == before
    doctor = subprocess.run([sys.executable, "-m", "comm_bench", "doctor"], capture_output=True, text=True)
    assert "native _C" in doctor.stdout
