"""Pass-through overhead and fallback-hop cost of the proxy, against a loopback mock upstream.

    python -m bench.passthrough [--requests N] [--concurrency C] [--write docs/benchmarks.md]

Starts three mock OpenAI-compatible upstreams (``tests/support/mock_openai_upstream``, in a child
process of their own): ``up`` answers (4 deltas, no delay), ``down`` answers 503 and
``down-nr`` answers 503 with ``Retry-After: 60``. Then ``python -m olp start`` (temporary
``OLP_HOME``, port 0, loopback only, cache off, circuits that never open) with three chains:
``direct`` = [up], ``fallback`` = [down, up], ``fallback-nr`` = [down-nr, up]. The same client
(httpx on Trio, one keep-alive connection per worker) then sends the same chat completion,
streamed and not, one at a time and C at a time, to four targets, interleaved:

* (a) ``upstream``: straight to the ``up`` mock;
* (b) ``direct``: through OLP, one hop;
* (c) ``fallback``: through OLP, a failed hop (503, retried once on the hop after a jittered
  backoff, as OLP does by default) and then ``up``;
* (c') ``fallback-nr``: the same without the retry: OLP's per-hop retry has no config switch,
  but a 503 whose ``Retry-After`` exceeds the retry policy's ``max_retry_after_s`` is never
  retried, so ``down-nr`` measures the failed hop alone.

Per request: time to the first content byte (streamed: the SSE event with the first
non-empty ``delta.content``; JSON: the first body byte) and to the complete response, both from
just before the request is handed to httpx. Reported: p50/p90/p99, requests/s, the proxy's CPU
per request, (b) − (a) as the pass-through overhead and (c) − (b) as the fallback-hop cost.
Nothing leaves 127.0.0.1; every process is stopped with SIGTERM and the temporary directory
is removed.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import httpx
import trio

from bench._common import (
    OWNER_TOKEN,
    REPO,
    START_TIMEOUT_S,
    BenchError,
    Server,
    add_budget,
    add_write,
    arg_parser,
    async_client,
    base_env,
    chat_body,
    command_line,
    f2,
    finish,
    load_before_after,
    logged_errors_note,
    machine_cpu_s,
    machine_info,
    mode_name,
    pcts,
    process_cpu_s,
    publish,
    run_main,
    sse_event_text,
    sse_text,
    start_olp,
    stop,
    table,
    tail,
)

ROUTER_KEY = "sk-bench-router"
UPSTREAM_MODEL = "gpt-bench"
DELTAS = ("Hello", " from", " the mock", " upstream.")
EXPECTED = "".join(DELTAS)
DOWN_NR_RETRY_AFTER_S = 60
SECTION = "passthrough"
WARMUP = 10
SEQ_BLOCK = 1  # sequential: targets alternate request by request
CONC_BLOCK = 5  # concurrent: blocks of C x 5 requests per target
LIBS = ("trio", "h11", "httpx", "httpcore")
#: The figures before issue #9's hot-path work (the run published at 3e6f06f), so the
#: section shows before and after.
BEFORE = ("**Before this change** (issue #9, hot paths; run of 2026-11-30 at 3e6f06f): "
          "streaming one at a time, first content 5.68 ms through OLP against 2.03 ms "
          "direct, i.e. **+3.65 ms**; JSON **+4.92 ms**; proxy CPU 5.55 ms per request.")

TargetName = Literal["upstream", "direct", "fallback", "fallback-nr"]
TARGETS: tuple[TargetName, ...] = ("upstream", "direct", "fallback", "fallback-nr")
LABELS: dict[TargetName, str] = {
    "upstream": "(a) straight to the upstream",
    "direct": "(b) OLP `direct` = [up]",
    "fallback": "(c) OLP `fallback` = [down, up], retry as is",
    "fallback-nr": "(c′) OLP `fallback-nr` = [down-nr, up], no retry",
}


# -- the mock upstreams (a child process running this module with --serve-mocks) ---------------

def serve_mocks() -> None:
    """Serve the three mocks until SIGTERM; print their base URLs as one JSON line first."""
    sys.path.insert(0, str(REPO / "tests" / "support"))
    mock: Any = importlib.import_module("mock_openai_upstream")

    async def run() -> None:
        with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async with trio.open_nursery() as nursery:
                up = await nursery.start(functools.partial(
                    mock.serve_mock, scenario="success", deltas=DELTAS, delay=0.0))
                down = await nursery.start(functools.partial(
                    mock.serve_mock, scenario="unavailable"))
                down_nr = await nursery.start(functools.partial(
                    mock.serve_mock, scenario="unavailable",
                    retry_after=DOWN_NR_RETRY_AFTER_S))
                print(json.dumps({"up": up.base_url, "down": down.base_url,
                                  "down-nr": down_nr.base_url}), flush=True)
                async for _ in signals:
                    nursery.cancel_scope.cancel()
                    break

    trio.run(run)


def start_mocks(root: Path) -> tuple[Server, dict[str, str]]:
    """The mocks' process and their base URLs (``up``, ``down``, ``down-nr``)."""
    log_path = root / "mocks.log"
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "bench.passthrough", "--serve-mocks"],
            env={**base_env(root, root), "PYTHONDONTWRITEBYTECODE": "1"}, cwd=REPO,
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=log,
            start_new_session=True)
    server = Server("mock upstreams", process, log_path)
    assert process.stdout is not None
    try:
        ready, _, _ = select.select([process.stdout], [], [], START_TIMEOUT_S)
        line = process.stdout.readline() if ready else b""
        try:
            urls: dict[str, str] = json.loads(line)
        except ValueError:
            raise BenchError(f"the mock upstreams did not start; log:\n{tail(log_path)}"
                             ) from None
        return server, urls
    except BaseException:
        stop(server)
        raise


