"""A mock run as a process (``python -m <mock>``), for the self-tests of its entry point."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import trio

SUPPORT = Path(__file__).resolve().parent.parent  # tests/support: where the mocks are


@asynccontextmanager
async def mock_process(module: str, *args: str, cwd: Path) -> AsyncIterator[str]:
    """Run ``python -m <module> <args>`` in ``cwd`` (with tests/support on PYTHONPATH) and
    yield the URL of its ``LISTENING`` line. On leaving, SIGTERM it: AssertionError unless it
    then exits 0. It is killed if anything fails."""
    env = {**os.environ, "PYTHONPATH": str(SUPPORT)}
    proc = await trio.lowlevel.open_process([sys.executable, "-m", module, *args],
                                            stdout=subprocess.PIPE, env=env, cwd=cwd)
    try:
        assert proc.stdout is not None
        line = b""
        while not line.endswith(b"\n"):
            chunk = await proc.stdout.receive_some(1)
            assert chunk, "the mock exited before LISTENING"
            line += chunk
        word, url = line.decode().split()
        assert word == "LISTENING", line
        yield url
        proc.send_signal(signal.SIGTERM)
        assert await proc.wait() == 0
    finally:
        if proc.returncode is None:
            proc.kill()
        with trio.CancelScope(shield=True):
            await proc.wait()
            if proc.stdout is not None:
                await proc.stdout.aclose()
