"""Small named JSON documents in the store: state that must survive a restart (the
engine's cooldowns and circuits)."""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from ._db import Database

#: The engine's cooldowns and circuits (saved by ``olp start``, cleared by ``olp cooldowns``).
HEALTH_STATE = "engine.health"
#: The engine's soft-trigger counts (requests per provider today, tokens this month).
LEDGER_STATE = "engine.ledger"


class StateStore:
    """One JSON value per name. The ``*_async`` methods run in a worker thread; the plain
    ones block (for the CLI)."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def load(self, name: str) -> Any | None:
        """The saved value, or ``None`` (also for a value that no longer parses)."""
        return self._db.read(lambda c: _read(c, name))

    def delete(self, name: str) -> bool:
        return self._db.write(lambda c: c.execute(
            "DELETE FROM state WHERE name = ?", (name,)).rowcount > 0)

    async def load_async(self, name: str) -> Any | None:
        return await self._db.read_async(lambda c: _read(c, name))

    async def save_async(self, name: str, value: Any) -> None:
        text = json.dumps(value)
        await self._db.write_async(lambda c: _write(c, name, text))


def _read(c: sqlite3.Connection, name: str) -> Any | None:
    row = c.execute("SELECT value FROM state WHERE name = ?", (name,)).fetchone()
    if row is None:
        return None
    try:
        return json.loads(row[0])
    except ValueError:
        return None


def _write(c: sqlite3.Connection, name: str, text: str) -> None:
    c.execute("INSERT INTO state (name, value) VALUES (?, ?) "
              "ON CONFLICT(name) DO UPDATE SET value = excluded.value", (name, text))
