"""OLP's pass-through next to the floor of its own stack, in one interleaved run.

    python -m bench.hot_path [--requests N] [--reps R] [--concurrency C] [--baseline DIR]
                             [--write PATH]

Starts the loopback mock upstream of ``bench.passthrough`` (``up``: 4 deltas, no delay),
``olp start`` (cache off, one ``openai-compatible`` provider ``up``, chain ``direct`` = [up])
and ``bench.floor_app`` (a bare Quart-Trio app on Hypercorn's trio worker that forwards to the
same mock with one shared ``httpx.AsyncClient`` and does nothing else), and the same app with
``--stream-upstream`` (the *streamed floor*: a JSON request asked of the upstream as a stream,
as OLP does). With two CPUs or more, the servers run pinned to CPU 0 and the mock and this
load generator to CPU 1, so the server under test has a CPU to itself.

For each cell (JSON and streaming, one at a time and C at a time) the servers take turns in
blocks (ABBA; the streamed floor in JSON cells only), R repetitions of N requests each, with
``Cache-Control: no-store``. Reports per server p50/p90/p99 to the first content byte and to
the end, requests/s and server CPU per request, and checks the targets of issue #31: JSON p50
one at a time at most 1 ms above the floor's; at C, at least 0.8× the floor's requests/s and
streams/s. Then measures :mod:`bench.bookkeeping` on the servers' CPU and sets the stream and
the bookkeeping against what 0.8× leaves OLP. ``--baseline DIR`` adds the OLP of another
checkout (``PYTHONPATH=DIR``) to the turns, for before and after in one run.
"""

from __future__ import annotations

import argparse
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
    START_TIMEOUT_S,
    Server,
    add_write,
    arg_parser,
    async_client,
    base_env,
    checkout_label,
    command_line,
    f2,
    finish,
    load_before_after,
    logged_errors_note,
    machine_info,
    mode_name,
    pcts,
    process_cpu_s,
    publish,
    run_main,
    start_olp,
    stop,
    table,
    wait_listening,
)
from bench.bookkeeping import measure as measure_bookkeeping
from bench.bookkeeping import summary as bookkeeping_summary
from bench.passthrough import ROUTER_KEY, UPSTREAM_MODEL, Sample, Target, block, start_mocks

SECTION = "hot-path"
LIBS = ("trio", "hypercorn", "quart", "quart-trio", "h11", "httpx", "httpcore", "msgspec")
BASELINE = "OLP before"
STREAMED = "streamed floor"
WARMUP = 20
SEQ_BLOCK = 25
CONC_BLOCK = 5  # blocks of 5 x C requests when concurrent
JSON_P50_MARGIN_MS = 1.0
RATE_RATIO = 0.8


# -- processes ---------------------------------------------------------------------------------

def pin(cpus: set[int] | None) -> None:
    """Pin this process (and so the children it starts next) to ``cpus``."""
    if cpus is not None:
        os.sched_setaffinity(0, cpus)


def start_floor(root: Path, upstream: str, *, streamed: bool = False,
                prefix: Sequence[str] = (), start_timeout_s: float = START_TIMEOUT_S) -> Server:
    """``bench.floor_app``; ``streamed``: with ``--stream-upstream`` (the streamed floor);
    ``prefix``: a command that runs it (as :func:`bench._common.start_olp`)."""
    stem = "streamed-floor" if streamed else "floor"
    out_path, log_path = root / f"{stem}.out", root / f"{stem}.log"
    with open(out_path, "wb") as out, open(log_path, "wb") as log:
        process = subprocess.Popen(
            [*prefix, sys.executable, "-m", "bench.floor_app", "--upstream", upstream, "--key",
             ROUTER_KEY, *(["--stream-upstream"] if streamed else [])],
            env=base_env(root, root), cwd=REPO, stdin=subprocess.DEVNULL,
            stdout=out, stderr=log, start_new_session=True)
    server = Server(f"{stem.replace('-', ' ')} app", process, log_path)

    def listening() -> str | None:
        for line in out_path.read_text(errors="replace").splitlines():
            if line.startswith("LISTENING "):
                return line.split(None, 1)[1].strip()
        return None

    return wait_listening(server, listening, start_timeout_s)


