"""Self-tests of the Mistral chat-completions mock over real loopback sockets (a raw h11
client, so that disconnects happen exactly where the test says). That the REAL vibe accepts it
is proven in tests/realcli/test_proxy_real_vibe.py.
"""

from __future__ import annotations

import functools
import hashlib
import json
from pathlib import Path
from typing import Any

import h11
import pytest
import trio
from mock_mistral import DEFAULT_DELTAS, MockMistral, Scenario, serve_mock
from mockhttp import MockClient, header, mock_process

GUARD_S = 20
CHAT = "/v1/chat/completions"
BOOTSTRAP = ("/v1/connectors/bootstrap?include_auth_actionable_connectors=true"
             "&builtin_connectors=web_search&supports_mcp=true")
BODY = {"model": "mistral-vibe-cli-latest",
        "messages": [{"role": "system", "content": "sys"}, {"role": "user", "content": "hi"}],
        "temperature": 1.0, "max_tokens": 250070}


@pytest.fixture
async def mock(nursery: trio.Nursery) -> MockMistral:
    handle: MockMistral = await nursery.start(serve_mock)
    return handle


async def sse_data(client: MockClient) -> str | None:
    """The next SSE ``data:`` payload, or None at the end of the response."""
    block = await client.sse_block()
    if block is not None:
        assert block.startswith("data: ") and "\n" not in block, block  # no `event:` lines
        return block.removeprefix("data: ")
    return None


async def read_stream(client: MockClient) -> list[str]:
    payloads = []
    while (item := await sse_data(client)) is not None:
        payloads.append(item)
    return payloads


async def test_streaming_success_as_vibe_needs_it(mock: MockMistral) -> None:
    with trio.fail_after(GUARD_S):
        client = await MockClient.open(mock)
        try:
            response, bootstrap = await client.request(
                "GET", BOOTSTRAP, headers=(("authorization", "Bearer k"),))
            assert response.status_code == 404  # as in the captures: vibe goes on without it
            client.start_next()
            await client.send("POST", CHAT, {**BODY, "stream": True},
                              headers=(("accept", "text/event-stream"),))
            response = await client.response()
            payloads = await read_stream(client)
        finally:
            await client.aclose()
        record = await mock.wait_for_outcome(2)
    assert response.status_code == 200
    assert header(response, "content-type") == "text/event-stream; charset=utf-8"
    assert payloads[-1] == "[DONE]"
    chunks = [json.loads(p) for p in payloads[:-1]]
    assert all(c["object"] == "chat.completion.chunk" and c["model"] == BODY["model"]
               and c["id"] == "cmpl-mock000002" for c in chunks)
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    texts = [c["choices"][0]["delta"]["content"] for c in chunks[1:-1]]
    assert tuple(texts) == DEFAULT_DELTAS
    last = chunks[-1]
    assert last["choices"][0]["finish_reason"] == "stop"
    assert last["usage"] == {"prompt_tokens": 25, "completion_tokens": 7, "total_tokens": 32}
    assert all(c["choices"][0]["finish_reason"] is None for c in chunks[:-1])
    assert [r["route"] for r in mock.requests] == ["/v1/connectors/bootstrap", CHAT]
    assert [r["route"] for r in mock.chat_requests()] == [CHAT]
    assert record["body"]["stream"] is True and record["outcome"] == "completed"


async def test_non_streaming_success(mock: MockMistral) -> None:
    with trio.fail_after(GUARD_S):
        client = await MockClient.open(mock)
        try:
            response, body = await client.request("POST", CHAT, BODY)
        finally:
            await client.aclose()
    assert response.status_code == 200
    assert body["object"] == "chat.completion" and body["model"] == BODY["model"]
    assert body["choices"][0]["message"] == {"role": "assistant",
                                             "content": "Hello from the mock upstream."}
    assert body["usage"]["total_tokens"] == 32


