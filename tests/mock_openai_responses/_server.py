"""A loopback mock of the OpenAI Responses API, served with h11 on trio.

Faithful to what the real ``codex`` CLI (0.171.0) needs (see
``cli-reference/codex/README.md``, "Upstream requests (what a mock must serve)"):
``POST /v1/responses`` answered with SSE (``event: <type>`` + ``data: <json>`` with ``type``
and ``sequence_number``), or with an OpenAI error body
``{"error": {"message", "type", "param", "code"}}`` and an ``x-request-id`` header (codex
quotes it as "request id: ..."). A small control API under ``/_mock/`` lets an
out-of-process test change the scenario and read the recorded requests.

h11 rather than an ASGI framework so that every fault is exact: ``hang`` never sends a status
line, ``drop`` closes the socket without a response, streams are never cut by a framework
response timeout, and a client that goes away is seen at once (a watcher reads the socket
while a response is in flight).
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

__all__ = [
    "DEFAULT_DELTAS",
    "INPUT_TOKENS",
    "OUTPUT_TOKENS",
    "SCENARIOS",
    "MockResponses",
    "Scenario",
    "serve_mock",
]

DEFAULT_DELTAS: tuple[str, ...] = ("Hello", " from", " the mock", " upstream.")
INPUT_TOKENS = 25
OUTPUT_TOKENS = 7

SCENARIOS: frozenset[str] = frozenset(
    {
        "success",  # the 4 deltas above, `delay` seconds apart
        "rate_limit",  # 429 rate_limit_exceeded (+ `retry-after` if `retry_after` is set)
        "quota",  # 429 insufficient_quota (billing: codex never retries it)
        "usage_limit",  # 429 usage_limit_reached (a ChatGPT plan's window), `resets_in_seconds`
        "auth",  # 401 invalid_api_key
        "server_error",  # 500 server_error
        "overloaded",  # 503 "The engine is currently overloaded"
        "error",  # any status: `status`, `error_type`, `code`, `message`
        "slow",  # " chunk0", " chunk1", ... one every `interval` s; `count` chunks or forever
        "stall",  # one delta, then silence with the connection open
        "hang",  # read the request, never send a status line
        "drop",  # read the request, close the connection without a response
    }
)

# scenario -> (status, error type, error code, message)
_ERRORS: dict[str, tuple[int, str, str | None, str]] = {
    "rate_limit": (
        429,
        "requests",
        "rate_limit_exceeded",
        "Rate limit reached for gpt-mock in organization org-mock on requests per min (RPM): "
        "Limit 3, Used 3, Requested 1. Please try again in 20s.",
    ),
    "quota": (
        429,
        "insufficient_quota",
        "insufficient_quota",
        "You exceeded your current quota, please check your plan and billing details.",
    ),
    "usage_limit": (
        429,
        "usage_limit_reached",
        None,
        "The usage limit has been reached",
    ),
    "auth": (
        401,
        "invalid_request_error",
        "invalid_api_key",
        "Incorrect API key provided: sk-mock*****1234. You can find your API key at "
        "https://platform.openai.com/account/api-keys.",
    ),
    "server_error": (
        500,
        "server_error",
        "server_error",
        "The server had an error while processing your request. Sorry about that!",
    ),
    "overloaded": (
        503,
        "server_error",
        None,
        "The engine is currently overloaded, please try again later.",
    ),
}

_SECRET_HEADERS = frozenset({"authorization", "proxy-authorization", "cookie", "openai-api-key"})
_MAX_BODY = 64 * 1024 * 1024
_RECV = 65536


@dataclasses.dataclass(frozen=True)
class Scenario:
    """What the mock answers to ``POST /v1/responses``; options a scenario does not use are
    ignored."""

    name: str = "success"
    deltas: tuple[str, ...] = DEFAULT_DELTAS  # success: the text deltas
    delay: float = 0.05  # success/stall: seconds before each delta
    retry_after: float | None = None  # error scenarios: `retry-after` header (seconds)
    resets_in_seconds: int | None = 3600  # usage_limit: in the error body (None: left out)
    interval: float = 2.0  # slow: seconds before each chunk
    count: int | None = None  # slow: number of chunks, None = forever
    status: int = 400  # error: HTTP status
    error_type: str = "invalid_request_error"  # error: OpenAI error type
    code: str | None = None  # error: OpenAI error code
    message: str = "mock error"  # error: message (also overrides the built-in errors' text)
    times: int | None = None  # serve this scenario to the next N requests, then "success"
    served_model: str | None = None  # the `model` in the response (default: the request's)
    cached_tokens: int = 0  # usage.input_tokens_details.cached_tokens (part of input_tokens)

    def __post_init__(self) -> None:
        if self.name not in SCENARIOS:
            raise ValueError(f"unknown scenario {self.name!r}; known: {sorted(SCENARIOS)}")
        if isinstance(self.deltas, str) or not all(isinstance(d, str) for d in self.deltas):
            raise ValueError("deltas must be a list of strings")
        object.__setattr__(self, "deltas", tuple(self.deltas))
        for field in ("delay", "interval"):
            value = getattr(self, field)
            if not isinstance(value, int | float) or value < 0 or not math.isfinite(value):
                raise ValueError(f"{field} must be a finite number >= 0")
        if self.retry_after is not None and (
            not isinstance(self.retry_after, int | float) or self.retry_after < 0
        ):
            raise ValueError("retry_after must be a number >= 0 or null")
        if not isinstance(self.cached_tokens, int) or not 0 <= self.cached_tokens <= INPUT_TOKENS:
            raise ValueError(f"cached_tokens must be an integer between 0 and {INPUT_TOKENS}")
        for field in ("count", "resets_in_seconds"):
            value = getattr(self, field)
            if value is not None and (not isinstance(value, int) or value < 0):
                raise ValueError(f"{field} must be an integer >= 0 or null")
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
                f"unknown scenario option(s) {sorted(unknown)}; known: {sorted(known)}"
            )
        if "message" not in options and name in _ERRORS:
            options["message"] = _ERRORS[name][3]
        return cls(name=name, **options)

    def as_json(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["deltas"] = list(self.deltas)
        return data


class MockResponses:
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
        """What to put in codex's ``model_providers.<id>.base_url`` (ends in ``/v1``)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/v1"

    @property
    def scenario(self) -> Scenario:
        return self._scenario

    @property
    def request_count(self) -> int:
        return len(self.requests)

    def set_scenario(self, name: str, **options: Any) -> Scenario:
        """Switch what later requests get (a request in flight keeps its scenario)."""
        self._scenario = Scenario.build(name, **options)
        self._remaining = self._scenario.times
        return self._scenario

    def clear_requests(self) -> None:
        self.requests.clear()

    async def wait_for_requests(self, n: int) -> None:
        """Wait until at least ``n`` requests have been recorded (bound it with fail_after)."""
        while len(self.requests) < n:
            await self._wait_changed()

    async def wait_for_outcome(self, n: int, *outcomes: str) -> dict[str, Any]:
        """Wait until request number ``n`` (1-based) has one of ``outcomes`` (default: not
        "pending"); returns its record. Outcomes: completed, client_disconnected, dropped."""
        while True:
            if len(self.requests) >= n:
                record = self.requests[n - 1]
                done = record["outcome"] in outcomes if outcomes else record["outcome"] != "pending"
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
            if name == "authorization" and credential is None:
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
            "credential_sha256": (
                hashlib.sha256(credential.encode()).hexdigest() if credential is not None else None
            ),
            "body": None,
            "body_error": None,
            "scenario": None,
            "status": None,
            "outcome": "pending",
        }
        try:
            record["body"] = json.loads(_decode_body(headers.get("content-encoding", ""), body))
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
        self.complete = False  # the whole response was handed to the socket

    async def send(self, event: h11.Event) -> None:
        data = self.conn.send(event)
        if data:
            try:
                await self.stream.send_all(data)
            except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
                raise _ClientGone from exc
        if isinstance(event, h11.EndOfMessage):
            self.complete = True

    async def respond_json(
        self, status: int, payload: Any, extra: list[tuple[str, str]] | None = None
    ) -> None:
        body = json.dumps(payload).encode()
        headers = [
            ("content-type", "application/json"),
            ("content-length", str(len(body))),
            *(extra or []),
        ]
        await self.send(h11.Response(status_code=status, headers=headers, reason=_reason(status)))
        await self.send(h11.Data(data=body))
        await self.send(h11.EndOfMessage())


