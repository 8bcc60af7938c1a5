"""What a spawn gets of a login that OLP keeps fresh (issue #41; ADR 0031).

A *login* (a provider × account whose credential is an OAuth login in a file) is kept by one
party only while OLP runs: its keeper (``olp/logins``), which the runtime builds and hands to
the runner and the actor through :class:`Login`. A spawn never sees the login's refresh token:
it gets a :class:`LoginPass`, the short-lived access token in the form its CLI reads, and so can
never spend the refresh token on its own (a refresh token works once; a second spender logs
the owner out).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import trio

from olp.ir import Error


@dataclass(frozen=True, slots=True)
class LoginPass:
    """The part of a login one spawn gets: ``env`` added to its environment (claude:
    ``CLAUDE_CODE_OAUTH_TOKEN``) and ``home_files`` written into its private home, mode 0600
    (codex: ``.codex/auth.json`` without its refresh token). ``generation`` changes whenever the
    keeper takes a new token (a refresh, or a file the owner's CLI wrote); ``expires_at`` is
    the access token's end (wall-clock seconds; ``None``: not said)."""

    generation: int
    env: Mapping[str, str] = field(default_factory=dict)
    home_files: Mapping[str, bytes] = field(default_factory=dict)
    expires_at: float | None = None


class Login(Protocol):
    """A login kept fresh for one provider account's spawns."""

    def ended(self) -> str | None:
        """Why the login can no longer serve (its refresh was refused for good, or its file
        is gone), with the fix; ``None`` while it can. Sync, reads nothing."""
        ...

    @property
    def generation(self) -> int:
        """The generation a spawn starting now gets (sync)."""
        ...

    async def current(self) -> LoginPass | Error:
        """A pass for a spawn starting now, whose access token outlives the spawn. Blocks
        while a refresh it needs is under way (bounded); an error (category ``auth`` when
        the login ended, ``unavailable`` when a refresh failed for now) instead of a pass.
        Cancellation just stops the wait."""
        ...

    async def renewed(self, stale: LoginPass) -> LoginPass | Error:
        """After the API refused ``stale``'s token: a newer pass (refreshing now when none
        was taken since, at most once a minute), or the error. Blocks like :meth:`current`."""
        ...

    def subscribe(self, changed: Callable[[], None]) -> None:
        """Call ``changed()`` (sync, on the Trio thread) after every new generation: warm
        processes started with an older token retire."""
        ...

    def status(self) -> dict[str, Any]:
        """The login as ``/health``, ``olp status`` and the dashboard show it."""
        ...

    async def serve(self, *, task_status: trio.TaskStatus[None] = ...) -> None:
        """Keep the login fresh until cancelled (the actor runs it beside its jobs)."""
        ...
