"""What a warm pool adds to the proxy's own work per request: the hand-out.

    python -m bench.warm_handout [--runs N] [--write docs/benchmarks.md]

A request on a CLI hop with a warm pool costs the proxy, on top of a cold spawn's work, the
pool key (the adapter builds the request's spawn, and its template's, for a placeholder
working directory, and compares them) and, on a hit, the check of the unit's spawn (built
again for the unit's own directory). Everything after the hand-out — the turn on stdin, the
parser, the stream — is the cold path's own. So this times exactly that, in-process, with
the real claude and codex adapters, for a coding tool's request: a 12,000-character system
prompt, a 30-message conversation and four tools. The spawn overhead section measures the
rest of the proxy's path (HTTP, engine, pipes, SSE).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

from bench._common import (
    add_write,
    arg_parser,
    command_line,
    f2,
    finish,
    load_before_after,
    machine_info,
    pcts,
    publish,
    run_main,
    table,
)
from olp.actors import CliConfig, CliRunner, ProcessSpawner, WarmSettings
from olp.ir import ChatRequest, Message, TextPart, ToolSpec
from olp.providers import anthropic, codex

SECTION = "warm-handout"
WORKDIR = Path("/tmp/olp-job-bench/work")


def coding_request() -> ChatRequest:
    system = ("You are a coding assistant. Follow the repository's conventions. " * 190)[:12000]
    turns = [Message(role="user" if i % 2 == 0 else "assistant",
                     content=(TextPart(text=f"turn {i}: " + "some code and prose " * 40),))
             for i in range(30)]
    tools = tuple(ToolSpec(name=f"tool_{i}", description="does a thing " * 10,
                           parameters={"type": "object", "properties": {
                               "path": {"type": "string"}, "line": {"type": "integer"}}})
                  for i in range(4))
    return ChatRequest(model="m", messages=(
        Message(role="system", content=(TextPart(text=system),)), *turns), tools=tools)


def time_handout(runner: CliRunner, request: ChatRequest, model: str,
                 runs: int) -> tuple[list[float], list[float]]:
    """Microseconds per request: (the pool key and the template check, which a cold request
    does not do; the spawn built for the unit's directory and compared, which a cold request
    builds too, for its own directory)."""
    from olp.actors._cli_runner import _identity, _template_of

    stored = runner.spawn_identity(_template_of(request), model, WORKDIR)
    extra: list[float] = []
    check: list[float] = []
    for _ in range(runs):
        start = time.perf_counter_ns()
        key = runner.spawn_identity(request, model)
        same = key == runner.spawn_identity(_template_of(request), model)
        middle = time.perf_counter_ns()
        unit = runner.adapter.invocation(request, binary=runner.config.binary, model=model,
                                         workdir=WORKDIR, extra_args=runner.config.extra_args)
        checked = _identity(unit) == stored
        end = time.perf_counter_ns()
        extra.append((middle - start) / 1000)
        check.append((end - middle) / 1000)
        assert same and checked
    return extra, check


def main(argv: Sequence[str] | None = None) -> int:
    parser = arg_parser("bench.warm_handout", __doc__)
    parser.add_argument("--runs", type=int, default=2000)
    add_write(parser, SECTION)
    args = parser.parse_args(argv)
    info = machine_info()
    request = coding_request()
    rows = []
    for name, adapter, model in (("claude", anthropic.ADAPTER, "claude-sonnet-4-6"),
                                 ("codex", codex.ADAPTER, "gpt-5.5")):
        runner = CliRunner(adapter, ProcessSpawner(), CliConfig(binary=f"/usr/bin/{name}"),
                           warm=WarmSettings(size=1))
        time_handout(runner, request, model, 50)  # warm-up
        extra, check = time_handout(runner, request, model, args.runs)
        for what, values in (("key + template check (warm only)", extra),
                             ("spawn for the unit, compared (cold builds it too)", check)):
            p = pcts(values)
            rows.append([name, what, args.runs, f2(p["p50"]), f2(p["p90"]), f2(p["p99"]),
                         f2(p["max"])])
    info["load"] = load_before_after(info["load"])
    where = f"{info['date']}, {info['cpus']} × {info['cpu']}, {info['load']}"
    lines = ["## Warm pool hand-out: what a warm pool adds to the proxy's work", "",
             f"`{command_line('bench.warm_handout', argv)}` — {where}.", "",
             *table(["CLI", "step", "runs", "p50 µs", "p90 µs", "p99 µs", "max µs"], "llrrrrr",
                    rows),
             "", "The first row of each CLI is what a warm pool adds to the proxy's work per "
             "request (the request's spawn built for the key, stdin included, and its "
             "template's); the second is the spawn the hand-out builds for the unit's "
             "directory, the same work a cold spawn does for its own. Budget for the proxy's "
             "own cost on a warm hop: 5 ms."]
    publish(finish(lines, []), args.write, SECTION)
    return 0


if __name__ == "__main__":
    run_main(main, "bench.warm_handout")
