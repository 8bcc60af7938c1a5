"""A loopback mock of the Mistral chat-completions API, served with h11 on trio.

Faithful to what the real ``vibe`` CLI (mistral-vibe 3.0.2) needs (see
``cli-reference/vibe/README.md``, "Upstream requests"):

* ``GET /v1/connectors/bootstrap?...`` once before the first completion: answered 404, as in the
  captures (the CLI carries on without connectors).
* ``POST /v1/chat/completions`` with ``"stream": true``: SSE ``data: <chat.completion.chunk>``
  lines (no ``event:`` lines) - a first chunk ``delta {role: "assistant", content: ""}``, one
  chunk per text delta, a last chunk with ``finish_reason: "stop"`` **and** top-level ``usage``,
  then ``data: [DONE]``. Without ``stream`` a plain ``chat.completion`` object.
* Errors: the status plus Mistral's body ``{"object": "error", "message", "type", "param",
  "code"}`` (the CLI echoes the body verbatim into its ``Error: ...`` line).

A small control API under ``/_mock/`` lets an out-of-process test change the scenario and read
the recorded requests. h11 rather than a framework so every fault is exact: ``hang`` never sends
a status line, ``drop`` closes the socket without a response, and a client that goes away is seen
at once (a watcher reads the socket while a response is in flight).
"""

from __future__ import annotations

import dataclasses
import functools
import gzip
import hashlib
import http
import itertools
import json
import math
import time
import zlib
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import urlsplit

import h11
import trio

__all__ = ["DEFAULT_DELTAS", "INPUT_TOKENS", "OUTPUT_TOKENS", "SCENARIOS", "MockMistral",
           "Scenario", "serve_mock"]

DEFAULT_DELTAS: tuple[str, ...] = ("Hello", " from", " the mock", " upstream.")
INPUT_TOKENS = 25
OUTPUT_TOKENS = 7

SCENARIOS: frozenset[str] = frozenset({
    "success",  # the 4 deltas above, `delay` seconds apart
    "rate_limit",  # 429 rate_limited (+ `retry-after` if `retry_after` is set)
    "auth",  # 401 Unauthorized
    "server_error",  # 500 internal_server_error
    "overloaded",  # 503 service_unavailable
    "error",  # any status: `status`, `error_type`, `message`
    "slow",  # " chunk0", " chunk1", ... one every `interval` s; `count` chunks or forever
    "stall",  # one delta, then silence with the connection open
    "hang",  # read the request, never send a status line
    "drop",  # read the request, close the connection without a response
})

# scenario -> (status, Mistral error type, message, Mistral numeric code)
_ERRORS: dict[str, tuple[int, str, str, str]] = {
    "rate_limit": (429, "rate_limited", "Requests rate limit exceeded", "1300"),
    "auth": (401, "invalid_api_key", "Unauthorized", "1000"),
    "server_error": (500, "internal_server_error", "Internal server error", "3000"),
    "overloaded": (503, "service_unavailable", "Service unavailable", "3505"),
}
CHAT_ROUTE = "/v1/chat/completions"
BOOTSTRAP_ROUTE = "/v1/connectors/bootstrap"

_SECRET_HEADERS = frozenset({"authorization", "x-api-key", "proxy-authorization", "cookie"})
_MAX_BODY = 64 * 1024 * 1024
_RECV = 65536


