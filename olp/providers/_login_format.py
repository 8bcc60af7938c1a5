"""How a CLI keeps its OAuth login in a file, and how it refreshes it (issue #41; ADR 0031).

Each CLI whose login OLP keeps fresh (claude, codex) describes it with a :class:`LoginFormat`
in its subpackage's ``_login`` module, from what was measured on the pinned binary
(``tests/fixtures/cli-reference/login_refresh/README.md``): where the file is, what it holds, the
request the CLI sends to its vendor's token endpoint and how it writes the answer back, the
lock the CLI itself takes while it refreshes, and what a spawn gets instead of the file. The
keeper (``olp/logins``) does the I/O; a format is pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

__all__ = ["LockSpec", "LoginFormat", "Tokens"]


@dataclass(frozen=True, slots=True)
class Tokens:
    """The OAuth login a file holds: the access token, the refresh token (``None``: none, so
    it cannot be refreshed), when the access token ends (wall-clock seconds; ``None``: not
    said) and the whole file (written back with only the tokens changed)."""

    access: str
    refresh: str | None
    expires_at: float | None
    data: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class LockSpec:
    """The lock the CLI takes around its own refresh, beside its login file: ``mkdir`` (a
    directory, held while it exists: claude's proper-lockfile) or ``flock`` (an exclusive
    ``flock`` on a file: codex's ``auth.lock``). OLP takes the same one, so the owner's own
    CLI waits for OLP's refresh and then reads the new tokens."""

    kind: Literal["mkdir", "flock"]
    name: str


class LoginFormat(Protocol):
    """One CLI's refreshable login (all of it measured on the pinned version)."""

    #: The CLI's name, as ``olp doctor`` says it.
    cli: str
    #: The CLI refreshes on its own when fewer than this many seconds remain.
    margin_s: float
    #: Where the CLI refreshes (the keeper posts there, as the CLI does).
    token_url: str
    #: The lock the CLI takes while it refreshes.
    lock: LockSpec
    #: How the CLI indents the file's JSON (``None``: compact), kept when OLP writes it.
    indent: int | None

    def path(self, env: Mapping[str, str], real_home: Path) -> Path | None:
        """The login file the CLI will read, with ``env`` its environment and ``real_home``
        where login files live; ``None`` when it logs in with a token or key from ``env``
        (nothing to keep)."""
        ...

    def parse(self, data: object) -> Tokens | None:
        """The OAuth login in the file's JSON ``data``; ``None`` when it holds none (an API
        key, or a logged-out stub)."""
        ...

    def refresh_body(self, tokens: Tokens) -> dict[str, Any]:
        """The JSON body the CLI posts to :attr:`token_url` to refresh ``tokens``."""
        ...

    def refreshed(self, tokens: Tokens, answer: Mapping[str, Any], now: float
                  ) -> dict[str, Any]:
        """The file as the CLI writes it after the endpoint's ``answer`` at ``now``: the
        old file with only its tokens (and their dates) changed. Raises ``ValueError`` when
        ``answer`` holds no access token."""
        ...

    def refused_for_good(self, status: int, answer: object) -> str | None:
        """Why the endpoint's refusal (``status``, the parsed JSON ``answer``) ends the login
        (the refresh token was used, expired or revoked: only a new login helps); ``None``
        when it may be transient (retried)."""
        ...

    def spawn_env(self, tokens: Tokens) -> dict[str, str]:
        """Variables a spawn gets instead of the file (never the refresh token)."""
        ...

    def spawn_files(self, tokens: Tokens) -> dict[str, bytes]:
        """Files a spawn's private home gets instead of the file (never the refresh
        token): a path relative to that home mapped to the bytes."""
        ...
