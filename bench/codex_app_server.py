"""codex on its app-server against ``codex exec``: how soon the client sees content.

    python -m bench.codex_app_server [--requests N] [--deltas D] [--interval S]
                                     [--write docs/benchmarks.md]

Starts the loopback mock Responses API (``python -m mock_openai_responses`` from
``tests/support``, scenario ``slow``: D text deltas, S seconds apart; default 20 × 0.25 s, the
issue's setting) and two ``python -m olp start`` configured as
``tests/realcli/test_codex_app_server_real.py`` does, with the real codex (``OLP_REAL_CODEX``):
one with ``providers.openai.codex_mode`` = ``exec`` (warm pool on, as by default), one with
``app-server``. Requests alternate between them (ABBA), one at a time, streaming, a distinct
user message each. Per request: how long after the mock sent its first delta the client read
its first content (both wall clocks: same machine), the time to the last byte, and how many
SSE events carried content. Then the app-server's resident memory idle (``/health``), and the
mock's log must hold every user message once. Goal (issue #43): first content within 150 ms of
the first upstream delta.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx

from bench._common import (
    BenchError,
    Server,
    add_write,
    arg_parser,
    base_env,
    command_line,
    finish,
    load_average,
    machine_info,
    publish,
    run_main,
    sse_event_text,
    start_olp,
    stop,
    sync_client,
    table,
)
from bench.warm_clis import SUPPORT, codex_config_toml, mock_requests

MODES = ("exec", "app-server")


def start_mock(root: Path, deltas: int, interval: float) -> Server:
    """The mock in a child process; returns once it printed ``LISTENING <base URL>``."""
    log_path = root / "mock.log"
    env = {**base_env(root, root), "PYTHONPATH": str(SUPPORT), "PYTHONDONTWRITEBYTECODE": "1"}
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "mock_openai_responses", "--scenario", "slow",
             "--interval", repr(interval), "--count", str(deltas)], env=env, cwd=SUPPORT,
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=log,
            start_new_session=True)
    server = Server("mock upstream", process, log_path)
    assert process.stdout is not None
    line = process.stdout.readline().decode(errors="replace")
    if not line.startswith("LISTENING "):
        stop(server)
        raise BenchError("the mock did not start")
    server.url = line.split(None, 1)[1].strip()
    return server


def proxy_config(binary: str, mock_url: str, mode: str) -> dict[str, Any]:
    return {"providers": {"enabled": {"openai": True, "anthropic": False, "mistral": False},
                          "openai": {"binary": binary, "codex_mode": mode, "metered": True,
                                     "home_files": {".codex/config.toml":
                                                    codex_config_toml(mock_url)},
                                     "env": {"OPENAI_API_KEY": "sk-mock-0000"}}},
            "cache": {"enabled": False}, "server": {"kill_grace_s": 1}}


def one_request(client: httpx.Client, text: str) -> tuple[float, float, int]:
    """Wall time of the first content, seconds to the last byte, content events."""
    body = json.dumps({"model": "gpt-5.5", "stream": True,
                       "messages": [{"role": "user", "content": text}]}).encode()
    t_send = time.perf_counter()
    first_wall, events, pending = 0.0, 0, b""
    with client.stream("POST", "/v1/chat/completions", content=body) as response:
        if response.status_code != 200:
            raise BenchError(f"HTTP {response.status_code}: {response.read()[:300]!r}")
        for chunk in response.iter_raw():
            pending += chunk.replace(b"\r\n", b"\n")
            *done, pending = pending.split(b"\n\n")
            for event in done:
                if sse_event_text(event):
                    events += 1
                    first_wall = first_wall or time.time()
    return first_wall, time.perf_counter() - t_send, events


def main(argv: Sequence[str] | None = None) -> int:
    parser = arg_parser(__name__, __doc__)
    parser.add_argument("--requests", type=int, default=6)
    parser.add_argument("--deltas", type=int, default=20)
    parser.add_argument("--interval", type=float, default=0.25)
    add_write(parser, "codex app-server")
    args = parser.parse_args(argv)
    binary = os.environ.get("OLP_REAL_CODEX")
    if not binary:
        raise BenchError("set OLP_REAL_CODEX (scripts/install-real-clis prints it)")
    with tempfile.TemporaryDirectory(prefix="olp-bench-") as tmp:
        root = Path(tmp)
        mock = start_mock(root, args.deltas, args.interval)
        proxies: dict[str, Server] = {}
        try:
            for mode in MODES:
                (root / mode / "user-home").mkdir(parents=True)
                proxies[mode] = start_olp(root / mode, proxy_config(binary, mock.url, mode),
                                          ["openai"], name=f"codex {mode} proxy",
                                          env={"HOME": str(root / mode / "user-home")})
            clients = {m: sync_client(p.url) for m, p in proxies.items()}
            results: dict[str, list[tuple[float, float, int]]] = {m: [] for m in MODES}
            texts: list[str] = []
            load = load_average()
            for i in range(args.requests + 1):  # the first round warms both up
                order = MODES if i % 2 == 0 else tuple(reversed(MODES))
                for mode in order:
                    text = f"Count for me, please ({secrets.token_hex(4)})."
                    texts.append(text)
                    first_wall, total, events = one_request(clients[mode], text)
                    sent = [r for r in mock_requests(mock)
                            if text in json.dumps(r.get("body", {}))]
                    if len(sent) != 1 or "first_delta_at" not in sent[0]:
                        raise BenchError(f"the mock did not record {text!r} once")
                    if i:
                        results[mode].append((first_wall - sent[0]["first_delta_at"],
                                              total, events))
            health = clients["app-server"].get("/health").json()
            memory = health["providers"]["openai"]["app_server"]["memory_bytes"]
        finally:
            for proxy in proxies.values():
                stop(proxy)
            stop(mock)
    rows = []
    for mode in MODES:
        lags = sorted(r[0] for r in results[mode])
        totals = sorted(r[1] for r in results[mode])
        events = sorted(r[2] for r in results[mode])
        rows.append([mode, f"{1000 * lags[len(lags) // 2]:.0f} ms",
                     f"{1000 * lags[-1]:.0f} ms", f"{totals[len(totals) // 2]:.2f} s",
                     str(events[len(events) // 2])])
    lines = [f"Command: `{command_line('bench.codex_app_server', argv)}`", "",
             f"{args.requests} requests per mode (ABBA, after one warm-up each), "
             f"{args.deltas} upstream deltas {args.interval:g} s apart; load {load}.", "",
             *table(["codex_mode", "first content after the first upstream delta (median)",
                     "(max)", "last byte (median)", "content events (median)"],
                    "lrrrr", rows), "",
             f"The app-server's resident memory after the run: {memory / 2**20:.0f} MB.", ""]
    info = machine_info()
    notes = [f"{k}: {v}" for k, v in info.items()]
    publish(finish(lines, notes), args.write, "codex app-server")
    return 0


if __name__ == "__main__":
    run_main(main, __name__)
