"""One login's keeper: the only party that refreshes it while OLP runs (issue #41; ADR 0031).

A refresh token works once; whoever spends it second is logged out, and so is everyone who
still holds the old pair. So for each login (provider × account whose credential is an OAuth
login in a file) exactly one keeper refreshes, and nothing else can:

* **Spawns never get the refresh token.** :meth:`LoginKeeper.current` hands each spawn a
  :class:`~olp.actors.LoginPass`: only the access token, in the form its CLI reads (the
  format's ``spawn_env``/``spawn_files``), and only while it outlives the spawn (``hold_s``).
* **The refresh happens ahead of everyone's margin**, ``margin_s + hold_s +`` :data:`SLACK_S`
  before the access token ends: before the owner's own CLI would refresh (its margin) and
  before any pass handed out ends. Warm processes holding an older token are told to retire
  (:meth:`subscribe`) at every new generation.
* **Under the CLI's own lock, after re-reading the file.** If the owner's own CLI refreshed
  meanwhile, its tokens are adopted and nothing is spent. The new pair is written at once,
  atomically, mode 0600, in the CLI's own format, into the login's real file; a file that a
  lock-ignoring writer made newer meanwhile is never overwritten with an older pair.
* **A refusal for good** (the refresh token was used, expired or revoked) ends the login: it is
  shown expired with the fix, its hops are skipped, and its file is never written again until
  it changes (``olp login``).

Times are wall-clock seconds from ``wall`` (the tokens' dates are); waiting is Trio's. Every
file operation is a small local one on the Trio thread; the token endpoint call is bounded.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import trio

from olp.actors import LoginPass
from olp.failures import Code, failure
from olp.ir import Error
from olp.providers._login_format import LoginFormat, Tokens

from ._ended import EndedLogins
from ._endpoint import EndpointUnreachable, Post, post_json
from ._files import Fingerprint, fingerprint, read_json, write_atomic
from ._locks import LockBusy, cli_lock

log = logging.getLogger("olp.logins")

#: Refresh this much earlier than the CLI's margin plus the longest a pass is held.
SLACK_S = 60.0
#: A pass is never handed out with fewer seconds than this left on its token.
MIN_LEFT_S = 5.0
#: Never two refreshes of one login closer together than this (a vendor issuing tokens that
#: live shorter than the lead would otherwise be asked again at once, forever).
MIN_GAP_S = 10.0
#: A refresh after the API refused a token (not a scheduled one): at most once per this.
FORCED_EVERY_S = 60.0
#: After a refresh failed for now: the first retry, doubling up to the second.
RETRY_S, MAX_RETRY_S = 15.0, 300.0


class LoginKeeper:
    """:class:`~olp.actors.Login` of the login in file ``path`` (``fmt``: its CLI's format;
    ``name``: the actor's, e.g. ``anthropic@alice``; ``fix``: the command that logs it in
    again; ``hold_s``: the longest a spawn holds a pass, its provider's ``total_s``).
    ``post`` calls the token endpoint; ``wall`` is the wall clock; ``ended``, where a login
    whose refresh was refused for good is recorded between starts. Run :meth:`serve`."""

    def __init__(self, name: str, fmt: LoginFormat, path: Path, *, fix: str, hold_s: float,
                 post: Post = post_json, wall: Callable[[], float] = time.time,
                 ended: EndedLogins | None = None,
                 poll_s: float = 30.0, lock_wait_s: float = 20.0,
                 wait_s: float = 45.0) -> None:
        self.name = name
        self.fmt = fmt
        self.path = path
        self.fix = fix
        self.hold_s = hold_s
        self.ahead_s = fmt.margin_s + hold_s + SLACK_S
        self._post = post
        self._wall = wall
        self._ended_logins = ended
        self._poll_s = poll_s
        self._lock_wait_s = lock_wait_s
        self._wait_s = wait_s
        self._tokens: Tokens | None = None
        self._seen: Fingerprint | None = None
        self._read = False  # the file was read at least once
        self._generation = 0
        self._ended: str | None = None
        self._problem: str | None = None
        self._failures = 0
        self._retry_at = -math.inf
        self._last_refresh_at = -math.inf
        self._last_forced_at = -math.inf
        self._refreshes = 0
        self._unsaved: dict[str, Any] | None = None  # refreshed, but the write failed
        self._lock = trio.Lock()
        self._wake = trio.Event()
        self._subscribers: list[Callable[[], None]] = []

    # --- what the runner and the actor ask ------------------------------------------------

    def ended(self) -> str | None:
        return self._ended

    @property
    def generation(self) -> int:
        return self._generation

    @property
    def refreshes(self) -> int:
        """Refreshes this keeper made."""
        return self._refreshes

    def subscribe(self, changed: Callable[[], None]) -> None:
        self._subscribers.append(changed)

    async def current(self) -> LoginPass | Error:
        self._look()
        if self._due_now():
            with trio.move_on_after(self._wait_s):
                await self._refresh()
        return self._pass()

    async def renewed(self, stale: LoginPass) -> LoginPass | Error:
        self._look()
        if self._generation == stale.generation and self._refreshable() \
                and self._wall() - self._last_forced_at >= FORCED_EVERY_S:
            self._last_forced_at = self._wall()
            log.info("the API refused the login's token: refreshing it now",
                     extra={"login": self.name})
            with trio.move_on_after(self._wait_s):
                await self._refresh(force_from=stale.generation)
        return self._pass()

    def status(self) -> dict[str, Any]:
        """The login now (its file looked at again first: one ``stat``)."""
        self._look()
        now = self._wall()
        tokens = self._tokens
        state = "expired" if self._ended else "failing" if self._problem else "ok"
        out: dict[str, Any] = {"state": state, "cli": self.fmt.cli, "file": str(self.path),
                               "refreshes": self._refreshes, "refreshable": self._refreshable()}
        if tokens is not None and tokens.expires_at is not None:
            out["expires_in_s"] = round(tokens.expires_at - now)
            due = self._due()
            if due != math.inf:
                out["refresh_in_s"] = max(0, round(due - now))
        if self._ended:
            out.update(problem=self._ended, fix=self.fix)
        elif self._problem:
            out["problem"] = self._problem
        return out

    async def serve(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
                    ) -> None:
        """Refresh when due, retry after a failure, notice a new file; until cancelled."""
        self._look()
        task_status.started()
        while True:
            if self._unsaved is not None:
                self._save_unsaved()
            if self._due_now():
                await self._refresh()
            wake_at = min(self._next_refresh(), self._wall() + self._poll_s)
            self._wake = trio.Event()
            with trio.move_on_after(max(0.0, wake_at - self._wall())):
                await self._wake.wait()
            self._look()

    # --- the file -------------------------------------------------------------------------

    def _look(self) -> None:
        """Read the file again if it changed (another inode, size or mtime) and adopt the
        login it holds now; sync (one ``stat``, and a small read when it changed)."""
        seen = fingerprint(self.path)
        if self._read and seen == self._seen:
            return
        self._read, self._seen = True, seen
        if self._unsaved is not None:
            return  # our newer pair is not on disk yet: the file is older than what we hold
        tokens = self.fmt.parse(read_json(self.path)) if seen is not None else None
        if tokens is None:
            if self._ended is None or self._tokens is not None:
                log.warning("the login file holds no %s login", self.fmt.cli,
                            extra={"login": self.name, "file": str(self.path)})
            self._tokens = None
            self._ended = (f"{self.path} holds no {self.fmt.cli} login: log in with "
                           f"`{self.fix}`")
            return
        old = self._tokens
        if old is not None and (old.access, old.refresh) == (tokens.access, tokens.refresh):
            self._tokens = tokens
            return
        recorded = self._ended_logins.why(self.path, seen) if self._ended_logins else None
        self._adopt(tokens)
        if recorded is not None:  # ended at an earlier start, and the file is unchanged
            self._ended = recorded
            log.warning("login expired (at an earlier start): %s", recorded,
                        extra={"login": self.name})
            return
        if self._ended_logins is not None:
            self._ended_logins.forget(self.path)
        if self._due_now():
            log.info("the login's token ends in %.0f s: refreshing it",
                     (tokens.expires_at or 0.0) - self._wall(), extra={"login": self.name})

    def _adopt(self, tokens: Tokens) -> None:
        """Take ``tokens`` as the login's (a new generation) and tell the subscribers when
        it replaces an earlier one."""
        self._tokens = tokens
        self._generation += 1
        self._ended = self._problem = None
        self._failures, self._retry_at = 0, -math.inf
        if self._generation > 1:
            for changed in self._subscribers:
                changed()
        self._wake.set()

    def _save_unsaved(self) -> None:
        assert self._unsaved is not None
        try:
            write_atomic(self.path, self._unsaved, indent=self.fmt.indent)
        except OSError as exc:
            self._problem = f"cannot write {self.path}: {exc.strerror}"
            return
        self._unsaved, self._problem = None, None
        self._seen = fingerprint(self.path)

    # --- refreshing -----------------------------------------------------------------------

    def _refreshable(self) -> bool:
        tokens = self._tokens
        return self._ended is None and tokens is not None and tokens.refresh is not None

    def _due(self) -> float:
        """When the login must be refreshed (wall clock; ``inf``: never)."""
        tokens = self._tokens
        if not self._refreshable() or tokens is None or tokens.expires_at is None:
            return math.inf
        return max(tokens.expires_at - self.ahead_s, self._last_refresh_at + MIN_GAP_S)

    def _next_refresh(self) -> float:
        due = self._due()
        return max(due, self._retry_at) if due != math.inf else math.inf

    def _due_now(self) -> bool:
        return self._wall() >= self._next_refresh()

    async def _refresh(self, *, force_from: int | None = None) -> None:
        """Refresh once if it is still wanted: due (or, with ``force_from``, the generation
        is still that one). One at a time; under the CLI's own lock, after re-reading the
        file. Blocks for the lock (at most ``lock_wait_s``) and the endpoint."""
        async with self._lock:
            self._look()
            if not self._wanted(force_from):
                return
            try:
                async with cli_lock(self.path.parent, self.fmt.lock,
                                    wait_s=self._lock_wait_s):
                    self._read = False  # read it again, under the lock
                    self._look()
                    if self._wanted(force_from):
                        await self._exchange()
            except LockBusy as exc:
                self._failed(str(exc))
            except OSError as exc:  # the lock's directory or file
                self._failed(f"cannot take {self.fmt.cli}'s lock: {exc.strerror}")
            except Exception as exc:  # a bug, or an answer the format cannot take: retried
                log.exception("login refresh failed", extra={"login": self.name})
                self._failed(f"{type(exc).__name__} while refreshing")

    def _wanted(self, force_from: int | None) -> bool:
        if not self._refreshable():
            return False
        if force_from is not None:
            return self._generation == force_from
        return self._due_now()

    async def _exchange(self) -> None:
        """Spend the refresh token at the token endpoint and keep what it answers."""
        tokens = self._tokens
        assert tokens is not None and tokens.refresh is not None
        before = self._seen
        try:
            status, answer = await self._post(self.fmt.token_url, self.fmt.refresh_body(tokens))
        except EndpointUnreachable as exc:
            self._failed(f"the token endpoint could not be reached ({exc})")
            return
        now = self._wall()
        self._last_refresh_at = now
        if status != 200 or not isinstance(answer, dict):
            why = self.fmt.refused_for_good(status, answer)
            if why is None:
                self._failed(f"the token endpoint answered HTTP {status}")
                return
            self._ended = f"{why}: log in again with `{self.fix}`"
            if self._ended_logins is not None:
                self._ended_logins.record(self.path, self._seen, self._ended)
            log.warning("login expired: %s; OLP no longer uses it and never writes its file",
                        why, extra={"login": self.name, "fix": self.fix})
            return
        try:
            data = self.fmt.refreshed(tokens, answer, now)
        except ValueError as exc:
            self._failed(str(exc))
            return
        new = self.fmt.parse(data)
        if new is None:
            self._failed("the token endpoint's answer holds no login")
            return
        if fingerprint(self.path) != before and self._newer_on_disk(new):
            return
        self._refreshes += 1
        try:
            write_atomic(self.path, data, indent=self.fmt.indent)
            self._seen = fingerprint(self.path)
        except OSError as exc:  # keep the new pair in memory: the old one is spent
            self._unsaved = data
            log.error("refreshed the login but could not write %s (%s): retrying",
                      self.path, exc.strerror, extra={"login": self.name})
        self._adopt(new)
        log.info("login refreshed; its token ends in %.0f s", (new.expires_at or now) - now,
                 extra={"login": self.name, "refreshes": self._refreshes})

    def _newer_on_disk(self, ours: Tokens) -> bool:
        """Whether a writer that ignored the lock left a login no older than ``ours`` (then
        it is adopted and ours dropped: never an older pair over a newer one)."""
        theirs = self.fmt.parse(read_json(self.path))
        if theirs is None or (theirs.expires_at or 0.0) < (ours.expires_at or 0.0):
            return False
        log.warning("the login file changed during the refresh; keeping the newer file",
                    extra={"login": self.name})
        self._read = False
        self._look()
        return True

    def _failed(self, problem: str) -> None:
        """A refresh that failed for now: retried after a back-off."""
        self._problem = problem
        self._failures += 1
        delay = min(RETRY_S * 2 ** (self._failures - 1), MAX_RETRY_S)
        self._retry_at = self._wall() + delay
        log.warning("login refresh failed (%s); retrying in %.0f s", problem, delay,
                    extra={"login": self.name})

    def _pass(self) -> LoginPass | Error:
        if self._ended is not None:
            return failure(Code.LOGIN_EXPIRED, f"{self.name}: login expired: {self._ended}")
        tokens = self._tokens
        assert tokens is not None
        left = math.inf if tokens.expires_at is None else tokens.expires_at - self._wall()
        if left < MIN_LEFT_S:
            if tokens.refresh is None:
                return failure(Code.LOGIN_EXPIRED, f"{self.name}: its token ended and it "
                                                   f"holds no refresh token: log in again with "
                                                   f"`{self.fix}`")
            return failure(Code.LOGIN_REFRESH_FAILED,
                           f"{self.name}: its token ended and could not be refreshed yet "
                           f"({self._problem or 'refresh pending'})")
        return LoginPass(self._generation, self.fmt.spawn_env(tokens),
                         self.fmt.spawn_files(tokens), tokens.expires_at)