@pytest.mark.parametrize(("scenario", "options", "status", "error_type", "retry_after"), [
    ("rate_limit", {"retry_after": 2}, 429, "rate_limited", "2"),
    ("rate_limit", {}, 429, "rate_limited", None),
    ("auth", {}, 401, "invalid_api_key", None),
    ("server_error", {}, 500, "internal_server_error", None),
    ("overloaded", {}, 503, "service_unavailable", None),
    ("error", {"status": 400, "message": "Prompt contains 300000 tokens, too large for model "
               "with 262144 maximum context length"}, 400, "invalid_request_error", None),
])
async def test_error_scenarios(nursery: trio.Nursery, scenario: str, options: dict[str, Any],
                               status: int, error_type: str, retry_after: str | None) -> None:
    mock = await nursery.start(functools.partial(serve_mock, scenario=scenario, **options))
    with trio.fail_after(GUARD_S):
        client = await MockClient.open(mock)
        try:
            response, body = await client.request("POST", CHAT, {**BODY, "stream": True})
        finally:
            await client.aclose()
    assert response.status_code == status
    assert set(body) == {"object", "message", "type", "param", "code"}
    assert body["object"] == "error" and body["type"] == error_type
    if "message" in options:
        assert body["message"] == options["message"]
    assert header(response, "retry-after") == retry_after
    assert mock.requests[0]["status"] == status


async def test_times_then_success(mock: MockMistral) -> None:
    mock.set_scenario("server_error", times=2)
    statuses = []
    with trio.fail_after(GUARD_S):
        for _ in range(3):
            client = await MockClient.open(mock)
            try:
                response, _ = await client.request("POST", CHAT, BODY)
            finally:
                await client.aclose()
            statuses.append(response.status_code)
    assert statuses == [500, 500, 200]
    assert mock.scenario.name == "success"


async def test_slow_with_count_streams_chunks_then_ends(mock: MockMistral) -> None:
    mock.set_scenario("slow", interval=0.01, count=3)
    with trio.fail_after(GUARD_S):
        client = await MockClient.open(mock)
        try:
            await client.send("POST", CHAT, {**BODY, "stream": True})
            await client.response()
            payloads = await read_stream(client)
        finally:
            await client.aclose()
    chunks = [json.loads(p) for p in payloads[:-1]]
    texts = [c["choices"][0]["delta"]["content"] for c in chunks[1:-1]]
    assert texts == [" chunk0", " chunk1", " chunk2"]


async def test_disconnect_mid_stream_is_seen(mock: MockMistral) -> None:
    mock.set_scenario("slow", interval=0.01)  # forever
    with trio.fail_after(GUARD_S):
        client = await MockClient.open(mock)
        try:
            await client.send("POST", CHAT, {**BODY, "stream": True})
            await client.response()
            await sse_data(client)
            await sse_data(client)
        finally:
            await client.aclose()
        record = await mock.wait_for_outcome(1)
    assert record["outcome"] == "client_disconnected"


async def test_stall_sends_one_delta_then_nothing(mock: MockMistral) -> None:
    mock.set_scenario("stall")
    with trio.fail_after(GUARD_S):
        client = await MockClient.open(mock)
        try:
            await client.send("POST", CHAT, {**BODY, "stream": True})
            assert (await client.response()).status_code == 200
            role = json.loads(await sse_data(client) or "")
            hello = json.loads(await sse_data(client) or "")
            with trio.move_on_after(0.3) as silent:
                await sse_data(client)
            assert silent.cancelled_caught
        finally:
            await client.aclose()
        assert (await mock.wait_for_outcome(1))["outcome"] == "client_disconnected"
    assert role["choices"][0]["delta"]["role"] == "assistant"
    assert hello["choices"][0]["delta"] == {"content": "Hello"}


