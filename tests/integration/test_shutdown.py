"""SIGTERM drains in-flight streams; a second signal stops at once; no CLI is left behind."""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

import httpx
import openai
import trio
from olp_harness import FAKE_CLAUDE, alive, in_thread, pids_from, run_proxy, wait_until

MESSAGES: list[Any] = [{"role": "user", "content": "Count slowly."}]


def config(tmp_path: Path, scenario: str, delay: str) -> dict[str, Any]:
    return {"providers": {
        "enabled": {"openai": False, "mistral": False},
        "anthropic": {"binary": str(FAKE_CLAUDE), "metered": True, "env": {
            "FAKE_CLAUDE_SCENARIO": scenario, "FAKE_CLAUDE_DELAY_S": delay,
            "FAKE_CLAUDE_PIDFILE": str(tmp_path / "pids"), "ANTHROPIC_API_KEY": "sk-fake"}}},
        "server": {"drain_grace_s": 20, "kill_grace_s": 1}}


async def test_sigterm_lets_an_in_flight_stream_finish(tmp_path: Path) -> None:
    with trio.fail_after(60):
        async with run_proxy(tmp_path / "home", config(tmp_path, "success", "0.3")) as proxy:
            first = trio.Event()
            token = trio.lowlevel.current_trio_token()

            def consume() -> str:
                text = ""
                for chunk in proxy.client().chat.completions.create(
                        model="sonnet", messages=MESSAGES, stream=True):
                    if chunk.choices and chunk.choices[0].delta.content:
                        if not text:
                            trio.from_thread.run_sync(first.set, trio_token=token)
                        text += chunk.choices[0].delta.content
                return text

            async with trio.open_nursery() as nursery:
                result: list[str] = []

                async def run() -> None:
                    result.append(await in_thread(consume))

                nursery.start_soon(run)
                await first.wait()
                proxy.process.send_signal(signal.SIGTERM)
            assert result == ["Hello from the mock upstream."]  # finished, with [DONE]
            with trio.fail_after(10):
                await proxy.process.wait()
            assert proxy.process.returncode == 0
            assert any(e.get("msg") == "draining in-flight requests" for e in proxy.logs)
    assert not any(alive(p) for p in pids_from(tmp_path / "pids"))


async def test_second_signal_stops_at_once_and_kills_the_cli(tmp_path: Path) -> None:
    with trio.fail_after(60):
        async with run_proxy(tmp_path / "home", config(tmp_path, "slow", "0.2")) as proxy:
            first = trio.Event()
            token = trio.lowlevel.current_trio_token()

            def consume() -> Exception | None:
                try:
                    for chunk in proxy.client().chat.completions.create(
                            model="sonnet", messages=MESSAGES, stream=True):
                        if chunk.choices and chunk.choices[0].delta.content:
                            trio.from_thread.run_sync(first.set, trio_token=token)
                except (openai.APIError, Exception) as exc:  # the stream is cut
                    return exc
                return None

            async with trio.open_nursery() as nursery:
                outcome: list[Exception | None] = []

                async def run() -> None:
                    outcome.append(await in_thread(consume))

                nursery.start_soon(run)
                await first.wait()
                proxy.process.send_signal(signal.SIGTERM)
                await trio.sleep(0.5)
                assert proxy.process.returncode is None  # still draining the endless stream
                proxy.process.send_signal(signal.SIGTERM)
                with trio.fail_after(5):
                    await proxy.process.wait()
            assert outcome and outcome[0] is not None
            pids = pids_from(tmp_path / "pids")
            assert pids and await wait_until(lambda: not any(alive(p) for p in pids), within=3)


def cut_config(tmp_path: Path) -> dict[str, Any]:
    """An endless answer (a chunk every 0.2 s) and a one-second drain."""
    cfg = config(tmp_path, "slow", "0.2")
    cfg["server"]["drain_grace_s"] = 1
    return cfg


