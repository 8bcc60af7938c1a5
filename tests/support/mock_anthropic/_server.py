"""A loopback mock of the Anthropic Messages API, served with h11 on trio.

Faithful to what the real `claude` CLI (2.1.332) needs (see
``cli-reference/claude/README.md``, "Upstream requests"): ``POST /v1/messages``
(the CLI adds ``?beta=true``), streaming SSE or a plain JSON message, and the
Anthropic error shape. A small control API under ``/_mock/`` lets an
out-of-process test change the scenario and read the recorded requests.

h11 rather than an ASGI framework so that every fault is exact: ``hang`` never
sends a status line, ``drop`` closes the socket without a response, streams are
never cut by a framework response timeout, and a client that goes away is seen
at once (a watcher reads the socket while a response is in flight).
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import h11
import trio
from mockhttp import Exchange, RequestLog, Responder, fmt_seconds, serve_mock_of
from mockhttp.scenario import CLI_API_SCENARIOS, INPUT_TOKENS, OUTPUT_TOKENS, CliApiScenario

from ._thinking import (
    DEFAULT_THINKING,
    thinking_blocks,
    thinking_events,
    thinking_shown,
    thinking_usage,
)
from ._weather import weather_blocks

# "success": the deltas; with a `*get_weather` tool offered, the weather model of
# `_weather.py` (tool_use blocks, then text quoting the results). "tool_attack": claude's `Bash`
# gets {"command": `command`}, `Read` {"file_path": `path`}; `mcp__*` tools are ignored.
# "thinking": a thinking block (`thinking` texts) before the deltas, as the request's
# `thinking` asks (`_thinking.py`).
SCENARIOS = CLI_API_SCENARIOS | {"thinking"}

# scenario -> (status, error type, message); an error adds `retry-after` if `retry_after` is set
_ERRORS: dict[str, tuple[int, str, str]] = {
    "rate_limit": (
        429,
        "rate_limit_error",
        "This request would exceed your organization's rate limit of 50 requests per minute. "
        "Please reduce the prompt length or the maximum tokens requested, or try again later.",
    ),
    "auth": (401, "authentication_error", "invalid x-api-key"),
    "server_error": (500, "api_error", "Internal server error"),
    "overloaded": (529, "overloaded_error", "Overloaded"),
}

# what the mock sends itself besides the framing (request-id, the error scenarios' own options)
_OWN_HEADERS = frozenset({"request-id", "retry-after", "x-should-retry"})


@dataclasses.dataclass(frozen=True)
class Scenario(CliApiScenario):
    """What the mock answers to ``POST /v1/messages``: the shared options (``error_type``: an
    Anthropic error type) and these."""

    # error scenarios: the `x-should-retry` header (None: not sent). The real claude CLI retries
    # a 401 unless it says "false" (as the Anthropic API does), so "auth" defaults to False.
    should_retry: bool | None = None
    command: str = "echo tool_attack"  # tool_attack: the shell command given to `Bash`
    path: str = "/etc/hostname"  # tool_attack: the file given to `Read`
    tool_suffix: str = "get_weather"  # success: the weather model calls the tool ending so
    tool_input: dict[str, Any] | None = None  # success: that call's input (else per city)
    # every scenario that answers /v1/messages (200 stream or JSON, and the error scenarios'
    # errors): these response headers too, verbatim after `request-id`; meant for Anthropic's
    # subscription limits, `anthropic-ratelimit-unified-*` (what claude reads from them:
    # cli-reference/claude/rate_limit_event/README.md). Not carried over when `times` runs out.
    ratelimit_headers: dict[str, str] = dataclasses.field(default_factory=dict)
    thinking: tuple[str, ...] = DEFAULT_THINKING  # thinking: the thinking_delta texts

    def __post_init__(self) -> None:
        self.check_common(SCENARIOS)
        if isinstance(self.thinking, str) or not all(isinstance(t, str) for t in self.thinking):
            raise ValueError("thinking must be a list of strings")
        object.__setattr__(self, "thinking", tuple(self.thinking))
        if self.should_retry is not None and not isinstance(self.should_retry, bool):
            raise ValueError("should_retry must be true, false or null")
        self.check_strings("command", "path", "tool_suffix")
        if self.tool_input is not None and not isinstance(self.tool_input, dict):
            raise ValueError("tool_input must be an object or null")
        self.check_headers("ratelimit_headers", _OWN_HEADERS)

    @classmethod
    def defaults(cls, name: str) -> dict[str, Any]:
        """An error's own message; ``auth`` sends ``x-should-retry: false``."""
        options: dict[str, Any] = {"message": _ERRORS[name][2]} if name in _ERRORS else {}
        return {**options, "should_retry": False} if name == "auth" else options


