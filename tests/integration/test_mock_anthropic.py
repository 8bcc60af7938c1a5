"""Self-tests of the Anthropic mock over real loopback sockets (a raw h11 client, so that
disconnects happen exactly where the test says). Faithfulness to the real CLI is proven in
tests/realcli/test_mock_anthropic_with_real_claude.py.
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
from mock_anthropic import DEFAULT_DELTAS, MockAnthropic, Scenario, serve_mock
from mockhttp import MockClient, header, mock_process

GUARD_S = 20
BODY = {
    "model": "claude-sonnet-4-6",
    "max_tokens": 100,
    "messages": [{"role": "user", "content": "hi"}],
}


@pytest.fixture
async def mock(nursery: trio.Nursery) -> MockAnthropic:
    return await nursery.start(serve_mock)


async def test_non_streaming_success(mock: MockAnthropic) -> None:
    with trio.fail_after(GUARD_S):
        client = await MockClient.open(mock)
        try:
            response, body = await client.request("POST", "/v1/messages", BODY)
        finally:
            await client.aclose()
        record = await mock.wait_for_outcome(1)  # settles just after the client has it all
    assert response.status_code == 200
    assert header(response, "request-id") == "req_mock000001"
    assert body["type"] == "message" and body["model"] == "claude-sonnet-4-6"
    assert body["content"] == [{"type": "text", "text": "Hello from the mock upstream."}]
    assert body["stop_reason"] == "end_turn"
    assert (body["usage"]["input_tokens"], body["usage"]["output_tokens"]) == (25, 7)
    assert mock.request_count == 1
    assert record["body"] == BODY and record["outcome"] == "completed"


async def test_streaming_success_and_keep_alive(mock: MockAnthropic) -> None:
    with trio.fail_after(GUARD_S):
        client = await MockClient.open(mock)
        try:
            await client.send("POST", "/v1/messages?beta=true", {**BODY, "stream": True})
            response = await client.response()
            events = []
            while (item := await client.sse()) is not None:
                events.append(item)
            client.start_next()  # a second request on the same connection
            again, _ = await client.request("POST", "/v1/messages", BODY)
        finally:
            await client.aclose()
    assert response.status_code == 200
    assert header(response, "content-type") == "text/event-stream; charset=utf-8"
    assert header(response, "request-id") == "req_mock000001"
    names = [name for name, _ in events]
    assert names == [
        "message_start",
        "content_block_start",
        "ping",
        *["content_block_delta"] * 4,
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    assert all(data["type"] == name for name, data in events)
    start = events[0][1]["message"]
    assert start["model"] == "claude-sonnet-4-6" and start["id"] == "msg_mock000001"
    assert start["usage"]["input_tokens"] == 25
    texts = [d["delta"]["text"] for n, d in events if n == "content_block_delta"]
    assert tuple(texts) == DEFAULT_DELTAS
    assert events[-2][1]["usage"] == {"output_tokens": 7}
    assert events[-2][1]["delta"]["stop_reason"] == "end_turn"
    assert again.status_code == 200
    assert [r["path"] for r in mock.requests] == ["/v1/messages?beta=true", "/v1/messages"]


@pytest.mark.parametrize(
    ("scenario", "options", "status", "error_type", "extra"),
    [
        ("rate_limit", {"retry_after": 2}, 429, "rate_limit_error", {"retry-after": "2"}),
        ("rate_limit", {}, 429, "rate_limit_error", {"retry-after": None}),
        ("auth", {}, 401, "authentication_error", {"x-should-retry": "false"}),
        ("server_error", {}, 500, "api_error", {"x-should-retry": None}),
        ("overloaded", {}, 529, "overloaded_error", {}),
        (
            "error",
            {"status": 400, "message": "prompt is too long: 300000 tokens > 200000 maximum"},
            400,
            "invalid_request_error",
            {},
        ),
    ],
)
async def test_error_scenarios(
    nursery: trio.Nursery,
    scenario: str,
    options: dict[str, Any],
    status: int,
    error_type: str,
    extra: dict[str, str | None],
) -> None:
    mock = await nursery.start(functools.partial(serve_mock, scenario=scenario, **options))
    with trio.fail_after(GUARD_S):
        client = await MockClient.open(mock)
        try:
            response, body = await client.request("POST", "/v1/messages", {**BODY, "stream": True})
        finally:
            await client.aclose()
    assert response.status_code == status
    assert body["type"] == "error" and body["error"]["type"] == error_type
    assert body["request_id"] == header(response, "request-id") == "req_mock000001"
    if "message" in options:
        assert body["error"]["message"] == options["message"]
    for name, value in extra.items():
        assert header(response, name) == value
    assert mock.requests[0]["status"] == status


async def test_times_then_success_and_set_scenario(mock: MockAnthropic) -> None:
    mock.set_scenario("server_error", times=2)
    statuses = []
    with trio.fail_after(GUARD_S):
        for _ in range(3):
            client = await MockClient.open(mock)
            try:
                response, _ = await client.request("POST", "/v1/messages", BODY)
            finally:
                await client.aclose()
            statuses.append(response.status_code)
    assert statuses == [500, 500, 200]
    assert mock.scenario.name == "success"
    assert [r["scenario"] for r in mock.requests] == ["server_error", "server_error", "success"]


async def test_slow_with_count_streams_chunks_then_ends(mock: MockAnthropic) -> None:
    mock.set_scenario("slow", interval=0.01, count=3)
    with trio.fail_after(GUARD_S):
        client = await MockClient.open(mock)
        try:
            await client.send("POST", "/v1/messages", {**BODY, "stream": True})
            await client.response()
            events = []
            while (item := await client.sse()) is not None:
                events.append(item)
            client.start_next()
            _, whole = await client.request("POST", "/v1/messages", BODY)
        finally:
            await client.aclose()
    texts = [d["delta"]["text"] for n, d in events if n == "content_block_delta"]
    assert texts == [" chunk0", " chunk1", " chunk2"]
    assert events[-1][0] == "message_stop"
    assert whole["content"][0]["text"] == " chunk0 chunk1 chunk2"


async def test_disconnect_mid_stream_is_seen_and_the_mock_keeps_serving(
    mock: MockAnthropic,
) -> None:
    mock.set_scenario("slow", interval=0.01)  # forever
    with trio.fail_after(GUARD_S):
        client = await MockClient.open(mock)
        try:
            await client.send("POST", "/v1/messages", {**BODY, "stream": True})
            await client.response()
            while (item := await client.sse()) is not None and item[0] != "content_block_delta":
                pass
        finally:
            await client.aclose()
        record = await mock.wait_for_outcome(1)
        assert record["outcome"] == "client_disconnected"
        mock.set_scenario("success")
        client = await MockClient.open(mock)
        try:
            response, _ = await client.request("POST", "/v1/messages", BODY)
        finally:
            await client.aclose()
    assert response.status_code == 200


async def test_stall_sends_one_delta_then_nothing(mock: MockAnthropic) -> None:
    mock.set_scenario("stall")
    with trio.fail_after(GUARD_S):
        client = await MockClient.open(mock)
        try:
            await client.send("POST", "/v1/messages", {**BODY, "stream": True})
            assert (await client.response()).status_code == 200
            names = []
            while (item := await client.sse()) is not None and item[0] != "content_block_delta":
                names.append(item[0])
            assert item == (
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": 0,
                    "delta": {"type": "text_delta", "text": "Hello"},
                },
            )
            with trio.move_on_after(0.3) as silent:
                await client.sse()
            assert silent.cancelled_caught
        finally:
            await client.aclose()
        assert (await mock.wait_for_outcome(1))["outcome"] == "client_disconnected"
    assert names == ["message_start", "content_block_start", "ping"]


async def test_stall_answers_a_non_streaming_retry_in_full(mock: MockAnthropic) -> None:
    mock.set_scenario("stall")
    with trio.fail_after(GUARD_S):
        client = await MockClient.open(mock)
        try:
            response, body = await client.request("POST", "/v1/messages", BODY)
        finally:
            await client.aclose()
    assert response.status_code == 200
    assert body["content"][0]["text"] == "Hello from the mock upstream."


async def test_hang_never_sends_a_status_line(mock: MockAnthropic) -> None:
    mock.set_scenario("hang")
    with trio.fail_after(GUARD_S):
        client = await MockClient.open(mock)
        try:
            await client.send("POST", "/v1/messages", {**BODY, "stream": True})
            with trio.move_on_after(0.3) as silent:
                await client.response()
            assert silent.cancelled_caught
            assert mock.request_count == 1 and mock.requests[0]["outcome"] == "pending"
        finally:
            await client.aclose()
        assert (await mock.wait_for_outcome(1))["outcome"] == "client_disconnected"


async def test_drop_closes_without_a_response(mock: MockAnthropic) -> None:
    mock.set_scenario("drop")
    with trio.fail_after(GUARD_S):
        client = await MockClient.open(mock)
        try:
            await client.send("POST", "/v1/messages", BODY)
            with pytest.raises(h11.RemoteProtocolError):
                await client.response()
        finally:
            await client.aclose()
    assert mock.requests[0]["outcome"] == "dropped"


async def test_control_api_and_redaction(mock: MockAnthropic) -> None:
    key = "sk-ant-secret-123"
    with trio.fail_after(GUARD_S):
        client = await MockClient.open(mock)
        try:
            response, body = await client.request(
                "POST", "/_mock/scenario", {"scenario": "rate_limit", "retry_after": 0.5}
            )
            assert response.status_code == 200 and body["scenario"]["retry_after"] == 0.5
            client.start_next()
            response, _ = await client.request(
                "POST", "/v1/messages?beta=true", BODY, headers=(("x-api-key", key),)
            )
            assert response.status_code == 429 and header(response, "retry-after") == "0.5"
            client.start_next()
            response, listing = await client.request("GET", "/_mock/requests")
            client.start_next()
            response, bad = await client.request("POST", "/_mock/scenario", {"scenario": "nope"})
            assert response.status_code == 400 and "unknown scenario" in bad["error"]
            client.start_next()
            response, bad = await client.request(
                "POST", "/_mock/scenario", {"scenario": "slow", "speed": 1}
            )
            assert response.status_code == 400 and "speed" in bad["error"]
            client.start_next()
            response, _ = await client.request("DELETE", "/_mock/requests")
        finally:
            await client.aclose()
    assert listing["count"] == 1
    (record,) = listing["requests"]
    assert record["headers"]["x-api-key"] == f"<redacted len={len(key)}>"
    assert record["credential_sha256"] == hashlib.sha256(key.encode()).hexdigest()
    assert key not in json.dumps(listing)
    assert record["scenario"] == "rate_limit" and record["status"] == 429
    assert mock.requests == []  # DELETE cleared them


async def test_bad_requests(mock: MockAnthropic) -> None:
    with trio.fail_after(GUARD_S):
        client = await MockClient.open(mock)
        try:
            response, body = await client.request("POST", "/v1/complete", BODY)
            assert response.status_code == 404 and body["error"]["type"] == "not_found_error"
            client.start_next()
            response, body = await client.request("POST", "/v1/messages", raw=b"{not json")
            assert response.status_code == 400
            assert body["error"]["type"] == "invalid_request_error"
            client.start_next()
            response, body = await client.request("GET", "/v1/messages")
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
    assert Scenario.build("auth").should_retry is False
    assert Scenario.build("rate_limit").should_retry is None


async def test_process_entry_point(tmp_path: Path) -> None:
    with trio.fail_after(GUARD_S):
        async with mock_process("mock_anthropic", "--port", "0", "--scenario", "rate_limit",
                                "--retry-after", "1", cwd=tmp_path) as url:
            assert url.startswith("http://127.0.0.1:")
            client = await MockClient.open_url(url)
            try:
                response, body = await client.request("POST", "/v1/messages", BODY)
                assert response.status_code == 429
                assert header(response, "retry-after") == "1"
                client.start_next()
                _, listing = await client.request("GET", "/_mock/requests")
                assert listing["count"] == 1
            finally:
                await client.aclose()
