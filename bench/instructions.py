"""Instructions per request, counted by Valgrind's callgrind: OLP next to its floors, without
the noise of a shared machine.

    python -m bench.instructions [--requests N] [--cells K ...] [--baseline DIR]
                                 [--write docs/benchmarks.md]

This machine's speed drifts by tens of percent within minutes, so a CPU-time ratio needs many
interleaved runs and still moves by ±0.1. The number of instructions a server runs per request
does not drift: two runs agree within 2 %. Each server here runs under ``valgrind
--tool=callgrind --instr-atstart=no``; after a warm-up, counting is switched on
(``callgrind_control -i on``), ``--requests`` requests are sent on the warm-up's keep-alive
connections and the counts are dumped (``callgrind_control -d``); instructions per request =
the dump's total (every thread of the server) ÷ the requests. The kernel's share (system
calls) is not counted.

The cells, each set up as in the benchmark named:

- pass-through (:mod:`bench.hot_path`; no cache): JSON one at a time and at 16 at once, and
  streaming at 16; OLP's ``direct`` model next to the floor (``bench/floor_app.py``) and, for
  JSON, the streamed floor (``--stream-upstream``);
- cache hits (:mod:`bench.cache_hits`), JSON and SSE, 16 at once: OLP next to the bare app.

For each, **OLP without bookkeeping** runs OLP from a copy of ``olp/`` with
``bench/without_bookkeeping.patch`` applied. The patch removes what issue #31 requires to stay
exactly as it is: the log line, the key's limits (reserved and settled), the audit row and
ledger, the metrics, the key check (a key's first answer is kept), the lingering close, and the
garbage collector. What that row still spends is OLP's own work on the answer itself.
``--baseline DIR`` adds **OLP before**: the OLP of another checkout (``PYTHONPATH=DIR``), for a
change's before and after.

Work on a timer (the recorder's commit every 250 ms, the cache's last-used times) runs as
often per second under valgrind as without it, while requests run tens of times slower, so
its share of a request is overstated here; it is part of the bookkeeping that the patch
removes.

Needs ``valgrind`` (``apt install valgrind``). Nothing leaves 127.0.0.1; every server is stopped
with SIGTERM; temporary files are removed.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import httpx
import trio

from bench import cache_hits, hot_path
from bench._common import (
    OWNER_TOKEN,
    REPO,
    BenchError,
    Server,
    add_write,
    arg_parser,
    async_client,
    checkout_label,
    command_line,
    finish,
    machine_info,
    publish,
    run_main,
    start_olp,
    stop,
    table,
)
from bench.passthrough import ROUTER_KEY, Target, block, start_mocks

SECTION = "instructions"
PATCH = REPO / "bench" / "without_bookkeeping.patch"
START_S = 300.0  # a server's start under valgrind: tens of times slower
WARMUP = 50
#: Server names in a report.
OLP, WITHOUT, BEFORE, FLOOR, STREAMED, BARE = (
    "OLP", "OLP without bookkeeping", "OLP before", "floor", "streamed floor", "bare app")


@dataclass(frozen=True)
class CellSpec:
    """One cell: its name in the report, what is sent, and the servers counted."""

    name: str
    hits: bool  # cache hits (else pass-through)
    stream: bool
    concurrency: int
    servers: tuple[str, ...]


CELLS = (
    CellSpec("pass-through, JSON, one at a time", False, False, 1,
             (OLP, WITHOUT, FLOOR, STREAMED)),
    CellSpec("pass-through, JSON, 16 at once", False, False, 16, (OLP, WITHOUT, FLOOR, STREAMED)),
    CellSpec("pass-through, streaming, 16 at once", False, True, 16, (OLP, WITHOUT, FLOOR)),
    CellSpec("cache hits, JSON, 16 at once", True, False, 16, (OLP, WITHOUT, BARE)),
    CellSpec("cache hits, SSE, 16 at once", True, True, 16, (OLP, WITHOUT, BARE)),
)


# -- callgrind ---------------------------------------------------------------------------------

class Callgrind:
    """Runs servers under callgrind, its files and control pipes in ``root``."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._n = 0

    def prefix(self) -> list[str]:
        """The command that runs one server, counting nothing until switched on."""
        self._n += 1
        return ["valgrind", "--tool=callgrind", "--instr-atstart=no",
                f"--vgdb-prefix={self.root / 'vgdb'}",
                f"--callgrind-out-file={self.root / f'server{self._n}'}.%p"]

    def control(self, pid: int, *args: str) -> None:
        done = subprocess.run(["callgrind_control", f"--vgdb-prefix={self.root / 'vgdb'}",
                               *args, str(pid)], capture_output=True, text=True, timeout=120)
        if "OK" not in done.stdout:
            raise BenchError(f"callgrind_control {' '.join(args)} {pid}: "
                             f"{(done.stdout + done.stderr).strip()[-300:]}")

    def total(self, pid: int) -> int:
        """The instructions of the first dump of ``pid`` (every thread's, in one file; the
        newest such file, should an earlier server have had the same pid)."""
        dumps = list(self.root.glob(f"server*.{pid}.1"))
        if not dumps:
            raise BenchError(f"no callgrind dump of process {pid} in {self.root}")
        newest = max(dumps, key=lambda p: p.stat().st_mtime_ns)
        return dump_total(newest.read_text(errors="replace"))


