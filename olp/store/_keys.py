"""API keys in SQLite: ``olp_`` tokens shown once, stored only as SHA-256 hashes
(:mod:`._key_records` says why a fast hash).

:class:`KeyStore` is the synchronous core (the CLI uses it; every method blocks on disk I/O).
:class:`AsyncKeyStore` runs the same methods in a worker thread for Trio code; the HTTP layer
depends only on the :class:`KeyService` protocol, so another backend can replace SQLite.
"""

from __future__ import annotations

import builtins
import hmac
import json
import math
import sqlite3
import time
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from typing import Final, Literal, Protocol

import trio

from ._bindings import Binding, format_binding, parse_binding
from ._db import Database, StoreError
from ._key_records import (
    NO_LIMITS,
    TOKEN_PREFIX,
    UNRESTRICTED,
    ImportedKey,
    ImportResult,
    KeyNameError,
    KeyPolicy,
    KeyRecord,
    Limits,
    Principal,
    Tier,
    generate_token,
    hash_token,
)

MAX_NAME_CHARS: Final = 64
_MAX_TOKEN_CHARS: Final = 1024  # longer input is not ours; don't even hash it
_COLUMNS: Final = ("id, name, tier, prefix, source, created_at, revoked_at, providers, limits, "
                   "imported_from, accounts")


class KeyService(Protocol):
    """What the HTTP layer needs from a key store (all calls may wait on I/O)."""

    async def authenticate(self, token: str) -> Principal | None: ...

    async def create(self, name: str, tier: Tier = "guest") -> tuple[KeyRecord, str]: ...

    async def list(self) -> builtins.list[KeyRecord]: ...

    async def revoke(self, id_or_name: int | str) -> bool: ...

    async def ensure_owner(self, env_token: str | None) -> str | None: ...


class KeyStore:
    """Synchronous key store over a :class:`Database`; every method blocks on disk I/O."""

    def __init__(self, db: Database, *, clock: Callable[[], float] = time.time) -> None:
        self._db = db
        self._clock = clock

    def create(self, name: str, tier: Tier = "guest",
               policy: KeyPolicy = UNRESTRICTED) -> tuple[KeyRecord, str]:
        """Store a new key; returns its record and the plaintext token (shown once, never
        stored). Raises :class:`KeyNameError` for a bad or taken name, ``ValueError`` for a
        policy :func:`_checked` refuses."""
        name = _check_name(name)
        if tier not in ("owner", "guest"):
            raise ValueError(f"unknown tier {tier!r}")
        policy = _checked(policy)
        token = generate_token()

        def insert(c: sqlite3.Connection) -> int:
            key_id = _insert(c, name, tier, token, "cli", self._clock())
            _store_policy(c, key_id, policy)
            return key_id

        return self._get(self._db.write(insert)), token

    def update(self, id_or_name: int | str, *,
               providers: frozenset[str] | None | Literal["keep"] = "keep",
               limits: dict[str, int] | None = None,
               clear_limits: bool = False,
               accounts: Binding | Literal["keep"] = "keep") -> KeyRecord | None:
        """Change an active key's policy: its allow-list (``None`` = every provider; the
        default keeps it), its limits (``clear_limits`` drops them all first, then
        ``limits`` sets the ones named) and its binding to accounts (``()``: none; the
        default keeps it). ``None`` if no active key matched; a bad limit, or a policy
        :func:`_checked` refuses, raises ``ValueError``. A running server applies it within
        2 s (it reads its keys again that often)."""
        where, arg = _where(id_or_name)
        changes = Limits.from_dict(dict(limits or {})).as_dict()

        def change(c: sqlite3.Connection) -> int | None:
            row = c.execute(f"SELECT id, providers, limits, accounts FROM api_keys "
                            f"WHERE {where} AND revoked_at IS NULL", (arg,)).fetchone()
            if row is None:
                return None
            old = _policy(row[1], row[2], row[3])
            base = NO_LIMITS if clear_limits else old.limits
            new = _checked(KeyPolicy(old.providers if providers == "keep" else providers,
                                     base.merged(changes),
                                     old.accounts if accounts == "keep" else accounts))
            _store_policy(c, int(row[0]), new)
            return int(row[0])

        key_id = self._db.write(change)
        return None if key_id is None else self._get(key_id)

    def list(self) -> builtins.list[KeyRecord]:
        """All keys, revoked ones included, oldest first; no secrets."""
        rows = self._db.read(
            lambda c: c.execute(f"SELECT {_COLUMNS} FROM api_keys ORDER BY id").fetchall())
        return [_record(r) for r in rows]

    def revoke(self, id_or_name: int | str) -> bool:
        """Revoke an active key by id (digits) or name; ``False`` if no active key matched."""
        where, arg = _where(id_or_name)
        sql = (f"UPDATE api_keys SET revoked_at = ?, revoked_reason = 'revoked' "
               f"WHERE {where} AND revoked_at IS NULL")
        return self._db.write(lambda c: c.execute(sql, (self._clock(), arg)).rowcount) > 0

    def rotate(self, id_or_name: int | str) -> tuple[KeyRecord, str] | None:
        """Give an active key (by id or name) a new secret: returns its record and the new
        plaintext token (shown once), or ``None`` if no active key matched. The old secret
        stops working at once here, and within 2 s in a running server. Raises
        :class:`StoreError` for the key ``OLP_OWNER_TOKEN`` defines (change that instead)."""
        where, arg = _where(id_or_name)
        token = generate_token()
        prefix = token[len(TOKEN_PREFIX):][:8]

        def update(c: sqlite3.Connection) -> int | None:
            row = c.execute(f"SELECT id, source FROM api_keys WHERE {where} "
                            "AND revoked_at IS NULL", (arg,)).fetchone()
            if row is None:
                return None
            if row[1] == "env":
                raise StoreError("this key is OLP_OWNER_TOKEN's: set a new OLP_OWNER_TOKEN "
                                 "and restart instead")
            c.execute("UPDATE api_keys SET hash = ?, prefix = ? WHERE id = ?",
                      (hash_token(token), prefix, row[0]))
            return int(row[0])

        key_id = self._db.write(update)
        return None if key_id is None else (self._get(key_id), token)

    def import_keys(self, keys: builtins.list[ImportedKey]) -> builtins.list[ImportResult]:
        """:func:`import_keys` in its own transaction."""
        return self._db.write(lambda c: import_keys(c, keys))

    def authenticate(self, token: str) -> Principal | None:
        """The principal of an active key, or ``None`` (empty, unknown or revoked token)."""
        if not token or len(token) > _MAX_TOKEN_CHARS:
            return None
        digest = hash_token(token)
        row = self._db.read(lambda c: c.execute(
            "SELECT id, name, tier, hash, providers, limits, accounts FROM api_keys "
            "WHERE hash = ? AND revoked_at IS NULL", (digest,)).fetchone())
        if row is None or not hmac.compare_digest(row[3], digest):
            return None
        return Principal(key_id=row[0], name=row[1], tier=_tier(row[2]),
                         policy=_policy(row[4], row[5], row[6]))

    def active_keys(self) -> dict[str, Principal]:
        """Every active key's principal by its hash (one read of the table)."""
        rows = self._db.read(lambda c: c.execute(
            "SELECT id, name, tier, hash, providers, limits, accounts FROM api_keys "
            "WHERE revoked_at IS NULL").fetchall())
        return {row[3]: Principal(key_id=row[0], name=row[1], tier=_tier(row[2]),
                                  policy=_policy(row[4], row[5], row[6])) for row in rows}

    def ensure_owner(self, env_token: str | None) -> str | None:
        """Make sure an owner key exists; return a new plaintext token only if one was made.

        With ``env_token`` (``OLP_OWNER_TOKEN``): its hash becomes an active owner key,
        replacing a previous env owner key; returns ``None``. Raises :class:`StoreError` if
        that token was revoked with ``olp keys revoke`` or is a guest key. Without it: if no
        active owner key exists, generate one and return it (show it once); else ``None``.
        """
        if env_token:
            self._db.write(partial(self._ensure_env_owner, env_token))
            return None
        return self._db.write(self._ensure_any_owner)

    def _ensure_env_owner(self, token: str, c: sqlite3.Connection) -> None:
        digest, now = hash_token(token), self._clock()
        row = c.execute("SELECT id, tier, revoked_at, revoked_reason FROM api_keys "
                        "WHERE hash = ?", (digest,)).fetchone()
        if row is not None and row[1] != "owner":
            raise StoreError("OLP_OWNER_TOKEN is also a guest key; set a different token")
        if row is not None and row[2] is None:
            return  # already the active owner key
        if row is not None and row[3] != "replaced":
            raise StoreError("OLP_OWNER_TOKEN was revoked; set a new token")
        c.execute("UPDATE api_keys SET revoked_at = ?, revoked_reason = 'replaced' "
                  "WHERE source = 'env' AND revoked_at IS NULL", (now,))
        name = _free_name(c, "owner-env")
        if row is None:
            _insert(c, name, "owner", token, "env", now)
        else:  # an earlier env token came back: reactivate it
            c.execute("UPDATE api_keys SET revoked_at = NULL, revoked_reason = NULL, name = ? "
                      "WHERE id = ?", (name, row[0]))

    def _ensure_any_owner(self, c: sqlite3.Connection) -> str | None:
        if c.execute("SELECT 1 FROM api_keys WHERE tier = 'owner' AND revoked_at IS NULL "
                     "LIMIT 1").fetchone():
            return None
        token = generate_token()
        _insert(c, _free_name(c, "owner"), "owner", token, "bootstrap", self._clock())
        return token

    def _get(self, key_id: int) -> KeyRecord:
        row = self._db.read(lambda c: c.execute(
            f"SELECT {_COLUMNS} FROM api_keys WHERE id = ?", (key_id,)).fetchone())
        return _record(row)