async def test_a_stream_still_running_at_the_end_of_the_drain_ends_with_an_error_event(
        tmp_path: Path) -> None:
    with trio.fail_after(60):
        async with run_proxy(tmp_path / "home", cut_config(tmp_path)) as proxy:
            first = trio.Event()
            token = trio.lowlevel.current_trio_token()

            def consume() -> list[str]:
                """Every ``data:`` payload until the body ends; a cut body raises here."""
                data: list[str] = []
                with httpx.stream(
                        "POST", f"{proxy.url}/v1/chat/completions", timeout=30,
                        headers={"Authorization": f"Bearer {proxy.token}"},
                        json={"model": "sonnet", "messages": MESSAGES, "stream": True}) as r:
                    assert r.status_code == 200
                    for line in r.iter_lines():
                        if line.startswith("data: "):
                            data.append(line.removeprefix("data: "))
                            if '"content"' in line:
                                trio.from_thread.run_sync(first.set, trio_token=token)
                return data

            async with trio.open_nursery() as nursery:
                result: list[list[str]] = []

                async def run() -> None:
                    result.append(await in_thread(consume))

                nursery.start_soon(run)
                await first.wait()
                proxy.process.send_signal(signal.SIGTERM)
            data = result[0]
            assert json.loads(data[-1]) == {"error": {
                "message": "server shutting down", "type": "api_error", "param": None,
                "code": "server_shutting_down"}}
            assert "[DONE]" not in data
            with trio.fail_after(10):
                await proxy.process.wait()
            assert proxy.process.returncode == 0
            chat = [e for e in proxy.logs if e.get("event") == "chat"]
            assert [e["outcome"] for e in chat] == ["shutdown"]
    pids = pids_from(tmp_path / "pids")
    assert pids and await wait_until(lambda: not any(alive(p) for p in pids), within=3)


async def test_the_sdk_raises_a_clear_error_for_a_stream_cut_by_the_drain(
        tmp_path: Path) -> None:
    with trio.fail_after(60):
        async with run_proxy(tmp_path / "home", cut_config(tmp_path)) as proxy:
            first = trio.Event()
            token = trio.lowlevel.current_trio_token()

            def consume() -> Exception | None:
                try:
                    for chunk in proxy.client().chat.completions.create(
                            model="sonnet", messages=MESSAGES, stream=True):
                        if chunk.choices and chunk.choices[0].delta.content:
                            trio.from_thread.run_sync(first.set, trio_token=token)
                except Exception as exc:
                    return exc
                return None

            async with trio.open_nursery() as nursery:
                outcome: list[Exception | None] = []

                async def run() -> None:
                    outcome.append(await in_thread(consume))

                nursery.start_soon(run)
                await first.wait()
                proxy.process.send_signal(signal.SIGTERM)
            assert isinstance(outcome[0], openai.APIError)
            assert "server shutting down" in str(outcome[0])


async def test_a_request_without_a_response_yet_at_the_end_of_the_drain_is_a_503(
        tmp_path: Path) -> None:
    with trio.fail_after(60):
        async with run_proxy(tmp_path / "home", cut_config(tmp_path)) as proxy:
            pidfile = tmp_path / "pids"

            def ask() -> Exception | None:
                try:
                    proxy.client().chat.completions.create(model="sonnet", messages=MESSAGES)
                except Exception as exc:
                    return exc
                return None

            async with trio.open_nursery() as nursery:
                outcome: list[Exception | None] = []

                async def run() -> None:
                    outcome.append(await in_thread(ask))

                nursery.start_soon(run)
                assert await wait_until(lambda: bool(pids_from(pidfile)), within=20)
                proxy.process.send_signal(signal.SIGTERM)
            error = outcome[0]
            assert isinstance(error, openai.APIStatusError) and error.status_code == 503
            assert isinstance(error.body, dict)
            assert error.body["code"] == "server_shutting_down"
            with trio.fail_after(10):
                await proxy.process.wait()
            assert proxy.process.returncode == 0
    pids = pids_from(tmp_path / "pids")
    assert pids and await wait_until(lambda: not any(alive(p) for p in pids), within=3)
