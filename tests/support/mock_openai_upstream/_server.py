"""A fault-injecting loopback mock of an OpenAI-compatible ``POST /v1/chat/completions``.

Served with h11 on trio (as ``mock_anthropic``) so that every fault is exact: ``hang`` never
sends a status line, ``drop`` closes without a response, ``reset`` sends a TCP RST, ``cut``
ends a chunked body without its terminator, ``stall`` goes silent with the socket open. A
watcher reads the socket while a response is in flight, so a client that goes away is seen
at once, and the handle counts open connections so tests can prove nothing leaked.

What a request gets: the next entry of the *script* (``push``), else the default scenario
(``set_scenario``; with ``times=N`` only for the next N requests, then ``success``).

``weather`` (the tool-calling tests of CLI hops): when the request offers a function whose
name ends with ``get_weather`` and its last user message holds no result yet, the answer is a
streamed call of it, ``{"city": ...}`` per city that message asks about ("weather in Paris and
Tokyo" → two parallel calls, else one; default Paris), after an optional text ``preamble``;
``tool_arguments`` replaces each call's arguments verbatim. Once a result is there (a
``role: "tool"`` message after the last user message, or a rendered ``Tool result:`` block in
the last user text — how a CLI hop renders the history), the answer is
:data:`WEATHER_ANSWER_PREFIX` + the results joined by ``" | "``; without such a tool it
answers as ``success``.

``read`` (Claude Code as a client, issue #44): as ``weather``, for the offered function whose
name ends with ``Read`` (Claude Code's file tool, through a CLI hop's bridge): one call with
``tool_arguments`` (``{"file_path": ...}``), then :data:`READ_ANSWER_PREFIX` + the first
line of each result rendered into the prompt (``[Read returned] ...``).
"""
from __future__ import annotations

import dataclasses
import json
import math
import socket
import struct
from collections import deque
from typing import Any

import h11
import trio
from mockhttp import Exchange, RequestLog, Responder, fmt_seconds, serve_mock_of
from mockhttp.scenario import DEFAULT_DELTAS, ScenarioBase
from mockhttp.weather import chat_weather_tool, report_or_cities, returned_results

PROMPT_TOKENS = 21
READ_TOOL_SUFFIX = "Read"
READ_ANSWER_PREFIX = "The file says: "
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
        "weather",  # get_weather call(s), then the answer from the results (module docstring)
        "read",  # a call of the offered ...Read tool, then the answer quoting its result
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



@dataclasses.dataclass(frozen=True)
class Scenario(ScenarioBase):
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
    preamble: str = ""  # weather: text streamed before the call(s)
    tool_arguments: str | None = None  # weather: each call's arguments text, verbatim
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
    def defaults(cls, name: str) -> dict[str, Any]:
        return {"message": _ERRORS[name][3]} if name in _ERRORS else {}


class MockOpenAI(RequestLog[Scenario]):
    """The handle ``serve_mock`` hands to ``task_status.started``: ``requests`` are the recorded
    requests, secrets redacted; waits as in ``mockhttp.RequestLog`` (outcomes also reset, cut),
    plus a script of answers and open-connection counting."""

    SECRET_HEADERS = frozenset({"authorization", "proxy-authorization", "cookie", "api-key"})

    def __init__(self, scenario: Scenario) -> None:
        super().__init__(scenario)
        self.open_connections = 0
        self.connections_total = 0
        self._script: deque[Scenario] = deque()

    @property
    def base_url(self) -> str:
        """The upstream's base URL, ending in ``/v1``."""
        return self._url("/v1")

    def push(self, name: str, **options: Any) -> Scenario:
        """Script the answer to one future request (first pushed, first served)."""
        scenario = Scenario.build(name, **options)
        self._script.append(scenario)
        return scenario

    async def wait_open_connections(self, n: int = 0) -> None:
        """Wait until exactly ``n`` connections are open (bound it with fail_after)."""
        while self.open_connections != n:
            await self._wait_changed()

    def _connection(self, delta: int) -> None:
        self.open_connections += delta
        if delta > 0:
            self.connections_total += delta
        self._notify()

    def _take_scenario(self) -> Scenario:
        return self._script.popleft() if self._script else super()._take_scenario()




class _Stream:
    """SSE chunk writer for one streamed completion."""

    def __init__(self, ex: Exchange, scenario: Scenario, model: str, n: int,
                 include_usage: bool) -> None:
        self.ex = ex
        self.scenario = scenario
        self.model = model
        self.id = f"chatcmpl-mock{n:06d}"
        self.include_usage = include_usage
        self.nl = "\r\n" if scenario.crlf else "\n"

    async def start(self) -> None:
        await self.ex.start_sse([("x-request-id", self.id)])
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

    async def tool_call(self, name: str, arguments: str, index: int = 0,
                        call_id: str = "call_mock1") -> None:
        await self.chunk({"tool_calls": [{"index": index, "id": call_id, "type": "function",
                                          "function": {"name": name, "arguments": ""}}]})
        half = len(arguments) // 2
        for part in (arguments[:half], arguments[half:]):
            await trio.sleep(self.scenario.delay)
            await self.chunk({"tool_calls": [{"index": index,
                                              "function": {"arguments": part}}]})

    async def finish(self, completion_tokens: int, finish_reason: str | None = None) -> None:
        if self.scenario.finish:
            await self.chunk({}, finish_reason or self.scenario.finish_reason)
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