class AsyncKeyStore:
    """:class:`KeyStore` for Trio code: each call runs in a worker thread (never blocks the
    loop) and, once started, finishes even if the caller is cancelled.

    :meth:`authenticate` looks keys up in memory: every active key's hash, read from the
    table as a whole (issue #42). The copy is read again when it is older than ``memo_s``
    (so a key revoked or changed by another process, ``olp keys``, stops or changes within
    ``memo_s``), and when a key is not in it, at most every ``miss_s`` (so a key created by
    ``olp keys create`` works at once). A wrong key is a dictionary miss: a flood of them costs
    one read of the table per ``miss_s``, never one per key. A key made or revoked through this
    store counts at once.
    """

    def __init__(self, keys: KeyStore, *, memo_s: float = 2.0, miss_s: float = 0.25,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.sync = keys
        self._memo_s = memo_s
        self._miss_s = miss_s
        self._clock = clock
        self._live: dict[str, Principal] = {}
        self._read_at = -math.inf
        self._changes = 0  # keys made or revoked through this store
        self._reading: trio.Event | None = None

    async def authenticate(self, token: str) -> Principal | None:
        """The active key's principal, or ``None``. A checkpoint; blocks on a read of the
        table only when the copy in memory is too old (see the class)."""
        if not token or len(token) > _MAX_TOKEN_CHARS:
            await trio.lowlevel.checkpoint()
            return None
        digest = hash_token(token)
        if self._clock() - self._read_at >= self._memo_s:
            await self._read()
        principal = self._live.get(digest)
        if principal is None and self._clock() - self._read_at >= self._miss_s:
            await self._read()  # a key made since the copy was read?
            principal = self._live.get(digest)
        else:
            await trio.lowlevel.checkpoint()
        return principal

    async def _read(self) -> None:
        """Read every active key into memory; one read at a time (a caller arriving while
        one runs waits for it). The read finishes even if its caller is cancelled. A key
        changed through this store meanwhile leaves the copy marked old: read again next."""
        if self._reading is not None:
            await self._reading.wait()
            return
        self._reading = done = trio.Event()
        try:
            started, changes = self._clock(), self._changes
            self._live = await trio.to_thread.run_sync(self.sync.active_keys)
            self._read_at = started if changes == self._changes else -math.inf
        finally:
            self._reading = None
            done.set()

    def _changed(self) -> None:
        """A key was made or revoked through this store: read the keys before the next
        check."""
        self._changes += 1
        self._read_at = -math.inf

    async def create(self, name: str, tier: Tier = "guest") -> tuple[KeyRecord, str]:
        made = await trio.to_thread.run_sync(self.sync.create, name, tier)
        self._changed()
        return made

    async def list(self) -> builtins.list[KeyRecord]:
        return await trio.to_thread.run_sync(self.sync.list)

    async def revoke(self, id_or_name: int | str) -> bool:
        revoked = await trio.to_thread.run_sync(self.sync.revoke, id_or_name)
        self._changed()
        return revoked

    async def ensure_owner(self, env_token: str | None) -> str | None:
        made = await trio.to_thread.run_sync(self.sync.ensure_owner, env_token)
        self._changed()
        return made


def import_keys(c: sqlite3.Connection, keys: builtins.list[ImportedKey]
                ) -> builtins.list[ImportResult]:
    """Store guest keys from another store, their secrets unchanged (hashed as OLP's own), in
    the caller's transaction. A key whose secret is already here (imported before, say) is
    left as it is, so a second run imports nothing; a name an active key already has gets a
    ``-2``/``-3`` suffix. Raises :class:`KeyNameError` for a name OLP cannot take."""
    results = []
    for key in keys:
        row = c.execute("SELECT id, name FROM api_keys WHERE hash = ?",
                        (hash_token(key.token),)).fetchone()
        if row is not None:
            results.append(ImportResult(key.origin, row[1], int(row[0]), False))
            continue
        name = _free_name(c, _check_name(key.name))
        key_id = _insert(c, name, "guest", key.token, "cli", key.created_at)
        c.execute("UPDATE api_keys SET imported_from = ? WHERE id = ?", (key.origin, key_id))
        _store_policy(c, key_id, _checked(key.policy))
        results.append(ImportResult(key.origin, name, key_id, True))
    return results


def _insert(c: sqlite3.Connection, name: str, tier: Tier, token: str, source: str,
            now: float) -> int:
    if token.startswith(TOKEN_PREFIX):
        prefix = token[len(TOKEN_PREFIX):][:8]
    else:  # a foreign key (OCP's ocp_...): its own prefix, kept whole for display
        head, sep, rest = token.partition("_")
        prefix = f"{head}_{rest[:8]}" if sep and head.isalnum() and len(head) <= 8 else ""
    try:
        cur = c.execute(
            "INSERT INTO api_keys (name, tier, hash, prefix, source, created_at) "
            "VALUES (?, ?, ?, ?, ?, ?)", (name, tier, hash_token(token), prefix, source, now))
    except sqlite3.IntegrityError:
        raise KeyNameError(f"an active key named {name!r} already exists") from None
    assert cur.lastrowid is not None
    return cur.lastrowid


def _free_name(c: sqlite3.Connection, base: str) -> str:
    """``base``, or ``base-2``, ``base-3``... if an active key already has that name."""
    name, n = base, 1
    while c.execute("SELECT 1 FROM api_keys WHERE name = ? AND revoked_at IS NULL",
                    (name,)).fetchone():
        n += 1
        name = f"{base}-{n}"
    return name


def _check_name(name: str) -> str:
    name = name.strip()
    if not name or len(name) > MAX_NAME_CHARS or not name.isprintable() or _is_id(name):
        raise KeyNameError(f"a key name needs 1-{MAX_NAME_CHARS} printable characters and "
                           "must not be all digits (digits mean an id)")
    return name


def _where(id_or_name: int | str) -> tuple[str, int | str]:
    """The SQL condition (and its argument) selecting a key by id (digits) or name."""
    if isinstance(id_or_name, int) or _is_id(id_or_name.strip()):
        return "id = ?", int(id_or_name)
    return "name = ?", id_or_name.strip()


def _is_id(text: str) -> bool:
    return text.isascii() and text.isdigit()


def _tier(value: str) -> Tier:
    if value == "owner":
        return "owner"
    if value == "guest":
        return "guest"
    raise StoreError(f"unknown tier {value!r} in the database")


def _checked(policy: KeyPolicy) -> KeyPolicy:
    """``policy`` with its binding in the one text form (repeats dropped); ``ValueError`` for
    a pair that is not ``PROVIDER:ACCOUNT``, or an account of a provider the allow-list
    excludes (the key could never use it)."""
    binding = parse_binding(format_binding(policy.accounts))
    excluded = [f"{p}:{a}" for p, a in binding if not policy.allows(p)]
    if excluded:
        raise ValueError(f"{', '.join(excluded)}: the key's providers exclude "
                         f"{'that provider' if len(excluded) == 1 else 'those providers'}")
    return replace(policy, accounts=binding)


def _store_policy(c: sqlite3.Connection, key_id: int, policy: KeyPolicy) -> None:
    providers = None if policy.providers is None else ",".join(sorted(policy.providers))
    limits = json.dumps(policy.limits.as_dict()) if policy.limits.any else None
    accounts = format_binding(policy.accounts) or None
    c.execute("UPDATE api_keys SET providers = ?, limits = ?, accounts = ? WHERE id = ?",
              (providers, limits, accounts, key_id))


def _policy(providers: object, limits: object, accounts: object) -> KeyPolicy:
    """The policy stored in a row's ``providers``, ``limits`` and ``accounts`` columns."""
    allowed = None if not isinstance(providers, str) else \
        frozenset(p for p in providers.split(",") if p)
    try:
        parsed = json.loads(limits) if isinstance(limits, str) else {}
        set_limits = Limits.from_dict(parsed if isinstance(parsed, dict) else {})
    except ValueError as exc:
        raise StoreError(f"a key's stored limits are not valid: {exc}") from None
    try:
        if accounts is not None and not isinstance(accounts, str):
            raise ValueError(f"{accounts!r} is not text")
        binding = parse_binding(accounts or "")
    except ValueError as exc:
        raise StoreError(f"a key's stored accounts are not valid: {exc}") from None
    return KeyPolicy(allowed, set_limits, binding)


def _record(row: tuple[object, ...]) -> KeyRecord:
    (key_id, name, tier, prefix, source, created_at, revoked_at, providers, limits, origin,
     accounts) = row
    assert isinstance(key_id, int) and isinstance(name, str) and isinstance(tier, str)
    assert isinstance(prefix, str) and isinstance(source, str)
    assert isinstance(created_at, float | int)
    assert revoked_at is None or isinstance(revoked_at, float | int)
    return KeyRecord(id=key_id, name=name, tier=_tier(tier), prefix=prefix, source=source,
                     created_at=float(created_at),
                     revoked_at=None if revoked_at is None else float(revoked_at),
                     policy=_policy(providers, limits, accounts),
                     imported_from=origin if isinstance(origin, str) else None)
