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
import time
from typing import Any

import h11
import trio
from mockhttp import Exchange, RequestLog, Responder, fmt_seconds, serve_mock_of
from mockhttp.scenario import CLI_API_SCENARIOS, INPUT_TOKENS, OUTPUT_TOKENS, CliApiScenario
from mockhttp.weather import WEATHER_TOOL_SUFFIX, report_or_cities

from ._reasoning import DEFAULT_SUMMARY, REASONING_TOKENS, reasoning_shown, stream_reasoning

# besides the shared ones: "quota" (billing: codex never retries it) and "usage_limit" (a
# ChatGPT plan's window, `resets_in_seconds`); "error" also takes a `code`. "tool_attack", a
# prompt-injected model, calls the first offered tool it knows with `command` (shell tools),
# `path` (view_image) or a patch adding `marker` (apply_patch). "reasoning": a reasoning item
# (with a summary of `reasoning_summary` when asked) before the deltas (`_reasoning.py`)
SCENARIOS: frozenset[str] = CLI_API_SCENARIOS | {"quota", "usage_limit", "reasoning"}

# scenario -> (status, error type, error code, message); an error adds `retry-after` if
# `retry_after` is set
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

# what the mock sends itself besides the framing (x-request-id, the errors' retry-after)
_OWN_HEADERS = frozenset({"cache-control", "x-request-id", "retry-after"})


@dataclasses.dataclass(frozen=True)
class Scenario(CliApiScenario):
    """What the mock answers to ``POST /v1/responses``: the shared options (``error_type``:
    an OpenAI error type) and these."""

    resets_in_seconds: int | None = 3600  # usage_limit: in the error body (None: left out)
    code: str | None = None  # error: OpenAI error code
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
    reasoning_summary: tuple[str, ...] = DEFAULT_SUMMARY  # reasoning: the summary's parts

    def __post_init__(self) -> None:
        self.check_common(SCENARIOS, retry_after=True)
        parts = self.reasoning_summary
        if isinstance(parts, str) or not all(isinstance(p, str) for p in parts):
            raise ValueError("reasoning_summary must be a list of strings")
        object.__setattr__(self, "reasoning_summary", tuple(parts))
        if not isinstance(self.cached_tokens, int) or not 0 <= self.cached_tokens <= INPUT_TOKENS:
            raise ValueError(f"cached_tokens must be an integer between 0 and {INPUT_TOKENS}")
        resets = self.resets_in_seconds
        if resets is not None and (not isinstance(resets, int) or resets < 0):
            raise ValueError("resets_in_seconds must be an integer >= 0 or null")
        self.check_strings("command", "path", "marker", "preamble")
        if self.tool_arguments is not None and not isinstance(self.tool_arguments, str):
            raise ValueError("tool_arguments must be a string or null")
        self.check_headers("response_headers", _OWN_HEADERS)

    @classmethod
    def defaults(cls, name: str) -> dict[str, Any]:
        return {"message": _ERRORS[name][3]} if name in _ERRORS else {}


class MockResponses(RequestLog[Scenario]):
    """The handle ``serve_mock`` hands to ``task_status.started``: ``requests`` are the recorded
    /v1 requests, secrets redacted; ``wait_for_requests``, ``wait_for_outcome``,
    ``set_scenario``, ``clear_requests`` as in ``mockhttp.RequestLog``."""

    SECRET_HEADERS = frozenset({"authorization", "proxy-authorization", "cookie", "openai-api-key"})
    #: Set by a test: a text answer's last delta waits for this event (a causal streaming
    #: test releases it once its client has read the first delta).
    hold_last_delta: trio.Event | None = None

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

def _usage(cached_tokens: int, reasoning_tokens: int = 0) -> dict[str, Any]:
    return {
        "input_tokens": INPUT_TOKENS,
        "input_tokens_details": {"cached_tokens": cached_tokens},
        "output_tokens": OUTPUT_TOKENS,
        "output_tokens_details": {"reasoning_tokens": reasoning_tokens},
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
    move = report_or_cities(_last_user_text(body), _tool_outputs(body))
    if isinstance(move, str):
        return move
    namespace, name = tool
    return [(namespace, name, json.dumps({"city": city})) for city in move]


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


class _Server(Responder[MockResponses]):
    def bad_request(self, message: str) -> dict[str, Any]:
        return _error_payload("invalid_request_error", message, None)

    async def answer(self, ex: Exchange, record: dict[str, Any]) -> bool:
        route, method = record["route"], record["method"]
        request_id = f"req_mock{record['n']:06d}"
        extra = [("x-request-id", request_id)]
        refused = ((404, f"Invalid URL ({method} {route})") if route != "/v1/responses"
                   else (405, f"Method {method} not allowed") if method != "POST" else None)
        if refused is not None:
            status, reason = refused
            return await self.reply_json(
                ex, record, status, _error_payload("invalid_request_error", reason, None), extra)
        scenario: Scenario = self.take_scenario(record)
        payload = record["body"]
        if (reason := self.model_problem(payload)) is not None:
            return await self.reply_json(
                ex, record, 400, _error_payload("invalid_request_error", reason, None),
                [*extra, *scenario.response_headers.items()])
        return await self._responses(ex, scenario, record, payload, request_id)

    async def _responses(self, ex: Exchange, scenario: Scenario, record: dict[str, Any],
                         payload: dict[str, Any], request_id: str) -> bool:
        name = scenario.name
        if name == "drop":
            return self.drop(record)

        async def respond() -> None:
            if name in _ERRORS or name == "error":
                await self._error(ex, scenario, record, request_id)
            elif name == "hang":
                await trio.sleep_forever()
            else:
                await self._stream(ex, scenario, record, payload, request_id)

        return await self.watched(ex, record, respond)

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

    async def _stream(self, ex: Exchange, scenario: Scenario, record: dict[str, Any],
                      payload: dict[str, Any], request_id: str) -> None:
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
        if scenario.name == "reasoning":
            record["reasoning"] = reasoning_shown(payload)
            thought = await stream_reasoning(sse.send, payload, f"rs_mock{n:06d}",
                                             scenario.reasoning_summary, scenario.delay)
            output = [] if thought is None else [thought]
            output.append(await self._message(sse, item_id, len(output), deltas, scenario))
            usage = _usage(scenario.cached_tokens, 0 if thought is None else REASONING_TOKENS)
            await sse.send("response.completed", response=_response(
                response_id, model, "completed", output, usage, created))
            await ex.send(h11.EndOfMessage())
            return
        await sse.send("response.output_item.added", output_index=0,
                       item=_message_item(item_id, "", "in_progress"))
        part: dict[str, Any] = {"type": "output_text", "text": "", "annotations": []}
        await sse.send("response.content_part.added", item_id=item_id, output_index=0,
                       content_index=0, part=part)
        texts: list[str] = []

        last = len(deltas) - 1

        async def delta(text: str) -> None:
            held = self.handle.hold_last_delta
            if held is not None and len(texts) == last:
                await held.wait()
            if not texts:  # wall clock: a benchmark compares it with its client's
                record["first_delta_at"] = time.time()
            texts.append(text)
            await sse.send("response.output_text.delta", item_id=item_id, output_index=0,
                           content_index=0, delta=text, logprobs=[])

        await scenario.stream_text(delta, deltas)
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


#: ``await nursery.start(serve_mock, ...)`` (or ``functools.partial(serve_mock, scenario=...,
#: **options)``) serves until cancelled and returns the ``MockResponses`` handle once bound
serve_mock = serve_mock_of(MockResponses, Scenario, _Server)