class _Server(Responder[MockOpenAI]):
    CONTROL_API = False  # no /_mock/ routes: a test drives it in-process

    def bad_request(self, message: str) -> dict[str, Any]:
        return _error_body("invalid_request_error", None, message)

    def connection(self, delta: int) -> None:
        self.handle._connection(delta)

    async def answer(self, ex: Exchange, record: dict[str, Any]) -> bool:
        route = record["route"]
        if route != "/v1/chat/completions" or record["method"] != "POST":
            return await self.reply_json(ex, record, 404, _error_body(
                "invalid_request_error", "not_found", f"no route {record['method']} {route}"))
        payload = record["body"]
        if self.model_problem(payload) is not None:
            return await self.reply_json(ex, record, 400, _error_body(
                "invalid_request_error", None, "a JSON body with a model is required"))
        scenario: Scenario = self.take_scenario(record)
        name = scenario.name
        if name in ("drop", "reset"):
            if name == "reset":  # SO_LINGER 0: close() sends RST
                ex.stream.socket.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                            struct.pack("ii", 1, 0))
            return self.drop(record, "dropped" if name == "drop" else "reset")

        async def respond() -> str | None:
            if name in _ERRORS or name == "error":
                await self._error(ex, scenario, record)
            elif name == "hang":
                await trio.sleep_forever()
            elif payload.get("stream") is True:
                return await self._stream(ex, scenario, record, payload)
            else:
                await self._whole(ex, scenario, record, payload)
            return None

        return await self.watched(ex, record, respond)

    async def _error(self, ex: Exchange, scenario: Scenario, record: dict[str, Any]) -> None:
        status, etype, code, _ = _ERRORS.get(
            scenario.name, (scenario.status, scenario.error_type, scenario.code, ""))
        error = _error_body(etype, code, scenario.message)
        extra = [("x-request-id", f"req_mock{record['n']:06d}"), *scenario.headers]
        if scenario.name == "usage_limit":
            if scenario.retry_after is not None:
                error["error"]["resets_in_seconds"] = scenario.retry_after
        elif scenario.retry_after is not None:
            extra.append(("retry-after", fmt_seconds(scenario.retry_after)))
        record["status"] = status
        await ex.respond_json(status, error, extra)

    async def _stream(self, ex: Exchange, scenario: Scenario, record: dict[str, Any],
                      payload: dict[str, Any]) -> str | None:
        """Stream an answer (or a fault); returns the outcome of a fault that ends it (cut),
        else None."""
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
            return None
        weather = weather_answer(payload) if name == "weather" else \
            read_answer(payload, scenario.tool_arguments) if name == "read" else None
        if isinstance(weather, list):
            if scenario.preamble:
                await out.deltas((scenario.preamble,))
            for i, (tool, arguments) in enumerate(weather):
                if scenario.tool_arguments is not None:
                    arguments = scenario.tool_arguments
                await out.tool_call(tool, arguments, i, f"call_mock{record['n']:06d}_{i}")
            await out.finish(completion_tokens=len(weather), finish_reason="tool_calls")
            return None
        if isinstance(weather, str):
            await out.deltas((weather,))
        elif scenario.tool_call is not None:
            await out.tool_call(*scenario.tool_call)
        else:
            await out.deltas(scenario.deltas)
        await out.finish(completion_tokens=len(scenario.deltas))
        return None

    async def _whole(self, ex: Exchange, scenario: Scenario, record: dict[str, Any],
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


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content
                       if isinstance(p, dict) and isinstance(p.get("text"), str))
    return ""


def weather_answer(body: dict[str, Any]) -> list[tuple[str, str]] | str | None:
    """weather: the calls to make (``[(name, JSON arguments)]``), the text that quotes the
    results already in the request, or None when no such tool is offered."""
    tool = chat_weather_tool(body)
    if tool is None:
        return None
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    last_user = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=-1)
    text = _text(messages[last_user].get("content")) if last_user >= 0 else ""
    results = [_text(m.get("content")).strip() for m in messages[last_user + 1:]
               if m.get("role") == "tool"]
    move = report_or_cities(text, results)
    return move if isinstance(move, str) else [(tool, json.dumps({"city": c})) for c in move]


def read_answer(body: dict[str, Any], arguments: str | None) -> list[tuple[str, str]] | str | None:
    """read: the call to make (``[(name, JSON arguments)]``), the text quoting the results
    already rendered into the last user text, or None when no ``...Read`` tool is offered."""
    tool = next((t["function"]["name"] for t in body.get("tools") or []
                 if isinstance(t, dict) and isinstance(t.get("function"), dict)
                 and str(t["function"].get("name", "")).endswith(READ_TOOL_SUFFIX)), None)
    if tool is None:
        return None
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    text = next((_text(m.get("content")) for m in reversed(messages)
                 if m.get("role") == "user"), "")
    found = returned_results(text, READ_TOOL_SUFFIX)
    if found:
        return READ_ANSWER_PREFIX + " | ".join(found)
    return [(tool, arguments or "{}")]


def _error_body(etype: str, code: str | None, message: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": etype, "param": None, "code": code}}


#: ``await nursery.start(serve_mock, ...)`` (or ``functools.partial(serve_mock, scenario=...,
#: **options)``) serves until cancelled and returns the ``MockOpenAI`` handle once bound
serve_mock = serve_mock_of(MockOpenAI, Scenario, _Server)
