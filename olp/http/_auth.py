"""Who is calling: the ``before_request`` hook that names every request's principal (an OLP
key in ``Authorization: Bearer`` or ``x-api-key``; a dashboard session; the opt-in anonymous
guest; the loopback metrics scraper) and :func:`owner_only` for the owner's endpoints.

Before anything else it applies the ``Host`` rule (:mod:`._host_check`); wrong keys are
counted per source address and backed off (:mod:`._auth_throttle`)."""

from __future__ import annotations

import dataclasses

import trio
from quart import g, request
from quart_trio import QuartTrio

from . import _dashboard
from ._auth_throttle import AuthThrottle
from ._errors import ApiError
from ._host_check import HostRule, cross_site
from ._services import Principal, Services
from ._trace import Trace


@dataclasses.dataclass(frozen=True, slots=True)
class _Anonymous:
    key_id: str = "anonymous"  # its own cache namespace
    name: str = "anonymous"
    tier: str = "guest"


ANONYMOUS = _Anonymous()
#: Who scrapes ``/metrics`` without a key from a loopback address (``server.metrics``
#: ``"loopback"``); it can read nothing else.
METRICS_SCRAPER = _Anonymous(key_id="metrics", name="metrics")
#: A dashboard visitor not logged in: it can reach the login page only.
VISITOR = _Anonymous(key_id="visitor", name="visitor")


class Gate:
    """Key checks with the per-source back-off: what the hook and the dashboard's login use."""

    def __init__(self, services: Services, throttle: AuthThrottle | None = None) -> None:
        self._services = services
        self.throttle = throttle or AuthThrottle()

    async def authenticate(self, token: str) -> Principal | None:
        """The key's principal, whatever the back-off (a correct key is always served), or
        ``None`` for a wrong key, counted against the client's address. Raises
        :class:`ApiError` 429 with ``Retry-After`` for a wrong key while that address is
        backed off. Waits on the key store (in memory, but for its periodic read)."""
        principal = await self._services.keys.authenticate(token)
        if principal is not None:
            return principal
        source = request.remote_addr or "-"
        wait = self.throttle.retry_after(source)
        if wait is not None:
            raise ApiError(429, f"Too many wrong keys from this address: try again in {wait} s.",
                           "rate_limit_error", "too_many_failed_logins",
                           headers={"Retry-After": str(wait)})
        self.throttle.failed(source)
        return None


def add_auth(app: QuartTrio, services: Services, sessions: _dashboard.Sessions,
             gate: Gate) -> None:
    """Register the hook that starts each request's :class:`Trace` and sets ``g.principal``,
    or refuses the request (403 for a ``Host`` not allowed; 401 for a missing or wrong key;
    429 while the source is backed off; 403/404 for a dashboard path the
    ``server.dashboard`` setting closes, 403 for a cross-site dashboard ``POST``)."""
    hosts = HostRule(services.allowed_hosts)

    @app.before_request
    async def _authenticate() -> None:
        g.t0 = trio.current_time()
        rule = request.url_rule.rule if request.url_rule is not None else request.path
        g.trace = Trace(f"{request.method} {rule}", t0=g.t0)
        if not hosts.allows(request.headers.get("Host")):
            raise ApiError(403, "This proxy does not answer to that Host name (add it to "
                                "server.allowed_hosts to allow it).", "permission_error",
                           "host_not_allowed")
        if _dashboard.is_dashboard_path(request.path):
            if services.dashboard == "off":
                raise ApiError(404, "The dashboard is off here (server.dashboard).",
                               "invalid_request_error", "not_found")
            if services.dashboard == "loopback" and not from_loopback():
                raise ApiError(403, "The dashboard answers only on this machine (set "
                               "server.dashboard to \"on\" to open it).", "permission_error",
                               "dashboard_loopback_only")
            if request.method == "POST" and cross_site(
                    request.headers.get("Origin"), request.headers.get("Sec-Fetch-Site"),
                    request.headers.get("Host")):
                raise ApiError(403, "The dashboard takes no request from another site.",
                               "permission_error", "cross_origin")
            principal = await _dashboard.session_principal(sessions, services.keys.authenticate)
            g.principal = principal or VISITOR
            if principal is not None:
                g.trace.key, g.trace.key_name = str(principal.key_id), principal.name
            return
        token = token_from_headers()
        if request.path == "/metrics" and services.metrics_access == "loopback" \
                and token is None and from_loopback():
            g.principal = METRICS_SCRAPER  # server.metrics "loopback": no key from here
            return
        principal = await gate.authenticate(token) if token else None
        if token is None and services.allow_anonymous and not _other_credentials():
            principal = ANONYMOUS  # opt-in (auth.allow_anonymous); a wrong key is still a 401
        if principal is None:
            raise ApiError(401, "Invalid or missing OLP API key: send `Authorization: Bearer "
                                "<key>` or `x-api-key: <key>`.", "invalid_request_error",
                           "invalid_api_key")
        g.principal = principal
        g.trace.key, g.trace.key_name = str(principal.key_id), principal.name


def owner_only() -> None:
    """Refuse (403) a request whose key is not the owner's."""
    if g.principal.tier != "owner":
        raise ApiError(403, "This endpoint is for the owner's key only.",
                       "permission_error", "owner_only")


def token_from_headers() -> str | None:
    auth = request.headers.get("Authorization", "")
    scheme, _, value = auth.partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return value.strip()
    key = request.headers.get("x-api-key", "").strip()
    return key or None


def _other_credentials() -> bool:
    """Whether the request carries credentials OLP does not take (``Authorization: Basic``,
    an empty ``Bearer``): a 401, never the anonymous guest."""
    return bool(request.headers.get("Authorization", "").strip()
                or "x-api-key" in request.headers)


def from_loopback() -> bool:
    """Whether the client's address is a loopback one (IPv4 127/8 or ``::1``)."""
    addr = request.remote_addr or ""
    return addr.startswith("127.") or addr in ("::1", "::ffff:127.0.0.1")