def olp_config(upstream: str, max_concurrent: int) -> dict[str, Any]:
    return {
        "providers": {"enabled": {"anthropic": False, "openai": False, "mistral": False},
                      "up": {"kind": "openai-compatible", "base_url": upstream,
                             "api_key_env": "ROUTER_KEY", "metered": True,
                             "max_concurrent": max_concurrent,
                             "timeouts": {"first_output_s": 20, "idle_s": 20,
                                          "total_s": 30}}},
        "routing": {"chains": {"direct": [{"provider": "up", "model": UPSTREAM_MODEL,
                                           "metered": True}]}},
        "cache": {"enabled": False},
        "server": {"drain_grace_s": 2, "kill_grace_s": 1},
    }


# -- the load ----------------------------------------------------------------------------------

@dataclass
class Cell:
    server: str
    stream: bool
    concurrency: int
    samples: list[Sample] = field(default_factory=list)
    wall_s: float = 0.0
    cpu_s: float = 0.0
    rep_rates: list[float] = field(default_factory=list)

    @property
    def rps(self) -> float:
        return len(self.samples) / self.wall_s if self.wall_s else float("nan")


def client(target: Target) -> httpx.AsyncClient:
    c = async_client(target.base_url, target.token)
    c.headers["Cache-Control"] = "no-store"
    return c


async def run_cell(targets: dict[str, Target], pids: dict[str, int], stream: bool,
                   concurrency: int, requests: int, reps: int) -> list[Cell]:
    """Warm-up, then per repetition the servers in ABBA blocks until each has ``requests``."""
    servers = tuple(targets)
    cells = {s: Cell(s, stream, concurrency) for s in servers}
    pools = {s: [client(targets[s]) for _ in range(concurrency)] for s in servers}
    size = SEQ_BLOCK if concurrency == 1 else CONC_BLOCK * concurrency
    try:
        for s in servers:
            await block(pools[s], targets[s], stream, max(WARMUP, 2 * concurrency))
        for rep in range(reps):
            done = {s: 0 for s in servers}
            walls = {s: 0.0 for s in servers}
            turn = 0
            while any(done[s] < requests for s in servers):
                order = servers if (turn + rep) % 2 == 0 else servers[::-1]
                turn += 1
                for s in order:
                    k = min(size, requests - done[s])
                    if k <= 0:
                        continue
                    cpu0 = process_cpu_s(pids[s])
                    samples, wall = await block(pools[s], targets[s], stream, k)
                    cells[s].cpu_s += process_cpu_s(pids[s]) - cpu0
                    cells[s].samples += samples
                    cells[s].wall_s += wall
                    done[s] += k
                    walls[s] += wall
            for s in servers:
                cells[s].rep_rates.append(done[s] / walls[s])
    finally:
        for pool in pools.values():
            for c in pool:
                await c.aclose()
    return [cells[s] for s in servers]


async def run_all(targets: dict[str, Target], pids: dict[str, int], requests: int, reps: int,
                  concurrency: int) -> list[Cell]:
    out: list[Cell] = []
    for c in (1, concurrency):
        for stream in (False, True):
            print(f"  {mode_name(stream)}, {c} at a time...", file=sys.stderr)
            # for a streamed request the streamed floor is the floor: it runs JSON cells only
            these = {s: t for s, t in targets.items() if not (stream and s == STREAMED)}
            out += await run_cell(these, pids, stream, c, requests, reps)
    return out


# -- the report --------------------------------------------------------------------------------

def verdicts(by: dict[tuple[str, bool, int], Cell], concurrency: int) -> list[str]:
    def p50(s: str, stream: bool, c: int, attr: str) -> float:
        return pcts([getattr(x, attr) for x in by[(s, stream, c)].samples])["p50"]

    lines = []
    gap = p50("OLP", False, 1, "total_ms") - p50("floor", False, 1, "total_ms")
    ok = gap <= JSON_P50_MARGIN_MS
    lines.append(f"- JSON one at a time, p50: OLP {f2(p50('OLP', False, 1, 'total_ms'))} ms, "
                 f"floor {f2(p50('floor', False, 1, 'total_ms'))} ms: **{gap:+.2f} ms** "
                 f"(target ≤ +{JSON_P50_MARGIN_MS:g} ms: {'met' if ok else 'NOT met'})")
    gap1 = p50("OLP", True, 1, "first_ms") - p50("floor", True, 1, "first_ms")
    lines.append(f"- streaming one at a time, first content p50: OLP "
                 f"{f2(p50('OLP', True, 1, 'first_ms'))} ms, floor "
                 f"{f2(p50('floor', True, 1, 'first_ms'))} ms: **{gap1:+.2f} ms**")
    for stream, unit in ((False, "requests/s"), (True, "streams/s")):
        o, f = by[("OLP", stream, concurrency)], by[("floor", stream, concurrency)]
        ratio = o.rps / f.rps
        ok = ratio >= RATE_RATIO
        lines.append(f"- {mode_name(stream)} at C={concurrency}: OLP {o.rps:.0f} {unit}, "
                     f"floor {f.rps:.0f}: **{ratio:.2f}×** (target ≥ {RATE_RATIO:g}×: "
                     f"{'met' if ok else 'NOT met'})")
    return lines


