"""The lockdown self-check's vendor mock: a loopback stand-in for one vendor's API.

``mock = await nursery.start(functools.partial(serve_vendor_mock, "anthropic"))`` binds
``127.0.0.1:0`` and serves until cancelled. A vendor CLI pointed at ``mock.base_url`` gets a
short answer (``answer``) in the wire format the test suite's mocks use, so the real CLI
accepts it, and every request it sends is kept in ``mock.requests`` (method, target, Host and
the parsed JSON body, nothing else: no header that may carry a secret) before it is answered.

A proxy-style request, meant for another host (``CONNECT``, or an absolute-form target such as
``GET http://example.com/x`` that does not name the mock itself), is recorded as ``foreign``,
answered ``403`` with an empty body and its connection closed: never forwarded. Nothing is
logged.
"""

from __future__ import annotations

import gzip
import json
import zlib
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import h11
import trio

from ._loopback import Exchange, serve_http
from ._vendor_answers import SPECS, Call, Dialect

__all__ = ["Dialect", "Recorded", "VendorMock", "serve_vendor_mock"]

_HOST = "127.0.0.1"


@dataclass(frozen=True, slots=True)
class Recorded:
    """One request as it arrived: ``target`` as sent (origin-form path and query,
    absolute-form URL or CONNECT authority), ``host`` the Host header ("" if none), ``body``
    the parsed JSON body (None: empty or not JSON), ``foreign`` True for a request meant for
    another host (CONNECT, or an absolute-form target naming another host)."""

    method: str
    target: str
    host: str
    body: Any
    foreign: bool


class VendorMock:
    """The handle :func:`serve_vendor_mock` starts with: where it listens and what it got."""

    def __init__(self, dialect: Dialect) -> None:
        self.dialect: Dialect = dialect
        self.host = _HOST
        self.port = 0
        self.requests: list[Recorded] = []

    @property
    def base_url(self) -> str:
        """The value of the CLI's base-URL setting: ``http://127.0.0.1:PORT`` for anthropic
        (``ANTHROPIC_BASE_URL``) and gemini (``GOOGLE_GEMINI_BASE_URL``); that plus ``/v1`` for
        openai-responses (codex's provider ``base_url``), openai-chat (qwen's
        ``OPENAI_BASE_URL``) and mistral (vibe's ``api_base``)."""
        return f"http://{self.host}:{self.port}{SPECS[self.dialect].base_path}"

    def model_requests(self) -> list[Recorded]:
        """The requests (not foreign) to the dialect's generation route."""
        spec = SPECS[self.dialect]
        return [r for r in self.requests
                if not r.foreign and spec.is_generation(r.method, _path(r.target))]

    def _own(self, target: str) -> bool:
        """Whether an absolute-form ``target`` names this mock (``127.0.0.1:PORT`` or
        ``localhost:PORT``)."""
        try:
            parts = urlsplit(target)
            port = parts.port
        except ValueError:
            return False
        own = parts.scheme in ("http", "https") and port == self.port
        return own and parts.hostname in (_HOST, "localhost")

    def _foreign(self, method: str, target: str) -> bool:
        if method == "CONNECT":
            return True
        if target.startswith("/") or target == "*":
            return False
        return not self._own(target)


def _path(target: str) -> str:
    """The path of a request target (origin-form or absolute-form), without the query."""
    if target.startswith("/"):
        return target.split("?", 1)[0].split("#", 1)[0]
    try:
        return urlsplit(target).path or "/"
    except ValueError:
        return ""


def _parse_body(body: bytes, encoding: str) -> Any:
    """The JSON body (gzip/deflate undone), or None when empty or not JSON."""
    if not body:
        return None
    try:
        encoding = encoding.strip().lower()
        if encoding == "gzip":
            body = gzip.decompress(body)
        elif encoding == "deflate":
            body = zlib.decompress(body)
        elif encoding not in ("", "identity"):
            return None
        return json.loads(body)
    except (ValueError, OSError, EOFError, zlib.error):
        return None


def _header(request: h11.Request, name: bytes) -> str:
    for key, value in request.headers:
        if key == name:
            return bytes(value).decode("latin-1")
    return ""


async def _refuse(ex: Exchange) -> bool:
    """403, an empty body, and the connection closed."""
    await ex.send(h11.Response(status_code=403, reason=b"Forbidden", headers=[
        ("content-length", "0"), ("connection", "close")]))
    await ex.send(h11.EndOfMessage())
    return False


async def serve_vendor_mock(dialect: Dialect, *, answer: str = "OK",
                            task_status: trio.TaskStatus[VendorMock] = trio.TASK_STATUS_IGNORED
                            ) -> None:
    """Bind 127.0.0.1:0, ``task_status.started(mock)``, serve until cancelled: the dialect's
    generation route answers ``answer``, every request is recorded before it is answered."""
    if dialect not in SPECS:
        raise ValueError(f"unknown dialect {dialect!r}; known: {sorted(SPECS)}")
    spec = SPECS[dialect]
    mock = VendorMock(dialect)

    async def dispatch(ex: Exchange, request: h11.Request, body: bytes) -> bool:
        method = request.method.decode("latin-1")
        target = request.target.decode("latin-1")
        foreign = mock._foreign(method, target)
        mock.requests.append(Recorded(
            method=method, target=target, host=_header(request, b"host"),
            body=_parse_body(body, _header(request, b"content-encoding")),
            foreign=foreign))
        if foreign:
            return await _refuse(ex)
        call = Call(method, _path(target), mock.requests[-1].body, answer, len(mock.requests))
        await spec.answer(ex, call)
        return ex.complete

    await serve_http(mock, dispatch, host=_HOST, port=0, bad_request=spec.bad_request,
                     task_status=task_status)
