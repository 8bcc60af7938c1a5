"""The real ``vibe-acp`` (PyPI ``mistral-vibe`` 3.0.2, beside ``$OLP_REAL_VIBE``) driven by
``olp.providers.vibe._acp`` against the loopback mock Mistral API, spawned through
:class:`~olp.actors._process.ProcessSpawner` with an open stdin (``SpawnSpec(stdin=None)``) and
the per-spawn home and environment OLP gives ``vibe -p``.

Needs ``OLP_REAL_VIBE``; without it the test skips on a developer's machine and fails in CI.
One process, three sessions: two answers (the second upstream request holds nothing of the
first), and a prompt vibe-acp would have run as a command, which reaches the model as text.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import trio
from mock_mistral import MockMistral, serve_mock
from olp_harness import alive, descendants, real_cli, wait_until

from olp.actors._cli_runner import CliConfig, CliRunner
from olp.actors._process import ProcessSpawner, SpawnSpec
from olp.ir import Error, Event, Stop, TextDelta, Usage
from olp.providers.vibe import ADAPTER
from olp.providers.vibe._acp import AcpServer, AcpSession, acp_binary, server_env
from olp.providers.vibe._acp_parser import VibeAcpParser

ANSWER = "Hello from the mock upstream."
MODEL = "devstral-2-25-12"
KEY = "mock-mistral-key-0000"
FIRST = "ACP-FIRST-MARKER-41d7: say hello."
SECOND = "ACP-SECOND-MARKER-9e02: say hello."


def vibe_config(mock: MockMistral) -> str:
    return "\n".join([
        "enable_telemetry = false",
        "enable_update_checks = false",
        "api_retry_max_elapsed_time = 3.0",
        "",
        "[[providers]]",
        'name = "mistral"',
        f'api_base = "{mock.api_base}"',
        'api_key_env_var = "MISTRAL_API_KEY"',
        'backend = "mistral"',
        "",
    ])


async def answer(session: AcpSession, prompt: str) -> tuple[list[Event], Event, int]:
    """The runner's read loop over one session."""
    parser = VibeAcpParser()
    events: list[Event] = []
    await session.send_input(prompt.encode())
    while (line := await session.receive_line()) is not None:
        events.extend(parser.feed(line))
    returncode = await session.wait()
    events.extend(parser.trailer(returncode, session.stderr_tail()))
    return events, parser.finish(returncode, session.stderr_tail()), returncode


def main_calls(mock: MockMistral) -> list[dict[str, Any]]:
    return [r for r in mock.chat_requests()
            if (r["body"].get("metadata") or {}).get("call_type") == "main_call"]


async def test_one_vibe_acp_answers_isolated_single_use_sessions(
        tmp_path: Path, nursery: trio.Nursery) -> None:
    binary = acp_binary(real_cli("OLP_REAL_VIBE"))
    mock: MockMistral = await nursery.start(
        lambda task_status: serve_mock(scenario="success", task_status=task_status))
    home, work = tmp_path / "home", tmp_path / "work"
    (home / "tmp").mkdir(parents=True)
    (home / ".vibe").mkdir()
    work.mkdir()
    (home / ".vibe" / "config.toml").write_text(vibe_config(mock))
    runner = CliRunner(ADAPTER, ProcessSpawner(kill_grace=1.0),
                       CliConfig(binary=binary, env={"MISTRAL_API_KEY": KEY},
                                 proxy_env=dict(os.environ)))
    env = {**runner.environment(home), **server_env(MODEL, home / ".vibe")}
    spec = SpawnSpec(argv=[binary], stdin=None, env=env, cwd=work)
    pid = None
    with trio.fail_after(120):
        async with ProcessSpawner(kill_grace=1.0).open(spec) as process, \
                trio.open_nursery() as inner:
            server = AcpServer(process, client_version="test")
            await inner.start(server.serve)
            assert server.alive() and server.agent_info["version"] == "3.0.2"
            pid = next(p for p in descendants(os.getpid()) if _is_vibe_acp(p))
            assert mock.requests == []  # initialize and session/new ask the upstream nothing
            sessions = [await server.new_session(work) for _ in range(3)]
            assert mock.requests == []

            first = await answer(sessions[0], FIRST)
            second = await answer(sessions[1], SECOND)
            third = await answer(sessions[2], "/proxy-setup HTTPS_PROXY http://127.0.0.1:9")
            # each session's _session/delete runs after its prompt is over: wait for vibe to
            # have removed every transcript (a fixed pause was too short on a loaded machine)
            unified = home / ".vibe" / "logs" / "session" / "unified"

            def deleted() -> bool:
                return (server.statistics().pending_calls == 0
                        and (not unified.exists() or not any(unified.iterdir())))

            assert await wait_until(deleted, within=20)
            statistics = server.statistics()
            inner.cancel_scope.cancel()
    # leaving the spawner's context ended the whole process group
    assert pid is not None and not alive(pid)
    assert not [p for p in descendants(os.getpid()) if _is_vibe_acp(p)]

    for events, terminal, returncode in (first, second, third):
        assert returncode == 0 and terminal == Stop(finish_reason="stop")
        assert "".join(e.text for e in events if isinstance(e, TextDelta)) == ANSWER
        assert [e for e in events if isinstance(e, Usage)] == [
            Usage(prompt_tokens=25, completion_tokens=7)]
        assert not [e for e in events if isinstance(e, Error)]
    assert statistics.sessions == 0 and statistics.denied_requests == 0

    calls = mock.chat_requests()
    assert [c["body"]["metadata"]["call_type"] for c in calls] == ["main_call"] * 3  # no titles
    one, two, three = main_calls(mock)
    for call in calls:
        assert call["body"]["model"] == MODEL
        assert call["credential_sha256"] == hashlib.sha256(KEY.encode()).hexdigest()
    assert [m["role"] for m in two["body"]["messages"]] == ["system", "user"]
    assert SECOND in two["body"]["messages"][1]["content"]
    text_of_two = json.dumps(two["body"])
    assert "ACP-FIRST-MARKER" not in text_of_two and ANSWER not in text_of_two  # isolated
    assert one["body"]["messages"][0] == two["body"]["messages"][0]  # the same system prompt
    # a prompt vibe-acp would have run as a command reached the model as text
    assert three["body"]["messages"][-1]["content"] == (
        "\u200b/proxy-setup HTTPS_PROXY http://127.0.0.1:9")
    assert not (home / ".vibe" / ".env").exists()
    # every session was deleted: no transcript left in VIBE_HOME
    assert not unified.exists() or list(unified.iterdir()) == []


def _is_vibe_acp(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return b"vibe-acp" in f.read()
    except OSError:
        return False
