"""What the lockdown self-check's vendor mock answers, per dialect: the ``success`` wire format
of the test suite's mocks (``tests/support/mock_*``), which the real CLIs accept, with one text.

Each dialect's :class:`Spec` says which requests are its generation route and answers every
request that is not foreign: the generation route with a short answer (streamed when the body
asks for it, whole otherwise), any other route as that vendor's mock does (404 or 405 in the
vendor's error shape). Nothing here logs or keeps a header or a body.
"""

from __future__ import annotations

import itertools
import json
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Final, Literal

import h11

from ._loopback import Exchange

Dialect = Literal["anthropic", "openai-responses", "gemini", "openai-chat", "mistral"]

INPUT_TOKENS: Final = 25  # the usage the mocks of the CLIs' APIs report
OUTPUT_TOKENS: Final = 7
CHAT_PROMPT_TOKENS: Final = 21  # the OpenAI-compatible chat mock's prompt tokens


@dataclass(frozen=True, slots=True)
class Call:
    """One request to answer: ``path`` is the target's path (no query), ``body`` the parsed
    JSON (or None), ``text`` the answer, ``n`` the request's number (from 1)."""

    method: str
    path: str
    body: Any
    text: str
    n: int


@dataclass(frozen=True, slots=True)
class Spec:
    """A dialect: its generation route (``is_generation(method, path)``), its answers, the
    JSON body of its answer to a malformed request, and the path its ``base_url`` ends in
    (the value of the CLI's base-URL setting: ``/v1`` where the CLI adds only the route)."""

    is_generation: Callable[[str, str], bool]
    answer: Callable[[Exchange, Call], Awaitable[None]]
    bad_request: Callable[[str], Any]
    base_path: str


def _model_problem(body: Any) -> str | None:
    """Why a body is not a JSON object with a string ``model`` (None: it is)."""
    if isinstance(body, dict) and isinstance(body.get("model"), str):
        return None
    return "body is not JSON" if body is None else "model: a string is required"


def _post_to(route: str) -> Callable[[str, str], bool]:
    return lambda method, path: method == "POST" and path == route


# --- anthropic: POST /v1/messages (mock_anthropic) --------------------------------------------

def _anthropic_error(error_type: str, message: str, request_id: str | None) -> dict[str, Any]:
    payload: dict[str, Any] = {"type": "error", "error": {"type": error_type, "message": message}}
    if request_id is not None:
        payload["request_id"] = request_id
    return payload


