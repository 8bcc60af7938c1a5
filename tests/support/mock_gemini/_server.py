"""A loopback mock of the Gemini API (generativelanguage ``v1beta``), served with h11 on trio.

Faithful to what the real ``gemini`` CLI (``@google/gemini-cli`` 0.61.0) needs, as captured in
``tests/fixtures/cli-reference/gemini/`` (its ``mock_gemini.py`` is the stdlib original):

* ``POST /{version}/models/{model}:streamGenerateContent?alt=sse`` → an SSE stream of
  ``GenerateContentResponse`` chunks, ``data: <json>\\r\\n\\r\\n`` each (Google's framing):
  ``candidates[0].content.parts[].text`` per delta, ``usageMetadata`` on every chunk, the
  last one with ``finishReason: "STOP"`` and prompt 25 / candidates 7 tokens.
* ``POST /{version}/models/{model}:generateContent`` → one response with the whole text.
* Errors: the HTTP status and Google's body ``{"error": {"code", "message", "status",
  "details"}}`` (the CLI copies the message, or the whole body, into its ``result`` line);
  ``rate_limit`` carries a per-minute ``QuotaFailure`` and ``RetryInfo`` and ends its message
  ``Please retry in Ns.``; ``rate_limit_daily`` a ``...PerDay...`` quota.
* Scenario ``weather`` (``_weather.py``): a tool-using model — ``functionCall`` parts when a
  ``get_weather`` function is declared and no result is in the conversation, then text
  quoting the results.
* Anything else → 404 in Google's shape.

Every request is recorded (:class:`MockGemini`; ``x-goog-api-key`` redacted, kept as a
SHA-256), with the model from the path and ``tool_declarations``: the names of every
function declaration in the body's ``tools`` (what the security tests check is empty).

A small control API under ``/_mock/`` lets an out-of-process test change the scenario and read
the recorded requests (``mockhttp.control``).
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import re
from typing import Any

import h11
import trio
from mockhttp import Exchange, RequestLog, Responder, serve_mock_of
from mockhttp.scenario import DEFAULT_DELTAS, INPUT_TOKENS, OUTPUT_TOKENS, ScenarioBase

from ._weather import weather_chunks

ERROR_SCENARIOS: frozenset[str] = frozenset({
    "rate_limit", "rate_limit_daily", "rate_limit_bare", "invalid_key_400",
    "unauthenticated_401", "permission_403", "not_found_404", "server_500", "unavailable_503"})
SCENARIOS: frozenset[str] = frozenset({
    "success",  # the deltas, `delay` seconds apart, then usage and STOP
    "slow",  # " chunk0", " chunk1", ... one every `interval` s; `count` chunks or forever
    "stall",  # one delta, then silence with the connection open
    "hang",  # read the request, never send a status line
    "conn_drop",  # two deltas, then the socket closed without the terminating chunk
    "empty",  # 200, one chunk with no parts and finishReason STOP
    "weather",  # the weather model (_weather.py): functionCall parts, then text from results
    *ERROR_SCENARIOS,
})
_ROUTE = re.compile(r"^/(?P<version>[\w.]+)/models/(?P<model>[^/:]+):(?P<method>\w+)$")


@dataclasses.dataclass(frozen=True)
class Scenario(ScenarioBase):
    """What the mock answers to a generate request; unused options are ignored."""

    name: str = "success"
    deltas: tuple[str, ...] = DEFAULT_DELTAS  # success/stall/conn_drop: the text deltas
    delay: float = 0.05  # success: seconds before each delta
    interval: float = 2.0  # slow: seconds before each chunk
    count: int | None = None  # slow: number of chunks, None = forever
    retry_delay: str = "2s"  # rate_limit: RetryInfo.retryDelay and "Please retry in ..."
    times: int | None = None  # serve this scenario to the next N requests, then "success"
    extra_args: dict[str, Any] | None = None  # weather: merged into every call's args

    def __post_init__(self) -> None:
        self.check_common(SCENARIOS)
        if self.extra_args is not None and not isinstance(self.extra_args, dict):
            raise ValueError("extra_args must be an object or null")
        if not isinstance(self.retry_delay, str) or not re.fullmatch(r"\d+(\.\d+)?s",
                                                                     self.retry_delay):
            raise ValueError('retry_delay must be a duration like "2s"')


class MockGemini(RequestLog[Scenario]):
    """The handle ``serve_mock`` hands to ``task_status.started``: ``requests`` are the recorded
    requests, the key redacted; ``wait_for_requests``, ``wait_for_outcome``, ``set_scenario``,
    ``clear_requests`` as in ``mockhttp.RequestLog``."""

    SECRET_HEADERS = frozenset({"x-goog-api-key", "authorization", "proxy-authorization",
                                "cookie"})
    CREDENTIAL_HEADERS = frozenset({"x-goog-api-key", "authorization"})

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT``: what ``GOOGLE_GEMINI_BASE_URL`` gets."""
        return self._url()

    def generate_requests(self) -> list[dict[str, Any]]:
        """The recorded generate requests (streamed or not)."""
        return [r for r in self.requests if r.get("method_name") in (
            "streamGenerateContent", "generateContent")]


