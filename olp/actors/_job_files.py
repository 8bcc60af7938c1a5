"""A spawn's job directory: its working directory and private home, with the invocation's
files, the owner's home files and the credential links written in (a few small local writes;
no checkpoint, so a cleanup after them cannot be interrupted)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from pathlib import Path

from ._adapter import Invocation


def prepare_dirs(workdir: Path, home: Path, invocation: Invocation,
                  home_files: Mapping[str, str], links: Mapping[str, Path]) -> None:
    """Create the job's working directory and private home (a few small local writes)."""
    workdir.mkdir(mode=0o700)
    (home / "tmp").mkdir(mode=0o700, parents=True)
    for name, text in invocation.files.items():
        write_private(inside(workdir, name), text.encode())
    for name, data in invocation.binary_files.items():
        write_private(inside(workdir, name), data)
    for rel, text in home_files.items():
        write_private(inside(home, rel), text.encode())
    for rel, text in invocation.home_files.items():  # after the owner's: the adapter's win
        write_private(inside(home, rel), text.encode())
    for rel, target in links.items():
        link = inside(home, rel)
        link.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        with contextlib.suppress(FileExistsError):
            link.symlink_to(target)


def write_private(path: Path, data: bytes) -> None:
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def inside(root: Path, rel: str) -> Path:
    """``root / rel``, refusing absolute paths and ``..`` that would leave ``root``."""
    path = (root / rel).resolve()
    if not path.is_relative_to(root.resolve()):
        raise ValueError(f"{rel!r} is outside the spawn's home")
    return path
