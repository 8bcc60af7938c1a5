"""The proxy's life as a process: SIGHUP, kill -9, restarts, idle connections, the owner key.

Real ``olp start`` processes and fake CLIs on the real clock; every wait is bounded with
``trio.fail_after`` (correctness bounds, not timings).
"""

from __future__ import annotations

import functools
import os
import signal
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio
from olp_harness import FAKE_CLAUDE, alive, in_thread, pids_from, run_proxy, wait_until

from olp.actors import ProcessSpawner, SpawnSpec

MESSAGES: list[Any] = [{"role": "user", "content": "Count slowly."}]


def claude(tmp_path: Path, scenario: str, delay: str = "0.2", **server: Any) -> dict[str, Any]:
    return {"providers": {
        "enabled": {"openai": False, "mistral": False},
        "anthropic": {"binary": str(FAKE_CLAUDE), "metered": True, "env": {
            "FAKE_CLAUDE_SCENARIO": scenario, "FAKE_CLAUDE_DELAY_S": delay,
            "FAKE_CLAUDE_PIDFILE": str(tmp_path / "pids"), "ANTHROPIC_API_KEY": "sk-fake"}}},
        "server": {"kill_grace_s": 1, **server}}


async def stream_until_first(proxy: Any, *, nursery: trio.Nursery) -> list[Any]:
    """Start a streaming request in a thread; return once its first content arrived. The
    list gets the full text, or the exception that ended the stream."""
    first = trio.Event()
    token = trio.lowlevel.current_trio_token()
    outcome: list[Any] = []

    def consume() -> None:
        text = ""
        try:
            for chunk in proxy.client().chat.completions.create(
                    model="sonnet", messages=MESSAGES, stream=True):
                if chunk.choices and chunk.choices[0].delta.content:
                    trio.from_thread.run_sync(first.set, trio_token=token)
                    text += chunk.choices[0].delta.content
        except Exception as exc:  # the proxy went away under us
            outcome.append(exc)
        else:
            outcome.append(text)

    nursery.start_soon(in_thread, consume)
    await first.wait()
    return outcome


def ask(proxy: Any) -> str:
    answer = proxy.client().chat.completions.create(model="sonnet", messages=MESSAGES)
    return answer.choices[0].message.content or ""


def run_dirs(tmp: Path, pid: int | None = None) -> list[Path]:
    return sorted(tmp.glob(f"olp-run-{pid if pid is not None else '*'}-*"))


async def test_sighup_mid_stream_reloads_and_never_stops(tmp_path: Path) -> None:
    """A closing terminal's SIGHUP (or ``olp reload``) reloads the config; the stream in
    flight completes and the proxy keeps serving."""
    with trio.fail_after(60):
        async with run_proxy(tmp_path / "home", claude(tmp_path, "success", "0.3")) as proxy:
            async with trio.open_nursery() as nursery:
                outcome = await stream_until_first(proxy, nursery=nursery)
                proxy.process.send_signal(signal.SIGHUP)
            assert outcome == ["Hello from the mock upstream."]  # completed, with [DONE]
            assert proxy.process.returncode is None
            assert await in_thread(lambda: ask(proxy)) == "Hello from the mock upstream."
            assert any(e.get("msg") == "SIGHUP: reloading the config" for e in proxy.logs)
            assert await wait_until(lambda: any(e.get("event") == "reloaded"
                                                for e in proxy.logs), within=20)


