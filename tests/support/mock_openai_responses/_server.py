"""A loopback mock of the OpenAI Responses API, served with h11 on trio.

Faithful to what the real ``codex`` CLI (0.171.0) needs (see
``cli-reference/codex/README.md``, "Upstream requests (what a mock must serve)"):
``POST /v1/responses`` answered with SSE (``event: <type>`` + ``data: <json>`` with ``type``
and ``sequence_number``), or with an OpenAI error body
``{"error": {"message", "type", "param", "code"}}`` and an ``x-request-id`` header (codex
quotes it as "request id: ..."). A small control API under ``/_mock/`` lets an
out-of-process test change the scenario and read the recorded requests. Every scenario also
takes ``response_headers`` (``{name: value}``, lower-cased, one-line values): more headers on
each ``/v1/responses`` answer, e.g. the rate-limit snapshot codex reads
(``x-codex-primary-used-percent`` & co.; ``cli-reference/codex/rate_limits/README.md``).

h11 rather than an ASGI framework so that every fault is exact: ``hang`` never sends a status
line, ``drop`` closes the socket without a response, streams are never cut by a framework
response timeout, and a client that goes away is seen at once (a watcher reads the socket
while a response is in flight).

``get_weather`` (the tool-calling tests; scenario ``success``): when the request offers a tool
whose name ends with ``get_weather`` (plain, or inside a ``namespace`` tool as codex offers MCP
tools: ``{"type": "namespace", "name": "mcp__olp", "tools": [...]}``) and the request holds no
result for it yet, the answer is a call of it, ``{"city": ...}`` per city the last user text
asks about ("weather in Paris and Tokyo" → two calls, else one; default Paris), streamed as the
Responses API streams function calls (per call: ``response.output_item.added`` with empty
``arguments``, ``response.function_call_arguments.delta`` ×2, ``...arguments.done``,
``response.output_item.done``; a namespaced tool's call carries ``namespace``), after an
optional text ``preamble`` message. Once a result is there (a ``function_call_output`` input
item, or a rendered ``Tool result:`` block in the last user text - how a CLI hop renders
the history), the answer is :data:`WEATHER_ANSWER_PREFIX` + the results joined by ``" | "``.
"""
from __future__ import annotations

import dataclasses
import itertools
import json
import math
import re
import time
from typing import Any
from urllib.parse import urlsplit

import h11
import trio
from mockhttp import Exchange, RequestLog, control, fmt_seconds, serve_http, while_watching

__all__ = [
    "DEFAULT_DELTAS",
    "INPUT_TOKENS",
    "OUTPUT_TOKENS",
    "SCENARIOS",
    "MockResponses",
    "Scenario",
    "WEATHER_ANSWER_PREFIX",
    "WEATHER_TOOL_SUFFIX",
    "offered_tools",
    "serve_mock",
    "weather_answer",
]

DEFAULT_DELTAS: tuple[str, ...] = ("Hello", " from", " the mock", " upstream.")
INPUT_TOKENS = 25
OUTPUT_TOKENS = 7
WEATHER_TOOL_SUFFIX = "get_weather"
WEATHER_ANSWER_PREFIX = "Weather report: "
DEFAULT_CITY = "Paris"
_CITIES = re.compile(r"weather in ([A-Z][\w-]*)(?:,? and (?:in )?([A-Z][\w-]*))?")
#: a rendered tool result: "Tool result:" or "Tool result (<id>):", then the text (after an
#: optional "[<name> returned] " tag) up to a blank line
_RENDERED_RESULT = re.compile(
    r"^Tool result(?: \([^)\n]*\))?[^\n]*:\n(?:\[[^\]\n]* returned\] )?(.*?)(?=\n\n|\Z)",
    re.MULTILINE | re.DOTALL)

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
        # a prompt-injected model: calls the first offered tool it knows with `command` (shell
        # tools), `path` (view_image) or a patch adding `marker` (apply_patch); once the tool
        # output comes back, answers text echoing it (so a leak reaches the client); plain
        # text when no such tool is offered
        "tool_attack",
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

