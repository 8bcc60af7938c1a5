"""A new user's first start (issue #30): ``olp start`` on a machine with no CLI says, in
readable lines on a terminal (``OLP_LOG_FORMAT=text`` here: the test's stderr is a pipe), what
it skipped and, in one line, what to do next; with the default format and no terminal, the
same lines are JSON."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import trio

from olp.runtime.server import NO_PROVIDER

TOKEN = "olp_test_owner_token_0123456789abcdef"


async def first_start(tmp_path: Path, **extra: str) -> list[str]:
    """``olp start`` with no CLI on ``PATH`` until it listens, then SIGTERM: its stderr
    lines."""
    home = tmp_path / "home"
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "OLP_HOME": str(home),
           "OLP_PORT": "0", "OLP_OWNER_TOKEN": TOKEN, **extra}
    with trio.fail_after(30):
        process = await trio.lowlevel.open_process(
            [sys.executable, "-m", "olp", "start"], env=env, stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        assert process.stderr is not None
        buffer = b""
        async for chunk in process.stderr:
            buffer += chunk
            if b"listening" in buffer:
                break
        process.send_signal(signal.SIGTERM)
        async for chunk in process.stderr:
            buffer += chunk
        await process.wait()
    return buffer.decode().splitlines()


async def test_readable_lines_and_what_to_do_next(tmp_path: Path) -> None:
    lines = await first_start(tmp_path, OLP_LOG_FORMAT="text")
    assert not any(line.startswith("{") for line in lines), lines
    assert any("WARNING provider skipped: `claude` not found on PATH  [provider=anthropic]"
               in line for line in lines), lines
    [hint] = [line for line in lines if NO_PROVIDER in line]
    assert "WARNING" in hint and "`olp setup`" in hint
    assert any(" info    listening" in line for line in lines)


async def test_json_lines_when_not_on_a_terminal(tmp_path: Path) -> None:
    entries = [json.loads(line) for line in await first_start(tmp_path)]
    assert {"level": "warning", "msg": NO_PROVIDER} in [
        {k: e[k] for k in ("level", "msg")} for e in entries]