@dataclasses.dataclass(frozen=True)
class Scenario:
    """What the mock answers to ``POST /v1/chat/completions``; unused options are ignored."""

    name: str = "success"
    deltas: tuple[str, ...] = DEFAULT_DELTAS  # success/stall: the text deltas
    delay: float = 0.05  # success/stall: seconds before each delta
    retry_after: float | None = None  # error scenarios: `retry-after` header
    interval: float = 2.0  # slow: seconds before each chunk
    count: int | None = None  # slow: number of chunks, None = forever
    status: int = 400  # error: HTTP status
    error_type: str = "invalid_request_error"  # error: Mistral error type
    message: str = "mock error"  # error: message (also overrides the built-in errors' text)
    times: int | None = None  # serve this scenario to the next N requests, then "success"

    def __post_init__(self) -> None:
        if self.name not in SCENARIOS:
            raise ValueError(f"unknown scenario {self.name!r}; known: {sorted(SCENARIOS)}")
        if isinstance(self.deltas, str) or not all(isinstance(d, str) for d in self.deltas):
            raise ValueError("deltas must be a list of strings")
        object.__setattr__(self, "deltas", tuple(self.deltas))
        for name in ("delay", "interval"):
            value = getattr(self, name)
            if not isinstance(value, int | float) or value < 0 or not math.isfinite(value):
                raise ValueError(f"{name} must be a finite number >= 0")
        if self.retry_after is not None and (
                not isinstance(self.retry_after, int | float) or self.retry_after < 0):
            raise ValueError("retry_after must be a number >= 0 or null")
        if self.count is not None and (not isinstance(self.count, int) or self.count < 0):
            raise ValueError("count must be an integer >= 0 or null")
        if self.times is not None and (not isinstance(self.times, int) or self.times < 1):
            raise ValueError("times must be an integer >= 1 or null")
        if not isinstance(self.status, int) or not 100 <= self.status <= 599:
            raise ValueError("status must be an HTTP status code")

    @classmethod
    def build(cls, name: str, **options: Any) -> Scenario:
        known = {f.name for f in dataclasses.fields(cls)} - {"name"}
        unknown = set(options) - known
        if unknown:
            raise ValueError(
                f"unknown scenario option(s) {sorted(unknown)}; known: {sorted(known)}")
        if "message" not in options and name in _ERRORS:
            options["message"] = _ERRORS[name][2]
        return cls(name=name, **options)

    def as_json(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["deltas"] = list(self.deltas)
        return data


class MockMistral:
    """The handle ``serve_mock`` hands to ``task_status.started``."""

    def __init__(self, scenario: Scenario) -> None:
        self.host = ""
        self.port = 0
        self.requests: list[dict[str, Any]] = []  # recorded /v1 requests, secrets redacted
        self._scenario = scenario
        self._remaining = scenario.times
        self._t0 = trio.current_time()
        self._changed = trio.Event()

    # -- public API -------------------------------------------------------------------------
    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT`` (no ``/v1``)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    @property
    def api_base(self) -> str:
        """What to put in vibe's ``[[providers]] api_base`` (``base_url`` + ``/v1``)."""
        return f"{self.base_url}/v1"

    @property
    def scenario(self) -> Scenario:
        return self._scenario

    @property
    def request_count(self) -> int:
        return len(self.requests)

    def chat_requests(self) -> list[dict[str, Any]]:
        """The recorded ``POST /v1/chat/completions`` requests (not the bootstrap GET)."""
        return [r for r in self.requests if r["route"] == CHAT_ROUTE]

    def set_scenario(self, name: str, **options: Any) -> Scenario:
        """Switch what later chat requests get (a request in flight keeps its scenario)."""
        self._scenario = Scenario.build(name, **options)
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
        "pending"); returns its record. Outcomes: completed, client_disconnected, dropped."""
        while True:
            if len(self.requests) >= n:
                record = self.requests[n - 1]
                done = (record["outcome"] in outcomes if outcomes
                        else record["outcome"] != "pending")
                if done:
                    return record
            await self._wait_changed()

    # -- internals --------------------------------------------------------------------------
    async def _wait_changed(self) -> None:
        await self._changed.wait()

    def _notify(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    def _take_scenario(self) -> Scenario:
        scenario = self._scenario
        if self._remaining is not None:
            self._remaining -= 1
            if self._remaining <= 0:
                self._scenario = Scenario()
                self._remaining = None
        return scenario

    def _record(self, request: h11.Request, body: bytes) -> dict[str, Any]:
        headers: dict[str, str] = {}
        credential: str | None = None
        for raw_name, raw_value in request.headers:
            name = raw_name.decode("latin-1").lower()
            value = raw_value.decode("latin-1")
            if name in ("authorization", "x-api-key") and credential is None:
                credential = value.removeprefix("Bearer ").removeprefix("bearer ")
            if name in _SECRET_HEADERS:
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
        if body:
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


class _ClientGone(Exception):
    """The peer closed or reset the connection."""


class _Exchange:
    """One HTTP request/response on an h11 connection."""

    def __init__(self, conn: h11.Connection, stream: trio.abc.Stream) -> None:
        self.conn = conn
        self.stream = stream
        self.complete = False

    async def send(self, event: h11.Event) -> None:
        data = self.conn.send(event)
        if data:
            try:
                await self.stream.send_all(data)
            except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
                raise _ClientGone from exc
        if isinstance(event, h11.EndOfMessage):
            self.complete = True

    async def respond_json(self, status: int, payload: Any,
                           extra: list[tuple[str, str]] | None = None) -> None:
        body = json.dumps(payload).encode()
        headers = [("content-type", "application/json"), ("content-length", str(len(body))),
                   *(extra or [])]
        await self.send(h11.Response(status_code=status, headers=headers, reason=_reason(status)))
        await self.send(h11.Data(data=body))
        await self.send(h11.EndOfMessage())


def _error_payload(error_type: str, message: str, code: str | None) -> dict[str, Any]:
    """Mistral's error body, as the real API (and the cli-reference captures) have it."""
    return {"object": "error", "message": message, "type": error_type, "param": None,
            "code": code}