_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
# what the mock sends itself (framing, x-request-id, and the error scenarios' retry-after)
_OWN_HEADERS = frozenset({"content-type", "content-length", "transfer-encoding", "connection",
                          "cache-control", "x-request-id", "retry-after"})


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
    command: str = ""  # tool_attack: the shell string for exec_command/shell_command/shell
    path: str = ""  # tool_attack: the file for view_image
    marker: str = ""  # tool_attack: the file an apply_patch call adds
    preamble: str = ""  # get_weather: a text message streamed before the call(s)
    tool_arguments: str | None = None  # get_weather: each call's arguments text, verbatim
    # every scenario that answers POST /v1/responses (the 200 event stream, the error
    # scenarios' errors, a 400 for a malformed body): these response headers too, verbatim
    # after `x-request-id` (and `retry-after`); meant for the rate-limit snapshot codex reads,
    # `x-codex-primary-used-percent` & co. (cli-reference/codex/rate_limits/README.md). Not
    # carried over when `times` runs out.
    response_headers: dict[str, str] = dataclasses.field(default_factory=dict)

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
        for field in ("command", "path", "marker", "preamble"):
            if not isinstance(getattr(self, field), str):
                raise ValueError(f"{field} must be a string")
        if self.tool_arguments is not None and not isinstance(self.tool_arguments, str):
            raise ValueError("tool_arguments must be a string or null")
        object.__setattr__(self, "response_headers", _checked_headers(self.response_headers))

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


def _checked_headers(headers: object) -> dict[str, str]:
    """``response_headers`` as a fresh dict with lower-case names, or ValueError."""
    if not isinstance(headers, dict):
        raise ValueError("response_headers must be an object of header name -> string value")
    checked: dict[str, str] = {}
    for name, value in headers.items():
        if not isinstance(name, str) or not _HEADER_NAME.fullmatch(name):
            raise ValueError(f"response_headers: {name!r} is not a header name")
        if not isinstance(value, str) or any(c in value for c in "\r\n\0"):
            raise ValueError(f"response_headers[{name!r}] must be a one-line string")
        if name.lower() in _OWN_HEADERS:
            raise ValueError(f"response_headers: {name!r} is set by the mock itself")
        checked[name.lower()] = value
    return checked


class MockResponses(RequestLog[Scenario]):
    """The handle ``serve_mock`` hands to ``task_status.started``: ``requests`` are the recorded
    /v1 requests, secrets redacted; ``wait_for_requests``, ``wait_for_outcome``,
    ``set_scenario``, ``clear_requests`` as in ``mockhttp.RequestLog``."""

    SECRET_HEADERS = frozenset({"authorization", "proxy-authorization", "cookie", "openai-api-key"})

    @property
    def base_url(self) -> str:
        """What to put in codex's ``model_providers.<id>.base_url`` (ends in ``/v1``)."""
        return self._url("/v1")


def _error_payload(
    error_type: str, message: str, code: str | None, **extra: Any
) -> dict[str, Any]:
    return {"error": {"message": message, "type": error_type, "param": None, "code": code,
                      **extra}}


class _Sse:
    """Numbers the events of one response (``sequence_number`` from 0)."""

    def __init__(self, ex: Exchange) -> None:
        self.ex = ex
        self.seq = itertools.count()

    async def send(self, event_type: str, **fields: Any) -> None:
        event = {"type": event_type, "sequence_number": next(self.seq), **fields}
        await self.ex.send_sse(json.dumps(event), event=event_type)

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


