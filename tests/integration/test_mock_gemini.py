"""Self-tests of the Gemini API mock over real loopback sockets. That the REAL gemini CLI
accepts it is proven in tests/realcli/test_proxy_real_gemini.py."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from typing import Any

import httpx
import pytest
import trio
from mock_gemini import DEFAULT_DELTAS, MockGemini, Scenario, serve_mock

SUPPORT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "support")
STREAM = "/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse"
BODY = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}],
        "systemInstruction": {"parts": [{"text": "sys"}]},
        "tools": [{"functionDeclarations": []}]}
KEY = "fake-gemini-key-0000"


async def start(nursery: trio.Nursery, scenario: str = "success", **options: Any) -> MockGemini:
    mock: MockGemini = await nursery.start(
        lambda task_status: serve_mock(scenario=scenario, task_status=task_status, **options))
    return mock


def chunks(text: str) -> list[dict[str, Any]]:
    """The SSE ``data:`` payloads, split on Google's ``\\r\\n\\r\\n``."""
    return [json.loads(event.removeprefix("data: ")) for event in text.split("\r\n\r\n")
            if event.strip()]


async def post(mock: MockGemini, path: str = STREAM, body: Any = BODY) -> httpx.Response:
    async with httpx.AsyncClient(base_url=mock.base_url, timeout=10) as client:
        return await client.post(path, json=body, headers={"x-goog-api-key": KEY})


async def test_success_streams_deltas_usage_and_stop(nursery: trio.Nursery) -> None:
    with trio.fail_after(10):
        mock = await start(nursery)
        response = await post(mock)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    events = chunks(response.text)
    texts = [e["candidates"][0]["content"]["parts"][0]["text"] for e in events]
    assert texts == list(DEFAULT_DELTAS)
    assert all("usageMetadata" in e for e in events)
    assert events[-1]["candidates"][0]["finishReason"] == "STOP"
    assert events[-1]["usageMetadata"]["candidatesTokenCount"] == 7
    assert "finishReason" not in events[0]["candidates"][0]
    [record] = mock.generate_requests()
    assert record["model"] == "gemini-2.5-pro"
    assert record["body"] == BODY and record["tool_declarations"] == []
    assert record["headers"]["x-goog-api-key"] == f"<redacted len={len(KEY)}>"
    assert record["credential_sha256"] == hashlib.sha256(KEY.encode()).hexdigest()


async def test_tool_declarations_are_recorded(nursery: trio.Nursery) -> None:
    body = {**BODY, "tools": [{"functionDeclarations": [{"name": "read_file"},
                                                        {"name": "glob"}]}]}
    with trio.fail_after(10):
        mock = await start(nursery)
        await post(mock, body=body)
    assert mock.requests[0]["tool_declarations"] == ["read_file", "glob"]


async def test_rate_limit_has_retry_info(nursery: trio.Nursery) -> None:
    with trio.fail_after(10):
        mock = await start(nursery, "rate_limit", retry_delay="3s", times=1)
        limited = await post(mock)
        then = await post(mock)
    assert limited.status_code == 429
    error = limited.json()["error"]
    assert error["status"] == "RESOURCE_EXHAUSTED"
    assert error["message"].endswith("Please retry in 3s.")
    assert {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "3s"} in (
        error["details"])
    assert then.status_code == 200  # `times` ran out: back to success


@pytest.mark.parametrize(("scenario", "status"), [
    ("rate_limit_daily", 429), ("invalid_key_400", 400), ("unauthenticated_401", 401),
    ("permission_403", 403), ("not_found_404", 404), ("server_500", 500),
    ("unavailable_503", 503)])
async def test_error_bodies(nursery: trio.Nursery, scenario: str, status: int) -> None:
    with trio.fail_after(10):
        mock = await start(nursery, scenario)
        response = await post(mock)
    assert response.status_code == status
    assert response.json()["error"]["code"] == status


async def test_slow_streams_until_the_client_goes(nursery: trio.Nursery) -> None:
    with trio.fail_after(10):
        mock = await start(nursery, "slow", interval=0.1)
        # a raw socket: the test hangs up exactly when it says
        stream = await trio.open_tcp_stream(mock.host, mock.port)
        data = json.dumps(BODY).encode()
        await stream.send_all(f"POST {STREAM} HTTP/1.1\r\nhost: mock\r\ncontent-type: "
                              f"application/json\r\ncontent-length: {len(data)}\r\n\r\n"
                              .encode() + data)
        seen = b""
        while seen.count(b"\r\n\r\n") < 4:  # the headers, then three events
            seen += await stream.receive_some(65536)
        await stream.aclose()
        record = await mock.wait_for_outcome(1)
    assert b" chunk2" in seen
    assert record["outcome"] == "client_disconnected"


async def test_conn_drop_and_empty(nursery: trio.Nursery) -> None:
    with trio.fail_after(10):
        mock = await start(nursery, "conn_drop")
        with pytest.raises(httpx.RemoteProtocolError):
            await post(mock)
        record = await mock.wait_for_outcome(1)
        mock.set_scenario("empty")
        empty = await post(mock)
    assert record["outcome"] == "dropped"
    [event] = chunks(empty.text)
    assert event["candidates"][0]["content"]["parts"] == []


async def test_unknown_routes_and_control(nursery: trio.Nursery) -> None:
    with trio.fail_after(10):
        mock = await start(nursery)
        missing = await post(mock, "/v1beta/models")
        async with httpx.AsyncClient(base_url=mock.base_url) as client:
            switched = await client.post("/_mock/scenario", json={"scenario": "hang"})
            bad = await client.post("/_mock/scenario", json={"scenario": "nope"})
            listed = await client.get("/_mock/requests")
    assert missing.status_code == 404 and missing.json()["error"]["status"] == "NOT_FOUND"
    assert switched.json()["scenario"]["name"] == "hang"
    assert bad.status_code == 400
    assert listed.json()["count"] == 1
    with pytest.raises(ValueError):
        Scenario.build("success", bogus=1)


def test_runs_as_a_process() -> None:
    proc = subprocess.Popen([sys.executable, "-m", "mock_gemini", "--scenario", "success"],
                            cwd=SUPPORT, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("LISTENING http://127.0.0.1:")
        response = httpx.post(line.split()[1] + STREAM, json=BODY, timeout=10)
        assert len(chunks(response.text)) == len(DEFAULT_DELTAS)
    finally:
        proc.terminate()
        assert proc.wait(timeout=10) == 0
        if proc.stdout is not None:
            proc.stdout.close()