def _error_payload(
    error_type: str, message: str, code: str | None, **extra: Any
) -> dict[str, Any]:
    return {"error": {"message": message, "type": error_type, "param": None, "code": code,
                      **extra}}


class _Sse:
    """Numbers the events of one response (``sequence_number`` from 0)."""

    def __init__(self, ex: _Exchange) -> None:
        self.ex = ex
        self.seq = itertools.count()

    async def send(self, event_type: str, **fields: Any) -> None:
        event = {"type": event_type, "sequence_number": next(self.seq), **fields}
        data = f"event: {event_type}\ndata: {json.dumps(event)}\n\n".encode()
        await self.ex.send(h11.Data(data=data))


def _usage(cached_tokens: int) -> dict[str, Any]:
    return {
        "input_tokens": INPUT_TOKENS,
        "input_tokens_details": {"cached_tokens": cached_tokens},
        "output_tokens": OUTPUT_TOKENS,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": INPUT_TOKENS + OUTPUT_TOKENS,
    }


def _response(response_id: str, model: str, status: str, output: list[Any],
              usage: dict[str, Any] | None, created: int) -> dict[str, Any]:
    return {
        "id": response_id,
        "object": "response",
        "created_at": created,
        "status": status,
        "error": None,
        "incomplete_details": None,
        "instructions": None,
        "model": model,
        "output": output,
        "parallel_tool_calls": True,
        "store": False,
        "tool_choice": "auto",
        "tools": [],
        "usage": usage,
    }


