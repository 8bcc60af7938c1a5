"""Cache-hit throughput and latency of the proxy, next to a bare Quart-Trio app (the floor).

    python -m bench.cache_hits [--duration S] [--warmup S] [--slices K]
                               [--clients per-worker|shared] [--write docs/benchmarks.md]

Starts ``python -m olp start`` (temporary ``OLP_HOME``, port 0, loopback only) with
``providers.anthropic.binary`` = ``tests/support/fakes/fake_claude.py``, sends one request (a miss:
the fake runs once) so the answer is cached, and captures one non-streaming and one streaming
hit. The cache key ignores ``stream``, so that one entry answers both modes. Then it starts
``python -m bench.bare_app`` with those captured bodies and headers and checks that the bare
app sends the same bytes. For each mode (JSON, SSE) × concurrency C (1, 16, 64) it runs a
closed loop against each target: C workers on Trio, each with its own ``httpx.AsyncClient``
and keep-alive connection, each sending its next request as soon as the last one ended; a
warm-up per target, then the measured time cut into slices that alternate between the two
targets (ABBA), so slow changes in background load hit both alike. Last, one step at C=64 with
one ``AsyncClient`` shared by all workers, to show why that is not the default (httpcore's
pool makes the client's CPU per request grow with C).

Reported: requests/s, latency p50/p90/p99 (streaming: until the whole body, ``[DONE]``
included, has arrived), time to the first body byte, and the CPU time the server and the
client used per answer. Every OLP answer must be a 200 with ``X-OLP-Cache: hit`` and the
expected body; anything else counts as an error. Nothing leaves 127.0.0.1; both servers are
stopped with SIGTERM; temporary files are removed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import trio

from bench._common import (
    OWNER_TOKEN,
    REPO,
    REQUEST_TIMEOUT_S,
    START_TIMEOUT_S,
    BenchError,
    Server,
    add_write,
    arg_parser,
    async_client,
    base_env,
    chat_body,
    checkout_label,
    command_line,
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
    start_olp,
    stop,
    sync_client,
    table,
    wait_listening,
)
from bench.bookkeeping import measure as measure_bookkeeping
from bench.bookkeeping import summary as bookkeeping_summary

FAKE_CLAUDE = REPO / "tests" / "support" / "fakes" / "fake_claude.py"
MODEL = "claude-sonnet-4-6"
BASELINE = "OLP before"
CANNED = "Hello from the mock upstream."  # what the fake claude answers
PATH = "/v1/chat/completions"
SECTION = "cache-hits"
CONCURRENCY = (1, 16, 64)
MODES = (False, True)  # stream
PAUSE_S = 0.3  # between runs: let the last run's connections close
LIBS = ("trio", "hypercorn", "quart", "quart-trio", "h11", "httpx", "httpcore", "anyio")


def request_body(stream: bool) -> bytes:
    return chat_body(MODEL, stream)


# -- the two servers ---------------------------------------------------------------------------

def olp_config() -> dict[str, Any]:
    return {
        "providers": {
            "enabled": {"openai": False, "mistral": False},
            # no sandbox: the fake reads its transcripts from tests/fixtures, outside it;
            # metered: an API key in its environment makes it a metered provider
            "anthropic": {"binary": str(FAKE_CLAUDE), "env": {"ANTHROPIC_API_KEY": "sk-fake"},
                          "sandbox": False, "metered": True},
        },
        "server": {"drain_grace_s": 2, "kill_grace_s": 1},
    }


def start_proxy(root: Path) -> Server:
    """``olp start`` with the fake ``claude`` as the anthropic CLI."""
    return start_olp(root, olp_config(), ["anthropic"], name="OLP")


def start_bare(root: Path, capture: dict[str, Any], *, prefix: Sequence[str] = (),
               start_timeout_s: float = START_TIMEOUT_S) -> Server:
    """``python -m bench.bare_app --port 0 --payloads -``, the capture on its stdin;
    ``prefix``: a command that runs it (as :func:`bench._common.start_olp`)."""
    out_path, log_path = root / "bare.out", root / "bare.log"
    with open(out_path, "wb") as out, open(log_path, "wb") as log:
        process = subprocess.Popen(
            [*prefix, sys.executable, "-m", "bench.bare_app", "--port", "0", "--payloads", "-",
             "--token", OWNER_TOKEN],
            env=base_env(root, root), cwd=REPO, stdin=subprocess.PIPE, stdout=out,
            stderr=log, start_new_session=True)
    server = Server("bare app", process, log_path)
    assert process.stdin is not None
    try:
        process.stdin.write(json.dumps(capture).encode())
        process.stdin.close()
    except BrokenPipeError:
        pass  # it died; wait_listening reports it

    def listening() -> str | None:
        for line in out_path.read_text(errors="replace").splitlines():
            if line.startswith("LISTENING "):
                return line.split(None, 1)[1].strip()
        return None

    return wait_listening(server, listening, start_timeout_s)


# -- warming the cache, capturing a hit, checking the bare app ---------------------------------

def warm_and_capture(olp: Server) -> dict[str, Any]:
    """One miss (the fake runs), then one hit per mode: their bodies and headers."""
    capture: dict[str, Any] = {}
    with sync_client(olp.url) as client:
        miss = client.post(PATH, content=request_body(False))
        if miss.status_code != 200 or miss.headers.get("x-olp-cache") not in ("miss", "hit"):
            raise BenchError(f"warm-up request: HTTP {miss.status_code}, X-OLP-Cache "
                             f"{miss.headers.get('x-olp-cache')!r}: {miss.text[:300]}")
        for stream in MODES:
            hit = client.post(PATH, content=request_body(stream))
            if hit.status_code != 200 or hit.headers.get("x-olp-cache") != "hit":
                raise BenchError(f"no cache hit after the warm-up (stream={stream}): HTTP "
                                 f"{hit.status_code}, X-OLP-Cache "
                                 f"{hit.headers.get('x-olp-cache')!r}: {hit.text[:300]}")
            if not body_ok(stream, hit.content):
                raise BenchError(f"unexpected hit body (stream={stream}): {hit.text[:300]}")
            capture["sse" if stream else "json"] = {"body": hit.text,
                                                    "headers": dict(hit.headers)}
    return capture


def check_bare(bare: Server, capture: dict[str, Any]) -> None:
    """The bare app must send OLP's captured bodies byte for byte."""
    with sync_client(bare.url) as client:
        for stream in MODES:
            got = client.post(PATH, content=request_body(stream))
            want = capture["sse" if stream else "json"]["body"].encode()
            if got.status_code != 200 or got.content != want:
                raise BenchError(f"the bare app's answer (stream={stream}) differs from "
                                 f"OLP's: HTTP {got.status_code} {got.text[:300]!r}")


