"""The mock upstreams (a child process running ``python -m bench.soak --serve-mocks``) and the
proxy's config: one provider per mock, the three CLIs behind the dispatcher."""

from __future__ import annotations

import functools
import importlib
import json
import select
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import trio

from bench._common import REPO, START_TIMEOUT_S, BenchError, Server, base_env, stop, tail

from .scenarios import CLIS, DISPATCHER, MOCKS, PRE_CONTENT_FAULTS, TIMEOUTS

ROUTER_KEY = "sk-soak-router"
KEEP_ALIVE_S = 120.0  # longer than any wait of a client between two requests (a worker's)


def serve_mocks() -> None:
    """Serve one mock per entry of :data:`MOCKS` until SIGTERM; print their URLs first."""
    sys.path.insert(0, str(REPO / "tests" / "support"))
    mock: Any = importlib.import_module("mock_openai_upstream")

    async def run() -> None:
        with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async with trio.open_nursery() as nursery:
                urls = {}
                for name, (scenario, options, _) in MOCKS.items():
                    deltas = ("soak", f" {name}", " answer", ".")
                    handle = await nursery.start(functools.partial(
                        mock.serve_mock, scenario=scenario, deltas=deltas, delay=0.01,
                        **options))
                    urls[name] = handle.base_url
                print(json.dumps(urls), flush=True)
                async for _ in signals:
                    nursery.cancel_scope.cancel()
                    break

    trio.run(run)


def start_mocks(root: Path) -> tuple[Server, dict[str, str]]:
    log_path = root / "mocks.log"
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "bench.soak", "--serve-mocks"],
            env={**base_env(root, root), "PYTHONDONTWRITEBYTECODE": "1"}, cwd=REPO,
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=log,
            start_new_session=True)
    server = Server("mock upstreams", process, log_path)
    assert process.stdout is not None
    try:
        ready, _, _ = select.select([process.stdout], [], [], START_TIMEOUT_S)
        try:
            urls: dict[str, str] = json.loads(process.stdout.readline() if ready else b"")
        except ValueError:
            raise BenchError(f"the mocks did not start; log:\n{tail(log_path)}") from None
        return server, urls
    except BaseException:
        stop(server)
        raise


def proxy_config(root: Path, mocks: dict[str, str], marker: str, slots: int) -> dict[str, Any]:
    """One provider per mock and the three CLIs behind the dispatcher (unconfined: the soak
    is about the proxy, not the sandbox); circuits that never open, so every request meets
    its fault; a cache large enough to never evict; no warm pools (the run checks that no CLI
    process outlives its request, and a warm process waits by design; the pools have their
    own tests, ``tests/integration/test_warm_pool.py``); keep-alive connections kept idle for
    :data:`KEEP_ALIVE_S`: a client on a loaded machine can take longer than the default 5 s to
    send its next request on one, and a server closing it meanwhile races that request (the
    HTTP/1.1 keep-alive race: the client sees a disconnect without a response), which is
    not what the soak is about."""
    dispatcher = root / "soak-cli"
    dispatcher.write_text(DISPATCHER)
    dispatcher.chmod(0o755)
    name, value = marker.split("=", 1)
    providers: dict[str, Any] = {"enabled": dict.fromkeys(CLIS, True)}
    for provider, (fake, prefix, _, key_var) in CLIS.items():
        providers[provider] = {
            "binary": str(dispatcher), "sandbox": False, "max_concurrent": slots,
            "timeouts": TIMEOUTS, "warm": 0,
            **({"codex_mode": "exec"} if provider == "openai" else {}),  # the fake plays exec
            "env": {"SOAK_FAKE": str(fake), "SOAK_PREFIX": prefix, name: value,
                    f"FAKE_{prefix}_ECHO": "1", key_var: "sk-soak-fake"}}
    for mock, url in mocks.items():
        providers[mock] = {"kind": "openai-compatible", "base_url": url,
                           "api_key_env": "SOAK_ROUTER_KEY", "metered": True,
                           "max_concurrent": slots, "timeouts": TIMEOUTS}

    def hop(provider: str) -> dict[str, Any]:
        model = CLIS[provider][2] if provider in CLIS else "gpt-soak"
        return {"provider": provider, "model": model, "metered": True}

    chains = {f"h-{m}": [hop(m)] for m in MOCKS}
    chains.update({f"f-{m}": [hop(m), hop("ok")] for m in PRE_CONTENT_FAULTS})
    chains.update({f"c-{p}": [hop(p)] for p in CLIS})
    chains["f-anthropic"] = [hop("anthropic"), hop("ok")]
    return {"providers": providers,
            "routing": {"chains": chains, "resilience": {"circuit_failures": 1_000_000}},
            "cache": {"enabled": True, "max_entries_per_key": 1_000_000},
            "server": {"drain_grace_s": 2, "kill_grace_s": 1, "keep_alive_s": KEEP_ALIVE_S}}
