"""The owner's dashboard at ``GET /dashboard``: a login page (one password field: the owner
key; guest keys are refused), then a session cookie (``HttpOnly``, ``SameSite=Strict``,
12 h) — the key never in a URL. The page (:mod:`._dashboard_page`, no asset from anywhere
else) polls ``GET /dashboard/api/state`` and posts actions to ``/dashboard/api/action`` with
the session's CSRF token in ``X-CSRF-Token``.

``server.dashboard``: ``"loopback"`` (default: only clients on this machine), ``"on"`` (any
address the proxy listens on), ``"off"``. Sessions live in memory (a restart logs out), and
a session lives only as long as the key that opened it: every session request checks that
key again (the key store reads its keys again every 2 s), so revoking or rotating it logs
it out.
State-changing requests from another site are refused (``Origin``/``Sec-Fetch-Site``,
:func:`._host_check.cross_site`) besides needing the CSRF token.
"""

from __future__ import annotations

import hmac
import json
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import msgspec
from quart import Response, g, request
from quart_trio import QuartTrio

from ._dashboard_page import LOGIN_PAGE, PAGE
from ._errors import ApiError

COOKIE = "olp_session"
SESSION_S = 12 * 3600.0
MAX_SESSIONS = 64


@dataclass(slots=True)
class Session:
    principal: Any
    csrf: str
    expires: float
    key: str = field(default="", repr=False)  # the key that logged in: checked per request


@dataclass(slots=True)
class Sessions:
    """Logged-in dashboard sessions, by their random cookie value (in memory)."""

    ttl_s: float = SESSION_S
    clock: Callable[[], float] = time.time
    _by_token: dict[str, Session] = field(default_factory=dict)

    def create(self, principal: Any, key: str = "") -> tuple[str, Session]:
        now = self.clock()
        self._by_token = {t: s for t, s in self._by_token.items() if s.expires > now}
        while len(self._by_token) >= MAX_SESSIONS:  # the oldest goes
            del self._by_token[min(self._by_token, key=lambda t: self._by_token[t].expires)]
        token = secrets.token_urlsafe(32)
        session = Session(principal, secrets.token_urlsafe(24), now + self.ttl_s, key)
        self._by_token[token] = session
        return token, session

    def get(self, token: str | None) -> Session | None:
        if not token:
            return None
        session = self._by_token.get(token)
        if session is None or session.expires <= self.clock():
            self._by_token.pop(token, None)
            return None
        return session

    def end(self, token: str | None) -> None:
        if token:
            self._by_token.pop(token, None)


State = Callable[[], Awaitable[dict[str, Any]]]
Action = Callable[[str, dict[str, Any]], Awaitable[dict[str, Any]]]


def is_dashboard_path(path: str) -> bool:
    return path == "/dashboard" or path.startswith("/dashboard/")


async def session_principal(sessions: Sessions,
                            authenticate: Callable[[str], Awaitable[Any]]) -> Any | None:
    """The owner principal of this request's session cookie, or ``None``: also when the key
    that opened the session is no longer an active owner key (revoked, rotated, demoted),
    which ends the session. Waits on the key store (at most its memo's age stale)."""
    token = request.cookies.get(COOKIE)
    session = sessions.get(token)
    if session is None:
        return None
    principal = await authenticate(session.key) if session.key else None
    if principal is None or principal.tier != "owner" \
            or principal.key_id != session.principal.key_id:
        sessions.end(token)
        return None
    session.principal = principal
    g.dashboard_session = session
    return principal


def add_routes(app: QuartTrio, sessions: Sessions, *, authenticate: Callable[[str], Awaitable[Any]],
               state: State, action: Action) -> None:
    """Register the dashboard on ``app``. ``authenticate`` is the key store's lookup."""

    @app.get("/dashboard")
    async def dashboard() -> Response:
        if g.get("dashboard_session") is None:
            return _html(LOGIN_PAGE.replace("{{error}}", ""))
        return _html(PAGE.replace("{{csrf}}", g.dashboard_session.csrf))

    @app.post("/dashboard/login")
    async def login() -> Response:
        form = await request.form
        g.body_read = True
        key = (form.get("key") or "").strip()
        try:
            principal = await authenticate(key) if key else None
        except ApiError as exc:  # too many wrong keys from this address
            if exc.status != 429:
                raise
            page = _html(LOGIN_PAGE.replace("{{error}}", exc.message), 429)
            page.headers.update(exc.headers)
            return page
        if principal is None:
            return _html(LOGIN_PAGE.replace("{{error}}", "That key is not valid."), 401)
        if principal.tier != "owner":
            return _html(LOGIN_PAGE.replace(
                "{{error}}", "This is a guest key: the dashboard is for the owner's key."), 403)
        token, _ = sessions.create(principal, key)
        response = Response("", status=303, headers={"Location": "/dashboard"})
        response.set_cookie(COOKIE, token, max_age=int(sessions.ttl_s), httponly=True,
                            samesite="Strict", path="/dashboard",
                            secure=request.scheme == "https")
        return response

    @app.post("/dashboard/logout")
    async def logout() -> Response:
        _check_csrf()
        sessions.end(request.cookies.get(COOKIE))
        response = Response("", status=303, headers={"Location": "/dashboard"})
        response.delete_cookie(COOKIE, path="/dashboard")
        return response

    @app.get("/dashboard/api/state")
    async def api_state() -> Response:
        _need_session()
        return _json(await state())

    @app.post("/dashboard/api/action")
    async def api_action() -> Response:
        _need_session()
        _check_csrf()
        body = _json_object(await request.get_data(cache=False))
        g.body_read = True
        if not isinstance(body, dict) or not isinstance(body.get("action"), str):
            raise ApiError(400, "Send {\"action\": ..., ...}.", "invalid_request_error",
                           "invalid_action")
        return _json(await action(body["action"], body))


def _json_object(data: str | bytes) -> dict[str, Any] | None:
    """A JSON object, or ``None`` (not JSON, not an object, or nested too deep to parse)."""
    try:
        return msgspec.json.decode(data, type=dict[str, Any])
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        return None


def _need_session() -> None:
    if g.get("dashboard_session") is None:
        raise ApiError(401, "Log in at /dashboard first.", "invalid_request_error",
                       "no_session")


def _check_csrf() -> None:
    session = g.get("dashboard_session")
    sent = request.headers.get("X-CSRF-Token", "")
    if session is None or not hmac.compare_digest(sent, session.csrf):
        raise ApiError(403, "Missing or wrong CSRF token.", "permission_error", "csrf")


def _html(text: str, status: int = 200) -> Response:
    return Response(text, status=status, content_type="text/html; charset=utf-8", headers={
        "Cache-Control": "no-store", "X-Frame-Options": "DENY",
        "Content-Security-Policy": "default-src 'self'; script-src 'unsafe-inline'; "
                                   "style-src 'unsafe-inline'; img-src 'self' data:; "
                                   "frame-ancestors 'none'; form-action 'self'",
        "Referrer-Policy": "same-origin"})  # no-referrer would make its own posts "Origin: null"


def _json(body: Any) -> Response:
    return Response(json.dumps(body), status=200, content_type="application/json",
                    headers={"Cache-Control": "no-store"})