def offered_tools(body: dict[str, Any]) -> list[str]:
    """The names of the tools a Responses request offers: its ``tools`` and the tools of any
    ``additional_tools`` input item (codex's code-mode models), namespaced ``ns.name``."""

    def names(tools: Any, prefix: str = "") -> list[str]:
        out: list[str] = []
        for tool in tools if isinstance(tools, list) else []:
            if not isinstance(tool, dict):
                continue
            name = str(tool.get("name") or tool.get("type"))
            if tool.get("type") == "namespace":
                out += names(tool.get("tools"), f"{prefix}{name}.")
            else:
                out.append(prefix + name)
        return out

    found = names(body.get("tools"))
    for item in body.get("input") or []:
        if isinstance(item, dict) and item.get("type") == "additional_tools":
            found += names(item.get("tools"))
    return found


def _tool_outputs(body: dict[str, Any]) -> list[str]:
    """The text of every tool result the request carries back (``function_call_output``,
    ``custom_tool_call_output``, ``local_shell_call_output``; content lists flattened)."""
    out: list[str] = []
    for item in body.get("input") or []:
        if not isinstance(item, dict) or not str(item.get("type", "")).endswith("call_output"):
            continue
        output = item.get("output")
        if isinstance(output, list):
            out += [str(part.get("text") or part.get("image_url") or "") for part in output
                    if isinstance(part, dict)]
        else:
            out.append(output if isinstance(output, str) else json.dumps(output))
    return out


def _last_user_text(body: dict[str, Any]) -> str:
    """The text of the request's last user message (codex puts the prompt there)."""
    users = [i for i in body.get("input") or []
             if isinstance(i, dict) and i.get("role") == "user"]
    if not users:
        return ""
    content = users[-1].get("content")
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return content if isinstance(content, str) else ""


def _weather_tool(body: dict[str, Any]) -> tuple[str | None, str] | None:
    """``(namespace, name)`` of the offered tool whose name ends with ``get_weather``."""
    for tool in body.get("tools") or []:
        if not isinstance(tool, dict):
            continue
        if tool.get("type") == "namespace":
            for inner in tool.get("tools") or []:
                name = inner.get("name") if isinstance(inner, dict) else None
                if isinstance(name, str) and name.endswith(WEATHER_TOOL_SUFFIX):
                    return str(tool.get("name")), name
        elif isinstance(tool.get("name"), str) and tool["name"].endswith(WEATHER_TOOL_SUFFIX):
            return None, tool["name"]
    return None


def weather_answer(body: dict[str, Any]) -> list[tuple[str | None, str, str]] | str | None:
    """get_weather: the calls to make (``[(namespace, name, JSON arguments)]``), the text that
    quotes the results already in the request, or None when no such tool is offered."""
    tool = _weather_tool(body)
    if tool is None:
        return None
    text = _last_user_text(body)
    results = _tool_outputs(body) + [r.strip() for r in _RENDERED_RESULT.findall(text)]
    if results:
        return WEATHER_ANSWER_PREFIX + " | ".join(results)
    match = _CITIES.search(text)
    cities = [c for c in match.groups() if c] if match else [DEFAULT_CITY]
    namespace, name = tool
    return [(namespace, name, json.dumps({"city": city})) for city in cities]


def _weather_calls(calls: list[tuple[str | None, str, str]], n: int) -> list[dict[str, Any]]:
    """The complete ``function_call`` output items for ``calls``."""
    items: list[dict[str, Any]] = []
    for i, (namespace, name, arguments) in enumerate(calls):
        item: dict[str, Any] = {"id": f"fc_mock{n:06d}_{i}", "type": "function_call",
                                "status": "completed", "arguments": arguments,
                                "call_id": f"call_mock{n:06d}_{i}", "name": name}
        if namespace is not None:
            item["namespace"] = namespace
        items.append(item)
    return items