def stream_share(by: dict[tuple[str, bool, int], Cell], concurrency: int,
                 bookkeeping: dict[str, float] | None) -> list[str]:
    """What the stream OLP asks for costs a bare app, against the targets' budgets, and what
    the bookkeeping the issue keeps costs by itself (:mod:`bench.bookkeeping`)."""
    if (STREAMED, False, 1) not in by:
        return []

    def p50(s: str, c: int) -> float:
        return pcts([x.total_ms for x in by[(s, False, c)].samples])["p50"]

    def cpu(s: str) -> float:
        cell = by[(s, False, concurrency)]
        return cell.cpu_s * 1000 / len(cell.samples)

    floor, streamed, olp = cpu("floor"), cpu(STREAMED), cpu("OLP")
    budget = floor / RATE_RATIO - floor
    left = budget - (streamed - floor)
    rate = by[(STREAMED, False, concurrency)].rps / by[("floor", False, concurrency)].rps
    kept = [] if bookkeeping is None else [
        f"- The bookkeeping every request keeps, measured in-process after the cells on the "
        f"servers' CPU (`python -m bench.bookkeeping`; CPU per request): "
        f"{bookkeeping_summary(bookkeeping)}"]
    return [
        f"- JSON one at a time, p50: the streamed floor {f2(p50(STREAMED, 1))} ms, "
        f"**{p50(STREAMED, 1) - p50('floor', 1):+.2f} ms** over the floor (of the "
        f"{JSON_P50_MARGIN_MS:g} ms the target allows OLP)",
        f"- JSON at C={concurrency}: the streamed floor serves **{rate:.2f}×** the floor's "
        f"requests/s. CPU per request: floor {f2(floor)} ms, streamed floor {f2(streamed)} "
        f"ms, OLP {f2(olp)} ms. {RATE_RATIO:g}× the floor's rate leaves OLP "
        f"{f2(budget)} ms per request beyond the floor's; the stream takes "
        f"**{f2(streamed - floor)} ms** of it on a bare app, leaving {f2(left)} "
        f"ms for all of OLP's own work; OLP spends **{olp - streamed:+.2f} ms** per request "
        "over the streamed floor (less than its own work: OLP's connection pool costs less "
        "than httpx's, ADR 0029)",
        *kept,
    ]


def before_after(by: dict[tuple[str, bool, int], Cell], concurrency: int) -> list[str]:
    """OLP against the baseline checkout, cell by cell (the same run, interleaved)."""
    rows = []
    for c in (1, concurrency):
        for stream in (False, True):
            old, new = by.get((BASELINE, stream, c)), by[("OLP", stream, c)]
            if old is None or not old.samples or not new.samples:
                continue
            attr = "first_ms" if stream else "total_ms"
            p_old = pcts([getattr(x, attr) for x in old.samples])["p50"]
            p_new = pcts([getattr(x, attr) for x in new.samples])["p50"]
            cpu_old = old.cpu_s * 1000 / len(old.samples)
            cpu_new = new.cpu_s * 1000 / len(new.samples)
            rows.append([mode_name(stream), str(c), f2(p_old), f2(p_new),
                         f"{old.rps:.0f}", f"{new.rps:.0f}", f"{new.rps / old.rps:.2f}×",
                         f2(cpu_old), f2(cpu_new), f"{cpu_new - cpu_old:+.2f}"])
    return table(["mode", "C", "p50 before", "p50 after", "req/s before", "req/s after",
                  "ratio", "CPU ms before", "CPU ms after", "Δ CPU ms"], "lr" + "r" * 8, rows)