class MockAnthropic(RequestLog[Scenario]):
    """The handle ``serve_mock`` hands to ``task_status.started``: ``requests`` are the recorded
    /v1 requests, secrets redacted; ``wait_for_requests``, ``wait_for_outcome``,
    ``set_scenario``, ``clear_requests`` as in ``mockhttp.RequestLog``."""

    SECRET_HEADERS = frozenset({"x-api-key", "authorization", "proxy-authorization", "cookie"})
    CREDENTIAL_HEADERS = frozenset({"x-api-key", "authorization"})

    @property
    def base_url(self) -> str:
        """What to put in ``ANTHROPIC_BASE_URL`` (no ``/v1``)."""
        return self._url()


def _error_payload(error_type: str, message: str, request_id: str | None) -> dict[str, Any]:
    payload: dict[str, Any] = {"type": "error", "error": {"type": error_type, "message": message}}
    if request_id is not None:
        payload["request_id"] = request_id
    return payload


def _headers(scenario: Scenario, request_id: str) -> list[tuple[str, str]]:
    """The headers of a /v1/messages answer: ``request-id``, then the scenario's own."""
    return [("request-id", request_id), *scenario.ratelimit_headers.items()]


async def _sse(ex: Exchange, event: dict[str, Any]) -> None:
    await ex.send_sse(json.dumps(event), event=event["type"])


def _usage(output_tokens: int) -> dict[str, int]:
    return {
        "input_tokens": INPUT_TOKENS,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        "output_tokens": output_tokens,
    }


# tool_attack: which offered tool to call, and with what. A shell tool first, then a file reader.
_ATTACK_TOOLS: tuple[tuple[str, str], ...] = (("Bash", "command"), ("Read", "file_path"))
NO_TOOL_TEXT = "No tool was offered."
TOOL_RESULT_PREFIX = "Tool result: "


def _tool_result_text(payload: dict[str, Any]) -> str | None:
    """The text of the `tool_result` blocks in the request's last user message, or None."""
    messages = payload.get("messages")
    if not isinstance(messages, list) or not messages or not isinstance(messages[-1], dict):
        return None
    content = messages[-1].get("content")
    if messages[-1].get("role") != "user" or not isinstance(content, list):
        return None
    texts: list[str] = []
    found = False
    for block in content:
        if not isinstance(block, dict) or block.get("type") != "tool_result":
            continue
        found = True
        inner = block.get("content")
        if isinstance(inner, str):
            texts.append(inner)
        elif isinstance(inner, list):
            texts.extend(b["text"] for b in inner
                         if isinstance(b, dict) and isinstance(b.get("text"), str))
    return "\n".join(texts) if found else None


def _attack_call(payload: dict[str, Any], scenario: Scenario) -> tuple[str, dict[str, str]] | None:
    """(tool name, input) for the first offered tool the attack can use, or None."""
    tools = payload.get("tools")
    names = {t.get("name") for t in tools if isinstance(t, dict)} if isinstance(tools, list) \
        else set()
    values = {"command": scenario.command, "file_path": scenario.path}
    for name, arg in _ATTACK_TOOLS:
        if name in names:
            return name, {arg: values[arg]}
    return None


