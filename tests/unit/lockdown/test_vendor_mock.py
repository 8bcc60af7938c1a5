"""The lockdown self-check's vendor mock over a real loopback socket (a raw h11 client): per
dialect, the generation route answers the given text streamed and whole, in the wire format of
the test suite's mocks; other routes get the vendor's 404; proxy-style requests (CONNECT, an
absolute-form target naming another host) are recorded as foreign and refused with a 403; and
every request is recorded before it is answered, without its headers."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import h11
import mockhttp._h11
import pytest
import trio
from mockhttp import MockClient, header

from olp.lockdown import _loopback
from olp.lockdown._vendor_mock import Dialect, Recorded, VendorMock, serve_vendor_mock

GUARD_S = 10
ANSWER = "LOCKDOWN-ANSWER-5d1e"
SECRET = "sk-secret-never-recorded-9a7b"


def _anthropic_stream(events: list[Any]) -> str:
    assert [e["type"] for e in events] == [
        "message_start", "content_block_start", "ping", "content_block_delta",
        "content_block_stop", "message_delta", "message_stop"]
    assert events[0]["message"]["usage"]["input_tokens"] == 25
    assert events[-2]["delta"]["stop_reason"] == "end_turn"
    assert events[-2]["usage"] == {"output_tokens": 7}
    return "".join(e["delta"]["text"] for e in events if e["type"] == "content_block_delta")


def _responses_stream(events: list[Any]) -> str:
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    assert [e["type"] for e in events] == [
        "response.created", "response.in_progress", "response.output_item.added",
        "response.content_part.added", "response.output_text.delta",
        "response.output_text.done", "response.content_part.done",
        "response.output_item.done", "response.completed"]
    done = events[-1]["response"]
    assert done["status"] == "completed" and done["usage"]["total_tokens"] == 32
    assert done["output"][0]["content"][0]["text"] == events[5]["text"]
    return "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta")


def _gemini_stream(events: list[Any]) -> str:
    assert events[-1]["candidates"][0]["finishReason"] == "STOP"
    assert events[-1]["usageMetadata"] == {
        "promptTokenCount": 25, "candidatesTokenCount": 7, "totalTokenCount": 32}
    return "".join(p["text"] for e in events for p in e["candidates"][0]["content"]["parts"])


def _chat_stream(events: list[Any]) -> str:
    assert events[-1] == "[DONE]"
    chunks = events[:-1]
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    assert any(c["choices"] and c["choices"][0]["finish_reason"] == "stop" for c in chunks)
    assert any(c.get("usage") for c in chunks)  # qwen asks for it; mistral always sends it
    return "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks
                   if c["choices"])


@dataclass(frozen=True)
class Case:
    """One dialect: its generation request (streamed and whole), how to read its answer."""

    stream_target: str
    stream_body: dict[str, Any]
    whole_target: str
    whole_body: dict[str, Any]
    streamed_text: Callable[[list[Any]], str]
    whole_text: Callable[[Any], str]
    base_suffix: str
    event_lines: bool  # the stream has `event:` lines


_MESSAGES = [{"role": "user", "content": "hi"}]
CASES: dict[Dialect, Case] = {
    "anthropic": Case(
        "/v1/messages?beta=true",
        {"model": "claude-sonnet-4-6", "max_tokens": 100, "messages": _MESSAGES, "stream": True},
        "/v1/messages", {"model": "claude-sonnet-4-6", "max_tokens": 100, "messages": _MESSAGES},
        _anthropic_stream, lambda b: str(b["content"][0]["text"]), "", True),
    "openai-responses": Case(
        "/v1/responses", {"model": "gpt-5-codex", "input": _MESSAGES, "stream": True},
        "/v1/responses", {"model": "gpt-5-codex", "input": _MESSAGES, "stream": False},
        _responses_stream, lambda b: str(b["output"][0]["content"][0]["text"]), "/v1", True),
    "gemini": Case(
        "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse",
        {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]},
        "/v1beta/models/gemini-2.5-flash:generateContent",
        {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]},
        _gemini_stream, lambda b: str(b["candidates"][0]["content"]["parts"][0]["text"]), "",
        False),
    "openai-chat": Case(
        "/v1/chat/completions",
        {"model": "qwen3-coder-plus", "messages": _MESSAGES, "stream": True,
         "stream_options": {"include_usage": True}},
        "/v1/chat/completions", {"model": "qwen3-coder-plus", "messages": _MESSAGES},
        _chat_stream, lambda b: str(b["choices"][0]["message"]["content"]), "/v1", False),
    "mistral": Case(
        "/v1/chat/completions",
        {"model": "mistral-vibe-cli-latest", "messages": _MESSAGES, "stream": True},
        "/v1/chat/completions", {"model": "mistral-vibe-cli-latest", "messages": _MESSAGES},
        _chat_stream, lambda b: str(b["choices"][0]["message"]["content"]), "/v1", False),
}
DIALECTS = pytest.mark.parametrize("dialect", list(CASES))


async def start(nursery: trio.Nursery, dialect: Dialect) -> VendorMock:
    mock: VendorMock = await nursery.start(
        functools.partial(serve_vendor_mock, dialect, answer=ANSWER))
    return mock


def sse_events(raw: bytes, event_lines: bool) -> list[Any]:
    """The data of every SSE event (JSON, or the bare string ``[DONE]``)."""
    out: list[Any] = []
    for block in raw.decode().replace("\r\n", "\n").split("\n\n"):
        if not block:
            continue
        fields = dict(line.split(": ", 1) for line in block.split("\n"))
        assert ("event" in fields) == event_lines, block
        data = fields["data"]
        out.append(data if data == "[DONE]" else json.loads(data))
        if event_lines:
            assert out[-1]["type"] == fields["event"]
    return out


async def exchange(mock: VendorMock, method: str, target: str, body: Any = None,
                   headers: tuple[tuple[str, str], ...] = ()) -> tuple[h11.Response, bytes]:
    """One request on a fresh connection: the response and its whole body."""
    client = await MockClient.open(mock)
    try:
        await client.send(method, target, body, headers=headers)
        response = await client.response()
        return response, await client.body()
    finally:
        await client.aclose()


@DIALECTS
async def test_streamed_answer_is_recorded_first(nursery: trio.Nursery, dialect: Dialect) -> None:
    case = CASES[dialect]
    with trio.fail_after(GUARD_S):
        mock = await start(nursery, dialect)
        response, raw = await exchange(mock, "POST", case.stream_target, case.stream_body,
                                       headers=(("authorization", f"Bearer {SECRET}"),))
    assert response.status_code == 200
    assert header(response, "content-type") == "text/event-stream; charset=utf-8"
    assert case.streamed_text(sse_events(raw, case.event_lines)) == ANSWER
    assert mock.requests == [Recorded("POST", case.stream_target, "mock", case.stream_body,
                                      False)]
    assert mock.model_requests() == mock.requests
    assert SECRET not in repr(mock.requests)
    assert mock.base_url == f"http://127.0.0.1:{mock.port}{case.base_suffix}"
    assert mock.dialect == dialect


@DIALECTS
async def test_whole_answer_and_keep_alive(nursery: trio.Nursery, dialect: Dialect) -> None:
    case = CASES[dialect]
    with trio.fail_after(GUARD_S):
        mock = await start(nursery, dialect)
        client = await MockClient.open(mock)
        try:
            first, body = await client.request("POST", case.whole_target, case.whole_body)
            client.start_next()
            await client.send("POST", case.stream_target, case.stream_body)
            second = await client.response()
            raw = await client.body()
        finally:
            await client.aclose()
    assert first.status_code == 200 and header(first, "content-type") == "application/json"
    assert case.whole_text(body) == ANSWER
    assert second.status_code == 200
    assert case.streamed_text(sse_events(raw, case.event_lines)) == ANSWER
    assert [r.body for r in mock.model_requests()] == [case.whole_body, case.stream_body]


@DIALECTS
async def test_unknown_route_is_a_recorded_404(nursery: trio.Nursery, dialect: Dialect) -> None:
    with trio.fail_after(GUARD_S):
        mock = await start(nursery, dialect)
        response, raw = await exchange(mock, "POST", "/v1/messages/count_tokens?beta=true"
                                       if dialect == "anthropic" else "/v1/unknown", {"a": 1})
        listing, _ = await exchange(mock, "GET", "/v1/models")
    assert (response.status_code, listing.status_code) == (404, 404)
    assert isinstance(json.loads(raw), dict)  # the vendor's JSON error shape
    assert [(r.method, r.body, r.foreign) for r in mock.requests] == [
        ("POST", {"a": 1}, False), ("GET", None, False)]
    assert mock.model_requests() == []


@DIALECTS
async def test_connect_is_foreign_and_refused(nursery: trio.Nursery, dialect: Dialect) -> None:
    with trio.fail_after(GUARD_S):
        mock = await start(nursery, dialect)
        client = await MockClient.open(mock)
        try:
            await client.send("CONNECT", "api.example.com:443",
                              headers=(("proxy-authorization", f"Basic {SECRET}"),))
            response = await client.response()
            body = await client.body()
            assert await client.stream.receive_some(1024) == b""  # the mock hung up
        finally:
            await client.aclose()
    assert (response.status_code, body) == (403, b"")
    assert mock.requests == [Recorded("CONNECT", "api.example.com:443", "mock", None, True)]
    assert mock.model_requests() == []
    assert SECRET not in repr(mock.requests)


@DIALECTS
async def test_absolute_form_for_another_host_is_foreign(nursery: trio.Nursery,
                                                         dialect: Dialect) -> None:
    case = CASES[dialect]
    with trio.fail_after(GUARD_S):
        mock = await start(nursery, dialect)
        response, body = await exchange(mock, "GET", "http://example.com/x")
        elsewhere = f"http://127.0.0.2:{mock.port}{case.stream_target}"
        posted, _ = await exchange(mock, "POST", elsewhere, case.stream_body)
    assert (response.status_code, body, posted.status_code) == (403, b"", 403)
    assert header(response, "connection") == "close"
    assert mock.requests == [
        Recorded("GET", "http://example.com/x", "mock", None, True),
        Recorded("POST", elsewhere, "mock", case.stream_body, True)]
    assert mock.model_requests() == []


async def test_absolute_form_naming_the_mock_itself_is_answered(nursery: trio.Nursery) -> None:
    case = CASES["anthropic"]
    with trio.fail_after(GUARD_S):
        mock = await start(nursery, "anthropic")
        target = f"http://127.0.0.1:{mock.port}/v1/messages"
        response, body = await exchange(mock, "POST", target, case.whole_body)
    assert response.status_code == 200 and case.whole_text(json.loads(body)) == ANSWER
    assert mock.model_requests() == [Recorded("POST", target, "mock", case.whole_body, False)]


async def test_a_body_that_is_not_json_is_recorded_as_none(nursery: trio.Nursery) -> None:
    with trio.fail_after(GUARD_S):
        mock = await start(nursery, "openai-chat")
        client = await MockClient.open(mock)
        try:
            await client.send("POST", "/v1/chat/completions", raw=b"not json")
            response = await client.response()
            error = json.loads(await client.body())
        finally:
            await client.aclose()
    assert response.status_code == 400 and error["error"]["type"] == "invalid_request_error"
    assert mock.requests == [Recorded("POST", "/v1/chat/completions", "mock", None, False)]


async def test_a_malformed_request_gets_the_vendors_400(nursery: trio.Nursery) -> None:
    with trio.fail_after(GUARD_S):
        mock = await start(nursery, "gemini")
        stream = await trio.open_tcp_stream(mock.host, mock.port)
        try:
            await stream.send_all(b"POST /x HTTP/1.1\r\nno colon here\r\n\r\n")
            raw = b""
            while chunk := await stream.receive_some(65536):
                raw += chunk
        finally:
            await stream.aclose()
    head, _, body = raw.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400 ")
    assert json.loads(body)["error"]["status"] == "INVALID_ARGUMENT"
    assert mock.requests == []


async def test_an_unknown_dialect_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown dialect"):
        await serve_vendor_mock("nope")  # type: ignore[arg-type]


def test_the_test_mocks_share_the_moved_core() -> None:
    for name in ("MAX_BODY", "ClientGone", "Exchange", "fmt_seconds", "read_request",
                 "serve_connection", "serve_http", "while_watching"):
        assert getattr(mockhttp._h11, name) is getattr(_loopback, name)


async def test_gemini_code_assist_for_a_google_login(nursery: trio.Nursery) -> None:
    """A Google login talks to Code Assist (``CODE_ASSIST_ENDPOINT``): its start-up calls are
    answered, and generation is the Gemini API's answer wrapped in ``response``."""
    body = {"model": "gemini-2.5-pro", "project": "p", "request": {"contents": []}}
    with trio.fail_after(GUARD_S):
        mock = await start(nursery, "gemini")
        load, loaded = await exchange(mock, "POST", "/v1internal:loadCodeAssist", {})
        quota, quota_body = await exchange(mock, "POST", "/v1internal:retrieveUserQuota", {})
        stream, raw = await exchange(mock, "POST",
                                     "/v1internal:streamGenerateContent?alt=sse", body)
    assert load.status_code == 200 and json.loads(loaded)["cloudaicompanionProject"]
    assert quota.status_code == 200 and json.loads(quota_body) == {}
    [event] = sse_events(raw, event_lines=False)
    assert stream.status_code == 200
    assert event["response"]["candidates"][0]["content"]["parts"] == [{"text": ANSWER}]
    assert [r.target for r in mock.model_requests()] == [
        "/v1internal:streamGenerateContent?alt=sse"]