def dump_total(text: str) -> int:
    """The instruction count of a callgrind dump: its ``totals:`` line (else ``summary:``)."""
    found: dict[str, int] = {}
    for line in text.splitlines():
        head, _, value = line.partition(":")
        if head in ("totals", "summary") and value.split():
            found.setdefault(head, int(value.split()[0]))
    if not found:
        raise BenchError("a callgrind dump without totals")
    return found.get("totals", found.get("summary", 0))


# -- the servers -------------------------------------------------------------------------------

def without_bookkeeping(root: Path) -> Path:
    """A copy of ``olp/`` (and the models registry beside it) with :data:`PATCH` applied;
    the directory to put on PYTHONPATH."""
    tree = root / "without"
    shutil.copytree(REPO / "olp", tree / "olp", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "models-registry.json", tree)
    done = subprocess.run(["git", "apply", str(PATCH)], cwd=tree, capture_output=True,
                          text=True, timeout=60)
    if done.returncode != 0:
        raise BenchError(f"{PATCH.name} does not apply to this olp/ (update it): "
                         f"{done.stderr.strip()[-300:]}")
    return tree


def start(name: str, spec: CellSpec, root: Path, cg: Callgrind, upstream: str,
          trees: dict[str, Path], capture: dict[str, object] | None) -> Server:
    """One of the cell's servers under callgrind (``trees``: the ``olp/`` of each OLP but
    the current one)."""
    prefix = cg.prefix()
    if name in (OLP, WITHOUT, BEFORE):
        env = {"PYTHONPATH": str(trees[name])} if name in trees else {}
        if spec.hits:
            return start_olp(root, cache_hits.olp_config(), ["anthropic"], name=name,
                             env=env, prefix=prefix, start_timeout_s=START_S)
        return start_olp(root, hot_path.olp_config(upstream, 64), ["up"], name=name,
                         env={"ROUTER_KEY": ROUTER_KEY, **env}, prefix=prefix,
                         start_timeout_s=START_S)
    if name == BARE:
        assert capture is not None
        return cache_hits.start_bare(root, dict(capture), prefix=prefix,
                                     start_timeout_s=START_S)
    return hot_path.start_floor(root, upstream, streamed=name == STREAMED, prefix=prefix,
                                start_timeout_s=START_S)


def warm_cache(server: Server) -> dict[str, object]:
    """:func:`bench.cache_hits.warm_and_capture`, again while the miss's answer is still being
    written (under valgrind the next request may join the finished flight: ``attached``)."""
    for _ in range(30):
        try:
            return cache_hits.warm_and_capture(server)
        except BenchError as exc:
            if "attached" not in str(exc):
                raise
            time.sleep(1)
    raise BenchError(f"the {server.name} gave no cache hit")


# -- the load ----------------------------------------------------------------------------------

