"""Without OLP_OWNER_TOKEN, the first start generates the owner key and hands it over once: on
an interactive terminal it is printed; otherwise (here: a pipe) it goes to a 0600 file in
OLP_HOME, never to stdout, which a service manager would keep in its journal."""

from __future__ import annotations

import functools
import json
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import trio


@asynccontextmanager
async def olp_start(home: Path) -> AsyncIterator[tuple[str, trio.Process]]:
    """``olp start`` with no owner token in its environment; yields its URL and process."""
    env = {k: v for k, v in os.environ.items() if k != "OLP_OWNER_TOKEN"}
    env.update(OLP_HOME=str(home), OLP_PORT="0")
    async with trio.open_nursery() as nursery:
        proc: trio.Process = await nursery.start(functools.partial(
            trio.run_process, [sys.executable, "-m", "olp", "start"], env=env,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=False))
        assert proc.stderr is not None
        err = b""
        with trio.fail_after(30):
            while b'"listening"' not in err:
                err += await proc.stderr.receive_some()
        nursery.start_soon(_drain, proc.stderr)
        line = next(ln for ln in err.splitlines() if b'"listening"' in ln)
        try:
            yield json.loads(line)["urls"][0], proc
        finally:
            proc.send_signal(signal.SIGTERM)


async def _drain(stream: trio.abc.ReceiveStream) -> None:
    while await stream.receive_some():
        pass


async def stdout_of(proc: trio.Process) -> str:
    """Everything the process wrote on stdout (read after it has exited)."""
    assert proc.stdout is not None
    out = b""
    while chunk := await proc.stdout.receive_some():
        out += chunk
    return out.decode()


async def test_the_owner_key_goes_to_a_private_file_once_and_works(tmp_path: Path) -> None:
    home = tmp_path / "home"
    key_file = home / "owner-key.txt"
    with trio.fail_after(60):
        async with olp_start(home) as (_, proc):
            pass
        await proc.wait()
        assert await stdout_of(proc) == ""  # stdout is a pipe: the key is not printed
        assert key_file.stat().st_mode & 0o777 == 0o600
        token = key_file.read_text().split()[-1]
        assert token.startswith("olp_")
        assert token.encode() not in (home / "olp.db").read_bytes()  # only its hash is kept
        written = key_file.read_bytes()
        async with olp_start(home) as (url, proc):
            health = await trio.to_thread.run_sync(lambda: httpx.get(
                f"{url}/health", headers={"Authorization": f"Bearer {token}"},
                timeout=10).json())
        await proc.wait()
        assert await stdout_of(proc) == ""
        assert key_file.read_bytes() == written  # not generated again
    assert "providers" in health  # the key in the file is the owner's
