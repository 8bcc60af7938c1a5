"""Starting a real ``olp start`` process for socket-level tests, and talking to it.

The proxy runs as a subprocess (its own OLP_HOME, port 0, a known owner token); the URL
comes from its ``listening`` log line. Tests drive it with the official ``openai`` SDK in a
worker thread, under ``trio.fail_after`` hang guards on the real clock.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import anthropic
import httpx
import openai
import trio

REPO = Path(__file__).resolve().parents[2]
FAKES = REPO / "tests" / "support" / "fakes"
FAKE_CLAUDE = FAKES / "fake_claude.py"
OWNER_TOKEN = "olp_test_owner_token_0123456789abcdef"
T = TypeVar("T")


@dataclass
class Proxy:
    url: str
    process: trio.Process
    logs: list[dict[str, Any]] = field(default_factory=list)
    token: str = OWNER_TOKEN
    _clients: list[openai.OpenAI | anthropic.Anthropic] = field(default_factory=list)

    def client(self, token: str | None = None) -> openai.OpenAI:
        """An SDK client for this proxy (closed when the proxy stops)."""
        client = openai.OpenAI(base_url=f"{self.url}/v1", api_key=token or self.token,
                               max_retries=0, timeout=60)
        self._clients.append(client)
        return client

    def anthropic_client(self, token: str | None = None) -> anthropic.Anthropic:
        """An ``anthropic`` SDK client for this proxy's Messages dialect (closed when the
        proxy stops)."""
        client = anthropic.Anthropic(base_url=self.url, api_key=token or self.token,
                                     max_retries=0, timeout=60)
        self._clients.append(client)
        return client

    def close_clients(self) -> None:
        for client in self._clients:
            client.close()

    def get(self, path: str, token: str | None = None) -> httpx.Response:
        return httpx.get(f"{self.url}{path}", timeout=10,
                         headers={"Authorization": f"Bearer {token or self.token}"})


async def in_thread(fn: Callable[[], T]) -> T:
    """Run blocking client code (the sync ``openai`` SDK) without blocking the loop."""
    return await trio.to_thread.run_sync(fn, abandon_on_cancel=True)


async def _read_logs(stream: trio.abc.ReceiveStream, proxy_logs: list[dict[str, Any]],
                     listening: trio.Event, urls: list[str]) -> None:
    buf = b""
    async for chunk in stream:
        buf += chunk
        *lines, buf = buf.split(b"\n")
        for line in lines:
            try:
                entry = json.loads(line)
            except ValueError:
                entry = {"raw": line.decode(errors="replace")}
            proxy_logs.append(entry)
            if entry.get("msg") == "listening":
                urls.extend(entry["urls"])
                listening.set()


@asynccontextmanager
async def run_proxy(home: Path, config: dict[str, Any], *, env: dict[str, str] | None = None,
                    ) -> AsyncIterator[Proxy]:
    """Start ``olp start`` with ``config`` as its config.json; stop it with SIGTERM after.

    Providers that run one of the fake CLIs in ``tests/support/fakes`` are unconfined unless the
    config says otherwise: the fakes keep pid files, argv records and hold files in the
    test's temporary directory, which a sandboxed spawn cannot see (and a pid written inside
    the sandbox's PID namespace means nothing outside it). The sandbox itself is tested in
    ``tests/integration/test_sandbox.py`` and, with every real CLI, in ``tests/realcli``.
    """
    await trio.Path(home).mkdir(parents=True, exist_ok=True)
    await trio.Path(home / "config.json").write_text(
        json.dumps(fakes_on_exec(unchecked_by_default(cold_by_default(
            unconfined_fakes(config))))))
    proc_env = {
        "PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", str(home)),
        "OLP_HOME": str(home), "OLP_PORT": "0", "OLP_OWNER_TOKEN": OWNER_TOKEN,
        "OLP_LOG_LEVEL": "debug", **(env or {})}
    proxy_logs: list[dict[str, Any]] = []
    listening, urls = trio.Event(), []
    async with trio.open_nursery() as nursery:
        process = await trio.lowlevel.open_process(
            [sys.executable, "-m", "olp", "start"], env=proc_env, stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE, start_new_session=True)
        assert process.stderr is not None
        nursery.start_soon(_read_logs, process.stderr, proxy_logs, listening, urls)
        try:
            with trio.fail_after(20):
                await listening.wait()
            url = urls[0].replace("0.0.0.0", "127.0.0.1")
            proxy = Proxy(url=url, process=process, logs=proxy_logs)
            try:
                yield proxy
            finally:
                proxy.close_clients()
        finally:
            with trio.CancelScope(shield=True), trio.move_on_after(15):
                if process.returncode is None:
                    process.send_signal(signal.SIGTERM)
                await process.wait()
            if process.returncode is None:
                os.killpg(process.pid, signal.SIGKILL)
                await process.wait()
            nursery.cancel_scope.cancel()


def alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(") ", 1)[1][0] != "Z"
    except (OSError, IndexError):  # gone between the lookup and the read: ESRCH, ENOENT
        return False


def pids_from(pidfile: Path) -> list[int]:
    if not pidfile.exists():
        return []
    return [int(p) for line in pidfile.read_text().split("\n") if line for p in line.split()]


async def wait_until(predicate: Callable[[], bool], *, within: float, step: float = 0.02) -> bool:
    """Poll ``predicate`` on the real clock; True as soon as it holds, False after ``within``."""
    with trio.move_on_after(within):
        while not predicate():  # noqa: ASYNC110 - polls OS state (process table), not a task
            await trio.sleep(step)
        return True
    return predicate()


def spawned(pid: int) -> set[int]:
    """:func:`descendants` of ``pid`` without the long-lived model servers (codex's
    ``app-server``, which stays up between requests by design: ADR 0032) and their sandbox
    and lifeline: what a request left behind."""
    found = descendants(pid)
    servers = set()
    for child in found:
        try:
            with open(f"/proc/{child}/cmdline", "rb") as f:
                if b"\0app-server\0" in f.read():
                    servers.add(child)
        except OSError:
            continue
    return found - servers


def descendants(pid: int) -> set[int]:
    """Every live process below ``pid`` (children, grandchildren, …), from /proc."""
    parents: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(") ", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            parents.setdefault(ppid, []).append(int(entry))
    found: set[int] = set()
    todo = [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return {p for p in found if alive(p)}


def unconfined_fakes(config: dict[str, Any]) -> dict[str, Any]:
    """``config`` with ``sandbox: false`` added to each provider block running a fake CLI, and,
    where a test keeps the sandbox on, the recorded transcripts the fake replays made visible
    in it (they live outside the fake's installation root, ``tests/support``)."""
    providers = config.get("providers", {})
    for block in providers.values():
        if isinstance(block, dict) and str(block.get("binary", "")).startswith(str(FAKES)):
            block.setdefault("sandbox", False)
            if block["sandbox"] and "sandbox_read_only" not in block:
                block["sandbox_read_only"] = [str(REPO / "tests" / "fixtures")]
    return config


def cold_by_default(config: dict[str, Any]) -> dict[str, Any]:
    """``config`` with ``warm: 0`` for every CLI provider that does not set ``warm``: most
    tests assert that no CLI process outlives its request, and a warm pool keeps one
    waiting. The pools are tested where a test sets ``warm`` (``test_warm_*``)."""
    from olp.providers import kit

    providers = config.setdefault("providers", {})
    for spec in kit.builtin_specs():
        if spec.kind == "cli" and spec.warm:  # a provider with a warm pool by default
            providers.setdefault(spec.name, {})
    for name, block in providers.items():
        if name != "enabled" and isinstance(block, dict) and "kind" not in block:
            block.setdefault("warm", 0)
    return config


def fakes_on_exec(config: dict[str, Any]) -> dict[str, Any]:
    """``config`` with ``codex_mode: "exec"`` for an ``openai`` provider running a fake CLI
    (or none named): the fake codex plays ``codex exec`` and speaks no app-server JSON-RPC.
    The app-server is tested with the real codex (``tests/realcli``) and under the MockClock
    (``tests/unit/providers/test_codex_app_server.py``)."""
    block = config.get("providers", {}).get("openai")
    if isinstance(block, dict) and (
            "binary" not in block or str(block["binary"]).startswith(str(FAKES))):
        block.setdefault("codex_mode", "exec")
    return config


def unchecked_by_default(config: dict[str, Any]) -> dict[str, Any]:
    """``config`` with ``lockdown_check: false`` for every CLI provider that does not set it:
    the fakes talk to no API, so their self-check could judge nothing and they would be
    refused; the real CLIs' checks are tested where a test turns them on
    (``tests/realcli/test_lockdown_real.py``, ``tests/integration/test_lockdown.py``)."""
    from olp.providers import kit

    providers = config.setdefault("providers", {})
    for spec in kit.builtin_specs():
        if spec.kind == "cli":
            block = providers.setdefault(spec.name, {})
            if isinstance(block, dict):
                block.setdefault("lockdown_check", False)
    return config


def real_cli(env_var: str) -> str:
    """The path the real-CLI installer exported, or fail (in CI) / skip (elsewhere)."""
    import pytest

    path = os.environ.get(env_var)
    if path:
        return path
    reason = (f"{env_var} is not set: run the real-CLI tier through `./dev realcli`, which "
              "installs the pinned CLIs first")
    if os.environ.get("CI") == "true":
        pytest.fail(reason)
    pytest.skip(reason)