def row(cell: Cell) -> list[str]:
    first = pcts([s.first_ms for s in cell.samples])
    total = pcts([s.total_ms for s in cell.samples])
    n = len(cell.samples)
    return [mode_name(cell.stream), str(cell.concurrency), cell.server, str(n),
            f"{cell.rps:.0f}", " / ".join(f"{r:.0f}" for r in cell.rep_rates),
            f2(first["p50"]), f2(first["p99"]), f2(total["p50"]), f2(total["p90"]),
            f2(total["p99"]), f2(cell.cpu_s * 1000 / n) if n else "–"]


def render(cells: Sequence[Cell], info: dict[str, str], command: str, args: argparse.Namespace,
           pinned: bool, notes: Sequence[str], bookkeeping: dict[str, float] | None) -> str:
    by = {(c.server, c.stream, c.concurrency): c for c in cells}
    placement = ("the servers pinned to CPU 0; the mock upstream and the load generator "
                 "to CPU 1" if pinned else "not pinned (fewer than 2 CPUs)")
    lines = [
        "## Hot path: OLP's pass-through next to the floor of its stack",
        "",
        "The floor is `bench/floor_app.py`: a bare Quart-Trio app on Hypercorn's trio worker "
        "that forwards each chat completion to the upstream with one shared "
        "`httpx.AsyncClient` and does nothing else (no key check, routing, accounting, "
        "headers or logs). Any proxy on this stack pays at least that much. OLP serves the "
        "same requests through `olp start` (cache off, one `openai-compatible` provider, "
        "chain `direct` = [up]). Both forward to the loopback mock upstream of "
        "`bench.passthrough` (4 deltas, no delay). Measured with:",
        "",
        "```sh",
        command,
        "```",
        "",
        f"- run: {info['date']}; per cell {args.reps} repetitions × {args.requests} requests "
        f"per server after {WARMUP} warm-up requests, the servers taking turns in blocks "
        f"({SEQ_BLOCK} requests one at a time, {CONC_BLOCK} × C concurrently; ABBA); "
        "`Cache-Control: no-store`",
        f"- machine: {info['platform']}, {info['cpus']} CPUs ({info['cpu']}); {info['load']}; "
        f"{placement}",
        f"- software: {info['python']}; {info['libs']}; olp {info['olp']}",
        "- OLP: `OLP_LOG_LEVEL=info` (one JSON log line per request, to a file), audit trail "
        "and accounting as always",
        "- client: httpx on Trio, one `AsyncClient` (one keep-alive connection) per worker and "
        "server, closed loop",
        "",
        "**Against the targets of issue #31:**",
        "",
        *verdicts(by, args.concurrency),
        "",
        "**What the stream costs on the bare stack** (the *streamed floor*: the floor app "
        "with `--stream-upstream`, which asks the upstream for a stream for a JSON request "
        "too, as OLP does, and assembles the answer; JSON cells only):",
        "",
        *stream_share(by, args.concurrency, bookkeeping),
        "",
        *(["**Before and after** (OLP at the baseline checkout `" + args.baseline_label +
            "` against this one, in the same run; p50 to the first content when streaming, "
            "to the end for JSON; ms):", "", *before_after(by, args.concurrency), ""]
          if args.baseline else []),
        "**All cells** (ms; first = to the first content byte, for JSON the first body byte; "
        "end = to the last byte; req/s over all repetitions, then per repetition; CPU = the "
        "server's user + system time per request, all threads):",
        "",
        *table(["mode", "C", "server", "n", "req/s", "per rep", "first p50", "first p99",
                "end p50", "end p90", "end p99", "CPU ms/req"], "lrl" + "r" * 9,
               map(row, cells)),
        "",
        "What the numbers mean:",
        "",
        "- **What OLP does that the floor does not**: the key check, the per-key limits, "
        "routing and the fallback walk, the hand-off to the provider's actor and back over "
        "a memory channel, the `X-OLP-*` headers, the audit row and ledger (written in "
        "batches by a worker thread), the metrics and one log line. For a JSON answer OLP "
        "also asks the upstream for a stream and assembles it, where the floor forwards "
        "JSON as JSON: the stream is what gives OLP its first-output and idle deadlines "
        "and a partial answer to fall back from (ADR 0028 measures what forwarding JSON "
        "would save; ADR 0029 sets the stream and the bookkeeping against the targets).",
        "- **CPU ms/req** is the fairest comparison: it does not depend on the client, which "
        "shares the other CPU with the mock. At C the servers are CPU-bound, so req/s "
        "follows it.",
        "- **per rep**: this machine's speed drifts by tens of percent over minutes; the "
        "servers take turns in short blocks so a drift hits all of them alike, and the "
        "ratios are steadier than the absolute figures.",
    ]
    return finish(lines, notes)


