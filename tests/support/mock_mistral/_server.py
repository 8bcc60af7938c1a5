"""A loopback mock of the Mistral chat-completions API, served with h11 on trio.

Faithful to what the real ``vibe`` CLI (mistral-vibe 3.0.2) needs (see
``cli-reference/vibe/README.md``, "Upstream requests"):

* ``GET /v1/connectors/bootstrap?...`` once before the first completion: answered 404, as in the
  captures (the CLI carries on without connectors).
* ``POST /v1/chat/completions`` with ``"stream": true``: SSE ``data: <chat.completion.chunk>``
  lines (no ``event:`` lines) - a first chunk ``delta {role: "assistant", content: ""}``, one
  chunk per text delta, a last chunk with ``finish_reason: "stop"`` **and** top-level ``usage``,
  then ``data: [DONE]``. Without ``stream`` a plain ``chat.completion`` object.
* ``tool_attack`` (security tests): when the request offers a tool that can run a command or
  read a file, the answer is a streamed call of that tool with the scenario's ``command`` /
  ``path`` (chunk ``delta {tool_calls: [{id, type: "function", index, function: {name,
  arguments}}]}``, finish reason ``tool_calls``); the follow-up request that carries the tool
  result is answered with text that echoes it, so a leak would reach the client.
* ``get_weather`` (the tool-calling tests, every non-fault scenario): when the request offers a
  tool whose name ends with ``get_weather`` and the conversation holds no result yet, the answer
  is a call of it, ``{"city": ...}`` per city the last user text asks about ("weather in Paris
  and Tokyo" → two calls, else one; default Paris). The real API streams each call whole, all
  calls of one answer in one delta with distinct ``index`` values: the mock sends
  ``delta {tool_calls: [...]}`` with ``finish_reason: "tool_calls"`` and ``usage`` in that
  chunk, then ``[DONE]``. Once a result is there (a ``role: "tool"`` message after the last
  user message, or a rendered ``Tool result (...):`` block in the last user text - how a CLI
  hop renders the history), the answer is :data:`WEATHER_ANSWER_PREFIX` + the results joined
  by ``" | "``.
* ``thinking`` (an option of the text scenarios): before the text, each of its strings as a
  streamed delta whose ``content`` is a list holding one Mistral thinking chunk, ``[{"type":
  "thinking", "thinking": [{"type": "text", "text": ...}]}]`` (how the API streams a reasoning
  model's thought); none by default.
* Errors: the status plus Mistral's body ``{"object": "error", "message", "type", "param",
  "code"}`` (the CLI echoes the body verbatim into its ``Error: ...`` line).

A small control API under ``/_mock/`` lets an out-of-process test change the scenario and read
the recorded requests. h11 rather than a framework so every fault is exact: ``hang`` never sends
a status line, ``drop`` closes the socket without a response, and a client that goes away is seen
at once (a watcher reads the socket while a response is in flight).
"""
from __future__ import annotations

import dataclasses
import json
import re
import time
from typing import Any

import h11
import trio
from mockhttp import Exchange, RequestLog, Responder, fmt_seconds, serve_mock_of
from mockhttp.scenario import CLI_API_SCENARIOS, INPUT_TOKENS, OUTPUT_TOKENS, CliApiScenario
from mockhttp.weather import chat_weather_tool, report_or_cities

# "tool_attack" goes for the first offered tool of ATTACK_TOOLS, with `command` / `path`, and
# echoes a tool result as "TOOL RESULT: ..."
SCENARIOS = CLI_API_SCENARIOS

# scenario -> (status, Mistral error type, message, Mistral numeric code)
_ERRORS: dict[str, tuple[int, str, str, str]] = {
    "rate_limit": (429, "rate_limited", "Requests rate limit exceeded", "1300"),
    "auth": (401, "invalid_api_key", "Unauthorized", "1000"),
    "server_error": (500, "internal_server_error", "Internal server error", "3000"),
    "overloaded": (503, "service_unavailable", "Service unavailable", "3505"),
}
CHAT_ROUTE = "/v1/chat/completions"
#: tool_attack: the tools it goes for, best first, with the arguments each gets. vibe 3.0.2:
#: ``bash`` {command, timeout_seconds}, ``read_file`` {path}, ``run_typescript`` {code} (its
#: ``tools.file_system.bash`` is the same shell); gemini/qwen-style names for other CLIs.
ATTACK_TOOLS: tuple[str, ...] = ("bash", "run_shell_command", "exec_command", "read_file",
                                 "run_typescript")