async def test_kill_9_takes_the_unconfined_cli_and_the_next_start_reaps(tmp_path: Path) -> None:
    """``sandbox: false``: the CLI and its grandchild die with the proxy; its run directory
    (with the job directory) stays until the next start removes it."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {"TMPDIR": str(tmp)}
    config = claude(tmp_path, "slow")
    with trio.fail_after(60):
        async with run_proxy(tmp_path / "home", config, env=env) as proxy:
            async with trio.open_nursery() as nursery:
                await stream_until_first(proxy, nursery=nursery)
                pids = pids_from(tmp_path / "pids")
                assert len(pids) == 2 and all(alive(p) for p in pids)  # the fake, its child
                left = run_dirs(tmp, proxy.process.pid)
                assert len(left) == 1 and list(left[0].glob("olp-job-*"))
                proxy.process.kill()
            assert await wait_until(lambda: not any(alive(p) for p in pids), within=10)
        assert left[0].exists()  # nobody cleaned up after the killed proxy yet
        async with run_proxy(tmp_path / "home2", config, env=env) as second:
            assert not left[0].exists()
            assert run_dirs(tmp) == run_dirs(tmp, second.process.pid)
            assert any(e.get("msg") == "removed what a killed proxy left behind"
                       for e in second.logs)
        assert run_dirs(tmp) == []  # a clean stop removes its own


async def test_a_live_proxys_run_dir_is_left_alone(tmp_path: Path) -> None:
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {"TMPDIR": str(tmp)}
    config = claude(tmp_path, "success", "0.01")
    with trio.fail_after(60):
        async with run_proxy(tmp_path / "home", config, env=env) as first:
            mine = run_dirs(tmp, first.process.pid)
            async with run_proxy(tmp_path / "home2", config, env=env) as second:
                assert run_dirs(tmp, first.process.pid) == mine and len(mine) == 1
                assert await in_thread(lambda: ask(first)) == "Hello from the mock upstream."
                assert await in_thread(lambda: ask(second)) == "Hello from the mock upstream."
                assert not any(e.get("msg") == "removed what a killed proxy left behind"
                               for e in second.logs)


async def test_a_spawn_outlives_the_thread_that_forked_it(monkeypatch: pytest.MonkeyPatch,
                                                          tmp_path: Path) -> None:
    """Trio forks in a worker thread that ends when idle; nothing tied to that thread (a
    ``PR_SET_PDEATHSIG``, bubblewrap's ``--die-with-parent``) may kill the CLI then."""
    import trio._core._thread_cache as thread_cache

    monkeypatch.setattr(thread_cache, "IDLE_TIMEOUT", 0.05)
    from olp.actors import Sandbox, find_bwrap

    bwrap = find_bwrap(os.environ)
    release = tmp_path / "release"
    script = f"echo up; while [ ! -e {release} ]; do sleep 0.05; done; echo done"
    argv = ["/bin/sh", "-c", script]
    job = tmp_path / "job"
    (job / "work").mkdir(parents=True)
    if bwrap is not None:
        argv = Sandbox(bwrap).wrap(argv, job_dir=job, workdir=job / "work",
                                   writable=[tmp_path])
    spec = SpawnSpec(argv=argv, stdin=b"", cwd=job / "work", env={"PATH": "/usr/bin:/bin"})
    with trio.fail_after(20):
        async with ProcessSpawner(kill_grace=1).open(spec) as proc:
            assert await proc.receive_line() == b"up"
            assert await wait_until(lambda: not _trio_workers(), within=10)
            release.touch()
            assert await proc.receive_line() == b"done"
            assert await proc.receive_line() is None
            assert await proc.wait() == 0


def _trio_workers() -> list[Any]:
    import threading

    return [t for t in threading.enumerate() if t.name.startswith("Trio thread")]


async def test_an_idle_connection_does_not_hold_the_drain(tmp_path: Path) -> None:
    """An idle keep-alive connection is closed by the server, and closed at once by a
    SIGTERM drain: the proxy exits far sooner than the drain grace."""
    config = claude(tmp_path, "success", drain_grace_s=60, keep_alive_s=1)
    with trio.fail_after(60):
        async with run_proxy(tmp_path / "home", config) as proxy:
            async with await _idle_connection(proxy) as idle:
                with trio.fail_after(20):  # keep_alive_s is 1: the server hangs up
                    while await idle.receive_some(4096):
                        pass
            async with await _idle_connection(proxy):  # another, left idle for the drain
                proxy.process.send_signal(signal.SIGTERM)
                with trio.fail_after(20):  # far below the 60 s grace
                    await proxy.process.wait()
            assert proxy.process.returncode == 0


async def _idle_connection(proxy: Any) -> trio.SocketStream:
    """A connection that has had one complete request and answer, then stays idle."""
    host, port = proxy.url.removeprefix("http://").rsplit(":", 1)
    stream = await trio.open_tcp_stream(host, int(port))
    await stream.send_all(f"GET /health HTTP/1.1\r\nHost: x\r\n"
                          f"Authorization: Bearer {proxy.token}\r\n\r\n".encode())
    got = b""
    while b"\r\n\r\n" not in got:
        got += await stream.receive_some(65536)
    head, body = got.split(b"\r\n\r\n", 1)
    length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                  if line.lower().startswith(b"content-length:"))
    while len(body) < length:
        body += await stream.receive_some(65536)
    return stream


async def test_a_generated_owner_key_never_goes_to_a_pipe(tmp_path: Path) -> None:
    """stdout is not a terminal (a service manager, a log file): the key is written to a
    0600 file in OLP_HOME, whose path is logged; stdout and stderr never carry the key."""
    home = tmp_path / "home"
    env = {k: v for k, v in os.environ.items() if k != "OLP_OWNER_TOKEN"}
    env.update(OLP_HOME=str(home), OLP_PORT="0")
    out = tmp_path / "stdout"
    err = tmp_path / "stderr"
    with trio.fail_after(60), out.open("wb") as stdout, err.open("wb") as stderr:
        async with trio.open_nursery() as nursery:
            proc: trio.Process = await nursery.start(functools.partial(
                trio.run_process, [sys.executable, "-m", "olp", "start"], env=env,
                stdout=stdout, stderr=stderr, check=False))
            assert await wait_until(lambda: b'"listening"' in err.read_bytes(), within=30)
            key_file = home / "owner-key.txt"
            assert key_file.stat().st_mode & 0o777 == 0o600
            key = key_file.read_text().strip()
            url = next(line for line in err.read_text().splitlines() if '"listening"' in line)
            url = url.split('"urls": ["', 1)[1].split('"', 1)[0]
            health = await trio.to_thread.run_sync(lambda: httpx.get(
                f"{url}/health", headers={"Authorization": f"Bearer {key}"}, timeout=10))
            assert health.status_code == 200 and "providers" in health.json()
            proc.send_signal(signal.SIGTERM)
    assert key.startswith("olp_")
    assert key not in out.read_text() and key not in err.read_text()
    assert str(key_file) in err.read_text()  # where to find it is logged
