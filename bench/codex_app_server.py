"""codex on its app-server against ``codex exec``: how soon the client sees content.

    python -m bench.codex_app_server [--requests N] [--deltas D] [--interval S]
                                     [--idle-s S] [--load N] [--concurrency C]
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

Then the app-server idles ``--idle-s`` (40 s: a server that has answered is replaced
by a fresh one after 30 s idle) and its memory is read again. Then ``--load`` requests
(default 1,000) at ``--concurrency`` (16) through one more ``app-server`` proxy against a
mock answering at once (scenario ``success``), a mix of a third streamed, a third not, a
third offering a tool (the mock calls it: ``tool_calls``): the throughput, the server's
memory after the first 100 and at the end, how many servers served (one is replaced after
100 threads) and the threads left open at the end (must be 0).
"""

from __future__ import annotations

import concurrent.futures
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


def start_mock(root: Path, deltas: int, interval: float, scenario: str = "slow") -> Server:
    """The mock in a child process; returns once it printed ``LISTENING <base URL>``."""
    root.mkdir(parents=True, exist_ok=True)
    log_path = root / "mock.log"
    env = {**base_env(root, root), "PYTHONPATH": str(SUPPORT), "PYTHONDONTWRITEBYTECODE": "1"}
    options = ["--interval", repr(interval), "--count", str(deltas)] if scenario == "slow" \
        else ["--delay", "0"]
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "mock_openai_responses", "--scenario", scenario,
             *options], env=env, cwd=SUPPORT,
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


def proxy_config(binary: str, mock_url: str, mode: str, slots: int = 4) -> dict[str, Any]:
    return {"providers": {"enabled": {"openai": True, "anthropic": False, "mistral": False},
                          "openai": {"binary": binary, "codex_mode": mode, "metered": True,
                                     "max_concurrent": slots,
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


TOOL = {"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}


def load_run(root: Path, binary: str, total: int, concurrency: int) -> list[str]:
    """The c=``concurrency`` mix through one app-server proxy; the report's lines."""
    mock = start_mock(root / "load", 0, 0.0, scenario="success")
    (root / "load-proxy" / "user-home").mkdir(parents=True)
    proxy = start_olp(root / "load-proxy", proxy_config(binary, mock.url, "app-server",
                                                        concurrency),
                      ["openai"], name="codex load proxy",
                      env={"HOME": str(root / "load-proxy" / "user-home")})
    try:
        health = sync_client(proxy.url)

        def server() -> dict[str, Any]:
            return health.get("/health").json()["providers"]["openai"]["app_server"]  # type: ignore

        def one(n: int, client: httpx.Client) -> None:
            kind = n % 3
            body: dict[str, Any] = {"model": "gpt-5.5", "messages": [
                {"role": "user", "content": f"Weather in Paris? ({n})" if kind == 2
                 else f"Say hello ({n})."}]}
            if kind == 0:
                body["stream"] = True
            if kind == 2:
                body["tools"] = [TOOL]
            response = client.post("/v1/chat/completions", json=body)
            if response.status_code != 200:
                raise BenchError(f"request {n}: HTTP {response.status_code}: "
                                 f"{response.text[:300]}")

        clients = [sync_client(proxy.url) for _ in range(concurrency)]
        one(0, clients[0])  # the server starts
        started = time.perf_counter()
        after_100 = 0
        with concurrent.futures.ThreadPoolExecutor(concurrency) as pool:
            futures = [pool.submit(one, n, clients[n % concurrency])
                       for n in range(1, total)]
            for i, future in enumerate(concurrent.futures.as_completed(futures)):
                future.result()
                if i == 100:
                    after_100 = server()["memory_bytes"]
        elapsed = time.perf_counter() - started
        end = server()
        for client in clients:
            client.close()
    finally:
        stop(proxy)
        stop(mock)
    if end["threads"]:
        raise BenchError(f"{end['threads']} threads left open after the load")
    return [f"**Load**: {total} requests at c={concurrency} (a third streamed, a third not, a "
            f"third with a tool call), one login: {(total - 1) / elapsed:.1f} requests/s; "
            f"{end['started']} servers served them (one is replaced after 100 threads); "
            f"the running server's memory {after_100 / 2**20:.0f} MB after 100 requests, "
            f"{end['memory_bytes'] / 2**20:.0f} MB at the end; threads left open: "
            f"{end['threads']}.", ""]


def main(argv: Sequence[str] | None = None) -> int:
    parser = arg_parser(__name__, __doc__)
    parser.add_argument("--requests", type=int, default=6)
    parser.add_argument("--deltas", type=int, default=20)
    parser.add_argument("--interval", type=float, default=0.25)
    parser.add_argument("--idle-s", type=float, default=40.0,
                        help="then idle this long and read the server's memory (0: no)")
    parser.add_argument("--load", type=int, default=1000, help="0: no load run")
    parser.add_argument("--concurrency", type=int, default=16)
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
            idle_memory, kept = None, 0
            if args.idle_s:  # idle after use: a fresh server takes the used one's place
                time.sleep(args.idle_s)
                health = clients["app-server"].get("/health").json()
                idle_memory = health["providers"]["openai"]["app_server"]["memory_bytes"]
                kept = health["providers"]["openai"]["app_server"]["kept"]
        finally:
            for proxy in proxies.values():
                stop(proxy)
            stop(mock)
        loaded = load_run(root, binary, args.load, args.concurrency) if args.load else []
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
             f"The app-server's resident memory after the run: {memory / 2**20:.0f} MB"
             + (f"; after {args.idle_s:g} s idle: {idle_memory / 2**20:.0f} MB, holding {kept} "
                "threads kept for their conversations (a used server holding none is replaced "
                "by a fresh one after 30 s idle)." if idle_memory is not None else "."),
             "",
             *loaded]
    info = machine_info()
    notes = [f"{k}: {v}" for k, v in info.items()]
    publish(finish(lines, notes), args.write, "codex app-server")
    return 0


if __name__ == "__main__":
    run_main(main, __name__)