TOOL_RESULT_PREFIX = "TOOL RESULT: "
NO_TOOL_ANSWER = "No tool to attack with."
BOOTSTRAP_ROUTE = "/v1/connectors/bootstrap"
#: a rendered tool result (vibe's rendering: always with the call's id)
_RENDERED_RESULT = re.compile(r"^Tool result \([^)\n]*\)[^\n]*:\n(.*?)(?=\n\n|\Z)",
                              re.MULTILINE | re.DOTALL)


@dataclasses.dataclass(frozen=True)
class Scenario(CliApiScenario):
    """What the mock answers to ``POST /v1/chat/completions``: the shared options
    (``error_type``: a Mistral error type) and these."""

    command: str = "id"  # tool_attack: the shell command a shell tool is called with
    path: str = "/etc/hostname"  # tool_attack: the file a file-reading tool is called with
    tools: tuple[str, ...] = ATTACK_TOOLS  # tool_attack: the tools to go for, best first
    thinking: tuple[str, ...] = ()  # text scenarios: thinking chunks streamed before the text

    def __post_init__(self) -> None:
        self.check_common(SCENARIOS, retry_after=True)
        if not isinstance(self.command, str) or not isinstance(self.path, str):
            raise ValueError("command and path must be strings")
        if isinstance(self.tools, str) or not all(t in ATTACK_TOOLS for t in self.tools):
            raise ValueError(f"tools must be a list of names from {list(ATTACK_TOOLS)}")
        object.__setattr__(self, "tools", tuple(self.tools))
        if isinstance(self.thinking, str) or not all(isinstance(t, str) for t in self.thinking):
            raise ValueError("thinking must be a list of strings")
        object.__setattr__(self, "thinking", tuple(self.thinking))

    @classmethod
    def defaults(cls, name: str) -> dict[str, Any]:
        return {"message": _ERRORS[name][2]} if name in _ERRORS else {}


class MockMistral(RequestLog[Scenario]):
    """The handle ``serve_mock`` hands to ``task_status.started``: ``requests`` are the recorded
    /v1 requests, secrets redacted; ``wait_for_requests`` (optionally by ``route``),
    ``wait_for_outcome``, ``set_scenario``, ``clear_requests`` as in ``mockhttp.RequestLog``."""

    SECRET_HEADERS = frozenset({"authorization", "x-api-key", "proxy-authorization", "cookie"})
    CREDENTIAL_HEADERS = frozenset({"authorization", "x-api-key"})
    PARSE_EMPTY_BODY = False  # the bootstrap GET is recorded with no body and no body_error

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT`` (no ``/v1``)."""
        return self._url()

    @property
    def api_base(self) -> str:
        """What to put in vibe's ``[[providers]] api_base`` (``base_url`` + ``/v1``)."""
        return f"{self.base_url}/v1"

    def chat_requests(self) -> list[dict[str, Any]]:
        """The recorded ``POST /v1/chat/completions`` requests (not the bootstrap GET)."""
        return [r for r in self.requests if r["route"] == CHAT_ROUTE]


def _error_payload(error_type: str, message: str, code: str | None) -> dict[str, Any]:
    """Mistral's error body, as the real API (and the cli-reference captures) have it."""
    return {"object": "error", "message": message, "type": error_type, "param": None,
            "code": code}


def _usage() -> dict[str, int]:
    return {"prompt_tokens": INPUT_TOKENS, "completion_tokens": OUTPUT_TOKENS,
            "total_tokens": INPUT_TOKENS + OUTPUT_TOKENS}