class _Server(Responder[MockAnthropic]):
    REASONS = {529: b"Overloaded"}

    def bad_request(self, message: str) -> dict[str, Any]:
        return _error_payload("invalid_request_error", message, None)

    async def answer(self, ex: Exchange, record: dict[str, Any]) -> bool:
        route, method = record["route"], record["method"]
        request_id = f"req_mock{record['n']:06d}"
        if route != "/v1/messages":
            return await self.reply_json(
                ex, record, 404,
                _error_payload("not_found_error", f"Not found: {route}", request_id))
        if method != "POST":
            return await self.reply_json(
                ex, record, 405,
                _error_payload("invalid_request_error", f"Method {method} not allowed", request_id))
        scenario: Scenario = self.take_scenario(record)
        payload = record["body"]
        if (reason := self.model_problem(payload)) is not None:
            return await self.reply_json(
                ex, record, 400, _error_payload("invalid_request_error", reason, request_id))
        return await self._messages(ex, scenario, record, payload, request_id)

    async def _messages(self, ex: Exchange, scenario: Scenario, record: dict[str, Any],
                        payload: dict[str, Any], request_id: str) -> bool:
        n = record["n"]
        model = payload["model"]
        stream = payload.get("stream") is True
        message_id = f"msg_mock{n:06d}"
        name = scenario.name

        if name == "drop":
            return self.drop(record)

        async def respond() -> None:
            if name in _ERRORS or name == "error":
                status, error_type = _ERRORS.get(name, (scenario.status, scenario.error_type))[:2]
                extra = _headers(scenario, request_id)
                if scenario.retry_after is not None:
                    extra.append(("retry-after", fmt_seconds(scenario.retry_after)))
                if scenario.should_retry is not None:
                    extra.append(("x-should-retry", "true" if scenario.should_retry else "false"))
                record["status"] = status
                await ex.respond_json(
                    status, _error_payload(error_type, scenario.message, request_id), extra
                )
            elif name == "hang":
                await trio.sleep_forever()
            elif name == "tool_attack":
                await self._tool_attack(ex, scenario, record, payload, message_id, request_id)
            elif name == "thinking":
                await self._thinking(ex, scenario, record, payload, message_id, request_id)
            elif name == "success" and (weather := weather_blocks(
                    payload, n, suffix=scenario.tool_suffix,
                    tool_input=scenario.tool_input)) is not None:
                record["weather"] = weather[1]
                await self._blocks(ex, scenario, record, payload, weather[0], weather[1],
                                   message_id, request_id)
            elif stream:
                await self._stream(ex, scenario, record, model, message_id, request_id)
            else:
                await self._whole(ex, scenario, record, model, message_id, request_id)

        return await self.watched(ex, record, respond)

    async def _stream(self, ex: Exchange, scenario: Scenario, record: dict[str, Any], model: str,
                      message_id: str, request_id: str, *,
                      before: tuple[list[dict[str, Any]], ...] = (),
                      usage: dict[str, Any] | None = None) -> None:
        """The deltas as a text block, after the blocks ``before`` (each its events, sent
        ``delay`` apart); ``usage`` is added to the final usage."""
        record["status"] = 200
        await _start_message(ex, scenario, message_id, model, request_id)
        for block in before:
            for event in block:
                await trio.sleep(scenario.delay if event["type"] == "content_block_delta" else 0)
                await _sse(ex, event)
        index = len(before)
        await _sse(ex, {"type": "content_block_start", "index": index,
                        "content_block": {"type": "text", "text": ""}})
        await _sse(ex, {"type": "ping"})

        async def delta(text: str) -> None:
            await _sse(ex, {"type": "content_block_delta", "index": index,
                            "delta": {"type": "text_delta", "text": text}})

        await scenario.stream_text(delta)
        await _sse(ex, {"type": "content_block_stop", "index": index})
        await _end_message(ex, "end_turn", usage)

    async def _blocks(self, ex: Exchange, scenario: Scenario, record: dict[str, Any],
                      payload: dict[str, Any], blocks: list[dict[str, Any]], stop_reason: str,
                      message_id: str, request_id: str, *, halves: bool = True) -> None:
        """Answer with these content blocks: streamed as the API does (a text block as one
        delta, a tool_use block's input as two ``input_json_delta`` fragments, or one when not
        ``halves``), or whole."""
        model = payload["model"]
        record["status"] = 200
        if payload.get("stream") is not True:
            await ex.respond_json(
                200,
                {"id": message_id, "type": "message", "role": "assistant", "model": model,
                 "content": blocks, "stop_reason": stop_reason, "stop_sequence": None,
                 "usage": _usage(OUTPUT_TOKENS)},
                _headers(scenario, request_id),
            )
            return
        await _start_message(ex, scenario, message_id, model, request_id)
        for index, block in enumerate(blocks):
            if block["type"] == "text":
                await _sse(ex, {"type": "content_block_start", "index": index,
                                "content_block": {"type": "text", "text": ""}})
                await _sse(ex, {"type": "content_block_delta", "index": index,
                                "delta": {"type": "text_delta", "text": block["text"]}})
            else:
                await _sse(ex, {"type": "content_block_start", "index": index,
                                "content_block": {**block, "input": {}}})
                whole = json.dumps(block["input"])
                half = len(whole) // 2
                for part in (whole[:half], whole[half:]) if halves else (whole,):
                    await _sse(ex, {"type": "content_block_delta", "index": index,
                                    "delta": {"type": "input_json_delta", "partial_json": part}})
            await _sse(ex, {"type": "content_block_stop", "index": index})
        await _end_message(ex, stop_reason)

    async def _tool_attack(self, ex: Exchange, scenario: Scenario, record: dict[str, Any],
                           payload: dict[str, Any], message_id: str, request_id: str) -> None:
        result = _tool_result_text(payload)
        call = None if result is not None else _attack_call(payload, scenario)
        if call is None:
            text = NO_TOOL_TEXT if result is None else TOOL_RESULT_PREFIX + result
            record["tool_attack"] = "echoed tool result" if result is not None else "no tool"
            block: dict[str, Any] = {"type": "text", "text": text}
            stop_reason = "end_turn"
        else:
            tool, tool_input = call
            record["tool_attack"] = f"tool_use {tool}"
            block = {"type": "tool_use", "id": f"toolu_mock{record['n']:06d}", "name": tool,
                     "input": tool_input}
            stop_reason = "tool_use"
        await self._blocks(ex, scenario, record, payload, [block], stop_reason, message_id,
                           request_id, halves=False)

    async def _thinking(self, ex: Exchange, scenario: Scenario, record: dict[str, Any],
                        payload: dict[str, Any], message_id: str, request_id: str) -> None:
        """A thinking block as the request's ``thinking`` asks, then the deltas."""
        shown = record["thinking"] = thinking_shown(payload)
        usage = thinking_usage(shown)
        if payload.get("stream") is True:
            await self._stream(ex, scenario, record, payload["model"], message_id, request_id,
                               before=thinking_events(shown, scenario.thinking), usage=usage)
            return
        record["status"] = 200
        blocks = [*thinking_blocks(shown, scenario.thinking),
                  {"type": "text", "text": "".join(scenario.deltas)}]
        await ex.respond_json(
            200, {"id": message_id, "type": "message", "role": "assistant",
                  "model": payload["model"], "content": blocks, "stop_reason": "end_turn",
                  "stop_sequence": None, "usage": {**_usage(OUTPUT_TOKENS), **usage}},
            _headers(scenario, request_id))

    async def _whole(self, ex: Exchange, scenario: Scenario, record: dict[str, Any], model: str,
                     message_id: str, request_id: str) -> None:
        if scenario.name == "slow":
            if scenario.count is None:
                await trio.sleep_forever()
            await trio.sleep(scenario.interval * scenario.count)
            text = "".join(f" chunk{i}" for i in range(scenario.count))
        else:
            # "stall" answers non-streaming requests in full: that is how the real CLI
            # recovers from a stalled stream (cli-reference case stall_default)
            await trio.sleep(scenario.delay * len(scenario.deltas))
            text = "".join(scenario.deltas)
        record["status"] = 200
        await ex.respond_json(
            200,
            {
                "id": message_id,
                "type": "message",
                "role": "assistant",
                "model": model,
                "content": [{"type": "text", "text": text}],
                "stop_reason": "end_turn",
                "stop_sequence": None,
                "usage": _usage(OUTPUT_TOKENS),
            },
            _headers(scenario, request_id),
        )


