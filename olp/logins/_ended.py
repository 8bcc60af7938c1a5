"""Logins that ended, kept between starts (issue #41): ``$OLP_HOME/logins.json``, mode 0600.

When a login's refresh is refused for good, its keeper records the login file (its path and
fingerprint) and why, here. A later start, ``olp doctor`` and ``olp status`` then show it
expired, with the fix, without asking the vendor again with a token known to be dead; the
first change of the file (``olp login``) clears it. No token is written here. Small local
reads and writes (the rare end of a login), on the calling thread.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

from ._files import Fingerprint, read_json, write_atomic


class EndedLogins:
    """The ended logins recorded in the JSON file ``path``."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def why(self, login_file: Path, seen: Fingerprint | None) -> str | None:
        """Why the login in ``login_file`` ended, when it was recorded with the fingerprint
        ``seen`` (the file is unchanged since); else ``None``."""
        entry = self._all().get(str(login_file))
        if not isinstance(entry, dict) or seen is None \
                or entry.get("fingerprint") != list(seen):
            return None
        why = entry.get("why")
        return why if isinstance(why, str) else None

    def record(self, login_file: Path, seen: Fingerprint | None, why: str) -> None:
        entries = self._all()
        entries[str(login_file)] = {"fingerprint": list(seen) if seen else None, "why": why}
        self._write(entries)

    def forget(self, login_file: Path) -> None:
        entries = self._all()
        if entries.pop(str(login_file), None) is not None:
            self._write(entries)

    def _all(self) -> dict[str, object]:
        data = read_json(self.path)
        return dict(data) if isinstance(data, dict) else {}

    def _write(self, entries: dict[str, object]) -> None:
        with contextlib.suppress(OSError):  # the state is also in memory and in the log
            self.path.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(self.path, entries, indent=1)
