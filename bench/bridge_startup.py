"""What OLP's tool bridge costs a tool request: spawn → the ``tools/list`` answer.

    python -m bench.bridge_startup [--runs N] [--write docs/benchmarks.md]

A CLI waits for its MCP servers before it calls the model, so this time is on the path of
every request with tools. Three servers answer the same handshake (``initialize``,
``notifications/initialized``, ``tools/list`` with one tool, the way claude sends it), run one
after another in turn so background load hits each alike:

- **bridge**: ``olp/actors/mcp_bridge_server.py`` as the CLIs launch it (``python -I -S``);
- **floor**: ``python -I -S -c …`` that reads the three lines and prints two fixed answers,
  the least any Python stdio server can cost;
- **mcp package**: the reference implementation's low-level server
  (``bench/mcp_reference_server.py``), in a virtual environment made for it outside the
  repository (``~/.cache/olp-bench/mcp-<version>``, from PyPI, on the first run).

Timed with ``time.perf_counter_ns`` from just before ``Popen`` to the line holding the
``tools/list`` answer; each server is then ended by closing its stdin. Nothing leaves the
machine (PyPI only, for the reference's first install).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from bench._common import (
    REPO,
    BenchError,
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
from olp.actors._toolbridge import BRIDGE_SCRIPT, tools_file_text
from olp.ir import ToolSpec

SECTION = "bridge-startup"
WARMUP = 3
MCP_VERSION = "2.3.0"
MCP_VENV = Path.home() / ".cache" / "olp-bench" / f"mcp-{MCP_VERSION}"
REFERENCE = REPO / "bench" / "mcp_reference_server.py"
HANDSHAKE = b"".join(json.dumps(m).encode() + b"\n" for m in (
    {"jsonrpc": "2.0", "id": 0, "method": "initialize",
     "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                "clientInfo": {"name": "claude-code", "version": "2.1.332"}}},
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
    {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}},
))
FLOOR = (
    "import sys\n"
    "for _ in range(3):\n"
    "    sys.stdin.readline()\n"
    "sys.stdout.write('{\"jsonrpc\":\"2.0\",\"id\":0,\"result\":{}}\\n'\n"
    "                 '{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"tools\":[]}}\\n')\n"
    "sys.stdout.flush()\n"
    "sys.stdin.read()\n"
)
WEATHER = ToolSpec(name="get_weather", description="Get the current weather of a city",
                   parameters={"type": "object", "properties": {"city": {"type": "string"}},
                               "required": ["city"]})


@dataclass(frozen=True, slots=True)
class Target:
    name: str
    shown: str
    argv: list[str]


def reference_python() -> str:
    """The interpreter of the reference's virtual environment, made on first use."""
    python = MCP_VENV / "bin" / "python"
    if not python.exists():
        print(f"installing mcp=={MCP_VERSION} into {MCP_VENV}...", file=sys.stderr)
        try:
            subprocess.run([sys.executable, "-m", "venv", str(MCP_VENV)], check=True)
            subprocess.run([str(python), "-m", "pip", "install", "-q",
                            "--disable-pip-version-check", f"mcp=={MCP_VERSION}"], check=True)
        except (OSError, subprocess.CalledProcessError) as exc:
            raise BenchError(f"could not install the mcp package: {exc}") from exc
    return str(python)


def targets(tools_file: Path) -> list[Target]:
    return [
        Target("bridge", "OLP's bridge (`python -I -S mcp_bridge_server.py`)",
               [sys.executable, "-I", "-S", str(BRIDGE_SCRIPT), str(tools_file)]),
        Target("floor", "floor: `python -I -S -c` reading 3 lines, printing 2",
               [sys.executable, "-I", "-S", "-c", FLOOR]),
        Target("mcp", f"`mcp` {MCP_VERSION} low-level server (`bench/mcp_reference_server.py`)",
               [reference_python(), str(REFERENCE), str(tools_file)]),
    ]


def one_run(target: Target, cwd: Path) -> float:
    """Milliseconds from spawn to the ``tools/list`` answer."""
    start = time.perf_counter_ns()
    proc = subprocess.Popen(target.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, cwd=cwd, env={"PATH": "/usr/bin:/bin"})
    assert proc.stdin is not None and proc.stdout is not None
    try:
        proc.stdin.write(HANDSHAKE)
        proc.stdin.flush()
        while True:
            line = proc.stdout.readline()
            if not line:
                raise BenchError(f"{target.name} exited before answering tools/list")
            if json.loads(line).get("id") == 1:
                elapsed = (time.perf_counter_ns() - start) / 1e6
                break
        proc.stdin.close()
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return elapsed


def measure(runs: int) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="olp-bench-bridge-") as tmp:
        work = Path(tmp)
        tools_file = work / "olp-tools.json"
        tools_file.write_text(tools_file_text([WEATHER]), encoding="utf-8")
        all_targets = targets(tools_file)
        for i in range(WARMUP + runs):
            order = all_targets if i % 2 == 0 else all_targets[::-1]
            for target in order:
                ms = one_run(target, work)
                if i >= WARMUP:
                    times.setdefault(target.name, []).append(ms)
    return {t.shown: times[t.name] for t in all_targets}  # in the targets' order


def render(times: dict[str, list[float]], info: dict[str, str], command: str) -> str:
    stats = {name: pcts(values) for name, values in times.items()}
    names = list(stats)
    bridge, floor, reference = (stats[n] for n in names)
    lines = [
        "## Tool bridge start-up (spawn → tools/list answer)",
        "",
        f"- run: {info['date']}; `{command}`",
        f"- machine: {info['platform']}, {info['cpus']} CPUs ({info['cpu']}), {info['python']};"
        f" {info['load']}",
        f"- olp: {info['olp']}",
        "",
        f"OLP's bridge answers `tools/list` **{f2(bridge['p50'])} ms** (p50) after its spawn: "
        f"{f2(bridge['p50'] - floor['p50'])} ms over the floor of any Python stdio server "
        f"({f2(floor['p50'])} ms), against **{f2(reference['p50'])} ms** for the `mcp` "
        f"package's own server ({reference['p50'] / bridge['p50']:.1f}× the bridge). A CLI "
        "waits for this before it calls the model, on every request with tools.",
        "",
        *table(["server", "n", "p50", "p90", "p99", "min"], "lrrrrr",
               [(name, len(times[name]), f2(s["p50"]), f2(s["p90"]), f2(s["p99"]),
                 f2(min(times[name]))) for name, s in stats.items()]),
    ]
    notes = ["the three are spawned in turn (the order flipped every round) after "
             f"{WARMUP} warm-up rounds; times in ms, measured in the parent from just before "
             "`Popen` to reading the answer line, so they include fork/exec and interpreter "
             "start-up. Inside a CLI's sandbox the spawn is the CLI's, not OLP's."]
    return finish(lines, notes)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = arg_parser("bench.bridge_startup", __doc__)
    parser.add_argument("--runs", type=int, default=30, metavar="N",
                        help="measured rounds (default 30)")
    add_write(parser, SECTION)
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    args.argv = argv
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    info = machine_info()
    times = measure(args.runs)
    info["load"] = load_before_after(info["load"])
    publish(render(times, info, command_line("bench.bridge_startup", args.argv)),
            args.write, SECTION)
    return 0


if __name__ == "__main__":
    run_main(main, "bench.bridge_startup")