# -- the proxy ---------------------------------------------------------------------------------

def proxy_config(mocks: dict[str, str], max_concurrent: int) -> dict[str, Any]:
    def provider(name: str) -> dict[str, Any]:
        return {"kind": "openai-compatible", "base_url": mocks[name],
                "api_key_env": "ROUTER_KEY", "metered": True, "max_concurrent": max_concurrent,
                "timeouts": {"first_output_s": 20, "idle_s": 20, "total_s": 30}}

    def hop(name: str) -> dict[str, Any]:
        return {"provider": name, "model": UPSTREAM_MODEL, "metered": True}

    return {
        "providers": {"enabled": {"anthropic": False, "openai": False, "mistral": False},
                      "up": provider("up"), "down": provider("down"),
                      "down-nr": provider("down-nr")},
        "routing": {"chains": {"direct": [hop("up")],
                               "fallback": [hop("down"), hop("up")],
                               "fallback-nr": [hop("down-nr"), hop("up")]},
                    "resilience": {"circuit_failures": 1_000_000}},
        "cache": {"enabled": False},
        "server": {"drain_grace_s": 2, "kill_grace_s": 1},
    }


def start_proxy(root: Path, mocks: dict[str, str], max_concurrent: int) -> Server:
    """``olp start`` with the three mocks as providers."""
    return start_olp(root, proxy_config(mocks, max_concurrent), ["up", "down", "down-nr"],
                     env={"ROUTER_KEY": ROUTER_KEY})


def own_cpu_s(pids: Sequence[int]) -> float:
    """CPU seconds used by this process and by ``pids``."""
    return time.process_time() + sum(process_cpu_s(pid) for pid in pids)


# -- one request -------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Target:
    name: TargetName
    base_url: str
    path: str
    model: str
    token: str

    def body(self, stream: bool) -> bytes:
        return chat_body(self.model, stream)


@dataclass(frozen=True, slots=True)
class Sample:
    first_ms: float  # to the first content byte
    total_ms: float  # to the complete response


class _FirstContent:
    """Finds the first SSE event carrying non-empty ``delta.content`` as bytes arrive."""

    def __init__(self) -> None:
        self.buffer = bytearray()
        self.scanned = 0

    def feed(self, chunk: bytes) -> bool:
        self.buffer += chunk
        end = self.buffer.find(b"\n\n", self.scanned)
        while end >= 0:
            event = bytes(self.buffer[self.scanned:end])
            self.scanned = end + 2
            if sse_event_text(event):
                return True
            end = self.buffer.find(b"\n\n", self.scanned)
        return False


