"""``python -m bench.soak``: plan, start the mocks and the proxy, drive, check, report."""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import uuid
from collections.abc import Sequence
from pathlib import Path

import trio

from bench import soak
from bench._common import (
    add_write,
    arg_parser,
    cmdline,
    command_line,
    descendants,
    load_before_after,
    log_entries,
    machine_info,
    processes_with_env,
    publish,
    rss_kib,
    run_main,
    start_olp,
    stop,
)

from .checks import cache_entry_problems, check_run
from .drive import drive, settle, wait_gone
from .report import render
from .scenarios import CLIS, MOCKS, plan
from .upstreams import ROUTER_KEY, proxy_config, serve_mocks, start_mocks

SECTION = "soak"


def rss_baseline_at(requests: int) -> int:
    """The request after which RSS growth is measured: half the run, once warm-up is over
    (the package's docstring, docs/adr/0013-memory-over-months.md)."""
    return requests // 2


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = arg_parser("bench.soak", soak.__doc__)
    parser.add_argument("--requests", type=int, default=10_000, metavar="N",
                        help="requests in all (default 10,000)")
    parser.add_argument("--concurrency", type=int, default=16, metavar="C",
                        help="requests in flight (default 16)")
    parser.add_argument("--seed", type=int, default=9, help="the RNG seed (default 9)")
    parser.add_argument("--max-rss-growth-pct", type=float, default=5.0, metavar="P",
                        help="largest allowed RSS growth from request N/2 to the end "
                             "(default 5)")
    add_write(parser, SECTION)
    parser.add_argument("--serve-mocks", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.requests < 5 or args.concurrency < 1:
        parser.error("--requests must be at least 5 and --concurrency at least 1")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.serve_mocks:
        serve_mocks()
        return 0
    command, info = command_line("bench.soak", argv), machine_info()
    marker = f"OLP_SOAK_RUN={uuid.uuid4().hex}"
    requests = plan(args.requests, args.seed)
    with tempfile.TemporaryDirectory(prefix="olp-soak-") as tmp:
        root = Path(tmp)
        print("starting the mock upstreams...", file=sys.stderr)
        mocks, urls = start_mocks(root)
        try:
            print("starting the proxy...", file=sys.stderr)
            config = proxy_config(root, urls, marker, max(32, 2 * args.concurrency))
            proxy = start_olp(root, config, [*CLIS, *MOCKS],
                              env={"SOAK_ROUTER_KEY": ROUTER_KEY})
            pid = proxy.process.pid
            try:
                print(f"{args.requests} requests at concurrency {args.concurrency}...",
                      file=sys.stderr)
                run = trio.run(drive, proxy.url, requests, args.concurrency, pid,
                               rss_baseline_at(args.requests))
                health, stats = trio.run(settle, proxy.url)
                children = wait_gone(lambda: descendants(pid), 10)
                marked = wait_gone(lambda: processes_with_env(marker), 5)
                rss_end = rss_kib(pid)
            finally:
                stop(proxy)
            orphans = wait_gone(lambda: processes_with_env(marker), 5)
            entries, entry_problems = cache_entry_problems(root / "olp-home" / "olp.db")
        finally:
            stop(mocks)
        errors = [e for e in log_entries(proxy.log_path) if e.get("level") in ("error", "critical")]
    checks = check_run(run, health, stats, children, marked, orphans, rss_end, entries,
                       entry_problems, args.max_rss_growth_pct)
    info["load"] = load_before_after(info["load"])
    notes = [f"left over: pid {p} `{cmdline(p)[:160]}`" for p in sorted(children | marked)]
    notes += [f"cache entry: {p}" for p in entry_problems[:10]]
    if errors:
        notes.append(f"the proxy logged {len(errors)} error(s), e.g. "
                     f"{json.dumps(errors[0])[:300]}")
    publish(render(run, checks, info, command, args, notes), args.write, SECTION)
    return 0 if all(c.ok for c in checks) else 1


if __name__ == "__main__":
    run_main(main, "bench.soak")