def _anthropic_usage(output_tokens: int) -> dict[str, int]:
    return {"input_tokens": INPUT_TOKENS, "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0, "output_tokens": output_tokens}


async def _anthropic(ex: Exchange, call: Call) -> None:
    request_id = f"req_mock{call.n:06d}"
    if call.path != "/v1/messages":
        await ex.respond_json(404, _anthropic_error(
            "not_found_error", f"Not found: {call.path}", request_id))
        return
    if call.method != "POST":
        await ex.respond_json(405, _anthropic_error(
            "invalid_request_error", f"Method {call.method} not allowed", request_id))
        return
    if (reason := _model_problem(call.body)) is not None:
        await ex.respond_json(400, _anthropic_error("invalid_request_error", reason, request_id))
        return
    model, message_id = call.body["model"], f"msg_mock{call.n:06d}"
    headers = [("request-id", request_id)]
    if call.body.get("stream") is not True:
        await ex.respond_json(200, {
            "id": message_id, "type": "message", "role": "assistant", "model": model,
            "content": [{"type": "text", "text": call.text}], "stop_reason": "end_turn",
            "stop_sequence": None, "usage": _anthropic_usage(OUTPUT_TOKENS)}, headers)
        return

    async def sse(event: dict[str, Any]) -> None:
        await ex.send_sse(json.dumps(event), event=event["type"])

    await ex.start_sse(headers)
    await sse({"type": "message_start", "message": {
        "id": message_id, "type": "message", "role": "assistant", "model": model, "content": [],
        "stop_reason": None, "stop_sequence": None, "usage": _anthropic_usage(1)}})
    await sse({"type": "content_block_start", "index": 0,
               "content_block": {"type": "text", "text": ""}})
    await sse({"type": "ping"})
    await sse({"type": "content_block_delta", "index": 0,
               "delta": {"type": "text_delta", "text": call.text}})
    await sse({"type": "content_block_stop", "index": 0})
    await sse({"type": "message_delta", "delta": {"stop_reason": "end_turn",
                                                   "stop_sequence": None},
               "usage": {"output_tokens": OUTPUT_TOKENS}})
    await sse({"type": "message_stop"})
    await ex.send(h11.EndOfMessage())


# --- openai-responses: POST /v1/responses (mock_openai_responses) -----------------------------

def _openai_error(error_type: str, message: str, code: str | None) -> dict[str, Any]:
    return {"error": {"message": message, "type": error_type, "param": None, "code": code}}


def _response(response_id: str, model: str, status: str, output: list[Any],
              usage: dict[str, Any] | None, created: int) -> dict[str, Any]:
    return {"id": response_id, "object": "response", "created_at": created, "status": status,
            "error": None, "incomplete_details": None, "instructions": None, "model": model,
            "output": output, "parallel_tool_calls": True, "store": False,
            "tool_choice": "auto", "tools": [], "usage": usage}


def _message_item(item_id: str, text: str, status: str) -> dict[str, Any]:
    content = ([{"type": "output_text", "text": text, "annotations": []}]
               if status == "completed" else [])
    return {"id": item_id, "type": "message", "status": status, "role": "assistant",
            "content": content}


async def _responses(ex: Exchange, call: Call) -> None:
    request_id = f"req_mock{call.n:06d}"
    headers = [("x-request-id", request_id)]
    refused = ((404, f"Invalid URL ({call.method} {call.path})") if call.path != "/v1/responses"
               else (405, f"Method {call.method} not allowed") if call.method != "POST"
               else (400, reason) if (reason := _model_problem(call.body)) is not None
               else None)
    if refused is not None:
        await ex.respond_json(refused[0], _openai_error(
            "invalid_request_error", refused[1], None), headers)
        return
    model, created = call.body["model"], int(time.time())
    response_id, item_id = f"resp_mock{call.n:06d}", f"msg_mock{call.n:06d}"
    usage = {"input_tokens": INPUT_TOKENS, "input_tokens_details": {"cached_tokens": 0},
             "output_tokens": OUTPUT_TOKENS, "output_tokens_details": {"reasoning_tokens": 0},
             "total_tokens": INPUT_TOKENS + OUTPUT_TOKENS}
    item = _message_item(item_id, call.text, "completed")
    done = _response(response_id, model, "completed", [item], usage, created)
    if call.body.get("stream") is not True:
        await ex.respond_json(200, done, headers)
        return
    seq = itertools.count()

    async def sse(event_type: str, **fields: Any) -> None:
        event = {"type": event_type, "sequence_number": next(seq), **fields}
        await ex.send_sse(json.dumps(event), event=event_type)

    await ex.start_sse(headers)
    pending = _response(response_id, model, "in_progress", [], None, created)
    await sse("response.created", response=pending)
    await sse("response.in_progress", response=pending)
    await sse("response.output_item.added", output_index=0,
              item=_message_item(item_id, "", "in_progress"))
    part: dict[str, Any] = {"type": "output_text", "text": "", "annotations": []}
    at = {"item_id": item_id, "output_index": 0, "content_index": 0}
    await sse("response.content_part.added", **at, part=part)
    await sse("response.output_text.delta", **at, delta=call.text, logprobs=[])
    await sse("response.output_text.done", **at, text=call.text, logprobs=[])
    await sse("response.content_part.done", **at, part={**part, "text": call.text})
    await sse("response.output_item.done", output_index=0, item=item)
    await sse("response.completed", response=done)
    await ex.send(h11.EndOfMessage())


# --- gemini: POST /{version}/models/{model}:(stream)GenerateContent (mock_gemini) -------------

_GEMINI_ROUTE: Final = re.compile(
    r"^/(?P<version>[\w.]+)/models/(?P<model>[^/:]+):(?P<method>\w+)$")
_GEMINI_METHODS: Final = ("streamGenerateContent", "generateContent")


#: Code Assist, what a Google-account login talks to (``CODE_ASSIST_ENDPOINT``): ``POST
#: /v1internal:<method>``; generation wraps the Gemini API's shapes (the gemini reference's
#: "Google-account (OAuth) login", its capture mock ``mock_gemini.py``).
_CODE_ASSIST: Final = re.compile(r"^/(?P<version>\w+):(?P<method>\w+)$")


def _gemini_generation(method: str, path: str) -> bool:
    match = _GEMINI_ROUTE.match(path) or _CODE_ASSIST.match(path)
    return method == "POST" and match is not None and match["method"] in _GEMINI_METHODS


def _gemini_chunk(model: str, text: str) -> dict[str, Any]:
    """The last (here: only) chunk of an answer, as ``mock_gemini`` sends it."""
    parts = [{"text": text}] if text else []
    return {"candidates": [{"content": {"parts": parts, "role": "model"}, "index": 0,
                            "finishReason": "STOP"}],
            "usageMetadata": {"promptTokenCount": INPUT_TOKENS,
                              "candidatesTokenCount": OUTPUT_TOKENS,
                              "totalTokenCount": INPUT_TOKENS + OUTPUT_TOKENS},
            "modelVersion": model, "responseId": "mockResp0001"}


async def _code_assist(ex: Exchange, call: Call, method: str) -> None:
    if call.method != "POST":
        await ex.respond_json(404, {"error": {
            "code": 404, "message": f"no route {call.method} {call.path}", "status": "NOT_FOUND"}})
        return
    if method not in _GEMINI_METHODS:
        payload: Any = {}
        if method == "loadCodeAssist":
            payload = {"currentTier": {"id": "standard-tier", "name": "Code Assist (OLP check)",
                                       "userDefinedCloudaicompanionProject": True},
                       "cloudaicompanionProject": "olp-lockdown-check"}
        elif method == "countTokens":
            payload = {"totalTokens": INPUT_TOKENS}
        await ex.respond_json(200, payload)
        return
    body = call.body if isinstance(call.body, dict) else {}
    wrapped = {"response": _gemini_chunk(str(body.get("model", "")), call.text),
               "traceId": "olp-check"}
    if method != "streamGenerateContent":
        await ex.respond_json(200, wrapped)
        return
    await ex.start_sse()
    await ex.send(h11.Data(data=f"data: {json.dumps(wrapped)}\r\n\r\n".encode()))
    await ex.send(h11.EndOfMessage())


async def _gemini(ex: Exchange, call: Call) -> None:
    if (assist := _CODE_ASSIST.match(call.path)) is not None:
        await _code_assist(ex, call, assist["method"])
        return
    match = _GEMINI_ROUTE.match(call.path)
    if match is None or not _gemini_generation(call.method, call.path):
        await ex.respond_json(404, {"error": {
            "code": 404, "message": f"no route {call.method} {call.path}", "status": "NOT_FOUND"}})
        return
    chunk = _gemini_chunk(match["model"], call.text)
    if match["method"] != "streamGenerateContent":
        await ex.respond_json(200, chunk)
        return
    await ex.start_sse()
    await ex.send(h11.Data(data=f"data: {json.dumps(chunk)}\r\n\r\n".encode()))
    await ex.send(h11.EndOfMessage())


# --- openai-chat: POST /v1/chat/completions (mock_openai_upstream, qwen) ----------------------

async def _openai_chat(ex: Exchange, call: Call) -> None:
    if call.path != "/v1/chat/completions" or call.method != "POST":
        await ex.respond_json(404, _openai_error(
            "invalid_request_error", f"no route {call.method} {call.path}", "not_found"))
        return
    if _model_problem(call.body) is not None:
        await ex.respond_json(400, _openai_error(
            "invalid_request_error", "a JSON body with a model is required", None))
        return
    model, completion_id = call.body["model"], f"chatcmpl-mock{call.n:06d}"
    usage = {"prompt_tokens": CHAT_PROMPT_TOKENS, "completion_tokens": 1,
             "total_tokens": CHAT_PROMPT_TOKENS + 1}
    created = int(time.time())
    if call.body.get("stream") is not True:
        await ex.respond_json(200, {
            "id": completion_id, "object": "chat.completion", "created": created, "model": model,
            "choices": [{"index": 0, "finish_reason": "stop", "logprobs": None,
                         "message": {"role": "assistant", "content": call.text}}],
            "usage": usage})
        return
    head = {"id": completion_id, "object": "chat.completion.chunk", "created": created,
            "model": model, "system_fingerprint": "fp_mock"}
    options = call.body.get("stream_options")
    include_usage = isinstance(options, dict) and options.get("include_usage") is True

    async def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> None:
        payload: dict[str, Any] = {**head, "choices": [
            {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}]}
        if include_usage:
            payload["usage"] = None
        await ex.send_sse(json.dumps(payload))

    await ex.start_sse([("x-request-id", completion_id)])
    await chunk({"role": "assistant", "content": "", "refusal": None})
    await chunk({"content": call.text})
    await chunk({}, "stop")
    if include_usage:
        await ex.send_sse(json.dumps({**head, "choices": [], "usage": usage}))
    await ex.send_sse("[DONE]")
    await ex.send(h11.EndOfMessage())


# --- mistral: POST /v1/chat/completions (mock_mistral, vibe) ----------------------------------

def _mistral_error(error_type: str, message: str, code: str | None) -> dict[str, Any]:
    return {"object": "error", "message": message, "type": error_type, "param": None,
            "code": code}


async def _mistral(ex: Exchange, call: Call) -> None:
    # GET /v1/connectors/bootstrap (before the first completion) is a 404 too, as captured.
    if call.path != "/v1/chat/completions":
        await ex.respond_json(404, {"detail": "Not Found"})
        return
    if call.method != "POST":
        await ex.respond_json(405, {"detail": "Method Not Allowed"})
        return
    if (reason := _model_problem(call.body)) is not None:
        await ex.respond_json(400, _mistral_error("invalid_request_error", reason, "3001"))
        return
    usage = {"prompt_tokens": INPUT_TOKENS, "completion_tokens": OUTPUT_TOKENS,
             "total_tokens": INPUT_TOKENS + OUTPUT_TOKENS}
    head = {"id": f"cmpl-mock{call.n:06d}", "object": "chat.completion.chunk",
            "created": int(time.time()), "model": call.body["model"]}
    if call.body.get("stream") is not True:
        await ex.respond_json(200, {
            **head, "object": "chat.completion",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": call.text},
                         "finish_reason": "stop"}],
            "usage": usage})
        return

    async def chunk(delta: dict[str, Any], finish_reason: str | None = None,
                    with_usage: bool = False) -> None:
        body: dict[str, Any] = {**head, "choices": [
            {"index": 0, "delta": delta, "finish_reason": finish_reason}]}
        if with_usage:
            body["usage"] = usage
        await ex.send_sse(json.dumps(body))

    await ex.start_sse()
    await chunk({"role": "assistant", "content": ""})
    await chunk({"content": call.text})
    await chunk({"content": ""}, "stop", with_usage=True)
    await ex.send_sse("[DONE]")
    await ex.send(h11.EndOfMessage())


SPECS: Final[dict[Dialect, Spec]] = {
    "anthropic": Spec(_post_to("/v1/messages"), _anthropic,
                      lambda m: _anthropic_error("invalid_request_error", m, None), ""),
    "openai-responses": Spec(_post_to("/v1/responses"), _responses,
                             lambda m: _openai_error("invalid_request_error", m, None), "/v1"),
    "gemini": Spec(_gemini_generation, _gemini,
                   lambda m: {"error": {"code": 400, "message": m, "status": "INVALID_ARGUMENT"}},
                   ""),
    "openai-chat": Spec(_post_to("/v1/chat/completions"), _openai_chat,
                        lambda m: _openai_error("invalid_request_error", m, None), "/v1"),
    # vibe's `api_base` (mock_mistral's `api_base`, not its `base_url`) ends in /v1
    "mistral": Spec(_post_to("/v1/chat/completions"), _mistral,
                    lambda m: _mistral_error("invalid_request_error", m, None), "/v1"),
}