def _sse(payload: dict[str, Any] | str) -> h11.Data:
    data = payload if isinstance(payload, str) else json.dumps(payload)
    return h11.Data(data=f"data: {data}\n\n".encode())


def _usage() -> dict[str, int]:
    return {"prompt_tokens": INPUT_TOKENS, "completion_tokens": OUTPUT_TOKENS,
            "total_tokens": INPUT_TOKENS + OUTPUT_TOKENS}


class _Server:
    def __init__(self, handle: MockMistral) -> None:
        self.handle = handle

    async def handle_connection(self, stream: trio.SocketStream) -> None:
        conn = h11.Connection(h11.SERVER, max_incomplete_event_size=256 * 1024)
        try:
            while True:
                got = await self._read_request(conn, stream)
                if got is None:
                    return
                request, body = got
                keep_open = await self._dispatch(_Exchange(conn, stream), request, body)
                if not keep_open:
                    return
                if conn.our_state is h11.DONE and conn.their_state is h11.DONE:
                    conn.start_next_cycle()
                else:
                    return
        except (_ClientGone, trio.BrokenResourceError, trio.ClosedResourceError):
            return
        except h11.RemoteProtocolError as exc:
            if conn.our_state in (h11.IDLE, h11.SEND_RESPONSE):
                try:
                    await _Exchange(conn, stream).respond_json(
                        exc.error_status_hint,
                        _error_payload("invalid_request_error", str(exc), None))
                except (_ClientGone, h11.LocalProtocolError):
                    pass
            return

    async def _read_request(self, conn: h11.Connection, stream: trio.SocketStream,
                            ) -> tuple[h11.Request, bytes] | None:
        request: h11.Request | None = None
        body = bytearray()
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                conn.receive_data(await stream.receive_some(_RECV))
                continue
            if isinstance(event, h11.ConnectionClosed):
                return None
            if isinstance(event, h11.Request):
                request = event
            elif isinstance(event, h11.Data):
                body += event.data
                if len(body) > _MAX_BODY:
                    raise h11.RemoteProtocolError("request body too large", 413)
            elif isinstance(event, h11.EndOfMessage):
                assert request is not None
                return request, bytes(body)

    async def _dispatch(self, ex: _Exchange, request: h11.Request, body: bytes) -> bool:
        """Answer one request; returns False when the connection must be closed."""
        target = request.target.decode("latin-1")
        route = urlsplit(target).path
        method = request.method.decode("latin-1")
        if route.startswith("/_mock/"):
            await self._control(ex, method, route, body)
            return True
        record = self.handle._record(request, body)

        async def plain(status: int, payload: Any) -> bool:
            record["status"] = status
            await ex.respond_json(status, payload)
            self.handle._finish(record, "completed")
            return True

        if route == BOOTSTRAP_ROUTE and method == "GET":
            # The captures answered 404 here and the CLI went on without connectors.
            return await plain(404, {"detail": "Not Found"})
        if route != CHAT_ROUTE:
            return await plain(404, {"detail": "Not Found"})
        if method != "POST":
            return await plain(405, {"detail": "Method Not Allowed"})
        scenario = self.handle._take_scenario()
        record["scenario"] = scenario.name
        payload = record["body"]
        if not isinstance(payload, dict) or not isinstance(payload.get("model"), str):
            reason = "body is not JSON" if payload is None else "model: a string is required"
            return await plain(400, _error_payload("invalid_request_error", reason, "3001"))
        return await self._chat(ex, scenario, record, payload)

    async def _chat(self, ex: _Exchange, scenario: Scenario, record: dict[str, Any],
                    payload: dict[str, Any]) -> bool:
        name = scenario.name
        if name == "drop":
            self.handle._finish(record, "dropped")
            return False

        async def respond() -> None:
            if name in _ERRORS or name == "error":
                status, error_type, _, code = _ERRORS.get(
                    name, (scenario.status, scenario.error_type, "", None))
                extra = []
                if scenario.retry_after is not None:
                    extra.append(("retry-after", _fmt_seconds(scenario.retry_after)))
                record["status"] = status
                await ex.respond_json(status, _error_payload(error_type, scenario.message, code),
                                      extra)
            elif name == "hang":
                await trio.sleep_forever()
            elif payload.get("stream") is True:
                await self._stream(ex, scenario, record, payload["model"])
            else:
                await self._whole(ex, scenario, record, payload["model"])

        eof = await _while_watching(ex, respond)
        self.handle._finish(record, "completed" if ex.complete else "client_disconnected")
        return ex.complete and not eof

    async def _stream(self, ex: _Exchange, scenario: Scenario, record: dict[str, Any],
                      model: str) -> None:
        record["status"] = 200
        completion_id = f"cmpl-mock{record['n']:06d}"
        created = int(time.time())
        await ex.send(h11.Response(status_code=200, reason=b"OK", headers=[
            ("content-type", "text/event-stream; charset=utf-8"),
            ("cache-control", "no-cache")]))

        def chunk(delta: dict[str, Any], finish_reason: str | None = None,
                  usage: dict[str, int] | None = None) -> h11.Data:
            body: dict[str, Any] = {
                "id": completion_id, "object": "chat.completion.chunk", "created": created,
                "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}]}
            if usage is not None:
                body["usage"] = usage
            return _sse(body)

        await ex.send(chunk({"role": "assistant", "content": ""}))
        if scenario.name == "stall":
            await trio.sleep(scenario.delay)
            await ex.send(chunk({"content": scenario.deltas[0] if scenario.deltas else "Hello"}))
            await trio.sleep_forever()
        elif scenario.name == "slow":
            chunks = itertools.count() if scenario.count is None else range(scenario.count)
            for i in chunks:
                await trio.sleep(scenario.interval)
                await ex.send(chunk({"content": f" chunk{i}"}))
        else:
            for text in scenario.deltas:
                await trio.sleep(scenario.delay)
                await ex.send(chunk({"content": text}))
        await ex.send(chunk({"content": ""}, "stop", _usage()))
        await ex.send(_sse("[DONE]"))
        await ex.send(h11.EndOfMessage())

    async def _whole(self, ex: _Exchange, scenario: Scenario, record: dict[str, Any],
                     model: str) -> None:
        if scenario.name == "slow":
            if scenario.count is None:
                await trio.sleep_forever()
            await trio.sleep(scenario.interval * (scenario.count or 0))
            text = "".join(f" chunk{i}" for i in range(scenario.count or 0))
        elif scenario.name == "stall":
            await trio.sleep_forever()
        else:
            await trio.sleep(scenario.delay * len(scenario.deltas))
            text = "".join(scenario.deltas)
        record["status"] = 200
        await ex.respond_json(200, {
            "id": f"cmpl-mock{record['n']:06d}", "object": "chat.completion",
            "created": int(time.time()), "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                         "finish_reason": "stop"}],
            "usage": _usage()})

    async def _control(self, ex: _Exchange, method: str, route: str, body: bytes) -> None:
        handle = self.handle
        if route == "/_mock/requests" and method == "GET":
            await ex.respond_json(200, {"count": handle.request_count,
                                        "requests": handle.requests})
        elif route == "/_mock/requests" and method == "DELETE":
            handle.clear_requests()
            await ex.respond_json(200, {"count": 0})
        elif route == "/_mock/scenario" and method == "GET":
            await ex.respond_json(200, {"scenario": handle.scenario.as_json()})
        elif route == "/_mock/scenario" and method == "POST":
            try:
                options = json.loads(body or b"{}")
                if not isinstance(options, dict):
                    raise ValueError("body must be a JSON object")
                name = options.pop("scenario", None)
                if not isinstance(name, str):
                    raise ValueError('"scenario" (a string) is required')
                scenario = handle.set_scenario(name, **options)
            except (ValueError, TypeError) as exc:
                await ex.respond_json(400, {"error": str(exc)})
            else:
                await ex.respond_json(200, {"scenario": scenario.as_json()})
        elif route == "/_mock/health" and method == "GET":
            await ex.respond_json(200, {"ok": True})
        else:
            await ex.respond_json(404, {"error": f"no control route {method} {route}"})


def _reason(status: int) -> bytes:
    try:
        return http.HTTPStatus(status).phrase.encode()
    except ValueError:
        return b""


def _fmt_seconds(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


async def _while_watching(ex: _Exchange, respond: Callable[[], Awaitable[None]]) -> bool:
    """Run ``respond`` while reading the socket, so that a client that goes away is seen at
    once (even while the mock is silent); returns True if the client closed its side."""
    eof = False

    async def watch(cancel_scope: trio.CancelScope) -> None:
        nonlocal eof
        while True:
            try:
                data = await ex.stream.receive_some(_RECV)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                data = b""
            if not data:
                eof = True
                cancel_scope.cancel()
                return
            ex.conn.receive_data(bytes(data))  # a pipelined next request: h11 buffers it

    async with trio.open_nursery() as nursery:
        nursery.start_soon(watch, nursery.cancel_scope)
        try:
            await respond()
        except _ClientGone:
            eof = True
        nursery.cancel_scope.cancel()
    return eof


async def serve_mock(*, scenario: str = "success", host: str = "127.0.0.1", port: int = 0,
                     task_status: trio.TaskStatus[MockMistral] = trio.TASK_STATUS_IGNORED,
                     **options: Any) -> None:
    """Serve the mock until cancelled. ``await nursery.start(serve_mock, ...)`` returns the
    :class:`MockMistral` handle once the socket is bound; ``options`` are the scenario's."""
    handle = MockMistral(Scenario.build(scenario, **options))
    server = _Server(handle)
    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(
            functools.partial(trio.serve_tcp, server.handle_connection, port, host=host))
        sockname = listeners[0].socket.getsockname()
        handle.host, handle.port = sockname[0], sockname[1]
        task_status.started(handle)