async def measure(server: Server, olp: bool, spec: CellSpec, requests: int,
                  cg: Callgrind) -> None:
    """Warm-up, counting on, ``requests`` requests, the counts dumped: all on the same
    keep-alive connections, so that no connection's setup is counted."""
    if spec.hits:
        clients = [async_client(server.url) for _ in range(spec.concurrency)]
        body = cache_hits.request_body(spec.stream)

        async def load(count: int) -> None:
            await hits(clients, server.name, body, olp, spec.stream, count)
    else:
        target = Target("direct" if olp else "upstream", server.url,
                        "/v1/chat/completions", "direct", OWNER_TOKEN)
        clients = [hot_path.client(target) for _ in range(spec.concurrency)]

        async def load(count: int) -> None:
            await block(clients, target, spec.stream, count)
    try:
        await load(max(WARMUP, 2 * spec.concurrency))
        await trio.to_thread.run_sync(cg.control, server.process.pid, "-i", "on")
        await load(requests)
        await trio.to_thread.run_sync(cg.control, server.process.pid, "-d")
    finally:
        for c in clients:
            await c.aclose()


async def hits(clients: list[httpx.AsyncClient], name: str, body: bytes, olp: bool,
               stream: bool, count: int) -> None:
    """``count`` cache hits, one client per worker; an answer that is not one is an error."""
    remaining = count

    async def worker(client: httpx.AsyncClient) -> None:
        nonlocal remaining
        while remaining > 0:
            remaining -= 1
            response = await client.post(cache_hits.PATH, content=body)
            if response.status_code != 200 or (
                    olp and response.headers.get("x-olp-cache") != "hit") or \
                    not cache_hits.body_ok(stream, response.content):
                raise BenchError(f"the {name}: HTTP {response.status_code}, X-OLP-Cache "
                                 f"{response.headers.get('x-olp-cache')!r}: "
                                 f"{response.text[:200]}")

    async with trio.open_nursery() as nursery:
        for client in clients:
            nursery.start_soon(worker, client)


def count_cell(spec: CellSpec, root: Path, cg: Callgrind, upstream: str,
               trees: dict[str, Path], requests: int) -> dict[str, float]:
    """Instructions per request of each of the cell's servers (and OLP before, when
    ``trees`` has it), one after the other."""
    out: dict[str, float] = {}
    capture: dict[str, object] | None = None
    names = [spec.servers[0], *([BEFORE] if BEFORE in trees else []), *spec.servers[1:]]
    for name in names:
        home = root / f"{spec.name}-{name}".replace(" ", "_").replace(",", "")
        home.mkdir()
        server = start(name, spec, home, cg, upstream, trees, capture)
        try:
            olp = name in (OLP, WITHOUT, BEFORE)
            if spec.hits and olp:
                capture = warm_cache(server)
            trio.run(measure, server, olp, spec, requests, cg)
            out[name] = cg.total(server.process.pid) / requests
        finally:
            stop(server)
        print(f"  {spec.name}: {name} {out[name] / 1000:,.0f} k instructions/request",
              file=sys.stderr)
    return out


# -- the report --------------------------------------------------------------------------------

def render(results: dict[str, dict[str, float]], info: dict[str, str], command: str,
           requests: int, before: str = "") -> str:
    lines = [
        "## Instructions per request: OLP next to its floors",
        "",
        "What each server ran per request, counted by Valgrind's callgrind (every thread; the "
        "kernel's share not counted). Unlike CPU time on this machine, these counts repeat "
        "within 2 % from run to run. Measured with:",
        "",
        "```sh",
        command,
        "```",
        "",
        f"- run: {info['date']}; {requests} requests counted per server, after a warm-up",
        f"- machine: {info['platform']}, {info['cpus']} CPUs ({info['cpu']})",
        f"- servers: {info['python']}; {info['libs']}; olp {info['olp']}",
        "- *OLP without bookkeeping*: OLP with `bench/without_bookkeeping.patch` (no log "
        "line, no limits, no audit row, ledger or metrics, the key checked once, no lingering "
        "close, no garbage collector): what is left is OLP's work on the answer itself",
        *([f"- *OLP before*: OLP at `{before}`, in the same run"] if before else []),
        "- work on a timer (the recorder's commit every 250 ms) runs as often per second under "
        "valgrind, where requests are tens of times slower: its share is overstated here, and "
        "part of the bookkeeping",
        "",
        *table(["cell", "server", "k instructions/request", "vs floor", "OLP over floor"],
               "llrrr", _rows(results)),
        "",
        "**In short:**",
        "",
        *_summary(results),
    ]
    return finish(lines, [])


