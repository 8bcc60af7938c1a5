"""Writing a tool's configuration into the user's home without destroying anything: a new
file is written whole, an existing one merged by the tool's recipe (the old one kept as
``<file>.bak``), always through a private temporary file renamed over; a file holding the key
is mode 0600. It blocks on file I/O."""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ._target import PLACEHOLDER, ConnectError, Target
from ._tools import recipe


@dataclass(frozen=True)
class WriteResult:
    """What :func:`write` did: the file, its backup (if an existing file changed), whether
    anything changed, and notes for the person."""

    path: Path
    backup: Path | None
    changed: bool
    notes: list[str]


def write(tool: str, target: Target, home: Path) -> WriteResult:
    """Write (or merge) ``tool``'s configuration under ``home``; :class:`ConnectError` when
    that would destroy something or cannot be done."""
    how = recipe(tool)
    rendered = how.render(target)
    if rendered.path is None or how.merge is None:
        raise ConnectError("Cline has no config file to write: it keeps its settings in VS "
                           "Code. Run `olp connect cline` (without --write) and enter what it "
                           "prints in Cline's settings panel.")
    if not target.key or target.key == PLACEHOLDER:
        raise ConnectError("give --key KEY (an OLP key) to write a configuration")
    path = home / rendered.path
    real = path.resolve() if path.is_symlink() else path  # write through a dotfiles link
    existing = _read(real)
    notes = list(rendered.notes)
    if existing is None:
        new = rendered.text
    else:
        new, extra = how.merge(existing, target, path)
        notes += extra
    if new == existing:
        return WriteResult(path, None, False, notes)
    backup = _backup(path, real) if existing is not None else None
    _make_dirs(real.parent)
    _atomic_write(real, new.encode("utf-8"), _mode_for(real, new, target.key))
    return WriteResult(path, backup, True, notes)


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except UnicodeDecodeError:
        raise ConnectError(f"{path} is not UTF-8 text; OLP will not rewrite it") from None


def _backup(path: Path, real: Path) -> Path:
    backup = path.with_name(path.name + ".bak")
    _atomic_write(backup, real.read_bytes(), 0o600)
    return backup


def _mode_for(path: Path, text: str, key: str) -> int:
    """0600 for a new file or one holding the key; an existing file keeps its mode."""
    if key in text or not path.exists():
        return 0o600
    return path.stat().st_mode & 0o777


def _make_dirs(directory: Path) -> None:
    """Create the missing directories down to ``directory``, each 0700."""
    missing = []
    while not directory.exists():
        missing.append(directory)
        directory = directory.parent
    for d in reversed(missing):
        d.mkdir(mode=0o700)
        d.chmod(0o700)


def _atomic_write(path: Path, data: bytes, mode: int) -> None:
    """Write ``data`` to a private temporary file beside ``path``, then rename it over."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".olp-tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise

