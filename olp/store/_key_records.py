"""What a key is, apart from where it is stored: its token (``olp_`` + 32 random bytes, shown
once) and the SHA-256 hash stored in its place, its tier, limits and provider allow-list, and
the records the store returns. Pure data; no I/O.

A token is 32 random bytes (``secrets``), so a fast unsalted hash is the right tool: there is
nothing to brute-force, and lookups stay O(1) through the unique index on the hash. (A slow
password hash would only add latency to every request.) The store still compares the stored
hash with :func:`hmac.compare_digest`.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass, field, fields, replace
from typing import Final, Literal

from ._bindings import Binding

Tier = Literal["owner", "guest"]
TOKEN_PREFIX: Final = "olp_"


class KeyNameError(ValueError):
    """The key name is invalid or already used by an active key."""


@dataclass(frozen=True, slots=True)
class Limits:
    """A key's limits; ``None`` = no limit. Request counts are per sliding minute and per UTC
    calendar day, ISO week and month; tokens (prompt + completion) per UTC day."""

    per_minute: int | None = None
    per_day: int | None = None
    per_week: int | None = None
    per_month: int | None = None
    tokens_per_day: int | None = None

    @property
    def any(self) -> bool:
        return any(v is not None for v in self.as_dict().values())

    def as_dict(self) -> dict[str, int]:
        """The limits that are set, by name."""
        return {f.name: v for f in fields(self) if (v := getattr(self, f.name)) is not None}

    @classmethod
    def from_dict(cls, values: dict[str, object]) -> Limits:
        """From :meth:`as_dict`'s shape; a value that is not a positive integer raises
        ``ValueError``, and so does an unknown name."""
        names = {f.name for f in fields(cls)}
        unknown = set(values) - names
        if unknown:
            raise ValueError(f"unknown limit(s): {', '.join(sorted(unknown))}")
        for name, value in values.items():
            if value is not None and (not isinstance(value, int) or isinstance(value, bool)
                                      or value < 1):
                raise ValueError(f"{name} must be a whole number of at least 1")
        return cls(**values)  # type: ignore[arg-type]

    def merged(self, changes: dict[str, int]) -> Limits:
        return replace(self, **changes)


NO_LIMITS: Final = Limits()


@dataclass(frozen=True, slots=True)
class KeyPolicy:
    """What a key may do: the providers its requests may reach (``None`` = every one), its
    :class:`Limits`, and the accounts it is bound to (``()``: none; see :mod:`._bindings`)."""

    providers: frozenset[str] | None = None
    limits: Limits = field(default=NO_LIMITS)
    accounts: Binding = ()

    def allows(self, provider: str) -> bool:
        return self.providers is None or provider in self.providers


UNRESTRICTED: Final = KeyPolicy()


@dataclass(frozen=True, slots=True)
class KeyRecord:
    """A key without its secret (safe to list and log)."""

    id: int
    name: str
    tier: Tier
    prefix: str
    source: str  # 'cli' | 'bootstrap' | 'env'
    created_at: float
    revoked_at: float | None
    policy: KeyPolicy = UNRESTRICTED
    imported_from: str | None = None  # e.g. 'ocp:12' (olp migrate-from-ocp)

    @property
    def active(self) -> bool:
        return self.revoked_at is None

    @property
    def display_prefix(self) -> str:
        """``olp_`` and the stored characters; an imported key's prefix is stored whole
        (``ocp_AbCd1234``)."""
        if not self.prefix:
            return "(custom)"
        if self.imported_from is not None:
            return f"{self.prefix}..."
        return f"{TOKEN_PREFIX}{self.prefix}..."


@dataclass(frozen=True, slots=True)
class ImportedKey:
    """A key brought over from another store with its secret unchanged (so its clients keep
    working): see :meth:`KeyStore.import_keys`."""

    name: str
    token: str
    created_at: float
    origin: str  # e.g. 'ocp:12', kept in api_keys.imported_from
    policy: KeyPolicy = UNRESTRICTED


@dataclass(frozen=True, slots=True)
class ImportResult:
    """What :meth:`KeyStore.import_keys` did with one key: ``imported`` (as ``name``, which
    differs from the key's own when an active key already had it), or ``present`` (its
    secret is already a key here: nothing changed)."""

    origin: str
    name: str
    key_id: int
    imported: bool


@dataclass(frozen=True, slots=True)
class Principal:
    """Who a request authenticated as."""

    key_id: int
    name: str
    tier: Tier
    policy: KeyPolicy = UNRESTRICTED

    @property
    def is_owner(self) -> bool:
        return self.tier == "owner"


def generate_token() -> str:
    """A new ``olp_`` token: 32 random bytes, URL-safe base64."""
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def hash_token(token: str) -> str:
    """SHA-256 hex of the whole token (see the module docstring for why a fast hash)."""
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()