def _check(target: Target, stream: bool, response: httpx.Response, body: bytes) -> None:
    if stream:
        try:
            text = sse_text(body)
        except BenchError as exc:
            raise BenchError(f"{target.name}: {exc}") from None
    else:
        text = json.loads(body)["choices"][0]["message"]["content"]
    if text != EXPECTED:
        raise BenchError(f"{target.name}: unexpected answer {text!r}")
    if target.name != "upstream":
        used = response.headers.get("x-olp-provider-used")
        hops = response.headers.get("x-olp-fallback-hops")
        want = "0" if target.name == "direct" else "1"
        if used != "up" or hops != want or response.headers.get("x-olp-cache") != "bypass":
            raise BenchError(f"{target.name}: served by {used!r} after {hops!r} hops, cache "
                             f"{response.headers.get('x-olp-cache')!r}")


async def one_request(client: httpx.AsyncClient, target: Target, stream: bool) -> Sample:
    request = client.build_request("POST", target.path, content=target.body(stream))
    t0 = time.perf_counter_ns()
    response = await client.send(request, stream=True)
    try:
        if response.status_code != 200:
            await response.aread()
            raise BenchError(f"{target.name}: HTTP {response.status_code}: "
                             f"{response.text[:300]}")
        t_first = 0
        finder = _FirstContent() if stream else None
        body = bytearray()
        async for chunk in response.aiter_raw():
            now = time.perf_counter_ns()
            body += chunk
            if not t_first and chunk and (finder is None or finder.feed(chunk)):
                t_first = now
        t_end = time.perf_counter_ns()
    finally:
        await response.aclose()
    _check(target, stream, response, bytes(body))
    if not t_first:
        raise BenchError(f"{target.name}: no content in the answer")
    return Sample((t_first - t0) / 1e6, (t_end - t0) / 1e6)


# -- passes ------------------------------------------------------------------------------------

@dataclass
class Result:
    target: TargetName
    stream: bool
    concurrency: int
    samples: list[Sample] = field(default_factory=list)
    wall_s: float = 0.0
    proxy_cpu_s: float = 0.0

    @property
    def rps(self) -> float:
        return len(self.samples) / self.wall_s if self.wall_s else float("nan")


async def block(clients: Sequence[httpx.AsyncClient], target: Target, stream: bool,
                count: int) -> tuple[list[Sample], float]:
    """``count`` requests, ``len(clients)`` in flight (closed loop); samples and wall time."""
    samples: list[Sample] = []
    remaining = count

    async def worker(client: httpx.AsyncClient) -> None:
        nonlocal remaining
        while remaining > 0:
            remaining -= 1
            samples.append(await one_request(client, target, stream))

    t0 = time.perf_counter()
    async with trio.open_nursery() as nursery:
        for client in clients:
            nursery.start_soon(worker, client)
    return samples, time.perf_counter() - t0


async def run_pass(targets: Sequence[Target], quotas: dict[TargetName, int], stream: bool,
                   concurrency: int, proxy_pid: int, deadline: float
                   ) -> tuple[list[Result], bool]:
    """Warm-up, then the targets in turn, a block each, until every quota is met."""
    clients = {t.name: [async_client(t.base_url, t.token) for _ in range(concurrency)]
               for t in targets}
    results = {t.name: Result(t.name, stream, concurrency) for t in targets}
    size = SEQ_BLOCK if concurrency == 1 else CONC_BLOCK * concurrency
    cut = False
    try:
        for t in targets:
            await block(clients[t.name], t, stream, max(WARMUP, concurrency))
        while not cut and any(len(results[t.name].samples) < quotas[t.name] for t in targets):
            for t in targets:
                r = results[t.name]
                k = min(size, quotas[t.name] - len(r.samples))
                if k <= 0:
                    continue
                if time.monotonic() > deadline:
                    cut = True
                    break
                cpu0 = process_cpu_s(proxy_pid)
                samples, wall = await block(clients[t.name], t, stream, k)
                r.proxy_cpu_s += process_cpu_s(proxy_pid) - cpu0
                r.samples += samples
                r.wall_s += wall
    finally:
        for pool in clients.values():
            for client in pool:
                await client.aclose()
    return [results[t.name] for t in targets], cut


async def run_all(targets: Sequence[Target], n: int, retry_n: int, concurrency: int,
                  proxy_pid: int, deadline: float) -> tuple[list[Result], bool]:
    results: list[Result] = []
    cut = False
    for c in (1, concurrency) if concurrency > 1 else (1,):
        quotas: dict[TargetName, int] = {t.name: n for t in targets}
        if c == 1:
            quotas["fallback"] = retry_n
        for stream in (True, False):
            print(f"  {mode_name(stream)}, {c} at a time...", file=sys.stderr)
            got, was_cut = await run_pass(targets, quotas, stream, c, proxy_pid, deadline)
            results += got
            cut = cut or was_cut
    return results, cut