def _quota_message(model: str, retry: str | None) -> str:
    text = ("You exceeded your current quota, please check your plan and billing details. For "
            "more information on this error, head to: https://ai.google.dev/gemini-api/docs/"
            "rate-limits. To monitor your current usage, head to: https://ai.dev/usage?tab="
            "rate-limit. \n* Quota exceeded for metric: generativelanguage.googleapis.com/"
            f"generate_content_free_tier_requests, limit: 2, model: {model}")
    return f"{text}\nPlease retry in {retry}." if retry else text


def _quota_details(model: str, quota_id: str, retry: str) -> list[dict[str, Any]]:
    return [
        {"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": [{
            "quotaMetric": "generativelanguage.googleapis.com/"
                           "generate_content_free_tier_requests",
            "quotaId": quota_id, "quotaDimensions": {"location": "global", "model": model},
            "quotaValue": "2"}]},
        {"@type": "type.googleapis.com/google.rpc.Help", "links": [{
            "description": "Learn more about Gemini API quotas",
            "url": "https://ai.google.dev/gemini-api/docs/rate-limits"}]},
        {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": retry},
    ]


def error_body(scenario: Scenario, model: str) -> tuple[int, dict[str, Any]]:
    """The (status, JSON body) Google sends for an error scenario (as captured)."""
    name = scenario.name

    def err(code: int, status: str, message: str, details: list[Any] | None = None
            ) -> tuple[int, dict[str, Any]]:
        body: dict[str, Any] = {"code": code, "message": message, "status": status}
        if details is not None:
            body["details"] = details
        return code, {"error": body}

    if name == "rate_limit":
        return err(429, "RESOURCE_EXHAUSTED", _quota_message(model, scenario.retry_delay),
                   _quota_details(model, "GenerateRequestsPerMinutePerProjectPerModel-FreeTier",
                                  scenario.retry_delay))
    if name == "rate_limit_daily":
        return err(429, "RESOURCE_EXHAUSTED", _quota_message(model, "20s"),
                   _quota_details(model, "GenerateRequestsPerDayPerProjectPerModel-FreeTier",
                                  "20s"))
    if name == "rate_limit_bare":
        return err(429, "RESOURCE_EXHAUSTED", "Resource has been exhausted (e.g. check quota).")
    if name == "invalid_key_400":
        msg = "API key not valid. Please pass a valid API key."
        return err(400, "INVALID_ARGUMENT", msg, [
            {"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "API_KEY_INVALID",
             "domain": "googleapis.com",
             "metadata": {"service": "generativelanguage.googleapis.com"}}])
    if name == "unauthenticated_401":
        return err(401, "UNAUTHENTICATED", "Request had invalid authentication credentials.")
    if name == "permission_403":
        return err(403, "PERMISSION_DENIED",
                   "Your API key was reported as leaked. Please use another API key.")
    if name == "not_found_404":
        return err(404, "NOT_FOUND", f"models/{model} is not found for API version v1beta, or "
                                     "is not supported for generateContent.")
    if name == "server_500":
        return err(500, "INTERNAL", "An internal error has occurred.")
    if name == "unavailable_503":
        return err(503, "UNAVAILABLE", "The model is overloaded. Please try again later.")
    raise KeyError(name)


def _usage(final: bool) -> dict[str, Any]:
    usage: dict[str, Any] = {"promptTokenCount": INPUT_TOKENS}
    total = INPUT_TOKENS
    if final:
        usage["candidatesTokenCount"] = OUTPUT_TOKENS
        total += OUTPUT_TOKENS
    usage["totalTokenCount"] = total
    return usage


def _chunk(model: str, parts: list[dict[str, Any]], *, final: bool = False) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"parts": parts, "role": "model"}, "index": 0}
    if final:
        candidate["finishReason"] = "STOP"
    return {"candidates": [candidate], "usageMetadata": _usage(final), "modelVersion": model,
            "responseId": "mockResp0001"}