def _attack_call(scenario: Scenario, payload: dict[str, Any]) -> tuple[str, str] | None:
    """tool_attack: ``(tool name, JSON arguments)`` for the best offered tool, or None."""
    offered = set()
    for tool in payload.get("tools") or []:
        function = tool.get("function") if isinstance(tool, dict) else None
        if isinstance(function, dict) and isinstance(function.get("name"), str):
            offered.add(function["name"])
    shell = json.dumps(scenario.command)
    arguments = {
        "bash": {"command": scenario.command, "timeout_seconds": 10},
        "run_shell_command": {"command": scenario.command},
        "exec_command": {"cmd": scenario.command},
        "read_file": {"path": scenario.path},
        "run_typescript": {"code": "async function main() { return await "
                                   f"tools.file_system.bash({{command: {shell}}}); }}"},
    }
    for name in scenario.tools:
        if name in offered:
            return name, json.dumps(arguments[name])
    return None


def _tool_results(payload: dict[str, Any]) -> list[str]:
    """The text of every ``role: "tool"`` message after the last user message."""
    messages = [m for m in payload.get("messages") or [] if isinstance(m, dict)]
    last_user = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=-1)
    results = []
    for message in messages[last_user + 1:]:
        if message.get("role") != "tool":
            continue
        content = message.get("content")
        if isinstance(content, list):
            content = "".join(part.get("text", "") if isinstance(part, dict) else str(part)
                              for part in content)
        results.append(content if isinstance(content, str) else json.dumps(content))
    return results


def _last_user_text(payload: dict[str, Any]) -> str:
    messages = [m for m in payload.get("messages") or [] if isinstance(m, dict)]
    users = [m for m in messages if m.get("role") == "user"]
    if not users:
        return ""
    content = users[-1].get("content")
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return content if isinstance(content, str) else ""


def weather_answer(payload: dict[str, Any]) -> list[tuple[str, str]] | str | None:
    """get_weather: the calls to make (``[(tool name, JSON arguments)]``), the text that quotes
    the results already in the conversation, or None when no such tool is offered."""
    name = chat_weather_tool(payload)
    if name is None:
        return None
    move = report_or_cities(_last_user_text(payload), _tool_results(payload), _RENDERED_RESULT)
    return move if isinstance(move, str) else [(name, json.dumps({"city": c})) for c in move]


def _call_id(n: int, i: int) -> str:
    """A Mistral-style call id: 9 alphanumeric characters."""
    return f"W{n:05d}c{i:02d}"