def _message_item(item_id: str, text: str, status: str) -> dict[str, Any]:
    content = [{"type": "output_text", "text": text, "annotations": []}] if status == "completed" \
        else []
    return {"id": item_id, "type": "message", "status": status, "role": "assistant",
            "content": content}


class _Server:
    def __init__(self, handle: MockResponses) -> None:
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
            # a malformed request: answer 400 if we still can, then close
            if conn.our_state in (h11.IDLE, h11.SEND_RESPONSE):
                try:
                    await _Exchange(conn, stream).respond_json(
                        exc.error_status_hint,
                        _error_payload("invalid_request_error", str(exc), None),
                    )
                except (_ClientGone, h11.LocalProtocolError):
                    pass
            return

    async def _read_request(
        self, conn: h11.Connection, stream: trio.SocketStream
    ) -> tuple[h11.Request, bytes] | None:
        request: h11.Request | None = None
        body = bytearray()
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                data = await stream.receive_some(_RECV)
                conn.receive_data(data)
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
        request_id = f"req_mock{record['n']:06d}"
        extra = [("x-request-id", request_id)]
        if route != "/v1/responses":
            record["status"] = 404
            await ex.respond_json(
                404,
                _error_payload("invalid_request_error", f"Invalid URL ({method} {route})", None),
                extra,
            )
            self.handle._finish(record, "completed")
            return True
        if method != "POST":
            record["status"] = 405
            await ex.respond_json(
                405,
                _error_payload("invalid_request_error", f"Method {method} not allowed", None),
                extra,
            )
            self.handle._finish(record, "completed")
            return True
        scenario = self.handle._take_scenario()
        record["scenario"] = scenario.name
        payload = record["body"]
        if not isinstance(payload, dict) or not isinstance(payload.get("model"), str):
            record["status"] = 400
            reason = "body is not JSON" if payload is None else "model: a string is required"
            await ex.respond_json(
                400, _error_payload("invalid_request_error", reason, None), extra
            )
            self.handle._finish(record, "completed")
            return True
        return await self._responses(ex, scenario, record, payload, request_id)

    async def _responses(
        self,
        ex: _Exchange,
        scenario: Scenario,
        record: dict[str, Any],
        payload: dict[str, Any],
        request_id: str,
    ) -> bool:
        name = scenario.name
        if name == "drop":
            self.handle._finish(record, "dropped")
            return False

        async def respond() -> None:
            if name in _ERRORS or name == "error":
                await self._error(ex, scenario, record, request_id)
            elif name == "hang":
                await trio.sleep_forever()
            else:
                await self._stream(ex, scenario, record, payload, request_id)

        eof = await _while_watching(ex, respond)
        self.handle._finish(record, "completed" if ex.complete else "client_disconnected")
        return ex.complete and not eof

    async def _error(
        self, ex: _Exchange, scenario: Scenario, record: dict[str, Any], request_id: str
    ) -> None:
        if scenario.name == "error":
            status, error_type, code = scenario.status, scenario.error_type, scenario.code
        else:
            status, error_type, code, _ = _ERRORS[scenario.name]
        extra = [("x-request-id", request_id)]
        if scenario.retry_after is not None:
            extra.append(("retry-after", _fmt_seconds(scenario.retry_after)))
        fields: dict[str, Any] = {}
        if scenario.name == "usage_limit":
            fields["plan_type"] = "plus"
            if scenario.resets_in_seconds is not None:
                fields["resets_in_seconds"] = scenario.resets_in_seconds
                fields["resets_at"] = int(time.time()) + scenario.resets_in_seconds
        record["status"] = status
        await ex.respond_json(
            status, _error_payload(error_type, scenario.message, code, **fields), extra
        )

    async def _stream(
        self,
        ex: _Exchange,
        scenario: Scenario,
        record: dict[str, Any],
        payload: dict[str, Any],
        request_id: str,
    ) -> None:
        n = record["n"]
        model = scenario.served_model or payload["model"]
        response_id, item_id = f"resp_mock{n:06d}", f"msg_mock{n:06d}"
        created = int(time.time())
        record["status"] = 200
        await ex.send(
            h11.Response(
                status_code=200,
                reason=b"OK",
                headers=[
                    ("content-type", "text/event-stream; charset=utf-8"),
                    ("cache-control", "no-cache"),
                    ("x-request-id", request_id),
                ],
            )
        )
        sse = _Sse(ex)
        pending = _response(response_id, model, "in_progress", [], None, created)
        await sse.send("response.created", response=pending)
        await sse.send("response.in_progress", response=pending)
        await sse.send("response.output_item.added", output_index=0,
                       item=_message_item(item_id, "", "in_progress"))
        part: dict[str, Any] = {"type": "output_text", "text": "", "annotations": []}
        await sse.send("response.content_part.added", item_id=item_id, output_index=0,
                       content_index=0, part=part)
        texts: list[str] = []

        async def delta(text: str) -> None:
            texts.append(text)
            await sse.send("response.output_text.delta", item_id=item_id, output_index=0,
                           content_index=0, delta=text, logprobs=[])

        if scenario.name == "stall":
            await trio.sleep(scenario.delay)
            await delta(scenario.deltas[0] if scenario.deltas else "Hello")
            await trio.sleep_forever()
        elif scenario.name == "slow":
            chunks = itertools.count() if scenario.count is None else range(scenario.count)
            for i in chunks:
                await trio.sleep(scenario.interval)
                await delta(f" chunk{i}")
        else:
            for text in scenario.deltas:
                await trio.sleep(scenario.delay)
                await delta(text)
        text = "".join(texts)
        await sse.send("response.output_text.done", item_id=item_id, output_index=0,
                       content_index=0, text=text, logprobs=[])
        await sse.send("response.content_part.done", item_id=item_id, output_index=0,
                       content_index=0, part={**part, "text": text})
        item = _message_item(item_id, text, "completed")
        await sse.send("response.output_item.done", output_index=0, item=item)
        await sse.send("response.completed",
                       response=_response(response_id, model, "completed", [item],
                                          _usage(scenario.cached_tokens),
                                          created))
        await ex.send(h11.EndOfMessage())

    async def _control(self, ex: _Exchange, method: str, route: str, body: bytes) -> None:
        handle = self.handle
        if route == "/_mock/requests" and method == "GET":
            await ex.respond_json(200, {"count": handle.request_count, "requests": handle.requests})
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
    """Run ``respond`` while reading the socket, so that a client that goes away is seen at once
    (even while the mock is silent); returns True if the client closed its side."""
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


async def serve_mock(
    *,
    scenario: str = "success",
    host: str = "127.0.0.1",
    port: int = 0,
    task_status: trio.TaskStatus[MockResponses] = trio.TASK_STATUS_IGNORED,
    **options: Any,
) -> None:
    """Serve the mock until cancelled. ``await nursery.start(serve_mock, ...)`` returns the
    ``MockResponses`` handle once the socket is bound; ``options`` are the scenario's."""
    handle = MockResponses(Scenario.build(scenario, **options))
    server = _Server(handle)
    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(
            functools.partial(trio.serve_tcp, server.handle_connection, port, host=host)
        )
        sockname = listeners[0].socket.getsockname()
        handle.host, handle.port = sockname[0], sockname[1]
        task_status.started(handle)