# -- the report --------------------------------------------------------------------------------

def retry_policy() -> tuple[float, float, float]:
    """The default per-hop retry of a 5xx: (lowest, highest) backoff and ``max_retry_after_s``,
    read from OLP so the text follows the code."""
    try:
        from olp.providers.openai_compat import RetryPolicy
    except ImportError:
        return float("nan"), float("nan"), float("nan")
    p = RetryPolicy()
    ceiling = min(p.backoff_max_s, p.backoff_base_s)
    return ceiling / 2, ceiling, p.max_retry_after_s


Key = tuple[bool, int, TargetName]


def _diff_rows(by: dict[Key, Result], concurrency: int) -> list[str]:
    rows: list[list[str]] = []
    for c in (1, concurrency) if concurrency > 1 else (1,):
        for stream in (True, False):
            if any(not by[(stream, c, t)].samples for t in TARGETS):
                continue
            for attr, label in (("first_ms", "first content"), ("total_ms", "complete")):
                s = {t: pcts([getattr(x, attr) for x in by[(stream, c, t)].samples])
                     for t in TARGETS}
                a, b, cc, cn = s["upstream"], s["direct"], s["fallback"], s["fallback-nr"]
                rows.append([
                    mode_name(stream), str(c), label, f"**{f2(b['p50'] - a['p50'])}**",
                    f2(b["p99"] - a["p99"]), f2(cc["p50"] - b["p50"]), f2(cc["p99"] - b["p99"]),
                    f"**{f2(cn['p50'] - b['p50'])}**", f2(cn["p99"] - b["p99"])])
    return table(["mode", "C", "to", "(b) − (a) p50", "(b) − (a) p99", "(c) − (b) p50",
                  "(c) − (b) p99", "(c′) − (b) p50", "(c′) − (b) p99"], "lrl" + "r" * 6, rows)


