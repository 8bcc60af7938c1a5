"""Lockdown verdicts kept between starts (issue #26): ``$OLP_HOME/lockdown.json``, 0600.

A verdict is kept under a digest of everything that decides it (:func:`check_key`): the
binary's content and ``--version`` (the file on ``PATH`` is often only a launcher), OLP's
version and the check's, the CLI, whether spawns are confined, the argv, environment and
files OLP gives a spawn, and the provider's own ``extra_args``, ``env`` and ``home_files``
(hashed: nothing secret is written). A new binary or a changed lockdown is checked afresh.
Only a verdict that judged a model request is kept; at most :data:`MAX_KEPT`, the newest.
Blocking file I/O: call the methods from a worker thread.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
import threading
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Final

from olp import __version__

#: One writer at a time in this process (every provider's gate shares the file).
_WRITING = threading.Lock()
#: Bumped whenever what the check looks at changes, so older verdicts are not trusted.
CHECK_VERSION: Final = 1
MAX_KEPT: Final = 64
_CHUNK: Final = 1 << 20


@dataclass(frozen=True, slots=True)
class Verdict:
    """One CLI binary's self-check: ``offered`` built-in tools beyond its floor, every
    ``problem`` (none: verified), the ``version`` it reported. ``checked`` is False when
    nothing could be judged (the CLI sent the mock no request): not kept, checked again."""

    cli: str
    version: str | None
    offered: tuple[str, ...] = ()
    problems: tuple[str, ...] = ()
    checked: bool = True

    @property
    def ok(self) -> bool:
        return self.checked and not self.problems

    def line(self) -> str:
        """What ``olp doctor`` prints after ``lockdown:`` (BRIEF §10)."""
        if self.ok:
            return f"verified ({self.cli} {self.version or 'version unknown'})"
        return "FAILED: " + "; ".join(self.problems or ("not verified",))


def file_digest(path: str) -> str:
    """SHA-256 of the file ``path`` resolves to (symlinks followed)."""
    digest = hashlib.sha256()
    with open(os.path.realpath(path), "rb") as f:
        while chunk := f.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def check_key(cli: str, binary: str, *, version: str | None, confined: bool,
              extra_args: Sequence[str],
              env: Mapping[str, str], home_files: Mapping[str, str],
              spawn: Mapping[str, Any] | None = None) -> str:
    """The digest a verdict is kept under (module docstring; ``spawn``: OLP's own argv,
    environment and files for a fixed request). Reads the whole binary."""
    parts = {"check": CHECK_VERSION, "olp": __version__, "cli": cli,
             "binary": file_digest(binary), "version": version, "confined": confined,
             "extra_args": list(extra_args), "env": sorted(env.items()),
             "home_files": sorted(home_files.items()), "spawn": spawn}
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


class VerdictStore:
    """The kept verdicts, by :func:`check_key`."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def get(self, key: str) -> Verdict | None:
        entry = self._read().get(key)
        if not isinstance(entry, dict):
            return None
        try:
            return Verdict(cli=str(entry["cli"]), version=entry.get("version"),
                           offered=tuple(entry.get("offered", ())),
                           problems=tuple(entry.get("problems", ())))
        except (KeyError, TypeError):
            return None

    def put(self, key: str, verdict: Verdict) -> None:
        if not verdict.checked:
            return
        with _WRITING:  # read, change, write: whole, and never two at once
            entries = {k: v for k, v in self._read().items() if k != key}
            entries[key] = {**asdict(verdict), "offered": list(verdict.offered),
                            "problems": list(verdict.problems)}
            kept = dict(list(entries.items())[-MAX_KEPT:])
            self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=self.path.name, dir=self.path.parent)  # 0600
            try:
                with os.fdopen(fd, "w") as f:
                    json.dump(kept, f, indent=1)
                os.replace(tmp, self.path)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
                raise

    def _read(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}
