"""The soak's section of docs/benchmarks.md: the run, the checks, the outcomes per kind."""

from __future__ import annotations

import argparse
from collections import Counter
from collections.abc import Sequence

from bench._common import finish, table

from .checks import Check
from .drive import Run
from .scenarios import TIMEOUTS, kinds


def kind_rows(run: Run) -> list[list[str]]:
    rows = []
    for kind in kinds():
        mine = [o for o in run.outcomes if o.request.kind == kind]
        count = Counter(o.outcome for o in mine)
        details = Counter(o.detail for o in mine if o.outcome == "error")
        rows.append([kind.name, f"`{kind.model}`", "fails" if kind.must_fail else "may answer",
                     str(len(mine)), str(count["complete"]), str(count["error"]),
                     ", ".join(f"{d} ×{n}" for d, n in details.most_common(3)) or "–",
                     str(count["disconnected"]), str(count["BAD"])])
    return rows


def render(run: Run, checks: Sequence[Check], info: dict[str, str], command: str,
           args: argparse.Namespace, notes: Sequence[str]) -> str:
    by = Counter(o.outcome for o in run.outcomes)
    behaviours = Counter(o.request.behaviour for o in run.outcomes)
    bad = [o for o in run.outcomes if o.outcome == "BAD"]
    lines = [
        "## Fault soak",
        "",
        "Many requests through `olp start` with faults at every stage: fake CLIs that crash "
        "before output or after the first chunk, hang, stall mid-stream, print garbage, exit "
        "non-zero or stream forever; mock upstreams that reset or drop the connection, hang, "
        "stall, cut the body, send malformed or error events, end early, or answer 429/500/"
        "503; clients that disconnect at random moments or read slowly. Deadlines "
        f"{TIMEOUTS['first_output_s']} s to the first output, {TIMEOUTS['idle_s']} s idle, "
        f"{TIMEOUTS['total_s']} s in all. Run with:",
        "",
        "```sh",
        command,
        "```",
        "",
        f"- run: {info['date']}; {len(run.outcomes):,} requests at concurrency "
        f"{args.concurrency}, seed {args.seed}, {run.wall_s:.0f} s "
        f"({len(run.outcomes) / run.wall_s:.1f} requests/s)",
        f"- machine: {info['platform']}, {info['cpus']} CPUs ({info['cpu']}), "
        f"{info['python']}; {info['load']}",
        f"- olp: {info['olp']}",
        f"- answers: {by['complete']:,} complete, {by['error']:,} clear errors, "
        f"{by['disconnected']:,} ended by the client's own disconnect, {by['BAD']:,} BAD; "
        f"client behaviours: {behaviours['normal']:,} normal, {behaviours['slow']:,} slow "
        f"readers, {behaviours['disconnect']:,} disconnects; "
        f"{sum(o.request.stream for o in run.outcomes):,} streamed, the rest JSON",
        f"- proxy RSS every {run.step:,} requests (MiB): "
        + ", ".join(f"{kib / 1024:.1f}" for kib in run.rss_curve),
        "",
        "*Complete*: a finish reason and, streamed, `[DONE]`. *Clear error*: an error status "
        "with an OpenAI error body, an in-stream `error` event (no `[DONE]`), or, for a JSON "
        "request whose every hop failed mid-answer, the partial text with `finish_reason: "
        "\"length\"` and `X-OLP-Truncated: true` (as the README documents). *BAD*: anything "
        "else the client did not cause itself — a 200 stream that ended without `[DONE]` and "
        "without an error event, no end within a minute, or a complete answer from a route "
        "that always fails. Cache entries are read back from `olp.db` after shutdown and each "
        "is traced to its prompt (the fake CLIs echo their stdin, the mocks name themselves).",
        "",
        f"**Result: {'PASS' if all(c.ok for c in checks) else 'FAIL'}**",
        "",
        *table(["check", "measured", "limit", ""], "llll",
               ([c.what, c.measured, c.limit, "ok" if c.ok else "**FAIL**"] for c in checks)),
        "",
        "Per kind (a chain and the fault its prompt selects; *fails*: no complete answer is "
        "possible, so one counts as BAD):",
        "",
        *table(["kind", "chain", "route", "n", "complete", "error", "most frequent errors",
                "client left", "BAD"], "lllrrrlrr", kind_rows(run)),
    ]
    if bad:
        lines += ["", "BAD answers (first 10):", "",
                  *(f"- request {o.request.n}: {o.request.kind.name}, "
                    f"{'streamed' if o.request.stream else 'JSON'}, {o.request.behaviour}: "
                    f"{o.detail}" for o in bad[:10])]
    return finish(lines, notes)