def render(results: Sequence[Result], info: dict[str, str], command: str,
           args: argparse.Namespace, notes: Sequence[str]) -> str:
    by: dict[Key, Result] = {(r.stream, r.concurrency, r.target): r for r in results}
    lo, hi, max_after = retry_policy()
    conc = args.concurrency

    def med(stream: bool, c: int, t: TargetName, attr: str = "first_ms") -> float:
        return pcts([getattr(x, attr) for x in by[(stream, c, t)].samples])["p50"]

    lines = [
        "## Pass-through overhead and fallback-hop cost (mock upstream)",
        "",
        "What OLP adds in front of an OpenAI-compatible HTTP upstream, and what one failed hop "
        "costs, next to the same requests sent straight to the upstream. The upstream is the "
        "loopback mock `tests/support/mock_openai_upstream` (h11 on Trio; 4 deltas, no artificial "
        "delay), so the upstream's own time is about as small as it gets and the differences "
        "are OLP's. Measured with:",
        "",
        "```sh",
        command,
        "```",
        "",
        f"- run: {info['date']}; `--requests {args.requests}` per target, mode and "
        f"concurrency (`--retry-requests {args.retry_requests}` for (c) one at a time) after "
        f"{WARMUP} warm-up requests; concurrency 1 and {conc}; the four targets interleaved "
        f"(one request each in turn when sequential, blocks of {CONC_BLOCK} × C when "
        "concurrent) so all see the same background load",
        f"- machine: {info['platform']}, {info['cpus']} CPUs ({info['cpu']}); {info['load']}",
        f"- client, proxy and mocks: {info['python']}; {info['libs']}; olp {info['olp']}",
        "- OLP: `olp start`, `cache.enabled: false`, `OLP_LOG_LEVEL=info` (JSON log lines to a "
        "file), providers `up`, `down`, `down-nr` of kind `openai-compatible` (metered, "
        "`max_concurrent` 32), `routing.resilience.circuit_failures: 1000000` so `down`'s "
        "circuit never opens and every (c) request pays the failed hop",
        "- client: httpx on Trio in the benchmark's process, one `AsyncClient` (one keep-alive "
        "connection) per worker and target; the mocks run in a second process, OLP in a third, "
        "all on the same CPUs",
        "",
    ]
    if all(by.get((True, 1, t)) and by[(True, 1, t)].samples for t in TARGETS):
        a, b = med(True, 1, "upstream"), med(True, 1, "direct")
        c, cn = med(True, 1, "fallback"), med(True, 1, "fallback-nr")
        lines += [
            "**In short** (one at a time, streaming, medians to the first content byte):",
            "",
            f"- pass-through overhead (b) − (a): **{f2(b - a)} ms** ({f2(b)} ms through OLP "
            f"against {f2(a)} ms straight to the mock);",
            f"- fallback-hop cost without the retry (c′) − (b): **{f2(cn - b)} ms**;",
            f"- fallback-hop cost as configured by default (c) − (b): **{f2(c - b)} ms**, of "
            f"which {f2(c - cn)} ms ((c) − (c′)) is the per-hop retry: a backoff drawn "
            f"uniformly from {lo * 1000:.0f}–{hi * 1000:.0f} ms, then the 503 again.",
            "",
            BEFORE,
            "",
        ]
    lines += [
        "**Differences** (ms; a difference of p50s, or of p99s, not a p50 of differences):",
        "",
        *_diff_rows(by, conc),
        "",
        "**All workloads** (ms; first = to the first content byte; complete = to the end of "
        "the response; proxy CPU = OLP's user + system CPU time per request, all threads):",
        "",
        *table(["mode", "C", "target", "n", "req/s", "first p50", "first p90", "first p99",
                "complete p50", "complete p90", "complete p99", "proxy CPU/req"],
               "lrl" + "r" * 9, map(_workload_row, results)),
        "",
        "What the numbers mean:",
        "",
        "- **Targets**: (a) `POST {mock}/v1/chat/completions` straight to the `up` mock; "
        "(b) `POST /v1/chat/completions` to OLP with `model: direct` (chain [up]); (c) "
        "`model: fallback` (chain [down, up]: `down` answers 503 \"engine overloaded\"); (c′) "
        "`model: fallback-nr` (chain [down-nr, up]: `down-nr` answers the same 503 with "
        f"`Retry-After: {DOWN_NR_RETRY_AFTER_S}`). Same body (system + user message, "
        "`stream` true or false) and client for all; only the model name differs. Every "
        "answer is checked (status 200, the full text, `[DONE]`, and for OLP "
        "`X-OLP-Provider-Used: up`, the expected `X-OLP-Fallback-Hops`, `X-OLP-Cache: "
        "bypass`); a failure stops the run.",
        f"- **The retry**: OLP's HTTP provider retries a 500/502/503 once on the same hop "
        f"before moving on, after an \"equal jitter\" backoff ({lo * 1000:.0f}–"
        f"{hi * 1000:.0f} ms for the first retry), so (c) pays two 503s and that sleep. "
        "The retry policy (`RetryPolicy` in `olp/providers/openai_compat/_retry.py`) has no "
        "config key (`providers.<name>` accepts none and `olp/runtime/provider_actors.py` "
        "builds the default), so it cannot be switched off for the run. (c′) measures the hop "
        f"without it through the upstream instead: a 503 whose `Retry-After` is over the policy's "
        f"`max_retry_after_s` ({max_after:g} s) is never retried, and for an `unavailable` "
        "error the header only feeds the circuit (which never opens here), so (c′) is the "
        "failed request, its classification and the step to the next hop.",
        "- **First content byte**: streaming — when the chunk that completes the first SSE "
        "event with a non-empty `delta.content` arrived (the mock and OLP both send a "
        "role-only chunk first; OLP holds status and headers back until content is in hand); "
        "JSON — when the first body byte arrived. **Complete**: when the body's last byte "
        "arrived. Both from just before the request is handed to httpx "
        "(`time.perf_counter_ns()`).",
        "- **req/s**: requests ÷ the wall time of that target's blocks; one at a time it is "
        "about 1000 ÷ the mean latency.",
        "- **What (b) − (a) covers**: OLP's HTTP server, the API-key check, decoding, routing, "
        "the engine and actor hand-offs, re-encoding the request, its own request to the "
        "upstream (prepared once per provider and handed to httpx's transport on a pooled "
        "keep-alive connection, head and body in one send), SSE parsing, the first-chunk rule, "
        "re-encoding the answer, a JSON log line (two with a failed hop), and, off the response "
        "path, saving the ledger and health book to SQLite in a worker thread when what is "
        "saved changes (here never: the ledger counts only providers with soft triggers, and "
        "none are configured; with the circuit closed a failed hop changes nothing saved).",
        "- **Upstream side**: OLP always asks the upstream for a stream with "
        "`stream_options.include_usage` (it needs the usage), also for a JSON request, which it "
        "then assembles; the straight request asks for exactly what the client asked for. "
        "That difference is part of (b) − (a) by design.",
        "- **Concurrent rows**: C workers each with their own keep-alive connection; client, "
        "mocks and OLP share the machine's CPUs, so with few CPUs these rows show CPU "
        "contention as much as latency.",
    ]
    return finish(lines, notes)


