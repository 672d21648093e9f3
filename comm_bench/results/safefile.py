"""Files written and read on a user's behalf (often as root, in shared folders), safely.

- A target is replaced atomically: the new version goes to a fresh, randomly named
  file created with O_EXCL|O_NOFOLLOW in the target's folder (reached through a
  descriptor held open, so a folder swapped for a symlink mid-run redirects
  nothing), then is renamed over the target. A crash or a full disk leaves the
  previous complete version.
- Only regular files are replaced: a link, folder, device, FIFO or socket at the
  target is refused (check_replaceable), so `--html /dev/null` never swaps a device
  node for a file. write_file is the one way every output a user names is written.
- One writer per target: an flock on `.<name>.lock` beside it (never written to);
  claim_next_free picks the next free numbered name under that lock (a kept document).
- Reads are bounded and take regular files only (a FIFO would block for ever).
"""
from __future__ import annotations

import errno
import fcntl
import os
import re
import secrets
import stat
from collections.abc import Callable, Iterable

from ..errors import RunFailed, UsageError

MAX_READ = 1 << 30   # the largest document read (a 128-rank pairwise sweep is ~300 MB)
TMP_HEX = 16        # hex digits of a temporary's random part


def temporary_name(name: str, token: str) -> str:
    """The name a document's new version is written under before the rename."""
    return f".{name}.{token}.tmp"


TMP_EXTRA = len(temporary_name("", "0" * TMP_HEX))   # what a temporary's name adds to the target's