def _attack_call(scenario: Scenario, body: dict[str, Any], n: int) -> dict[str, Any] | None:
    """The tool call a prompt-injected model would make with what ``body`` offers (the
    Responses API output item, complete), or None."""
    call_id, item_id = f"call_mock{n:06d}", f"fc_mock{n:06d}"
    shell = ["bash", "-lc", scenario.command]
    patch = f"*** Begin Patch\n*** Add File: {scenario.marker}\n+pwned\n*** End Patch\n"
    for name in offered_tools(body):
        if name == "exec_command" and scenario.command:
            args: Any = {"cmd": scenario.command}
        elif name == "shell_command" and scenario.command:
            args = {"command": scenario.command}
        elif name == "shell" and scenario.command:
            args = {"command": shell}
        elif name == "local_shell" and scenario.command:
            return {"id": item_id, "type": "local_shell_call", "call_id": call_id,
                    "status": "completed",
                    "action": {"type": "exec", "command": shell, "env": {}}}
        elif name == "view_image" and scenario.path:
            args = {"path": scenario.path}
        elif name == "apply_patch" and scenario.marker:
            return {"id": item_id, "type": "custom_tool_call", "call_id": call_id,
                    "name": name, "input": patch, "status": "completed"}
        else:
            continue
        return {"id": item_id, "type": "function_call", "call_id": call_id, "name": name,
                "arguments": json.dumps(args), "status": "completed"}
    return None


