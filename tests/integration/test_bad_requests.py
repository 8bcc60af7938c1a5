"""``olp start`` over a real socket: requests with nothing to answer are 400s and spawn no
CLI; a config it cannot use stops it at once with the message naming the path."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio
from olp_harness import FAKE_CLAUDE, in_thread, run_proxy


def config(tmp_path: Path) -> dict[str, Any]:
    return {"providers": {
        "enabled": {"openai": False, "mistral": False},
        "anthropic": {"binary": str(FAKE_CLAUDE), "metered": True,
                      "env": {"FAKE_CLAUDE_PIDFILE": str(tmp_path / "pids"),
                              "FAKE_CLAUDE_ARGV_FILE": str(tmp_path / "argv.json"),
                              "ANTHROPIC_API_KEY": "sk-ant-fake"},
                      "timeouts": {"first_output_s": 20, "idle_s": 10, "total_s": 60}}},
        "server": {"kill_grace_s": 1}}


EMPTY: list[tuple[list[dict[str, Any]], str]] = [
    ([{"role": "user", "content": ""}], "messages[0].content"),
    ([{"role": "user", "content": "   \n "}], "messages[0].content"),
    ([{"role": "system", "content": "Be terse."}], "messages"),
    ([{"role": "system", "content": "Be terse."}, {"role": "user", "content": ""}],
     "messages[1].content"),
    ([{"role": "user", "content": ""}, {"role": "assistant", "content": ""},
      {"role": "user", "content": [{"type": "text", "text": " "}]}], "messages"),
]


async def test_a_request_with_no_text_is_a_400_and_spawns_nothing(tmp_path: Path) -> None:
    with trio.fail_after(60):
        async with run_proxy(tmp_path / "home", config(tmp_path)) as proxy:
            def post(messages: list[dict[str, Any]], stream: bool) -> httpx.Response:
                return httpx.post(f"{proxy.url}/v1/chat/completions", timeout=30,
                                  headers={"Authorization": f"Bearer {proxy.token}"},
                                  json={"model": "sonnet", "messages": messages,
                                        "stream": stream})

            for messages, param in EMPTY:
                for stream in (False, True):
                    resp = await in_thread(lambda m=messages, s=stream: post(m, s))
                    assert resp.status_code == 400, resp.text
                    error = resp.json()["error"]
                    assert (error["type"], error["param"]) == ("invalid_request_error", param)
                    assert "Input must be provided" not in resp.text
            assert not (tmp_path / "argv.json").exists()
            assert not (tmp_path / "pids").exists()
            # The same proxy does spawn the fake for a request with text (the files work).
            ok = await in_thread(lambda: post([{"role": "user", "content": "hi"}], False))
            assert ok.status_code == 200, ok.text
            assert (tmp_path / "argv.json").exists() and (tmp_path / "pids").exists()


@pytest.mark.parametrize(("block", "expected"), [
    ({"anthropic": {"home_files": {".": "x"}}}, "providers.anthropic.home_files: '.'"),
    ({"router": {"kind": "openai-compatible", "base_url": "file:///etc/passwd"}},
     "providers.router.base_url: "),
])
async def test_olp_start_refuses_an_unusable_config(tmp_path: Path, block: dict[str, Any],
                                                    expected: str) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.json").write_text(json.dumps({"providers": block}))
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "OLP_HOME": str(home),
           "OLP_PORT": "0", "OLP_OWNER_TOKEN": "olp_test_owner_token_0123456789abcdef"}
    with trio.fail_after(30):
        done = await trio.run_process([sys.executable, "-m", "olp", "start"], env=env,
                                      check=False, capture_stdout=True, capture_stderr=True,
                                      stdin=subprocess.DEVNULL)
    stderr = done.stderr.decode()
    assert done.returncode == 2, stderr
    assert f"olp: configuration error: {home / 'config.json'}: {expected}" in stderr
    assert "Traceback" not in stderr


async def test_olp_start_refuses_a_deeply_nested_config(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.json").write_bytes(b"[" * 100_000 + b"]" * 100_000)
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "OLP_HOME": str(home),
           "OLP_PORT": "0", "OLP_OWNER_TOKEN": "olp_test_owner_token_0123456789abcdef"}
    with trio.fail_after(30):
        done = await trio.run_process([sys.executable, "-m", "olp", "start"], env=env,
                                      check=False, capture_stdout=True, capture_stderr=True,
                                      stdin=subprocess.DEVNULL)
    stderr = done.stderr.decode()
    assert done.returncode == 2, stderr
    assert f"olp: configuration error: {home / 'config.json'}: " in stderr
    assert "nested too deeply" in stderr and "Traceback" not in stderr