class _Server(Responder[MockMistral]):
    def bad_request(self, message: str) -> dict[str, Any]:
        return _error_payload("invalid_request_error", message, None)

    async def answer(self, ex: Exchange, record: dict[str, Any]) -> bool:
        route, method = record["route"], record["method"]
        if route == BOOTSTRAP_ROUTE and method == "GET":
            # The captures answered 404 here and the CLI went on without connectors.
            return await self.reply_json(ex, record, 404, {"detail": "Not Found"})
        if route != CHAT_ROUTE:
            return await self.reply_json(ex, record, 404, {"detail": "Not Found"})
        if method != "POST":
            return await self.reply_json(ex, record, 405, {"detail": "Method Not Allowed"})
        scenario: Scenario = self.take_scenario(record)
        payload = record["body"]
        if (reason := self.model_problem(payload)) is not None:
            return await self.reply_json(
                ex, record, 400, _error_payload("invalid_request_error", reason, "3001"))
        return await self._chat(ex, scenario, record, payload)

    async def _chat(self, ex: Exchange, scenario: Scenario, record: dict[str, Any],
                    payload: dict[str, Any]) -> bool:
        name = scenario.name
        if name == "drop":
            return self.drop(record)

        async def respond() -> None:
            if name in _ERRORS or name == "error":
                status, error_type, _, code = _ERRORS.get(
                    name, (scenario.status, scenario.error_type, "", None))
                extra = []
                if scenario.retry_after is not None:
                    extra.append(("retry-after", fmt_seconds(scenario.retry_after)))
                record["status"] = status
                await ex.respond_json(status, _error_payload(error_type, scenario.message, code),
                                      extra)
            elif name == "hang":
                await trio.sleep_forever()
            elif payload.get("stream") is True:
                await self._stream(ex, scenario, record, payload)
            else:
                await self._whole(ex, scenario, record, payload)

        return await self.watched(ex, record, respond)

    async def _stream(self, ex: Exchange, scenario: Scenario, record: dict[str, Any],
                      payload: dict[str, Any]) -> None:
        model = payload["model"]
        record["status"] = 200
        completion_id = f"cmpl-mock{record['n']:06d}"
        created = int(time.time())
        await ex.start_sse()

        async def chunk(delta: dict[str, Any], finish_reason: str | None = None,
                        usage: dict[str, int] | None = None) -> None:
            body: dict[str, Any] = {
                "id": completion_id, "object": "chat.completion.chunk", "created": created,
                "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}]}
            if usage is not None:
                body["usage"] = usage
            await ex.send_sse(json.dumps(body))

        await chunk({"role": "assistant", "content": ""})
        weather = (None if scenario.name in ("stall", "slow", "tool_attack")
                   else weather_answer(payload))
        if scenario.name == "tool_attack":
            results = _tool_results(payload)
            call = None if results else _attack_call(scenario, payload)
            record["tool_attack"] = call[0] if call else None
            if call is None:
                text = (TOOL_RESULT_PREFIX + "\n".join(results)) if results else NO_TOOL_ANSWER
                await chunk({"content": text})
            else:
                name, arguments = call
                await chunk({"tool_calls": [{
                    "id": f"call{record['n']:06d}", "type": "function", "index": 0,
                    "function": {"name": name, "arguments": arguments}}]})
            last: dict[str, Any] = {"content": ""}
            reason = "stop" if call is None else "tool_calls"
        elif isinstance(weather, list):
            record["tool_calls"] = [name for name, _ in weather]
            last, reason = {"tool_calls": [
                {"id": _call_id(record["n"], i), "type": "function", "index": i,
                 "function": {"name": name, "arguments": arguments}}
                for i, (name, arguments) in enumerate(weather)]}, "tool_calls"
        else:
            for thought in scenario.thinking:
                await chunk({"content": [{"type": "thinking",
                                          "thinking": [{"type": "text", "text": thought}]}]})
            await scenario.stream_text(lambda text: chunk({"content": text}),
                                       (weather,) if isinstance(weather, str) else None)
            last, reason = {"content": ""}, "stop"
        await chunk(last, reason, _usage())
        await ex.send_sse("[DONE]")
        await ex.send(h11.EndOfMessage())

    async def _whole(self, ex: Exchange, scenario: Scenario, record: dict[str, Any],
                     payload: dict[str, Any]) -> None:
        model = payload["model"]
        weather = weather_answer(payload) if scenario.name == "success" else None
        message: dict[str, Any] = {"role": "assistant"}
        finish_reason = "stop"
        if scenario.name == "slow":
            if scenario.count is None:
                await trio.sleep_forever()
            await trio.sleep(scenario.interval * (scenario.count or 0))
            text = "".join(f" chunk{i}" for i in range(scenario.count or 0))
        elif scenario.name == "stall":
            await trio.sleep_forever()
        elif isinstance(weather, list):
            record["tool_calls"] = [name for name, _ in weather]
            text = ""
            message["tool_calls"] = [
                {"id": _call_id(record["n"], i), "type": "function", "index": i,
                 "function": {"name": name, "arguments": arguments}}
                for i, (name, arguments) in enumerate(weather)]
            finish_reason = "tool_calls"
        elif isinstance(weather, str):
            text = weather
        else:
            await trio.sleep(scenario.delay * len(scenario.deltas))
            text = "".join(scenario.deltas)
        record["status"] = 200
        await ex.respond_json(200, {
            "id": f"cmpl-mock{record['n']:06d}", "object": "chat.completion",
            "created": int(time.time()), "model": model,
            "choices": [{"index": 0, "message": {**message, "content": text},
                         "finish_reason": finish_reason}],
            "usage": _usage()})


#: ``await nursery.start(serve_mock, ...)`` (or ``functools.partial(serve_mock, scenario=...,
#: **options)``) serves until cancelled and returns the ``MockMistral`` handle once bound
serve_mock = serve_mock_of(MockMistral, Scenario, _Server)
