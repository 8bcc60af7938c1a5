"""Self-tests of the OpenAI Responses mock over real loopback sockets (a raw h11 client, so
that disconnects happen exactly where the test says). Faithfulness to the real CLI is proven in
tests/realcli/test_proxy_real_codex.py (the real codex accepts every scenario used there).
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path
from typing import Any

import h11
import pytest
import trio
from mock_openai_responses import DEFAULT_DELTAS, MockResponses, Scenario, serve_mock
from mockhttp import MockClient, header, mock_process

GUARD_S = 20
BODY = {
    "model": "gpt-mock",
    "stream": True,
    "input": [{"type": "message", "role": "user",
               "content": [{"type": "input_text", "text": "hi"}]}],
}
STREAM_EVENTS = [
    "response.created", "response.in_progress", "response.output_item.added",
    "response.content_part.added", *["response.output_text.delta"] * 4,
    "response.output_text.done", "response.content_part.done", "response.output_item.done",
    "response.completed",
]


@pytest.fixture
async def mock(nursery: trio.Nursery) -> MockResponses:
    handle: MockResponses = await nursery.start(serve_mock)
    return handle


async def stream_all(client: MockClient) -> list[tuple[str, dict[str, Any]]]:
    events = []
    while (item := await client.sse()) is not None:
        events.append(item)
    return events


async def test_streaming_success_and_keep_alive(mock: MockResponses) -> None:
    with trio.fail_after(GUARD_S):
        client = await MockClient.open(mock)
        try:
            await client.send("POST", "/v1/responses", BODY,
                              headers=(("authorization", "Bearer sk-mock-0000"),))
            response = await client.response()
            events = await stream_all(client)
            client.start_next()  # a second request on the same connection
            await client.send("POST", "/v1/responses", BODY)
            again = await client.response()
            await stream_all(client)
        finally:
            await client.aclose()
        record = await mock.wait_for_outcome(1)
    assert mock.base_url == f"http://127.0.0.1:{mock.port}/v1"
    assert response.status_code == 200 and again.status_code == 200
    assert header(response, "content-type") == "text/event-stream; charset=utf-8"
    assert header(response, "x-request-id") == "req_mock000001"
    assert [name for name, _ in events] == STREAM_EVENTS
    assert all(data["type"] == name for name, data in events)
    assert [data["sequence_number"] for _, data in events] == list(range(len(events)))
    texts = [d["delta"] for n, d in events if n == "response.output_text.delta"]
    assert tuple(texts) == DEFAULT_DELTAS
    done = events[-2][1]["item"]
    assert done["type"] == "message" and done["role"] == "assistant"
    assert done["content"] == [{"type": "output_text", "text": "Hello from the mock upstream.",
                                "annotations": []}]
    completed = events[-1][1]["response"]
    assert completed["status"] == "completed" and completed["model"] == "gpt-mock"
    assert completed["usage"] == {
        "input_tokens": 25, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 7,
        "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 32}
    assert record["body"] == BODY and record["outcome"] == "completed"
    assert record["headers"]["authorization"] == "<redacted len=19>"
    assert record["credential_sha256"] == hashlib.sha256(b"sk-mock-0000").hexdigest()
    assert mock.request_count == 2


async def test_served_model_and_cached_tokens(mock: MockResponses) -> None:
    mock.set_scenario("success", served_model="gpt-5.5-2026-01-01", cached_tokens=10, delay=0)
    with trio.fail_after(GUARD_S):
        client = await MockClient.open(mock)
        try:
            await client.send("POST", "/v1/responses", BODY)
            await client.response()
            events = await stream_all(client)
        finally:
            await client.aclose()
    completed = events[-1][1]["response"]
    assert completed["model"] == "gpt-5.5-2026-01-01"
    assert completed["usage"]["input_tokens_details"] == {"cached_tokens": 10}
    assert completed["usage"]["input_tokens"] == 25  # cached tokens are part of the input


@pytest.mark.parametrize(("scenario", "options", "status", "error_type", "code", "extra"), [
    ("rate_limit", {"retry_after": 2}, 429, "requests", "rate_limit_exceeded",
     {"retry-after": "2"}),
    ("rate_limit", {}, 429, "requests", "rate_limit_exceeded", {"retry-after": None}),
    ("quota", {}, 429, "insufficient_quota", "insufficient_quota", {}),
    ("usage_limit", {}, 429, "usage_limit_reached", None, {}),
    ("auth", {}, 401, "invalid_request_error", "invalid_api_key", {}),
    ("server_error", {}, 500, "server_error", "server_error", {}),
    ("overloaded", {}, 503, "server_error", None, {}),
    ("error", {"status": 400, "code": "context_length_exceeded",
               "message": "Your input exceeds the context window of this model."},
     400, "invalid_request_error", "context_length_exceeded", {}),
])
async def test_error_scenarios(nursery: trio.Nursery, scenario: str, options: dict[str, Any],
                               status: int, error_type: str, code: str | None,
                               extra: dict[str, str | None]) -> None:
    mock = await nursery.start(functools.partial(serve_mock, scenario=scenario, **options))
    with trio.fail_after(GUARD_S):
        client = await MockClient.open(mock)
        try:
            response, body = await client.request("POST", "/v1/responses", BODY)
        finally:
            await client.aclose()
    assert response.status_code == status
    assert header(response, "x-request-id") == "req_mock000001"
    error = body["error"]
    assert (error["type"], error["code"], error["param"]) == (error_type, code, None)
    assert isinstance(error["message"], str) and error["message"]
    if "message" in options:
        assert error["message"] == options["message"]
    if scenario == "usage_limit":
        assert error["resets_in_seconds"] == 3600 and error["plan_type"] == "plus"
        assert isinstance(error["resets_at"], int)
    for name, value in extra.items():
        assert header(response, name) == value
    assert mock.requests[0]["status"] == status


async def test_times_then_success_and_set_scenario(mock: MockResponses) -> None:
    mock.set_scenario("server_error", times=2)
    statuses = []
    with trio.fail_after(GUARD_S):
        for _ in range(3):
            client = await MockClient.open(mock)
            try:
                await client.send("POST", "/v1/responses", BODY)
                response = await client.response()
                await client.body()
            finally:
                await client.aclose()
            statuses.append(response.status_code)
    assert statuses == [500, 500, 200]
    assert mock.scenario.name == "success"
    assert [r["scenario"] for r in mock.requests] == ["server_error", "server_error", "success"]


async def test_slow_with_count_streams_chunks_then_completes(mock: MockResponses) -> None:
    mock.set_scenario("slow", interval=0.01, count=3)
    with trio.fail_after(GUARD_S):
        client = await MockClient.open(mock)
        try:
            await client.send("POST", "/v1/responses", BODY)
            await client.response()
            events = await stream_all(client)
        finally:
            await client.aclose()
    texts = [d["delta"] for n, d in events if n == "response.output_text.delta"]
    assert texts == [" chunk0", " chunk1", " chunk2"]
    assert events[-1][1]["response"]["output"][0]["content"][0]["text"] == " chunk0 chunk1 chunk2"


async def test_disconnect_mid_stream_is_seen_and_the_mock_keeps_serving(
        mock: MockResponses) -> None:
    mock.set_scenario("slow", interval=0.01)  # forever
    with trio.fail_after(GUARD_S):
        client = await MockClient.open(mock)
        try:
            await client.send("POST", "/v1/responses", BODY)
            await client.response()
            while (item := await client.sse()) is not None and \
                    item[0] != "response.output_text.delta":
                pass
        finally:
            await client.aclose()
        record = await mock.wait_for_outcome(1)
        assert record["outcome"] == "client_disconnected"
        mock.set_scenario("success", delay=0)
        client = await MockClient.open(mock)
        try:
            await client.send("POST", "/v1/responses", BODY)
            response = await client.response()
        finally:
            await client.aclose()
    assert response.status_code == 200


async def test_stall_sends_one_delta_then_nothing(mock: MockResponses) -> None:
    mock.set_scenario("stall")
    with trio.fail_after(GUARD_S):
        client = await MockClient.open(mock)
        try:
            await client.send("POST", "/v1/responses", BODY)
            assert (await client.response()).status_code == 200
            names = []
            while (item := await client.sse()) is not None and \
                    item[0] != "response.output_text.delta":
                names.append(item[0])
            assert item is not None and item[1]["delta"] == "Hello"
            with trio.move_on_after(0.3) as silent:
                await client.sse()
            assert silent.cancelled_caught
        finally:
            await client.aclose()
        assert (await mock.wait_for_outcome(1))["outcome"] == "client_disconnected"
    assert names == STREAM_EVENTS[:4]


async def test_hang_never_sends_a_status_line(mock: MockResponses) -> None:
    mock.set_scenario("hang")
    with trio.fail_after(GUARD_S):
        client = await MockClient.open(mock)
        try:
            await client.send("POST", "/v1/responses", BODY)
            with trio.move_on_after(0.3) as silent:
                await client.response()
            assert silent.cancelled_caught
            assert mock.request_count == 1 and mock.requests[0]["outcome"] == "pending"
        finally:
            await client.aclose()
        assert (await mock.wait_for_outcome(1))["outcome"] == "client_disconnected"


async def test_drop_closes_without_a_response(mock: MockResponses) -> None:
    mock.set_scenario("drop")
    with trio.fail_after(GUARD_S):
        client = await MockClient.open(mock)
        try:
            await client.send("POST", "/v1/responses", BODY)
            with pytest.raises(h11.RemoteProtocolError):
                await client.response()
        finally:
            await client.aclose()
    assert mock.requests[0]["outcome"] == "dropped"


async def test_control_api(mock: MockResponses) -> None:
    with trio.fail_after(GUARD_S):
        client = await MockClient.open(mock)
        try:
            response, body = await client.request(
                "POST", "/_mock/scenario", {"scenario": "rate_limit", "retry_after": 0.5})
            assert response.status_code == 200 and body["scenario"]["retry_after"] == 0.5
            client.start_next()
            response, _ = await client.request("POST", "/v1/responses", BODY)
            assert response.status_code == 429 and header(response, "retry-after") == "0.5"
            client.start_next()
            response, listing = await client.request("GET", "/_mock/requests")
            client.start_next()
            response, current = await client.request("GET", "/_mock/scenario")
            assert current["scenario"]["name"] == "rate_limit"
            client.start_next()
            response, bad = await client.request("POST", "/_mock/scenario", {"scenario": "nope"})
            assert response.status_code == 400 and "unknown scenario" in bad["error"]
            client.start_next()
            response, bad = await client.request(
                "POST", "/_mock/scenario", {"scenario": "slow", "speed": 1})
            assert response.status_code == 400 and "speed" in bad["error"]
            client.start_next()
            response, health = await client.request("GET", "/_mock/health")
            assert health == {"ok": True}
            client.start_next()
            response, _ = await client.request("DELETE", "/_mock/requests")
        finally:
            await client.aclose()
    assert listing["count"] == 1
    (record,) = listing["requests"]
    assert record["scenario"] == "rate_limit" and record["status"] == 429
    assert mock.requests == []  # DELETE cleared them


async def test_bad_requests(mock: MockResponses) -> None:
    with trio.fail_after(GUARD_S):
        client = await MockClient.open(mock)
        try:
            response, body = await client.request("POST", "/v1/chat/completions", BODY)
            assert response.status_code == 404
            assert body["error"]["type"] == "invalid_request_error"
            client.start_next()
            response, body = await client.request("POST", "/v1/responses", raw=b"{not json")
            assert response.status_code == 400
            client.start_next()
            response, body = await client.request("GET", "/v1/responses")
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
    with pytest.raises(ValueError, match="cached_tokens"):
        Scenario.build("success", cached_tokens=99)
    assert Scenario.build("quota").message.startswith("You exceeded your current quota")


async def test_process_entry_point(tmp_path: Path) -> None:
    with trio.fail_after(GUARD_S):
        async with mock_process("mock_openai_responses", "--port", "0", "--scenario", "rate_limit",
                                "--retry-after", "1", cwd=tmp_path) as url:
            assert url.startswith("http://127.0.0.1:") and url.endswith("/v1")
            client = await MockClient.open_url(url)
            try:
                response, _ = await client.request("POST", "/v1/responses", BODY)
                assert response.status_code == 429
                assert header(response, "retry-after") == "1"
                client.start_next()
                _, listing = await client.request("GET", "/_mock/requests")
                assert listing["count"] == 1
            finally:
                await client.aclose()
