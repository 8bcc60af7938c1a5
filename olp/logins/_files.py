"""A login file: who it is now (a fingerprint), its JSON, and an atomic write of a new one.

Small local files: read and written synchronously on the Trio thread (microseconds; a write is
one small file, an ``fsync`` and a ``rename``), as the job files are.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
from pathlib import Path
from typing import Any

Fingerprint = tuple[int, int, int, int]


def fingerprint(path: Path) -> Fingerprint | None:
    """Identity of the file ``path`` resolves to (device, inode, size, mtime); ``None`` when
    it is gone. A rename over it (how every CLI writes it) changes the inode."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def read_json(path: Path) -> object | None:
    """The file's JSON, or ``None`` when it is missing, unreadable or not JSON."""
    try:
        data: object = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return None
    return data


def write_atomic(path: Path, data: Any, *, indent: int | None = None) -> None:
    """Replace the file ``path`` resolves to with ``data`` as JSON, at once: a temporary file
    in the same directory (mode 0600, created exclusively, synced), renamed over it. A link
    at ``path`` (a dotfiles setup) is written through, not replaced."""
    real = path.resolve()
    tmp = real.parent / f".{real.name}.olp-{secrets.token_hex(4)}"
    text = json.dumps(data, indent=indent, separators=None if indent else (",", ":"))
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(text.encode())
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, real)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    with contextlib.suppress(OSError):  # the rename itself, durable
        directory = os.open(real.parent, os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)