def _floor(cell: dict[str, float]) -> float:
    return cell.get(FLOOR, cell.get(BARE, float("nan")))


def _rows(results: dict[str, dict[str, float]]) -> list[list[str]]:
    rows = []
    for cell_name, cell in results.items():
        floor = _floor(cell)
        for name, count in cell.items():
            rows.append([cell_name, name, f"{count / 1000:,.0f}", f"{count / floor:.2f}×",
                         f"{(count - floor) / 1000:+,.0f} k" if name != FLOOR and
                         name != BARE else ""])
    return rows


def _summary(results: dict[str, dict[str, float]]) -> list[str]:
    """Per cell, what OLP runs above its floor, what its bookkeeping takes of that, and the
    rest; at 16 at once set against what 0.8× the floor's rate leaves OLP (one at a time the
    target is a latency, which no count gives: ADR 0030)."""
    out = []
    for cell_name, cell in results.items():
        floor, olp, without = _floor(cell), cell[OLP], cell[WITHOUT]
        floor_name = BARE if BARE in cell else FLOOR
        spec = next((c for c in CELLS if c.name == cell_name), None)
        if spec is not None and spec.concurrency == 1:
            budget = f"{cell_name}: "
        else:
            allowed = floor / 0.8 - floor
            budget = (f"{cell_name}: 0.8× the {floor_name}'s rate leaves OLP "
                      f"{allowed / 1000:,.0f} k instructions a request above it; ")
        stream = (f"; the stream alone (the streamed floor) {(cell[STREAMED] - floor) / 1000:,.0f}"
                  f" k") if STREAMED in cell else ""
        before = (f"; OLP before: {(cell[BEFORE] - floor) / 1000:,.0f} k"
                  f" ({(olp - cell[BEFORE]) / 1000:+,.0f} k)") if BEFORE in cell else ""
        out.append(
            f"- {budget}OLP runs {(olp - floor) / 1000:,.0f} k above the {floor_name}, "
            f"of which its bookkeeping {(olp - without) / 1000:,.0f} k and the rest "
            f"{(without - floor) / 1000:,.0f} k{stream}{before}")
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = arg_parser("bench.instructions", __doc__)
    parser.add_argument("--requests", type=int, default=300, metavar="N",
                        help="requests counted per server (default 300)")
    parser.add_argument("--cells", nargs="*", metavar="K", type=int,
                        help="only these cells, by number from 1: " +
                             "; ".join(f"{i} {c.name}" for i, c in enumerate(CELLS, 1)))
    parser.add_argument("--baseline", type=Path, metavar="DIR",
                        help="also count the OLP of this checkout (`OLP before`)")
    add_write(parser, SECTION)
    args = parser.parse_args(argv)
    if args.baseline is not None and not (args.baseline / "olp" / "__init__.py").is_file():
        parser.error(f"--baseline {args.baseline}: no olp package there")
    if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
        raise BenchError("valgrind is not installed (apt install valgrind)")
    cells = [CELLS[i - 1] for i in args.cells] if args.cells else list(CELLS)
    info = machine_info(("trio", "hypercorn", "quart", "quart-trio", "h11", "httpx"))
    results: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="olp-instructions-") as tmp:
        root = Path(tmp)
        cg = Callgrind(root)
        trees = {WITHOUT: without_bookkeeping(root)}
        if args.baseline is not None:
            trees[BEFORE] = args.baseline.resolve()
        mocks, urls = start_mocks(root)
        try:
            for spec in cells:
                print(f"{spec.name}...", file=sys.stderr)
                results[spec.name] = count_cell(spec, root, cg, urls["up"], trees,
                                                args.requests)
        finally:
            stop(mocks)
    before = checkout_label(args.baseline) if args.baseline is not None else ""
    publish(render(results, info, command_line("bench.instructions", argv), args.requests,
                   before), args.write, SECTION)
    return 0


if __name__ == "__main__":
    run_main(main, "bench.instructions")