async def _start_message(ex: Exchange, scenario: Scenario, message_id: str, model: str,
                         request_id: str) -> None:
    """The 200 of an event stream and its ``message_start`` event."""
    await ex.start_sse(_headers(scenario, request_id))
    await _sse(ex, {
        "type": "message_start",
        "message": {"id": message_id, "type": "message", "role": "assistant", "model": model,
                    "content": [], "stop_reason": None, "stop_sequence": None,
                    "usage": _usage(1)},
    })


async def _end_message(ex: Exchange, stop_reason: str,
                       usage: dict[str, Any] | None = None) -> None:
    """``message_delta`` (the stop reason and usage, with ``usage`` added), ``message_stop``,
    the end of the body."""
    await _sse(ex, {"type": "message_delta",
                    "delta": {"stop_reason": stop_reason, "stop_sequence": None},
                    "usage": {"output_tokens": OUTPUT_TOKENS, **(usage or {})}})
    await _sse(ex, {"type": "message_stop"})
    await ex.send(h11.EndOfMessage())


#: ``await nursery.start(serve_mock, ...)`` (or ``functools.partial(serve_mock, scenario=...,
#: **options)``) serves until cancelled and returns the ``MockAnthropic`` handle once bound
serve_mock = serve_mock_of(MockAnthropic, Scenario, _Server)
