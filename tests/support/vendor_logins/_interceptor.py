"""A TLS-intercepting HTTPS proxy that plays the vendors' token endpoints (issue #41).

The real CLIs reach it through their own variables: ``HTTPS_PROXY`` (``CONNECT host:443``),
and the test CA through ``NODE_EXTRA_CA_CERTS`` (claude, gemini) or ``CODEX_CA_CERTIFICATE``
(codex); OLP's own refresher through ``HTTPS_PROXY`` and ``SSL_CERT_FILE``. Each tunnel is
answered ``200 Connection established``, then TLS is ended here with a certificate of the test
CA (:mod:`._ca`) and the requests inside are served with the same h11 core as the mocks:

* ``POST platform.claude.com/v1/oauth/token`` (JSON) → :attr:`Interceptor.claude`;
* ``POST auth.openai.com/oauth/token`` (JSON or a form) → :attr:`Interceptor.codex`;
* ``POST oauth2.googleapis.com/token`` (a form) → :attr:`Interceptor.google`, which also
  answers the other Google routes gemini calls, Code Assist included (:mod:`._google`);
* anything else on a known host → 404 (recorded: a CLI's side traffic).

Every tunnel and request is recorded (:attr:`Interceptor.connects`,
:attr:`Interceptor.requests`); tokens are fake, so nothing is redacted. Apart from gemini's,
the API stays on the loopback mocks (``tests/support/mock_*``), which take only the newest
access token when given a vendor's :meth:`~._tokens.Vendor.check_bearer` as their ``gate``.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import h11
import trio
from mockhttp import Exchange, read_request, serve_connection

from ._ca import HOSTS, TestCa, make_ca
from ._google import TOKEN_HOST, GoogleVendor
from ._tokens import Vendor

TOKEN_ROUTES = {("platform.claude.com", "/v1/oauth/token"): "claude",
                ("auth.openai.com", "/oauth/token"): "codex",
                (TOKEN_HOST, "/token"): "google"}


@dataclass(slots=True)
class Interceptor:
    """The running interceptor: where it listens, the CA to trust, the three vendors, and
    what it saw."""

    ca: TestCa
    claude: Vendor = field(default_factory=lambda: Vendor("claude"))
    codex: Vendor = field(default_factory=lambda: Vendor("codex"))
    google: GoogleVendor = field(default_factory=GoogleVendor)
    host: str = "127.0.0.1"
    port: int = 0
    connects: list[dict[str, Any]] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)

    @property
    def proxy_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def env_for(self, cli: str) -> dict[str, str]:
        """The variables that send ``cli``'s HTTPS through this proxy and make it trust the
        test CA (loopback stays direct: the API mocks are plain HTTP on 127.0.0.1)."""
        env = {"HTTPS_PROXY": self.proxy_url, "https_proxy": self.proxy_url,
               "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"}
        if cli in ("claude", "gemini"):
            env["NODE_EXTRA_CA_CERTS"] = str(self.ca.ca_file)
        elif cli == "codex":
            env["CODEX_CA_CERTIFICATE"] = str(self.ca.ca_file)
        else:  # OLP itself (httpx) and anything that reads the usual variable
            env["SSL_CERT_FILE"] = str(self.ca.ca_file)
        return env

    def token_requests(self, vendor: str) -> list[dict[str, Any]]:
        return [r for r in self.requests if r.get("token_endpoint") == vendor]

    async def _tunnel(self, stream: trio.SocketStream) -> None:
        conn = h11.Connection(h11.SERVER)
        try:
            got = await read_request(conn, stream)
        except (h11.RemoteProtocolError, trio.BrokenResourceError):
            return
        if got is None:
            return
        request, _ = got
        target = request.target.decode("latin-1")
        host = target.rpartition(":")[0] if request.method == b"CONNECT" else ""
        self.connects.append({"at": time.time(), "method": request.method.decode(),
                              "target": target})
        if request.method != b"CONNECT" or host not in HOSTS:
            await stream.send_all(b"HTTP/1.1 403 Forbidden\r\ncontent-length: 0\r\n"
                                  b"connection: close\r\n\r\n")
            return
        await stream.send_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
        tls = trio.SSLStream(stream, self.ca.server_context(), server_side=True)
        try:
            await tls.do_handshake()
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            return

        async def dispatch(ex: Exchange, inner: h11.Request, body: bytes) -> bool:
            return await self._answer(host, ex, inner, body)

        await serve_connection(tls, dispatch,  # type: ignore[arg-type]
                               lambda message: {"error": message})

    async def _answer(self, host: str, ex: Exchange, request: h11.Request,
                      body: bytes) -> bool:
        path = urlsplit(request.target.decode("latin-1")).path
        headers = {k.decode("latin-1").lower(): v.decode("latin-1")
                   for k, v in request.headers}
        parsed = _parse_body(headers.get("content-type", ""), body)
        record: dict[str, Any] = {"at": time.time(), "host": host,
                                  "method": request.method.decode(), "path": path,
                                  "headers": headers, "body": parsed}
        self.requests.append(record)
        vendor_name = TOKEN_ROUTES.get((host, path))
        stream = False
        if vendor_name is not None and request.method == b"POST":
            record["token_endpoint"] = vendor_name
            vendor: Vendor | GoogleVendor = getattr(self, vendor_name)
            status, payload = vendor.refresh(parsed if isinstance(parsed, dict) else {},
                                             headers)
        elif (google := self.google.route(host, record["method"], path, parsed,
                                          headers)) is not None:
            status, payload, stream = google
        else:
            status, payload = 404, {"error": {"message": f"the interceptor does not serve "
                                                         f"{host}{path}", "type": "not_found"}}
        record["status"] = status
        if stream:
            await _send_one_event(ex, payload)
        else:
            await ex.respond_json(status, payload)
        return True


async def _send_one_event(ex: Exchange, payload: Any) -> None:
    """A 200 event stream holding ``payload`` as its one event (Code Assist's ``alt=sse``)."""
    await ex.start_sse()
    await ex.send_sse(json.dumps(payload))
    await ex.send(h11.EndOfMessage())


def _parse_body(content_type: str, body: bytes) -> Any:
    if not body:
        return None
    if "x-www-form-urlencoded" in content_type:
        return dict(parse_qsl(body.decode("utf-8", "replace")))
    try:
        return json.loads(body)
    except ValueError:
        return body.decode("utf-8", "replace")


async def serve_interceptor(directory: Path, *,
                            task_status: trio.TaskStatus[Interceptor] = trio.TASK_STATUS_IGNORED
                            ) -> None:
    """Serve until cancelled; ``await nursery.start(serve_interceptor, tmp_path)`` returns the
    :class:`Interceptor` once bound (its CA written into ``directory``)."""
    ca = await trio.to_thread.run_sync(make_ca, directory)
    interceptor = Interceptor(ca)
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    interceptor.port = listeners[0].socket.getsockname()[1]

    async def handler(stream: trio.SocketStream) -> None:
        try:
            await interceptor._tunnel(stream)
        finally:
            with trio.CancelScope(shield=True):
                await stream.aclose()

    async with trio.open_nursery() as nursery:
        task_status.started(interceptor)
        await nursery.start(trio.serve_listeners, handler, listeners)
