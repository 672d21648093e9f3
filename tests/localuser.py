"""A second, unprivileged local user for the security tests (created with useradd,
removed afterwards), and a way to run code as that user.

The code runs in a child forked from the test process that drops to the user's
uid/gid before running it: modules the test imported (torch's TCPStore) stay usable
even when the checkout itself is not readable by that user (/root in CI)."""
from __future__ import annotations

import os
import pickle
import pwd
import select
import shutil
import subprocess
import tempfile
from dataclasses import dataclass

import pytest


@dataclass
class User:
    name: str
    uid: int
    gid: int


@pytest.fixture(scope="module")
def other_user():
    if os.geteuid() != 0 or not shutil.which("useradd"):
        pytest.skip("needs root and useradd to create a second local user")
    name = f"cbt{os.getpid()}"[:31]
    subprocess.run(["useradd", "--system", "--no-create-home", "--user-group",
                    "--shell", "/usr/sbin/nologin", name], check=True, capture_output=True)
    try:
        pw = pwd.getpwnam(name)
        yield User(name, pw.pw_uid, pw.pw_gid)
    finally:
        subprocess.run(["userdel", name], capture_output=True)


@pytest.fixture
def user_dir(other_user):
    """A folder the other user owns (where a root-run sweep is told to write)."""
    path = tempfile.mkdtemp(prefix="cb-shared-", dir="/tmp")
    os.chown(path, other_user.uid, other_user.gid)
    os.chmod(path, 0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def as_user(user: User, fn, *args, timeout: float = 60.0):
    """fn(*args) run as `user` in a forked child; its return value, or AssertionError
    carrying the child's exception."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        code = 0
        try:
            os.close(r)
            os.setgroups([])
            os.setgid(user.gid)
            os.setuid(user.uid)
            result = ("ok", fn(*args))
        except BaseException as exc:  # noqa: BLE001 - handed to the parent
            result = ("error", f"{type(exc).__name__}: {exc}")
        try:
            os.write(w, pickle.dumps(result))
        except BaseException:  # noqa: BLE001
            code = 1
        os._exit(code)
    os.close(w)
    chunks = []
    try:
        while True:
            ready, _, _ = select.select([r], [], [], timeout)
            if not ready:
                os.kill(pid, 9)
                raise AssertionError(f"code run as {user.name} did not finish within {timeout} s")
            chunk = os.read(r, 1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(r)
        os.waitpid(pid, 0)
    status, value = pickle.loads(b"".join(chunks))
    if status != "ok":
        raise AssertionError(f"as {user.name}: {value}")
    return value