async def test_hang_never_sends_a_status_line(mock: MockMistral) -> None:
    mock.set_scenario("hang")
    with trio.fail_after(GUARD_S):
        client = await MockClient.open(mock)
        try:
            await client.send("POST", CHAT, {**BODY, "stream": True})
            with trio.move_on_after(0.3) as silent:
                await client.response()
            assert silent.cancelled_caught
            assert mock.requests[0]["outcome"] == "pending"
        finally:
            await client.aclose()
        assert (await mock.wait_for_outcome(1))["outcome"] == "client_disconnected"


async def test_drop_closes_without_a_response(mock: MockMistral) -> None:
    mock.set_scenario("drop")
    with trio.fail_after(GUARD_S):
        client = await MockClient.open(mock)
        try:
            await client.send("POST", CHAT, BODY)
            with pytest.raises(h11.RemoteProtocolError):
                await client.response()
        finally:
            await client.aclose()
    assert mock.requests[0]["outcome"] == "dropped"


async def test_control_api_and_redaction(mock: MockMistral) -> None:
    key = "mock-mistral-key-secret"
    with trio.fail_after(GUARD_S):
        client = await MockClient.open(mock)
        try:
            response, body = await client.request(
                "POST", "/_mock/scenario", {"scenario": "rate_limit", "retry_after": 0.5})
            assert response.status_code == 200 and body["scenario"]["retry_after"] == 0.5
            client.start_next()
            response, _ = await client.request(
                "POST", CHAT, BODY, headers=(("authorization", f"Bearer {key}"),))
            assert response.status_code == 429 and header(response, "retry-after") == "0.5"
            client.start_next()
            response, listing = await client.request("GET", "/_mock/requests")
            client.start_next()
            response, bad = await client.request("POST", "/_mock/scenario", {"scenario": "nope"})
            assert response.status_code == 400 and "unknown scenario" in bad["error"]
            client.start_next()
            response, _ = await client.request("DELETE", "/_mock/requests")
        finally:
            await client.aclose()
    assert listing["count"] == 1
    (record,) = listing["requests"]
    assert record["headers"]["authorization"] == f"<redacted len={len(key) + 7}>"
    assert record["credential_sha256"] == hashlib.sha256(key.encode()).hexdigest()
    assert key not in json.dumps(listing)
    assert mock.requests == []


async def test_bad_requests(mock: MockMistral) -> None:
    with trio.fail_after(GUARD_S):
        client = await MockClient.open(mock)
        try:
            response, _ = await client.request("POST", "/v1/fim/completions", BODY)
            assert response.status_code == 404
            client.start_next()
            response, body = await client.request("POST", CHAT, raw=b"{not json")
            assert response.status_code == 400 and body["type"] == "invalid_request_error"
            client.start_next()
            response, _ = await client.request("GET", CHAT)
            assert response.status_code == 405
        finally:
            await client.aclose()
    assert [r["status"] for r in mock.requests] == [404, 400, 405]
    assert mock.requests[1]["body_error"] is not None


def test_scenario_validation() -> None:
    with pytest.raises(ValueError, match="unknown scenario"):
        Scenario.build("nope")
    with pytest.raises(ValueError, match="unknown scenario option"):
        Scenario.build("slow", speed=2)
    with pytest.raises(ValueError, match="times"):
        Scenario.build("auth", times=0)
    assert Scenario.build("auth").message == "Unauthorized"


async def test_process_entry_point(tmp_path: Path) -> None:
    with trio.fail_after(GUARD_S):
        async with mock_process("mock_mistral", "--port", "0", "--scenario", "rate_limit",
                                "--retry-after", "1", cwd=tmp_path) as url:
            assert url.startswith("http://127.0.0.1:")
            client = await MockClient.open_url(url)
            try:
                response, _ = await client.request("POST", CHAT, BODY)
                assert response.status_code == 429
                assert header(response, "retry-after") == "1"
                client.start_next()
                _, listing = await client.request("GET", "/_mock/requests")
                assert listing["count"] == 1
            finally:
                await client.aclose()
