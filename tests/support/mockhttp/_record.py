"""Request recording, scenario switching and waiting: the base of every mock's handle."""

from __future__ import annotations

import gzip
import hashlib
import json
import zlib
from collections.abc import Callable
from typing import Any, ClassVar, Generic, Protocol, TypeVar
from urllib.parse import urlsplit

import h11
import trio


class ScenarioLike(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def times(self) -> int | None: ...

    @classmethod
    def build(cls, name: str, **options: Any) -> Any: ...


S = TypeVar("S", bound=ScenarioLike)


class RequestLog(Generic[S]):
    """The base of a mock's handle: where it is bound, the current scenario, and the recorded
    requests (secrets redacted). Waits block until a request is recorded or finished (they
    never time out: bound them with ``trio.fail_after``)."""

    SECRET_HEADERS: ClassVar[frozenset[str]] = frozenset(
        {"authorization", "proxy-authorization", "cookie"})
    CREDENTIAL_HEADERS: ClassVar[frozenset[str]] = frozenset({"authorization"})
    PARSE_EMPTY_BODY: ClassVar[bool] = True  # False: an empty body is recorded as no body

    def __init__(self, scenario: S) -> None:
        self.host = ""
        self.port = 0
        self.requests: list[dict[str, Any]] = []
        # Checks each request's credential before the scenario answers it: ``None`` lets it
        # through, ``(status, payload)`` refuses it (a vendor's API that takes only its newest
        # access token: ``vendor_logins.Vendor.check_bearer``).
        self.gate: Callable[[h11.Request], tuple[int, Any] | None] | None = None
        self._scenario = scenario
        self._remaining = scenario.times
        self._t0 = trio.current_time()
        self._changed = trio.Event()

    def _url(self, path: str = "") -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}{path}"

    @property
    def scenario(self) -> S:
        return self._scenario

    @property
    def request_count(self) -> int:
        return len(self.requests)

    def set_scenario(self, name: str, **options: Any) -> S:
        """Switch what later requests get (a request in flight keeps its scenario)."""
        self._scenario = type(self._scenario).build(name, **options)
        self._remaining = self._scenario.times
        return self._scenario

    def clear_requests(self) -> None:
        self.requests.clear()

    async def wait_for_requests(self, n: int, *, route: str | None = None) -> None:
        """Wait until at least ``n`` requests (to ``route``, if given) have been recorded."""
        while len([r for r in self.requests if route is None or r["route"] == route]) < n:
            await self._wait_changed()

    async def wait_for_outcome(self, n: int, *outcomes: str) -> dict[str, Any]:
        """Wait until request number ``n`` (1-based) has one of ``outcomes`` (default: not
        "pending"); returns its record. Outcomes: completed, client_disconnected (the client
        went away before the whole response was sent), dropped, and the mock's own faults."""
        while True:
            if len(self.requests) >= n:
                record = self.requests[n - 1]
                if record["outcome"] in outcomes if outcomes else record["outcome"] != "pending":
                    return record
            await self._wait_changed()

    async def _wait_changed(self) -> None:
        await self._changed.wait()

    def _notify(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    def _take_scenario(self) -> S:
        """The scenario for the next request; counts down ``times``, then back to success."""
        scenario = self._scenario
        if self._remaining is not None:
            self._remaining -= 1
            if self._remaining <= 0:
                self._scenario, self._remaining = type(scenario)(), None
        return scenario

    def _record(self, request: h11.Request, body: bytes) -> dict[str, Any]:
        """Record a request (outcome "pending"); the credential is kept only as a SHA-256."""
        headers: dict[str, str] = {}
        credential: str | None = None
        for raw_name, raw_value in request.headers:
            name = raw_name.decode("latin-1").lower()
            value = raw_value.decode("latin-1")
            if name in self.CREDENTIAL_HEADERS and credential is None:
                credential = value.removeprefix("Bearer ").removeprefix("bearer ")
            if name in self.SECRET_HEADERS:
                value = f"<redacted len={len(value)}>"
            headers[name] = f"{headers[name]}, {value}" if name in headers else value
        target = request.target.decode("latin-1")
        record: dict[str, Any] = {
            "n": len(self.requests) + 1,
            "t_rel_s": round(trio.current_time() - self._t0, 3),
            "method": request.method.decode("latin-1"),
            "path": target,
            "route": urlsplit(target).path,
            "headers": headers,
            "credential_sha256": (hashlib.sha256(credential.encode()).hexdigest()
                                  if credential is not None else None),
            "body": None,
            "body_error": None,
            "scenario": None,
            "status": None,
            "outcome": "pending",
        }
        if body or self.PARSE_EMPTY_BODY:
            try:
                record["body"] = json.loads(
                    _decode_body(headers.get("content-encoding", ""), body))
            except (ValueError, OSError, zlib.error) as exc:
                record["body_error"] = f"{type(exc).__name__}: {exc}"[:300]
                record["body_raw_head"] = body[:300].decode("utf-8", "replace")
        self.requests.append(record)
        self._notify()
        return record

    def _finish(self, record: dict[str, Any], outcome: str) -> None:
        record["outcome"] = outcome
        record["t_end_s"] = round(trio.current_time() - self._t0, 3)
        self._notify()


def _decode_body(encoding: str, body: bytes) -> bytes:
    encoding = encoding.strip().lower()
    if encoding in ("", "identity"):
        return body
    if encoding == "gzip":
        return gzip.decompress(body)
    if encoding == "deflate":
        return zlib.decompress(body)
    raise ValueError(f"unsupported content-encoding {encoding!r}")
