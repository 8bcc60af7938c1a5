"""The ``Host`` rule against DNS rebinding, and the dashboard's same-origin wall.

A page on ``attacker.example`` whose name is re-pointed at 127.0.0.1 reaches the proxy from
a loopback address, so the peer address proves nothing; the ``Host`` header it sends still
names the attacker's host. So a request is served only if its ``Host`` is ``localhost``, an
IP address (a rebinding needs a name the attacker's DNS answers; an IP literal is no such
name, so a LAN client that uses the machine's address still works), or one of
``server.allowed_hosts`` (exact names, ``.example.lan`` for a domain and its subdomains,
``"*"`` to turn the rule off). See ``docs/adr/0022-host-rule-and-auth-back-off.md``.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from typing import Final
from urllib.parse import urlsplit

#: How many ``Host`` headers' verdicts are remembered at most.
REMEMBERED: Final = 64


class HostRule:
    """Which ``Host`` names the proxy answers to (the module docstring says why)."""

    def __init__(self, allowed: Iterable[str] = ()) -> None:
        names = {name.strip().lower().rstrip(".") for name in allowed if name.strip()}
        self.any = "*" in names
        self._exact = frozenset(n for n in names if not n.startswith("."))
        self._suffixes = tuple(n for n in names if n.startswith("."))
        self._seen: dict[str, bool] = {}  # the last few headers' verdicts

    def allows(self, host_header: str | None) -> bool:
        """Whether a request with this ``Host`` header (``None``: none sent) is served. A
        request without one is no browser's, so no rebinding. The verdicts of the last
        :data:`REMEMBERED` headers are kept (a client sends the same one every time)."""
        if self.any or host_header is None:
            return True
        verdict = self._seen.get(host_header)
        if verdict is None:
            if len(self._seen) >= REMEMBERED:
                self._seen.clear()
            verdict = self._seen[host_header] = self._allows(host_header)
        return verdict

    def _allows(self, host_header: str) -> bool:
        name = host_name(host_header)
        if name is None:
            return False
        if name == "localhost" or _is_ip(name) or name in self._exact:
            return True
        return any(name.endswith(s) or name == s[1:] for s in self._suffixes)


def host_name(header: str) -> str | None:
    """The name in a ``Host`` header, lowercased, without port, brackets or final dot
    (``None`` if it cannot be one)."""
    value = header.strip().lower()
    if value.startswith("["):  # [v6]:port
        end, rest = value.find("]"), value[value.find("]") + 1:]
        if end < 0 or (rest and not (rest.startswith(":") and rest[1:].isdigit())):
            return None
        return value[1:end]
    name, sep, port = value.rpartition(":") if value.count(":") == 1 else (value, "", "")
    if sep and not port.isdigit():
        return None
    name = name.rstrip(".")
    return name or None


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def cross_site(origin: str | None, fetch_site: str | None, host_header: str | None) -> bool:
    """Whether a state-changing dashboard request comes from another site. A browser that
    sends ``Sec-Fetch-Site`` (every current one) is believed: only ``same-origin`` and
    ``none`` (typed or bookmarked) pass. Otherwise its ``Origin`` must name this ``Host``
    (``Origin: null`` does not). A request with neither header is no browser's cross-site
    form, and the CSRF token still guards the actions."""
    if fetch_site is not None:
        return fetch_site.strip().lower() not in ("same-origin", "none")
    if origin is None:
        return False
    parts = urlsplit(origin.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        return True  # "null", a file: page, garbage
    return parts.netloc.lower() != (host_header or "").strip().lower()
