"""A fault-injecting loopback mock of an OpenAI-compatible ``POST /v1/chat/completions``.

Served with h11 on trio (as ``mock_anthropic``) so that every fault is exact: ``hang`` never
sends a status line, ``drop`` closes without a response, ``reset`` sends a TCP RST, ``cut``
ends a chunked body without its terminator, ``stall`` goes silent with the socket open. A
watcher reads the socket while a response is in flight, so a client that goes away is seen
at once, and the handle counts open connections so tests can prove nothing leaked.

What a request gets: the next entry of the *script* (``push``), else the default scenario
(``set_scenario``; with ``times=N`` only for the next N requests, then ``success``).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import http
import json
import math
import socket
import struct
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import urlsplit

import h11
import trio

__all__ = [
    "DEFAULT_DELTAS",
    "PROMPT_TOKENS",
    "SCENARIOS",
    "MockOpenAI",
    "Scenario",
    "serve_mock",
]

DEFAULT_DELTAS: tuple[str, ...] = ("Hello", " from", " the mock", " upstream.")
PROMPT_TOKENS = 21
CREATED = 1_700_000_000

SCENARIOS: frozenset[str] = frozenset(
    {
        "success",  # a streamed answer (options: deltas, delay, done, crlf, keepalive, ...)
        "error",  # any error answer: status, error_type, code, message, retry_after, headers
        "rate_limit",  # 429 rate_limit_exceeded (Retry-After if `retry_after` is set)
        "insufficient_quota",  # 429 insufficient_quota (OpenAI's "no credit")
        "usage_limit",  # 429 usage_limit_reached with `resets_in_seconds` (= retry_after)
        "server_error",  # 500 server_error
        "unavailable",  # 503 "engine overloaded"
        "context_length",  # 400 context_length_exceeded
        "content_policy",  # 400 content_policy_violation
        "auth",  # 401 invalid_api_key
        "hang",  # read the request, never send a status line
        "drop",  # read the request, close the connection (FIN) without a response
        "reset",  # read the request, reset the connection (RST) without a response
        "slow_first",  # headers and a role chunk at once, keepalives, content after first_delay
        "cut",  # `cut_after` deltas, then close mid-body (no chunked terminator)
        "stall",  # `cut_after` deltas, then silence with the connection open
        "stream_error",  # `cut_after` deltas, then an in-stream {"error": {...}} event
    }
)

# name -> (status, type, code, message)
_ERRORS: dict[str, tuple[int, str, str | None, str]] = {
    "rate_limit": (429, "requests", "rate_limit_exceeded",
                   "Rate limit reached for requests in organization org-mock."),
    "insufficient_quota": (429, "insufficient_quota", "insufficient_quota",
                           "You exceeded your current quota, please check your plan and "
                           "billing details."),
    "usage_limit": (429, "usage_limit_reached", "usage_limit_reached",
                    "The usage limit has been reached"),
    "server_error": (500, "server_error", None,
                     "The server had an error while processing your request. Sorry about that!"),
    "unavailable": (503, "server_error", None,
                    "The engine is currently overloaded, please try again later"),
    "context_length": (400, "invalid_request_error", "context_length_exceeded",
                       "This model's maximum context length is 128000 tokens. However, your "
                       "messages resulted in 200000 tokens. Please reduce the length of the "
                       "messages."),
    "content_policy": (400, "invalid_request_error", "content_policy_violation",
                       "Your request was rejected as a result of our safety system."),
    "auth": (401, "invalid_request_error", "invalid_api_key",
             "Incorrect API key provided: sk-mock***. You can find your API key in your "
             "account settings."),
}

_SECRET_HEADERS = frozenset({"authorization", "proxy-authorization", "cookie", "api-key"})
_MAX_BODY = 64 * 1024 * 1024
_RECV = 65536


@dataclasses.dataclass(frozen=True)
class Scenario:
    """What the mock answers to one request; options a scenario does not use are ignored."""

    name: str = "success"
    deltas: tuple[str, ...] = DEFAULT_DELTAS  # streamed text, one chunk each
    delay: float = 0.0  # seconds before each delta
    model: str | None = None  # the served model; default "<requested>-2025-01-01"
    done: bool = True  # end with data: [DONE]
    crlf: bool = False  # CRLF line ends
    keepalive: bool = False  # a ": keepalive" comment before every chunk
    malformed: bool = False  # a garbage event after the first delta
    tool_call: tuple[str, str] | None = None  # (name, arguments): a tool call, not text
    finish_reason: str = "stop"
    finish: bool = True  # send the finish_reason chunk (False + done=False: a clean early EOF)
    usage: bool | None = None  # the usage chunk; None: when the request asked for it
    status: int = 400  # error
    error_type: str = "invalid_request_error"  # error
    code: str | None = None  # error
    message: str = "mock error"  # error (also overrides the built-in errors' text)
    retry_after: float | str | None = None  # Retry-After header (usage_limit: body reset)
    headers: tuple[tuple[str, str], ...] = ()  # extra response headers
    first_delay: float = 1.0  # slow_first: seconds before the first delta
    interval: float = 0.05  # slow_first: seconds between keepalive comments
    cut_after: int = 1  # cut / stall / stream_error: deltas sent before the fault
    times: int | None = None  # as the default scenario: for the next N requests only

    def __post_init__(self) -> None:
        if self.name not in SCENARIOS:
            raise ValueError(f"unknown scenario {self.name!r}; known: {sorted(SCENARIOS)}")
        object.__setattr__(self, "deltas", tuple(self.deltas))
        object.__setattr__(self, "headers", tuple(tuple(h) for h in self.headers))
        for name in ("delay", "first_delay", "interval"):
            value = getattr(self, name)
            if not isinstance(value, int | float) or value < 0 or not math.isfinite(value):
                raise ValueError(f"{name} must be a finite number >= 0")
        if self.times is not None and self.times < 1:
            raise ValueError("times must be >= 1 or None")

    @classmethod
    def build(cls, name: str, **options: Any) -> Scenario:
        known = {f.name for f in dataclasses.fields(cls)} - {"name"}
        unknown = set(options) - known
        if unknown:
            raise ValueError(
                f"unknown scenario option(s) {sorted(unknown)}; known: {sorted(known)}")
        if name in _ERRORS and "message" not in options:
            options["message"] = _ERRORS[name][3]
        return cls(name=name, **options)


class MockOpenAI:
    """The handle ``serve_mock`` hands to ``task_status.started``."""

    def __init__(self, scenario: Scenario) -> None:
        self.host = ""
        self.port = 0
        self.requests: list[dict[str, Any]] = []  # recorded requests, secrets redacted
        self.open_connections = 0
        self.connections_total = 0
        self._scenario = scenario
        self._remaining = scenario.times
        self._script: deque[Scenario] = deque()
        self._changed = trio.Event()

    # -- public API -------------------------------------------------------------------------
    @property
    def base_url(self) -> str:
        """The upstream's base URL, ending in ``/v1``."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/v1"

    @property
    def request_count(self) -> int:
        return len(self.requests)

    def set_scenario(self, name: str, **options: Any) -> Scenario:
        """The default answer for requests the script does not cover."""
        self._scenario = Scenario.build(name, **options)
        self._remaining = self._scenario.times
        return self._scenario

    def push(self, name: str, **options: Any) -> Scenario:
        """Script the answer to one future request (first pushed, first served)."""
        scenario = Scenario.build(name, **options)
        self._script.append(scenario)
        return scenario

    async def wait_for_requests(self, n: int) -> None:
        while len(self.requests) < n:
            await self._wait_changed()

    async def wait_for_outcome(self, n: int, *outcomes: str) -> dict[str, Any]:
        """Request ``n`` (1-based) once its outcome is one of ``outcomes`` (default: not
        pending). Outcomes: completed, client_disconnected, dropped, reset, cut."""
        while True:
            if len(self.requests) >= n:
                record = self.requests[n - 1]
                if (record["outcome"] in outcomes if outcomes
                        else record["outcome"] != "pending"):
                    return record
            await self._wait_changed()

    async def wait_open_connections(self, n: int = 0) -> None:
        """Wait until exactly ``n`` connections are open (bound it with fail_after)."""
        while self.open_connections != n:
            await self._wait_changed()

    # -- internals --------------------------------------------------------------------------
    async def _wait_changed(self) -> None:
        await self._changed.wait()

    def _notify(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    def _connection(self, delta: int) -> None:
        self.open_connections += delta
        if delta > 0:
            self.connections_total += delta
        self._notify()

    def _take_scenario(self) -> Scenario:
        if self._script:
            return self._script.popleft()
        scenario = self._scenario
        if self._remaining is not None:
            self._remaining -= 1
            if self._remaining <= 0:
                self._scenario, self._remaining = Scenario(), None
        return scenario

    def _record(self, request: h11.Request, body: bytes) -> dict[str, Any]:
        headers: dict[str, str] = {}
        credential: str | None = None
        for raw_name, raw_value in request.headers:
            name = raw_name.decode("latin-1").lower()
            value = raw_value.decode("latin-1")
            if name == "authorization":
                credential = value.removeprefix("Bearer ")
            if name in _SECRET_HEADERS:
                value = f"<redacted len={len(value)}>"
            headers[name] = value
        target = request.target.decode("latin-1")
        record: dict[str, Any] = {
            "n": len(self.requests) + 1,
            "method": request.method.decode("latin-1"),
            "path": target,
            "route": urlsplit(target).path,
            "headers": headers,
            "credential_sha256": (hashlib.sha256(credential.encode()).hexdigest()
                                  if credential is not None else None),
            "body": None,
            "scenario": None,
            "status": None,
            "outcome": "pending",
        }
        try:
            record["body"] = json.loads(body)
        except ValueError:
            record["body_raw_head"] = body[:300].decode("utf-8", "replace")
        self.requests.append(record)
        self._notify()
        return record

    def _finish(self, record: dict[str, Any], outcome: str) -> None:
        record["outcome"] = outcome
        self._notify()


class _ClientGone(Exception):
    """The peer closed or reset the connection."""


class _Exchange:
    """One HTTP request/response on an h11 connection."""

    def __init__(self, conn: h11.Connection, stream: trio.SocketStream) -> None:
        self.conn = conn
        self.stream = stream
        self.complete = False

    async def send(self, event: h11.Event) -> None:
        data = self.conn.send(event)
        if data:
            await self.send_raw(data)
        if isinstance(event, h11.EndOfMessage):
            self.complete = True

    async def send_raw(self, data: bytes) -> None:
        try:
            await self.stream.send_all(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            raise _ClientGone from exc

    async def respond_json(self, status: int, payload: Any,
                           extra: list[tuple[str, str]] | None = None) -> None:
        body = json.dumps(payload).encode()
        headers = [("content-type", "application/json"), ("content-length", str(len(body))),
                   *(extra or [])]
        await self.send(h11.Response(status_code=status, headers=headers, reason=_reason(status)))
        await self.send(h11.Data(data=body))
        await self.send(h11.EndOfMessage())


class _Stream:
    """SSE chunk writer for one streamed completion."""

    def __init__(self, ex: _Exchange, scenario: Scenario, model: str, n: int,
                 include_usage: bool) -> None:
        self.ex = ex
        self.scenario = scenario
        self.model = model
        self.id = f"chatcmpl-mock{n:06d}"
        self.include_usage = include_usage
        self.nl = "\r\n" if scenario.crlf else "\n"

    async def start(self) -> None:
        await self.ex.send(h11.Response(status_code=200, reason=b"OK", headers=[
            ("content-type", "text/event-stream; charset=utf-8"),
            ("cache-control", "no-cache"),
            ("x-request-id", self.id),
        ]))
        await self.chunk({"role": "assistant", "content": "", "refusal": None})

    async def raw(self, text: str) -> None:
        await self.ex.send(h11.Data(data=text.encode()))

    async def event(self, payload: Any) -> None:
        if self.scenario.keepalive:
            await self.raw(f": keepalive{self.nl}{self.nl}")
        data = payload if isinstance(payload, str) else json.dumps(payload)
        await self.raw(f"data: {data}{self.nl}{self.nl}")

    async def chunk(self, delta: dict[str, Any], finish_reason: str | None = None) -> None:
        payload: dict[str, Any] = {
            "id": self.id, "object": "chat.completion.chunk", "created": CREATED,
            "model": self.model, "system_fingerprint": "fp_mock",
            "choices": [{"index": 0, "delta": delta, "logprobs": None,
                         "finish_reason": finish_reason}],
        }
        if self.include_usage:
            payload["usage"] = None
        await self.event(payload)

    async def deltas(self, texts: tuple[str, ...]) -> None:
        for i, text in enumerate(texts):
            await trio.sleep(self.scenario.delay)
            await self.chunk({"content": text})
            if i == 0 and self.scenario.malformed:
                await self.event('{"id": "chatcmpl-broken", "choices": [{"delta": {"content"')

    async def tool_call(self, name: str, arguments: str) -> None:
        await self.chunk({"tool_calls": [{"index": 0, "id": "call_mock1", "type": "function",
                                          "function": {"name": name, "arguments": ""}}]})
        half = len(arguments) // 2
        for part in (arguments[:half], arguments[half:]):
            await trio.sleep(self.scenario.delay)
            await self.chunk({"tool_calls": [{"index": 0, "function": {"arguments": part}}]})

    async def finish(self, completion_tokens: int) -> None:
        if self.scenario.finish:
            await self.chunk({}, self.scenario.finish_reason)
        if self.include_usage:
            await self.event({
                "id": self.id, "object": "chat.completion.chunk", "created": CREATED,
                "model": self.model, "system_fingerprint": "fp_mock", "choices": [],
                "usage": {"prompt_tokens": PROMPT_TOKENS, "completion_tokens": completion_tokens,
                          "total_tokens": PROMPT_TOKENS + completion_tokens},
            })
        if self.scenario.done:
            await self.event("[DONE]")
        await self.ex.send(h11.EndOfMessage())


class _Server:
    def __init__(self, handle: MockOpenAI) -> None:
        self.handle = handle

    async def handle_connection(self, stream: trio.SocketStream) -> None:
        self.handle._connection(+1)
        try:
            await self._serve(stream)
        finally:
            with trio.CancelScope(shield=True):
                await stream.aclose()
            self.handle._connection(-1)

    async def _serve(self, stream: trio.SocketStream) -> None:
        conn = h11.Connection(h11.SERVER, max_incomplete_event_size=256 * 1024)
        try:
            while True:
                got = await self._read_request(conn, stream)
                if got is None:
                    return
                keep_open = await self._dispatch(_Exchange(conn, stream), *got)
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
                        exc.error_status_hint, _error_body("invalid_request_error", None,
                                                           str(exc)))
                except (_ClientGone, h11.LocalProtocolError):
                    pass

    async def _read_request(self, conn: h11.Connection, stream: trio.SocketStream
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
        """Answer one request; False when the connection must be closed."""
        record = self.handle._record(request, body)
        route = record["route"]
        if route != "/v1/chat/completions" or record["method"] != "POST":
            record["status"] = 404
            await ex.respond_json(404, _error_body("invalid_request_error", "not_found",
                                                   f"no route {record['method']} {route}"))
            self.handle._finish(record, "completed")
            return True
        payload = record["body"]
        if not isinstance(payload, dict) or not isinstance(payload.get("model"), str):
            record["status"] = 400
            await ex.respond_json(400, _error_body("invalid_request_error", None,
                                                   "a JSON body with a model is required"))
            self.handle._finish(record, "completed")
            return True
        scenario = self.handle._take_scenario()
        record["scenario"] = scenario.name
        name = scenario.name
        if name in ("drop", "reset"):
            if name == "reset":  # SO_LINGER 0: close() sends RST
                ex.stream.socket.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                            struct.pack("ii", 1, 0))
            self.handle._finish(record, "dropped" if name == "drop" else "reset")
            return False
        outcome = "completed"

        async def respond() -> None:
            nonlocal outcome
            if name in _ERRORS or name == "error":
                await self._error(ex, scenario, record)
            elif name == "hang":
                await trio.sleep_forever()
            elif payload.get("stream") is True:
                outcome = await self._stream(ex, scenario, record, payload)
            else:
                await self._whole(ex, scenario, record, payload)

        eof = await _while_watching(ex, respond)
        if outcome == "completed" and not ex.complete:
            outcome = "client_disconnected"
        self.handle._finish(record, outcome)
        return ex.complete and not eof

    async def _error(self, ex: _Exchange, scenario: Scenario, record: dict[str, Any]) -> None:
        status, etype, code, _ = _ERRORS.get(
            scenario.name, (scenario.status, scenario.error_type, scenario.code, ""))
        error = _error_body(etype, code, scenario.message)
        extra = [("x-request-id", f"req_mock{record['n']:06d}"), *scenario.headers]
        if scenario.name == "usage_limit":
            if scenario.retry_after is not None:
                error["error"]["resets_in_seconds"] = scenario.retry_after
        elif scenario.retry_after is not None:
            extra.append(("retry-after", _fmt_seconds(scenario.retry_after)))
        record["status"] = status
        await ex.respond_json(status, error, extra)

    async def _stream(self, ex: _Exchange, scenario: Scenario, record: dict[str, Any],
                      payload: dict[str, Any]) -> str:
        """Stream an answer (or a fault); returns the request's outcome."""
        options = payload.get("stream_options")
        asked = isinstance(options, dict) and options.get("include_usage") is True
        include_usage = asked if scenario.usage is None else scenario.usage
        model = scenario.model or f"{payload['model']}-2025-01-01"
        out = _Stream(ex, scenario, model, record["n"], include_usage)
        record["status"] = 200
        name = scenario.name
        await out.start()
        if name == "slow_first":
            with trio.move_on_after(scenario.first_delay):
                while True:
                    await trio.sleep(scenario.interval)
                    await out.raw(f": keepalive{out.nl}{out.nl}")
        elif name in ("cut", "stall", "stream_error"):
            await out.deltas(scenario.deltas[: scenario.cut_after])
            if name == "cut":
                await ex.stream.aclose()  # mid-body: no chunked terminator, no [DONE]
                return "cut"
            if name == "stall":
                await trio.sleep_forever()
            await out.event(_error_body("server_error", None, scenario.message))
            await ex.send(h11.EndOfMessage())
            return "completed"
        if scenario.tool_call is not None:
            await out.tool_call(*scenario.tool_call)
        else:
            await out.deltas(scenario.deltas)
        await out.finish(completion_tokens=len(scenario.deltas))
        return "completed"

    async def _whole(self, ex: _Exchange, scenario: Scenario, record: dict[str, Any],
                     payload: dict[str, Any]) -> None:
        record["status"] = 200
        await ex.respond_json(200, {
            "id": f"chatcmpl-mock{record['n']:06d}", "object": "chat.completion",
            "created": CREATED, "model": scenario.model or f"{payload['model']}-2025-01-01",
            "choices": [{"index": 0, "finish_reason": scenario.finish_reason, "logprobs": None,
                         "message": {"role": "assistant", "content": "".join(scenario.deltas)}}],
            "usage": {"prompt_tokens": PROMPT_TOKENS, "completion_tokens": len(scenario.deltas),
                      "total_tokens": PROMPT_TOKENS + len(scenario.deltas)},
        })


def _error_body(etype: str, code: str | None, message: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": etype, "param": None, "code": code}}


def _reason(status: int) -> bytes:
    try:
        return http.HTTPStatus(status).phrase.encode()
    except ValueError:
        return b""


def _fmt_seconds(value: float | str) -> str:
    if isinstance(value, str):
        return value
    return str(int(value)) if float(value).is_integer() else str(value)


async def _while_watching(ex: _Exchange, respond: Callable[[], Awaitable[None]]) -> bool:
    """Run ``respond`` while reading the socket, so a client that goes away is seen at once;
    True if the client closed its side."""
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
            ex.conn.receive_data(data)  # a pipelined next request: h11 buffers it

    async with trio.open_nursery() as nursery:
        nursery.start_soon(watch, nursery.cancel_scope)
        try:
            await respond()
        except _ClientGone:
            eof = True
        nursery.cancel_scope.cancel()
    return eof


async def serve_mock(*, scenario: str = "success", host: str = "127.0.0.1", port: int = 0,
                     task_status: trio.TaskStatus[MockOpenAI] = trio.TASK_STATUS_IGNORED,
                     **options: Any) -> None:
    """Serve until cancelled; ``await nursery.start(serve_mock, ...)`` returns the handle once
    the socket is bound. ``options`` are the default scenario's."""
    handle = MockOpenAI(Scenario.build(scenario, **options))
    server = _Server(handle)
    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(
            functools.partial(trio.serve_tcp, server.handle_connection, port, host=host))
        handle.host, handle.port = listeners[0].socket.getsockname()[:2]
        task_status.started(handle)