class _Server:
    def __init__(self, handle: MockResponses) -> None:
        self.handle = handle

    async def dispatch(self, ex: Exchange, request: h11.Request, body: bytes) -> bool:
        """Answer one request; returns False when the connection must be closed."""
        target = request.target.decode("latin-1")
        route = urlsplit(target).path
        method = request.method.decode("latin-1")
        if route.startswith("/_mock/"):
            await control(ex, self.handle, method, route, body)
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
                400, _error_payload("invalid_request_error", reason, None),
                [*extra, *scenario.response_headers.items()],
            )
            self.handle._finish(record, "completed")
            return True
        return await self._responses(ex, scenario, record, payload, request_id)

    async def _responses(
        self,
        ex: Exchange,
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

        eof = await while_watching(ex, respond)
        self.handle._finish(record, "completed" if ex.complete else "client_disconnected")
        return ex.complete and not eof

    async def _error(
        self, ex: Exchange, scenario: Scenario, record: dict[str, Any], request_id: str
    ) -> None:
        if scenario.name == "error":
            status, error_type, code = scenario.status, scenario.error_type, scenario.code
        else:
            status, error_type, code, _ = _ERRORS[scenario.name]
        extra = [("x-request-id", request_id)]
        if scenario.retry_after is not None:
            extra.append(("retry-after", fmt_seconds(scenario.retry_after)))
        extra += scenario.response_headers.items()
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
        ex: Exchange,
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
        await ex.start_sse([("x-request-id", request_id), *scenario.response_headers.items()])
        sse = _Sse(ex)
        pending = _response(response_id, model, "in_progress", [], None, created)
        await sse.send("response.created", response=pending)
        await sse.send("response.in_progress", response=pending)
        deltas = scenario.deltas
        weather = weather_answer(payload) if scenario.name == "success" else None
        if isinstance(weather, list):
            if scenario.tool_arguments is not None:
                weather = [(ns, name, scenario.tool_arguments) for ns, name, _ in weather]
            calls = _weather_calls(weather, n)
            record["tool_calls"] = [c["name"] for c in calls]
            output: list[dict[str, Any]] = []
            if scenario.preamble:
                output.append(await self._message(sse, item_id, 0, (scenario.preamble,),
                                                  scenario))
            for call in calls:
                await self._function_call(sse, call, len(output), scenario)
                output.append(call)
            await sse.send("response.completed",
                           response=_response(response_id, model, "completed", output,
                                              _usage(scenario.cached_tokens), created))
            await ex.send(h11.EndOfMessage())
            return
        if isinstance(weather, str):
            deltas = (weather,)
        if scenario.name == "tool_attack":
            outputs = _tool_outputs(payload)
            call = None if outputs else _attack_call(scenario, payload, n)
            record["tool_call"] = call
            if call is not None:
                await self._tool_call(sse, call, response_id, model, created, scenario)
                return
            deltas = ("Tool output: " + "\n".join(outputs),) if outputs else deltas
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
            for text in deltas:
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


    async def _message(self, sse: _Sse, item_id: str, index: int, deltas: tuple[str, ...],
                       scenario: Scenario) -> dict[str, Any]:
        """Stream one assistant text message at ``output_index`` ``index``; returns the
        complete item."""
        await sse.send("response.output_item.added", output_index=index,
                       item=_message_item(item_id, "", "in_progress"))
        part: dict[str, Any] = {"type": "output_text", "text": "", "annotations": []}
        await sse.send("response.content_part.added", item_id=item_id, output_index=index,
                       content_index=0, part=part)
        for text in deltas:
            await trio.sleep(scenario.delay)
            await sse.send("response.output_text.delta", item_id=item_id, output_index=index,
                           content_index=0, delta=text, logprobs=[])
        text = "".join(deltas)
        await sse.send("response.output_text.done", item_id=item_id, output_index=index,
                       content_index=0, text=text, logprobs=[])
        await sse.send("response.content_part.done", item_id=item_id, output_index=index,
                       content_index=0, part={**part, "text": text})
        item = _message_item(item_id, text, "completed")
        await sse.send("response.output_item.done", output_index=index, item=item)
        return item

    async def _function_call(self, sse: _Sse, call: dict[str, Any], index: int,
                             scenario: Scenario) -> None:
        """Stream one complete ``function_call`` item at ``output_index`` ``index``: added
        (empty arguments, in progress), the arguments in two deltas, done, the item done."""
        await sse.send("response.output_item.added", output_index=index,
                       item={**call, "status": "in_progress", "arguments": ""})
        arguments = call["arguments"]
        half = len(arguments) // 2
        for piece in (arguments[:half], arguments[half:]):
            await trio.sleep(scenario.delay)
            await sse.send("response.function_call_arguments.delta", item_id=call["id"],
                           output_index=index, delta=piece)
        await sse.send("response.function_call_arguments.done", item_id=call["id"],
                       output_index=index, arguments=arguments)
        await sse.send("response.output_item.done", output_index=index, item=call)

    async def _tool_call(self, sse: _Sse, call: dict[str, Any], response_id: str, model: str,
                         created: int, scenario: Scenario) -> None:
        """Stream one tool-call output item as the Responses API does: added (empty
        arguments/input), the argument deltas and done, the complete item, completed."""
        started = {**call, "status": "in_progress"}
        kind = call["type"]
        if kind == "function_call":
            started["arguments"] = ""
        elif kind == "custom_tool_call":
            started["input"] = ""
        await sse.send("response.output_item.added", output_index=0, item=started)
        await trio.sleep(scenario.delay)
        if kind == "function_call":
            await sse.send("response.function_call_arguments.delta", item_id=call["id"],
                           output_index=0, delta=call["arguments"])
            await sse.send("response.function_call_arguments.done", item_id=call["id"],
                           output_index=0, arguments=call["arguments"])
        elif kind == "custom_tool_call":
            await sse.send("response.custom_tool_call_input.delta", item_id=call["id"],
                           output_index=0, delta=call["input"])
            await sse.send("response.custom_tool_call_input.done", item_id=call["id"],
                           output_index=0, input=call["input"])
        await sse.send("response.output_item.done", output_index=0, item=call)
        await sse.send("response.completed",
                       response=_response(response_id, model, "completed", [call],
                                          _usage(scenario.cached_tokens), created))
        await sse.ex.send(h11.EndOfMessage())


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
    await serve_http(handle, _Server(handle).dispatch, host=host, port=port,
                     bad_request=lambda message: _error_payload("invalid_request_error", message,
                                                                None),
                     task_status=task_status)