# -- main --------------------------------------------------------------------------------------

def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = arg_parser("bench.hot_path", __doc__)
    parser.add_argument("--requests", type=int, default=400, metavar="N",
                        help="measured requests per server, cell and repetition (default 400)")
    parser.add_argument("--reps", type=int, default=2, metavar="R",
                        help="repetitions per cell (default 2)")
    parser.add_argument("--concurrency", type=int, default=16, metavar="C",
                        help="the concurrent cells' requests in flight (default 16)")
    parser.add_argument("--baseline", type=Path, metavar="DIR",
                        help="also run the OLP of another checkout (e.g. a `git worktree` of "
                             "the commit before a change), interleaved, for before and after")
    add_write(parser, SECTION)
    args = parser.parse_args(argv)
    args.baseline_label = ""
    if args.baseline is not None:
        if not (args.baseline / "olp" / "__init__.py").is_file():
            parser.error(f"--baseline {args.baseline}: no olp package there")
        args.baseline_label = checkout_label(args.baseline)
    if min(args.requests, args.reps, args.concurrency) < 1:
        parser.error("--requests, --reps and --concurrency must be at least 1")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    command = command_line("bench.hot_path", argv)
    info = machine_info(LIBS)
    pinned = (os.cpu_count() or 1) >= 2 and hasattr(os, "sched_setaffinity")
    servers_cpu, load_cpu = ({0}, {1}) if pinned else (None, None)
    with tempfile.TemporaryDirectory(prefix="olp-bench-") as tmp:
        root = Path(tmp)
        pin(load_cpu)
        mocks, urls = start_mocks(root)
        try:
            pin(servers_cpu)
            proxy = start_olp(root, olp_config(urls["up"], 4 * args.concurrency), ["up"],
                              name="OLP", env={"ROUTER_KEY": ROUTER_KEY})
            try:
                floor = start_floor(root, urls["up"])
                streamed = baseline = None
                try:
                    streamed = start_floor(root, urls["up"], streamed=True)
                    if args.baseline is not None:
                        (root / "baseline").mkdir()
                        baseline = start_olp(
                            root / "baseline", olp_config(urls["up"], 4 * args.concurrency),
                            ["up"], name="baseline OLP",
                            env={"ROUTER_KEY": ROUTER_KEY,
                                 "PYTHONPATH": str(args.baseline.resolve())})
                    pin(load_cpu)
                    targets = {
                        # named "upstream" for passthrough's checks: the text only, no X-OLP-*
                        "floor": Target("upstream", floor.url, "/v1/chat/completions",
                                        "direct", OWNER_TOKEN),
                        STREAMED: Target("upstream", streamed.url, "/v1/chat/completions",
                                         "direct", OWNER_TOKEN),
                        "OLP": Target("direct", proxy.url, "/v1/chat/completions", "direct",
                                      OWNER_TOKEN)}
                    pids = {"floor": floor.process.pid, STREAMED: streamed.process.pid,
                            "OLP": proxy.process.pid}
                    if baseline is not None:
                        targets[BASELINE] = Target("direct", baseline.url,
                                                   "/v1/chat/completions", "direct",
                                                   OWNER_TOKEN)
                        pids[BASELINE] = baseline.process.pid
                    t0 = time.monotonic()
                    cells = trio.run(run_all, targets, pids, args.requests, args.reps,
                                     args.concurrency)
                    print(f"measured in {time.monotonic() - t0:.0f} s", file=sys.stderr)
                finally:
                    stop(floor)
                    if streamed is not None:
                        stop(streamed)
                    if baseline is not None:
                        stop(baseline)
            finally:
                stop(proxy)
        finally:
            stop(mocks)
        notes = logged_errors_note(proxy.log_path, "OLP")
    pin(servers_cpu)
    print("  the bookkeeping, in-process...", file=sys.stderr)
    bookkeeping = measure_bookkeeping()
    info["load"] = load_before_after(info["load"])
    publish(render(cells, info, command, args, pinned, notes, bookkeeping), args.write,
            SECTION)
    return 0


if __name__ == "__main__":
    run_main(main, "bench.hot_path")
