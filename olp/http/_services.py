"""What the app is given: :class:`Services` (built whole by :mod:`olp.runtime.server`, or by
tests) and the callers it authenticates (:class:`Principal`, :class:`KeyAuthenticator`)."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import trio

from olp.accounting import Recorder, RequestLimiter
from olp.actors import ProviderActor
from olp.cache import CacheStore, Singleflight
from olp.engine import Engine
from olp.store import Database

from ._chat import HeaderPolicy


class Principal(Protocol):
    """Who is calling: a key's id (its cache namespace), name and tier (owner or guest)."""

    @property
    def key_id(self) -> int | str: ...

    @property
    def name(self) -> str: ...

    @property
    def tier(self) -> str: ...


class KeyAuthenticator(Protocol):
    async def authenticate(self, token: str) -> Principal | None:
        """The key's principal, or ``None`` for an unknown or revoked key."""
        ...


@dataclass(slots=True)
class Services:
    """What the app needs from the rest of OLP, every field given at construction. A config
    reload (:func:`olp.runtime.reload.apply`) replaces the fields it configures in place, so
    the routes read them per request, never once at start."""

    engine: Engine
    keys: KeyAuthenticator
    models: Callable[[], list[dict[str, Any]]]
    actors: Mapping[str, ProviderActor] = field(default_factory=dict)
    provider_info: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    headers: HeaderPolicy = field(default_factory=HeaderPolicy)
    cache: CacheStore | None = None
    flights: Singleflight | None = None
    allow_anonymous: bool = False  # auth.allow_anonymous: no key = the "anonymous" guest
    heartbeat_s: float = 0.0  # streaming.heartbeat_interval_ms / 1000; 0 = off
    background: trio.Nursery | None = None  # where heartbeat streams' engine work runs
    max_body_bytes: int = 5 * 1024 * 1024
    started_at: float = field(default_factory=time.time)
    limiter: RequestLimiter | None = None  # per-key limits (None: none are enforced)
    recorder: Recorder | None = None  # the audit trail and usage ledger (None: not kept)
    db: Database | None = None  # where the usage and audit views read from
    metrics_access: str = "owner"  # server.metrics: owner | loopback | off
    config_state: Callable[[], dict[str, Any]] | None = None  # the config reloads (/health)
    dashboard: str = "loopback"  # server.dashboard: loopback | on | off
    allowed_hosts: tuple[str, ...] = ()  # server.allowed_hosts, beside localhost and IPs
    body_timeout_s: float = 10.0  # server.body_timeout_s: a body slower than this is a 408