def _kind(mode: int) -> str | None:
    """What a non-regular file is, in words (None for a regular file)."""
    for test, word in ((stat.S_ISREG, None), (stat.S_ISLNK, "a symbolic link"), (stat.S_ISDIR, "a folder"),
                       (stat.S_ISCHR, "a device"), (stat.S_ISBLK, "a device"), (stat.S_ISFIFO, "a FIFO"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return word
    return "not a regular file"


class Target:
    """A file in a folder we hold open: replace it atomically, lock it."""

    def __init__(self, path: str) -> None:
        self.path = str(path)
        if not self.path or self.path.endswith(os.sep):
            raise UsageError(f"cannot write '{self.path}': give a file name, not a folder")
        folder, self.name = os.path.split(os.path.abspath(self.path))
        self.folder = folder
        try:
            self.dfd: int | None = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError as exc:
            raise UsageError(f"cannot write '{self.path}': folder '{folder}': {exc.strerror}") from None
        self._lock_fd: int | None = None
        try:
            name_max = os.fpathconf(self.dfd, "PC_NAME_MAX")
        except OSError:
            name_max = 255
        if len(self.name.encode()) + TMP_EXTRA > name_max:
            os.close(self.dfd)
            raise UsageError(f"cannot write '{self.path}': the file name is {len(self.name.encode())} bytes; "
                             f"its folder's file system allows {name_max} and comm-bench needs {TMP_EXTRA} "
                             "more for its temporary file: choose a shorter name")

    def lstat(self, name: str | None = None) -> os.stat_result | None:
        """The target's (or a sibling's) own status, links not followed; None if absent."""
        try:
            return os.stat(name or self.name, dir_fd=self.dfd, follow_symlinks=False)
        except FileNotFoundError:
            return None

    def read_head(self, n: int = 4096) -> bytes:
        """The first n bytes of the target (a regular file, not followed through a link)."""
        fd = os.open(self.name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=self.dfd)
        try:
            return os.read(fd, n)
        finally:
            os.close(fd)

    def read_tail(self, n: int = 4096) -> bytes:
        """The last n bytes of the target (a regular file, not followed through a link)."""
        fd = os.open(self.name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=self.dfd)
        try:
            size = os.fstat(fd).st_size
            return os.pread(fd, n, max(0, size - n))
        finally:
            os.close(fd)

    def check_replaceable(self, what: str) -> None:
        """UsageError unless the target is absent or a regular file (never a link: we
        replace files, we do not write through links into devices or elsewhere)."""
        st = self.lstat()
        kind = None if st is None else _kind(st.st_mode)
        if kind:
            raise UsageError(f"{what} '{self.path}' is {kind}, not a regular file: comm-bench never writes "
                             "through links or into devices; give a file's own path")

    def replace(self, data: bytes, sync: bool = False) -> None:
        """Write `data` as the target's new content, atomically. OSError (e.g. ENOSPC)
        leaves the previous version and no temporary behind."""
        tmp = temporary_name(self.name, secrets.token_hex(TMP_HEX // 2))
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666,
                     dir_fd=self.dfd)
        try:
            old = self.lstat()
            if old is not None and stat.S_ISREG(old.st_mode):
                os.fchmod(fd, stat.S_IMODE(old.st_mode) & 0o777)   # a replaced file keeps its permissions
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            if sync:
                os.fsync(fd)
            os.close(fd)
            fd = None  # type: ignore[assignment]  # closed: the handler below must not close it again
            os.replace(tmp, self.name, src_dir_fd=self.dfd, dst_dir_fd=self.dfd)
        except BaseException:
            if fd is not None:
                os.close(fd)
            try:
                os.unlink(tmp, dir_fd=self.dfd)
            except OSError:
                pass
            raise

    # -- one writer per target ------------------------------------------------
    def lock(self, busy_ok: bool = False) -> bool:
        """Take the target's lock (True), or raise UsageError naming who holds it (busy_ok:
        return False instead, the caller looking for a free name)."""
        name = f".{self.name}.lock"
        while True:
            try:
                fd = os.open(name, os.O_RDONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                             0o644, dir_fd=self.dfd)
            except OSError as exc:
                raise UsageError(_lock_error(self.path, name, self.folder, exc)) from None
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                os.close(fd)
                raise UsageError(f"cannot lock '{self.path}': {name} in {self.folder} is {_kind(st.st_mode)}, "
                                 "not the lock file comm-bench makes: remove it or choose another -o")
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                if busy_ok:
                    return False
                pid = _flock_holder(st)
                raise UsageError(f"'{self.path}' is being written by another comm-bench run"
                                 f"{f' (pid {pid})' if pid else ''}; wait for it or choose another -o") from None
            # the previous holder unlinks the file on release: make sure ours is still the one there
            now = self.lstat(name)
            if now is not None and (now.st_dev, now.st_ino) == (st.st_dev, st.st_ino):
                self._lock_fd = fd
                self._remove_dead_temporaries()
                return True
            os.close(fd)

    def _remove_dead_temporaries(self) -> None:
        """The lock is ours, so a temporary of this target is a dead writer's: a run killed
        while it wrote its document (kill -9 between create and rename) left one, and a CI
        run found it beside the next run's results."""
        head, tail = temporary_name(self.name, "\0").split("\0")
        pattern = re.compile(re.escape(head) + f"[0-9a-f]{{{TMP_HEX}}}" + re.escape(tail))
        try:
            names = os.listdir(self.dfd)
        except OSError:
            return
        for n in names:
            st = self.lstat(n) if pattern.fullmatch(n) else None
            if st is not None and stat.S_ISREG(st.st_mode):
                try:
                    os.unlink(n, dir_fd=self.dfd)
                except OSError:
                    pass

    def unlock(self) -> None:
        if self._lock_fd is None:
            return
        try:
            os.unlink(f".{self.name}.lock", dir_fd=self.dfd)
        except OSError:
            pass
        os.close(self._lock_fd)
        self._lock_fd = None

    def close(self) -> None:
        if self.dfd is not None:
            self.unlock()
            os.close(self.dfd)
            self.dfd = None


NUMBERED_MAX = 9999     # results.1.json .. results.9999.json


def numbered(path: str, n: int) -> str:
    """results.json -> results.N.json (nccl-tests' JSON writer numbers its files so); out -> out.N."""
    stem, ext = os.path.splitext(path)
    return f"{stem}.{n}{ext}"


def claim_next_free(path: str, siblings: Callable[[str], Iterable[str]] = lambda name: ()) -> Target:
    """The first free numbered name of `path` (results.1.json, results.2.json, ...), locked
    for this run: nothing of that name, nor of siblings(name) (files a run writes beside
    it), and no other run holding its lock. The lock is taken before the name is looked
    at, so two runs started at once never pick the same name."""
    for n in range(1, NUMBERED_MAX + 1):
        target = Target(numbered(path, n))
        try:
            if target.lock(busy_ok=True) and target.lstat() is None and \
                    not any(os.path.lexists(p) for p in siblings(target.path)):
                return target
        except BaseException:
            target.close()
            raise
        target.close()
    raise UsageError(f"'{path}' and its numbered names up to {numbered(path, NUMBERED_MAX)} are all taken: "
                     "choose another -o")


def write_file(path: str, data: str | bytes, what: str = "file") -> str:
    """Write a whole output file that the user named (an HTML page, a PNG, JUnit XML, an
    OpenMetrics textfile...): atomically, as a regular file only. UsageError (exit 2) for
    a link, folder, device, FIFO or socket at `path`, a missing folder or a failed write."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    target = Target(path)
    try:
        target.check_replaceable(what)
        target.replace(data)
    except OSError as exc:
        raise UsageError(f"cannot write {what} '{path}': {exc.strerror}") from None
    finally:
        target.close()
    return str(path)


def _lock_error(path: str, name: str, folder: str, exc: OSError) -> str:
    """Why the lock file could not be opened, and what to do (only a link there can be removed)."""
    if exc.errno == errno.EROFS:
        return (f"cannot write '{path}': the file system {mount_of(path)} is read-only; "
                "choose an -o on a writable one")
    if exc.errno in (errno.EACCES, errno.EPERM):
        return f"cannot write '{path}': no permission to create files in {folder}; choose another -o"
    if exc.errno == errno.ELOOP:
        return (f"cannot lock '{path}': {name} in {folder} is a symbolic link, not the lock file "
                "comm-bench makes: remove it or choose another -o")
    return f"cannot lock '{path}' ({name} in {folder}: {exc.strerror}); choose another -o"


def _flock_holder(st: os.stat_result) -> int | None:
    """The pid holding an flock on the file `st` describes, from /proc/locks (best effort)."""
    want = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    try:
        with open("/proc/locks") as f:
            for line in f:
                parts = line.split()
                if len(parts) > 5 and parts[1] == "FLOCK" and parts[5] == want:
                    return int(parts[4])
    except (OSError, ValueError):
        pass
    return None


def disk_full_error(path: str, exc: OSError, kept: str) -> RunFailed | None:
    """One line naming the file system that is full (None for other errors)."""
    if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
        return None
    what = "is full" if exc.errno == errno.ENOSPC else "is over your disk quota"
    return RunFailed(f"cannot write results to '{path}': the file system {mount_of(path)} {what}; "
                     f"{kept}")


def mount_of(path: str) -> str:
    """'/mnt/data (ext4 on /dev/sdb1)': the mount that holds `path`."""
    folder = os.path.dirname(os.path.abspath(path))
    best = None
    try:
        with open("/proc/self/mounts") as f:
            for line in f:
                dev, point, fstype = line.split()[:3]
                point = point.replace("\\040", " ")
                if (folder == point or folder.startswith(point.rstrip("/") + "/")) and \
                        (best is None or len(point) >= len(best[1])):
                    best = (dev, point, fstype)
    except OSError:
        pass
    if best is None:
        return f"holding {folder}"
    dev, point, fstype = best
    return f"at {point} ({fstype}{'' if dev == fstype else ' on ' + dev})"


def read_bounded(path: str, what: str, limit: int = MAX_READ) -> bytes:
    """The bytes of `path` (at most `limit`), refusing early what cannot be JSON/YAML text.
    UsageError for a missing, unreadable, endless or oversized file."""
    try:
        # O_NONBLOCK: opening a FIFO with no writer must not wait; regular files ignore it
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise UsageError(f"{what} '{path}' not found") from None
    except OSError as exc:
        raise UsageError(f"cannot read {what} '{path}': {exc.strerror}") from None
    kind = _kind(os.fstat(fd).st_mode)
    if kind:
        os.close(fd)
        raise UsageError(f"'{path}' is {kind}, not a {what}: give a regular file")
    f = os.fdopen(fd, "rb")
    chunks: list[bytes] = []
    total = 0
    with f:
        try:
            while True:
                chunk = f.read(min(1 << 20, limit + 1 - total))
                if not chunk:
                    break
                if not chunks and b"\0" in chunk[:4096]:
                    raise UsageError(f"'{path}' holds binary data (NUL bytes), not a {what}")
                chunks.append(chunk)
                total += len(chunk)
                if total > limit:
                    raise UsageError(f"'{path}' is larger than {limit >> 20} MiB: not a {what} "
                                     "comm-bench reads")
        except OSError as exc:
            raise UsageError(f"cannot read {what} '{path}': {exc.strerror}") from None
    return b"".join(chunks)
