#!/usr/bin/env python3
"""Run a command inside a throw-away VM that has a real ibverbs device (Soft-RoCE).

The VM is the host's own Debian kernel booted by virtme-ng under QEMU software
emulation (KVM does not work here), sharing the host's root filesystem
read-only, so the project's venv and built extensions are there at the same
paths. At boot it loads rdma_rxe and creates rxe0 on `lo`.
Only the folders passed as `rwdirs` come back written.

    python tools/softroce_vm.py -- ibv_devinfo
    python tools/softroce_vm.py --rwdir out -- comm-bench sweep -t rdma -o out/r.json

From Python: `run_in_vm("cmd", rwdirs=[...])` -> VmResult(returncode, output, seconds).
`vm_unavailable()` says why a VM cannot boot here ('' when it can).
"""
from __future__ import annotations

import argparse
import glob
import os
import shlex
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RC_MARK = "__SOFTROCE_VM_RC__="
# Inside the VM: Soft-RoCE on lo, no locked-memory limit, the venv first on PATH.
GUEST_PRELUDE = ("modprobe rdma_rxe && rdma link add rxe0 type rxe netdev lo && ulimit -l unlimited "
                 "&& export PATH={bindir}:$PATH HOME=/tmp PYTHONDONTWRITEBYTECODE=1 && cd {cwd}")


@dataclass
class VmResult:
    returncode: int
    output: str
    seconds: float


def _vng() -> str:
    here = os.path.join(os.path.dirname(sys.executable), "vng")
    return here if os.path.exists(here) else (shutil.which("vng") or "")


def _kernel() -> str:
    kernels = sorted(glob.glob("/boot/vmlinuz-*"))
    return kernels[-1] if kernels else ""


def _static_busybox() -> bool:
    for name in ("busybox-static", "busybox.static", "busybox"):
        path = shutil.which(name)
        if path:
            out = subprocess.run(["file", "-L", path], capture_output=True, text=True).stdout
            if "statically linked" in out or "static-pie linked" in out:
                return True
    return False


def vm_unavailable() -> str:
    """Why the Soft-RoCE VM cannot boot here, or '' when everything it needs is present."""
    if not _vng():
        return "virtme-ng (vng) is not installed: pip install virtme-ng"
    if not shutil.which("qemu-system-x86_64"):
        return "qemu-system-x86_64 is missing: apt-get install qemu-system-x86"
    if not _kernel():
        return "no kernel in /boot: apt-get install linux-image-amd64"
    if not glob.glob("/lib/modules/*/kernel/drivers/infiniband/sw/rxe/rdma_rxe.ko*"):
        return "the kernel has no rdma_rxe module: apt-get install linux-image-amd64"
    if not shutil.which("file") or not _static_busybox():
        return "virtme-ng needs a static busybox: apt-get install busybox-static file"
    if not shutil.which("rdma"):
        return "the `rdma` tool is missing: apt-get install iproute2"
    return ""


def run_in_vm(command: str, *, rwdirs=(), timeout: float = 900, memory: str = "2G", cpus: int = 2,
              cwd: str = REPO) -> VmResult:
    """Boot the VM, run `command` (a shell line) in `cwd` with rxe0 up, return its output and code."""
    why = vm_unavailable()
    if why:
        return VmResult(125, f"softroce_vm: cannot boot: {why}\n", 0.0)
    prelude = GUEST_PRELUDE.format(bindir=os.path.dirname(sys.executable), cwd=shlex.quote(cwd))
    guest = f"{prelude} && {{ {command} ; }} ; echo {RC_MARK}$?"
    args = [_vng(), "--disable-kvm", "--force-9p", "--run", _kernel(), "--memory", memory,
            "--cpus", str(cpus)]
    for d in rwdirs:
        os.makedirs(d, exist_ok=True)
        args += ["--rwdir", os.path.abspath(d)]
    args += ["--exec", guest]
    env = dict(os.environ, PATH=f"{os.path.dirname(sys.executable)}:{os.environ.get('PATH', '')}")
    start = time.monotonic()
    try:
        proc = subprocess.run(args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, errors="replace",
                              timeout=timeout, env=env)
        out = proc.stdout
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout if isinstance(exc.stdout, str) else (exc.stdout or b"").decode(errors="replace")
        return VmResult(124, out + f"\nsoftroce_vm: timed out after {timeout:.0f} s\n",
                        time.monotonic() - start)
    seconds = time.monotonic() - start
    rc = 125  # no marker: the VM did not boot or the guest shell died
    lines = []
    for line in out.splitlines():
        if line.startswith(RC_MARK):
            rc = int(line[len(RC_MARK):].strip() or 125)
        else:
            lines.append(line)
    text = "\n".join(lines) + "\n"
    if rc == 125 and proc.returncode:
        text += f"softroce_vm: vng exited with {proc.returncode} before the command finished\n"
    return VmResult(rc, text, seconds)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rwdir", action="append", default=[], help="folder the VM may write (repeatable)")
    ap.add_argument("--timeout", type=float, default=900)
    ap.add_argument("--memory", default="2G")
    ap.add_argument("--cpus", type=int, default=2)
    ap.add_argument("command", nargs=argparse.REMAINDER, help="-- then the command to run inside")
    args = ap.parse_args(argv)
    cmd = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not cmd:
        ap.error("give a command after --")
    res = run_in_vm(" ".join(shlex.quote(c) for c in cmd) if len(cmd) > 1 else cmd[0],
                    rwdirs=args.rwdir, timeout=args.timeout, memory=args.memory, cpus=args.cpus)
    sys.stdout.write(res.output)
    print(f"softroce_vm: exit {res.returncode} after {res.seconds:.0f} s", file=sys.stderr)
    return res.returncode


if __name__ == "__main__":
    sys.exit(main())