def _workload_row(r: Result) -> list[str]:
    first = pcts([s.first_ms for s in r.samples])
    total = pcts([s.total_ms for s in r.samples])
    cpu = (f2(r.proxy_cpu_s * 1000 / len(r.samples))
           if r.samples and r.target != "upstream" else "–")
    return [mode_name(r.stream), str(r.concurrency), LABELS[r.target], str(len(r.samples)),
            f"{r.rps:.0f}", f2(first["p50"]), f2(first["p90"]), f2(first["p99"]),
            f2(total["p50"]), f2(total["p90"]), f2(total["p99"]), cpu]


# -- main --------------------------------------------------------------------------------------

def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = arg_parser("bench.passthrough", __doc__)
    parser.add_argument("--requests", type=int, default=200, metavar="N",
                        help="measured requests per target, mode and concurrency (default 200, "
                             "after 10 warm-ups)")
    parser.add_argument("--retry-requests", type=int, default=100, metavar="M",
                        help="measured requests of the (c) fallback-with-retry target one at "
                             "a time, each ~0.2 s of backoff (default 100)")
    parser.add_argument("--concurrency", type=int, default=8, metavar="C",
                        help="also run every workload with C requests in flight (default 8; "
                             "1 = sequential only)")
    add_write(parser, SECTION)
    add_budget(parser)
    parser.add_argument("--serve-mocks", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.requests < 1 or args.retry_requests < 1 or args.concurrency < 1:
        parser.error("--requests, --retry-requests and --concurrency must be at least 1")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.serve_mocks:
        serve_mocks()
        return 0
    deadline = time.monotonic() + args.budget_s
    command = command_line("bench.passthrough", argv)
    info = machine_info(LIBS)
    notes: list[str] = []
    with tempfile.TemporaryDirectory(prefix="olp-bench-") as tmp:
        root = Path(tmp)
        print("starting the mock upstreams...", file=sys.stderr)
        mocks, mock_urls = start_mocks(root)
        try:
            print("starting the proxy...", file=sys.stderr)
            proxy = start_proxy(root, mock_urls, max(32, 2 * args.concurrency))
            try:
                olp = proxy.url
                targets = [
                    Target("upstream", mock_urls["up"], "/chat/completions", UPSTREAM_MODEL,
                           ROUTER_KEY),
                    *(Target(name, olp, "/v1/chat/completions", name, OWNER_TOKEN)
                      for name in ("direct", "fallback", "fallback-nr"))]
                print(f"proxy at {olp}, upstream at {mock_urls['up']}", file=sys.stderr)
                pids = (proxy.process.pid, mocks.process.pid)
                t0, machine0, own0 = time.monotonic(), machine_cpu_s(), own_cpu_s(pids)
                results, cut = trio.run(run_all, targets, args.requests, args.retry_requests,
                                        args.concurrency, proxy.process.pid, deadline)
                others = (machine_cpu_s() - machine0 - (own_cpu_s(pids) - own0)) \
                    / (time.monotonic() - t0)
            finally:
                stop(proxy)
        finally:
            stop(mocks)
        notes += logged_errors_note(proxy.log_path, "OLP")
    info["load"] = load_before_after(info["load"])
    if others == others:  # not NaN
        info["load"] += (f"; other processes used {max(0.0, others):.2f} of the "
                         f"{info['cpus']} CPUs on average while measuring")
        if others > 0.25 * (os.cpu_count() or 1):
            notes.append("the machine was busy with other work during the run (see "
                         "*machine*): the numbers are higher and noisier than on an idle "
                         "machine.")
    if cut:
        notes.append(f"the {args.budget_s:g} s budget ran out: some workloads have fewer "
                     "samples than asked for (see n).")
    publish(render(results, info, command, args, notes), args.write, SECTION)
    return 0


if __name__ == "__main__":
    run_main(main, "bench.passthrough")
