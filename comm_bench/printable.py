"""Text from documents printed as text, never as terminal commands (issue 44): a host name
holding ESC ] 52 (an OSC 52 clipboard write), a carriage return that overwrites the line
before it, or a lone surrogate ("\\ud800", which JSON allows and UTF-8 cannot encode: exit 70
in every reader before) is printed escaped, as \\u001b, \\u000d, \\ud800. Tab and newline
pass. Installed on stdout and stderr by the CLI, so every command's output and one-line
errors go through it; output files (HTML, PNG, JSON) are not touched.

\\uXXXX is also what JSON writes for these characters, so JSON printed to stdout stays JSON."""
from __future__ import annotations

import os
import sys

STDOUT_TTY_ENV = "COMM_BENCH_STDOUT_TTY"   # the spawner's own stdout, "1" a terminal


def user_terminal() -> bool:
    """Does what this process prints end on a terminal? A spawned rank prints through its
    spawner's pipe, so the spawner's word (STDOUT_TTY_ENV) counts where it is given: rank 0's
    `check` line was left one long line on a terminal."""
    said = os.environ.get(STDOUT_TTY_ENV)
    if said is not None:
        return said == "1"
    try:
        return sys.stdout.isatty()
    except (AttributeError, ValueError):
        return False

# C0 controls but tab and newline, DEL, C1 controls, and the bidirectional overrides that
# make a terminal show text in another order than it is
_CONTROLS = [c for c in range(0x20) if c not in (0x09, 0x0A)] + list(range(0x7F, 0xA0)) + \
    [0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A)]
TABLE = {c: f"\\u{c:04x}" for c in _CONTROLS}


def escape(text: str) -> str:
    """`text` with control characters and unpaired surrogates written as \\uXXXX."""
    text = text.translate(TABLE)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


class Printable:
    """A text stream that escapes what it is given (everything else is the stream's own)."""

    def __init__(self, stream):
        self._stream = stream

    def write(self, text):
        if isinstance(text, str):
            text = text.translate(TABLE)
        return self._stream.write(text)

    def writelines(self, lines):
        for line in lines:
            self.write(line)

    def __getattr__(self, name):
        return getattr(self._stream, name)


def install() -> None:
    """sys.stdout and sys.stderr escape control characters; a lone surrogate is written
    as \\udXXX instead of failing to encode."""
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if stream is None or isinstance(stream, Printable):
            continue
        try:
            stream.reconfigure(errors="backslashreplace")
        except (AttributeError, ValueError, OSError):
            pass
        setattr(sys, name, Printable(stream))