def body_ok(stream: bool, body: bytes | bytearray) -> bool:
    if stream:
        return body.endswith(b"data: [DONE]\n\n")
    return f'"content":"{CANNED}"'.encode() in body


# -- the closed loop ---------------------------------------------------------------------------

@dataclass
class Run:
    target: str
    stream: bool
    concurrency: int
    duration_s: float
    clients: str  # "per-worker" (C clients, one connection each) or "shared" (one client)
    latency_s: list[float] = field(default_factory=list)
    ttfb_s: list[float] = field(default_factory=list)
    errors: int = 0
    error_example: str = ""
    server_cpu_s: float = 0.0
    client_cpu_s: float = 0.0
    machine_cpu_s: float = 0.0  # every process's, these two included

    @property
    def rps(self) -> float:
        return len(self.latency_s) / self.duration_s

    def cpu_ms_per_request(self, cpu_s: float) -> float:
        return cpu_s * 1000 / len(self.latency_s) if self.latency_s else float("nan")


def new_clients(server: Server, concurrency: int, clients: str) -> list[httpx.AsyncClient]:
    """``per-worker``: one client with one connection per worker; ``shared``: one client
    with a pool of ``concurrency`` connections. Each client costs milliseconds to make."""
    n = concurrency if clients == "per-worker" else 1
    return [async_client(server.url, OWNER_TOKEN, concurrency // n) for _ in range(n)]


async def closed_loop(server: Server, pool: Sequence[httpx.AsyncClient], run: Run,
                      warmup_s: float, measure_s: float) -> None:
    """``run.concurrency`` workers over ``pool``, each sending its next request as soon as
    the previous one ended, for ``warmup_s`` + ``measure_s``. Requests that end inside the
    measured part are added to ``run``, with the CPU time both processes used meanwhile."""
    body = request_body(run.stream)
    check_hit = server.name == "OLP"
    t_begin = trio.current_time()
    start, end = t_begin + warmup_s, t_begin + warmup_s + measure_s

    async def worker(client: httpx.AsyncClient) -> None:
        while True:
            t0 = trio.current_time()
            if t0 >= end:
                return
            t_first = 0.0
            problem = ""
            try:
                async with client.stream("POST", PATH, content=body) as response:
                    received = bytearray()
                    async for chunk in response.aiter_raw():
                        if not t_first and chunk:
                            t_first = trio.current_time()
                        received += chunk
                if response.status_code != 200:
                    problem = f"HTTP {response.status_code}: {bytes(received[:200])!r}"
                elif check_hit and response.headers.get("x-olp-cache") != "hit":
                    problem = f"X-OLP-Cache: {response.headers.get('x-olp-cache')!r}"
                elif not body_ok(run.stream, received):
                    problem = f"unexpected body {bytes(received[:200])!r}"
            except httpx.HTTPError as exc:
                problem = f"{type(exc).__name__}: {exc}"
            t1 = trio.current_time()
            if start <= t1 < end:
                if problem:
                    run.errors += 1
                    run.error_example = run.error_example or problem
                else:
                    run.latency_s.append(t1 - t0)
                    run.ttfb_s.append(t_first - t0)
            if problem:
                await trio.sleep(0.01)  # no busy loop against a dead server

    async def cpu_probe() -> None:
        await trio.sleep_until(start)
        server0, client0 = process_cpu_s(server.process.pid), time.process_time()
        machine0 = machine_cpu_s()
        await trio.sleep_until(end)
        run.server_cpu_s += process_cpu_s(server.process.pid) - server0
        run.client_cpu_s += time.process_time() - client0
        run.machine_cpu_s += machine_cpu_s() - machine0

    with trio.fail_after(warmup_s + measure_s + REQUEST_TIMEOUT_S + 10):
        async with trio.open_nursery() as nursery:
            if measure_s > 0:
                nursery.start_soon(cpu_probe)
            for i in range(run.concurrency):
                nursery.start_soon(worker, pool[i % len(pool)])


def slice_order(slices: int, targets: int = 2) -> list[int]:
    """Target indices for ``slices`` rounds, ABBA: 0 1 1 0 0 1 1 0 ... (0 1 2 2 1 0 ... for
    three)."""
    forward = list(range(targets))
    return [i for k in range(slices) for i in (forward if k % 2 == 0 else forward[::-1])]


async def step(servers: Sequence[Server], stream: bool, concurrency: int, clients: str,
               warmup_s: float, duration_s: float, slices: int) -> list[Run]:
    """One mode and concurrency for both targets: a warm-up each, then ``slices`` measured
    slices each, alternating ABBA so both see the same background load on average; each
    target keeps its clients (and connections) for the whole step."""
    runs = [Run(s.name, stream, concurrency, duration_s, clients) for s in servers]
    pools = [new_clients(s, concurrency, clients) for s in servers]
    try:
        for server, pool, run in zip(servers, pools, runs, strict=True):
            await closed_loop(server, pool, run, warmup_s, 0.0)
        for i in slice_order(slices, len(servers)):
            await closed_loop(servers[i], pools[i], runs[i], 0.0, duration_s / slices)
    finally:
        with trio.CancelScope(shield=True):
            for client in (c for pool in pools for c in pool):
                await client.aclose()
    return runs


async def run_all(servers: Sequence[Server], warmup_s: float, duration_s: float,
                  clients: str, slices: int) -> list[Run]:
    """Every mode × concurrency; then, unless the main runs used it, the shared client at
    the top concurrency (to show why it is not the default)."""
    steps = [(stream, c, clients) for stream in MODES for c in CONCURRENCY]
    if clients != "shared":
        steps.append((False, CONCURRENCY[-1], "shared"))
    runs: list[Run] = []
    for stream, concurrency, how in steps:
        print(f"{mode_name(stream)}, concurrency {concurrency}, {how} client(s): "
              f"{' and '.join(s.name for s in servers)}, {warmup_s:g} s warm-up + "
              f"{duration_s:g} s in {slices} slices each...", file=sys.stderr)
        done = await step(servers, stream, concurrency, how, warmup_s, duration_s, slices)
        for run in done:
            if run.errors:
                print(f"  {run.target}: {run.errors} error(s), e.g. {run.error_example}",
                      file=sys.stderr)
        runs += done
        await trio.sleep(PAUSE_S)
    return runs


# -- the report --------------------------------------------------------------------------------

def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f}"


def _num(value: float, digits: int = 0) -> str:
    return "–" if value != value else f"{value:,.{digits}f}"  # NaN → dash


def _ratio(a: float, b: float, digits: int = 2) -> str:
    return _num(a / b if b else float("nan"), digits)


def render(runs: Sequence[Run], info: dict[str, str], command: str, args: argparse.Namespace,
           notes: Sequence[str], bookkeeping: dict[str, float] | None = None) -> str:
    warmup, clients, slices = args.warmup, args.clients, args.slices
    main = [r for r in runs if r.clients == clients]
    checks = [r for r in runs if r.clients != clients]
    by = {(r.target, r.stream, r.concurrency): r for r in main}
    duration = runs[0].duration_s
    per_worker = clients == "per-worker"
    lines = [
        "## Cache hits: OLP next to a bare Quart-Trio app",
        "",
        "Requests/s and latency of answers served from OLP's response cache, next to the "
        "floor for any Quart-Trio app on this machine: `bench/bare_app.py`, a bare "
        "Quart-Trio app on Hypercorn's trio worker that checks the `Authorization` header "
        "against a constant and sends the same bytes (captured from an OLP hit at start-up "
        "and checked byte for byte; same headers, same SSE writes). Closed loop: C workers "
        "each send the next request as soon as the previous one ended. Measured with:",
        "",
        "```sh",
        command,
        "```",
        "",
        f"- run: {info['date']}; per target, mode and C: {warmup:g} s warm-up, then "
        f"{duration:g} s measured in {slices} slices that alternate with the other "
        "target's (ABBA order), so both see the same background load",
        f"- machine: {info['platform']}, {info['cpus']} CPUs ({info['cpu']}); "
        f"{info['load']}" + (f"; {info['others']}" if "others" in info else ""),
        f"- servers and client: {info['python']}; {info['libs']}; olp {info['olp']}",
        "- OLP: `olp start` with default settings (cache on; `OLP_LOG_LEVEL=info`, so one "
        "JSON log line per request, to a file); one cache entry answers every request",
        "- client: httpx on Trio, " + (
            "one `AsyncClient` per worker (one keep-alive connection each)" if per_worker
            else "one `AsyncClient` shared by the C workers (a pool of C keep-alive "
            "connections)") + ", in one process on the same CPUs as the servers",
    ]
    summary = _summary(by) + _budget(by, bookkeeping)
    if summary:
        lines += ["", "**In short:**", "", *summary]
    lines += [
        "",
        "**Side by side** (ratio = OLP ÷ bare app; latency in ms, for streaming until "
        "`[DONE]` has arrived; CPU = the server's CPU time per answer, all threads):",
        "",
        *table(["mode", "C", "OLP req/s", "bare req/s", "ratio", "OLP p50", "bare p50",
                "ratio", "OLP p99", "bare p99", "OLP CPU ms", "bare CPU ms"],
               "l" + "r" * 11, _side_by_side(by)),
        *_before_after_block(by, args.baseline),
        "",
        "**All runs** (ms; first byte = until the first body bytes arrived; CPU = CPU time "
        f"used during the {duration:g} s measured ÷ answers completed in it):",
        "",
        *table(["target", "mode", "C", "clients", "n", "errors", "req/s", "p50", "p90", "p99",
                "first byte p50", "first byte p99", "server CPU/req", "client CPU/req"],
               "llrl" + "r" * 10, map(_run_row, [*main, *checks])),
    ]
    lines += [
        "",
        "What the numbers mean:",
        "",
        "- **OLP hit**: `POST /v1/chat/completions` with the owner key, answered from the "
        "cache: the key check (SHA-256; the key store itself, in a worker thread, at most "
        "every 2 s per key), the key's limits, body decoding, routing, the cache key "
        "(SHA-256), the cache read (from memory; its last-used time is written in batches), "
        "the replay as JSON or SSE, the `X-OLP-*` headers, the audit row and ledger (written "
        "in batches by a worker thread), the metrics and a log line. Every measured OLP "
        "answer was checked (200, `X-OLP-Cache: hit`, the expected body); anything else is "
        "counted under *errors* and left out of the latencies.",
        "- **bare app**: the same request; the header compared with a constant, `json.loads` "
        "of the body, a canned answer. What Quart-Trio and Hypercorn cost by themselves.",
        "- **req/s**: answers completed inside the measured slices ÷ their length (a request "
        "still in flight when a slice ends is not counted; the same for both targets). "
        "**Latency**: from just before the request is handed to httpx until the whole body "
        "has been read. **First byte**: until the first body bytes arrived (for JSON, about "
        "the whole latency).",
        "- **The client is part of every number.** It is the same Python process and code "
        "for both targets, and it shares the machine's CPUs with the server under test; its "
        "CPU time per answer is in the last column. Where client + server CPU per answer × "
        "req/s approaches the CPU count, client and server together set the pace, and the "
        "req/s ratio understates the difference between the servers. *Server CPU per "
        "answer* (user + system time of all the server's threads, from `/proc/<pid>/stat`, "
        "10 ms ticks) does not "
        "depend on the client and is the fairest per-request comparison.",
    ]
    check = _client_check(main, checks)
    if check:
        lines.append(check)
    return finish(lines, notes)


def _side_by_side(by: dict[tuple[str, bool, int], Run]) -> list[list[str]]:
    rows = []
    for stream in MODES:
        for c in CONCURRENCY:
            o, b = by.get(("OLP", stream, c)), by.get(("bare app", stream, c))
            if o is None or b is None:
                continue
            po, pb = pcts(o.latency_s), pcts(b.latency_s)
            rows.append([
                mode_name(stream), str(c), _num(o.rps), _num(b.rps), _ratio(o.rps, b.rps),
                _ms(po["p50"]), _ms(pb["p50"]), _ratio(po["p50"], pb["p50"]), _ms(po["p99"]),
                _ms(pb["p99"]), _num(o.cpu_ms_per_request(o.server_cpu_s), 2),
                _num(b.cpu_ms_per_request(b.server_cpu_s), 2)])
    return rows


def _before_after_block(by: dict[tuple[str, bool, int], Run], baseline: Path | None
                        ) -> list[str]:
    """The before-and-after table, when a baseline OLP ran."""
    if not any(target == BASELINE for target, _, _ in by):
        return []
    label = checkout_label(baseline) if baseline is not None else "-"
    return ["", f"**Before and after** (OLP at the baseline checkout `{label}` against this "
                "one, in the same run; ms):", "",
            *table(["mode", "C", "req/s before", "req/s after", "ratio", "p50 before",
                    "p50 after", "CPU ms before", "CPU ms after"], "l" + "r" * 8,
                   _before_after(by))]


def _before_after(by: dict[tuple[str, bool, int], Run]) -> list[list[str]]:
    rows = []
    for stream in MODES:
        for c in CONCURRENCY:
            old, new = by.get((BASELINE, stream, c)), by.get(("OLP", stream, c))
            if old is None or new is None:
                continue
            rows.append([
                mode_name(stream), str(c), _num(old.rps), _num(new.rps),
                _ratio(new.rps, old.rps), _ms(pcts(old.latency_s)["p50"]),
                _ms(pcts(new.latency_s)["p50"]),
                _num(old.cpu_ms_per_request(old.server_cpu_s), 2),
                _num(new.cpu_ms_per_request(new.server_cpu_s), 2)])
    return rows


def _run_row(run: Run) -> list[str]:
    p, f = pcts(run.latency_s), pcts(run.ttfb_s)
    return [run.target, mode_name(run.stream), str(run.concurrency), run.clients,
            str(len(run.latency_s)), str(run.errors), _num(run.rps), _ms(p["p50"]),
            _ms(p["p90"]), _ms(p["p99"]), _ms(f["p50"]), _ms(f["p99"]),
            _num(run.cpu_ms_per_request(run.server_cpu_s), 3),
            _num(run.cpu_ms_per_request(run.client_cpu_s), 3)]


def _summary(by: dict[tuple[str, bool, int], Run]) -> list[str]:
    out = []
    for stream in MODES:
        o1, b1 = by.get(("OLP", stream, 1)), by.get(("bare app", stream, 1))
        top = max(CONCURRENCY)
        ot, bt = by.get(("OLP", stream, top)), by.get(("bare app", stream, top))
        if o1 is None or b1 is None or ot is None or bt is None:
            continue
        po, pb = pcts(o1.latency_s)["p50"], pcts(b1.latency_s)["p50"]
        co, cb = (r.cpu_ms_per_request(r.server_cpu_s) for r in (o1, b1))
        best_o = max(by[("OLP", stream, c)].rps for c in CONCURRENCY)
        best_b = max(by[("bare app", stream, c)].rps for c in CONCURRENCY)
        out.append(
            f"- {mode_name(stream)}: one at a time, an OLP hit takes **{_ms(po)} ms** (p50) "
            f"against {_ms(pb)} ms for the bare app, i.e. **+{_ms(po - pb)} ms**; the server "
            f"spends **{_num(co, 2)} ms** of CPU per OLP hit against {_num(cb, 2)} ms "
            f"(**+{_num(co - cb, 2)} ms**). Best throughput **{_num(best_o)} req/s** against "
            f"{_num(best_b)} ({_ratio(best_o, best_b)}×); at C={top}: {_num(ot.rps)} against "
            f"{_num(bt.rps)} req/s.")
    return out


def _budget(by: dict[tuple[str, bool, int], Run],
            bookkeeping: dict[str, float] | None) -> list[str]:
    """What 0.8× the bare app's rate leaves OLP per hit (issue #31), at C=16, against what its
    own work takes and what the bookkeeping alone takes (:mod:`bench.bookkeeping`)."""
    out = []
    for stream in MODES:
        o, b = by.get(("OLP", stream, 16)), by.get(("bare app", stream, 16))
        if o is None or b is None:
            continue
        co, cb = (r.cpu_ms_per_request(r.server_cpu_s) for r in (o, b))
        out.append(f"{mode_name(stream)} {_num(cb / 0.8 - cb, 2)} ms (OLP's own work takes "
                   f"{_num(co - cb, 2)})")
    if not out:
        return []
    kept = "" if bookkeeping is None else (
        "; of OLP's own work, the bookkeeping every request keeps (measured in-process "
        f"after the runs, `python -m bench.bookkeeping`): {bookkeeping_summary(bookkeeping)}")
    return ["- Budget at C=16: with the server's CPU the only limit, 0.8× the bare app's "
            "rate leaves OLP this much CPU per hit beyond the bare app's: "
            + "; ".join(out) + kept + "."]


def _client_check(main: Sequence[Run], checks: Sequence[Run]) -> str:
    parts = []
    for check in checks:
        ref = next((r for r in main if (r.target, r.stream, r.concurrency)
                    == (check.target, check.stream, check.concurrency)), None)
        if ref is None:
            continue
        parts.append(
            f"{check.target}: {_num(check.rps)} req/s with the client spending "
            f"{_num(check.cpu_ms_per_request(check.client_cpu_s), 2)} ms of CPU per answer, "
            f"against {_num(ref.rps)} req/s and "
            f"{_num(ref.cpu_ms_per_request(ref.client_cpu_s), 2)} ms with one client per "
            "worker")
    if not parts:
        return ""
    return ("- **Why one client per worker** (the *shared* rows): with one `AsyncClient` "
            f"shared by {checks[0].concurrency} workers, " + "; ".join(parts) + ". httpcore "
            "1.0's connection pool walks every pooled connection on each request it hands "
            "out and each one it takes back, so a shared client's own CPU per request grows "
            "with C and it, not the server, sets the pace.")


# -- main --------------------------------------------------------------------------------------

def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = arg_parser("bench.cache_hits", __doc__)
    parser.add_argument("--duration", type=float, default=5.0, metavar="S",
                        help="measured seconds per target, mode and concurrency (default 5)")
    parser.add_argument("--warmup", type=float, default=1.0, metavar="S",
                        help="warm-up seconds before each measured window (default 1)")
    parser.add_argument("--slices", type=int, default=5, metavar="K",
                        help="cut each target's measured time into K slices, alternating "
                             "with the other target's (default 5)")
    parser.add_argument("--clients", choices=("per-worker", "shared"), default="per-worker",
                        help="one httpx.AsyncClient per worker (default), or one shared by "
                             "all workers (httpcore's pool then costs the client O(C) CPU "
                             "per request; a check at C=64 is always run with it)")
    parser.add_argument("--baseline", type=Path, metavar="DIR",
                        help="also serve the hits with the OLP of another checkout (e.g. a "
                             "`git worktree` of the commit before a change), interleaved, "
                             "for before and after")
    add_write(parser, SECTION)
    args = parser.parse_args(argv)
    if args.baseline is not None and not (args.baseline / "olp" / "__init__.py").is_file():
        parser.error(f"--baseline {args.baseline}: no olp package there")
    if args.duration <= 0 or args.warmup < 0 or args.slices < 1:
        parser.error("--duration must be positive, --warmup not negative, --slices >= 1")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    command = command_line("bench.cache_hits", argv)
    notes: list[str] = []
    info = machine_info(LIBS)
    with tempfile.TemporaryDirectory(prefix="olp-bench-") as tmp:
        root = Path(tmp)
        print("starting OLP...", file=sys.stderr)
        olp = start_proxy(root)
        try:
            capture = warm_and_capture(olp)
            print(f"OLP at {olp.url}, cache warm; starting the bare app...", file=sys.stderr)
            bare = start_bare(root, capture)
            servers = [olp, bare]
            try:
                check_bare(bare, capture)
                if args.baseline is not None:
                    (root / "baseline").mkdir()
                    servers.append(start_olp(
                        root / "baseline", olp_config(), ["anthropic"], name=BASELINE,
                        env={"PYTHONPATH": str(args.baseline.resolve())}))
                    warm_and_capture(servers[-1])
                runs = trio.run(run_all, servers, args.warmup, args.duration,
                                args.clients, args.slices)
            finally:
                for server in servers[1:]:
                    stop(server)
        finally:
            stop(olp)
        notes += logged_errors_note(olp.log_path, "OLP")
    print("the bookkeeping, in-process...", file=sys.stderr)
    bookkeeping = measure_bookkeeping()
    info["load"] = load_before_after(info["load"])
    # ticks are 10 ms: on a quiet machine this can come out a hair below zero
    others = max(0.0, sum(r.machine_cpu_s - r.server_cpu_s - r.client_cpu_s for r in runs))
    measured = sum(r.duration_s for r in runs)
    if measured and others == others:  # not NaN
        info["others"] = (f"other processes (and hypervisor steal) took "
                          f"{others / measured:.2f} of the {info['cpus']} CPUs on average "
                          "while measuring")
        if others / measured > 0.25 * (os.cpu_count() or 1):
            notes.append("the machine was busy with other work during the run (see "
                         "*machine*): absolute numbers are lower and noisier than on an idle "
                         "machine; the ratios and the CPU per answer suffer less.")
    errors = sum(r.errors for r in runs)
    if errors:
        notes.append(f"{errors} answer(s) were errors or not cache hits (see *errors*), e.g. "
                     + next(r.error_example for r in runs if r.errors))
    publish(render(runs, info, command, args, notes, bookkeeping), args.write, SECTION)
    return 0


if __name__ == "__main__":
    run_main(main, "bench.cache_hits")