def tool_declarations(body: Any) -> list[str]:
    """The name of every function declaration in a request body's ``tools``."""
    names: list[str] = []
    tools = body.get("tools") if isinstance(body, dict) else None
    for tool in tools if isinstance(tools, list) else []:
        declarations = tool.get("functionDeclarations") if isinstance(tool, dict) else None
        for declaration in declarations if isinstance(declarations, list) else []:
            name = declaration.get("name") if isinstance(declaration, dict) else None
            names.append(name if isinstance(name, str) else "?")
    return names


def google_404(message: str) -> dict[str, Any]:
    return {"error": {"code": 404, "message": message, "status": "NOT_FOUND"}}


class _Server(Responder[MockGemini]):
    def bad_request(self, message: str) -> dict[str, Any]:
        return {"error": {"code": 400, "message": message, "status": "INVALID_ARGUMENT"}}

    async def answer(self, ex: Exchange, record: dict[str, Any]) -> bool:
        route, method = record["route"], record["method"]
        match = _ROUTE.match(route)
        record["model"] = match["model"] if match else None
        record["method_name"] = match["method"] if match else None
        record["tool_declarations"] = tool_declarations(record["body"])
        if match is None or method != "POST" or match["method"] not in (
                "streamGenerateContent", "generateContent"):
            return await self.reply_json(ex, record, 404,
                                         google_404(f"no route {method} {route}"))
        scenario: Scenario = self.take_scenario(record)
        stream = match["method"] == "streamGenerateContent"
        model = match["model"]

        async def respond() -> str | None:
            if scenario.name in ERROR_SCENARIOS:
                status, payload = error_body(scenario, model)
                record["status"] = status
                await ex.respond_json(status, payload)
            elif scenario.name == "hang":
                await trio.sleep_forever()
            elif stream:
                return "dropped" if await self._stream(ex, scenario, record, model) else None
            else:
                await self._whole(ex, scenario, record, model)
            return None

        return await self.watched(ex, record, respond)

    async def _send(self, ex: Exchange, payload: dict[str, Any]) -> None:
        await ex.send(h11.Data(data=f"data: {json.dumps(payload)}\r\n\r\n".encode()))

    async def _stream(self, ex: Exchange, scenario: Scenario, record: dict[str, Any],
                      model: str) -> bool:
        """Stream the answer; True when the mock dropped the connection on purpose."""
        record["status"] = 200
        await ex.start_sse()
        name = scenario.name
        weather = (weather_chunks(record["body"], scenario.extra_args) if name == "weather"
                   else None)
        if weather is not None:
            *head, last = weather
            for parts in head:
                await trio.sleep(scenario.delay)
                await self._send(ex, _chunk(model, parts))
            await trio.sleep(scenario.delay)
            await self._send(ex, _chunk(model, last, final=True))
        elif name == "empty":
            await self._send(ex, _chunk(model, [], final=True))
        elif name == "stall":
            await self._send(ex, _chunk(model, [{"text": scenario.deltas[0]}]))
            await trio.sleep_forever()
        elif name == "conn_drop":
            for text in scenario.deltas[:2]:
                await self._send(ex, _chunk(model, [{"text": text}]))
            await trio.sleep(0.05)
            return True
        elif name == "slow":
            chunks = itertools.count() if scenario.count is None else range(scenario.count)
            for i in chunks:
                await trio.sleep(scenario.interval)
                await self._send(ex, _chunk(model, [{"text": f" chunk{i}"}]))
            await self._send(ex, _chunk(model, [{"text": ""}], final=True))
        else:
            *head, last = scenario.deltas or ("",)
            for text in head:
                await trio.sleep(scenario.delay)
                await self._send(ex, _chunk(model, [{"text": text}]))
            await trio.sleep(scenario.delay)
            await self._send(ex, _chunk(model, [{"text": last}], final=True))
        await ex.send(h11.EndOfMessage())
        return False

    async def _whole(self, ex: Exchange, scenario: Scenario, record: dict[str, Any],
                     model: str) -> None:
        if scenario.name in ("stall", "slow") and scenario.count is None:
            await trio.sleep_forever()
        weather = (weather_chunks(record["body"], scenario.extra_args)
                   if scenario.name == "weather" else None)
        record["status"] = 200
        if weather is not None:
            parts = [p for chunk in weather for p in chunk]
            await ex.respond_json(200, _chunk(model, parts, final=True))
            return
        text = "" if scenario.name == "empty" else "".join(scenario.deltas)
        await ex.respond_json(200, _chunk(model, [{"text": text}] if text else [], final=True))


#: ``await nursery.start(serve_mock, ...)`` (or ``functools.partial(serve_mock, scenario=...,
#: **options)``) serves until cancelled and returns the ``MockGemini`` handle once bound
serve_mock = serve_mock_of(MockGemini, Scenario, _Server)
