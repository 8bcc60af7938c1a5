"""Spawn-path overhead of the proxy, measured end to end with a fake CLI that timestamps itself.

    python -m bench.spawn_overhead [--requests N] [--concurrency C] [--write docs/benchmarks.md]

Starts ``python -m olp start`` (temporary ``OLP_HOME``, port 0, loopback only) with
``providers.anthropic.binary`` = ``bench/fake_timestamp_cli.py``, then sends N raw streaming
``POST /v1/chat/completions`` with httpx, one at a time and then C at a time. Per request:

* ``t_send_ns``        the client, just before the request is handed to httpx to write;
* ``exec_ns``          the fake CLI, its first statement (carried back in the answer text);
* ``first_line_ns``    the fake CLI, right before it writes its content line;
* ``t_first_byte_ns``  the client, when the first byte of the SSE body arrived.

Reported: (a) request → CLI exec = ``exec_ns - t_send_ns``; (b) CLI content line → client's
first SSE byte = ``t_first_byte_ns - first_line_ns``; and two baselines without the proxy:
(c) bare ``subprocess.Popen`` call → exec of the same fake (interpreter start-up, which (a)
includes too), (d) bare pipe: the fake writes its content line → the parent has read it.
All clocks are ``time.time_ns()`` on one machine. Nothing leaves 127.0.0.1.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import httpx

from bench._common import (
    REQUEST_TIMEOUT_S,
    BenchError,
    Server,
    add_budget,
    add_write,
    arg_parser,
    chat_body,
    f2,
    finish,
    load_before_after,
    logged_errors_note,
    machine_info,
    pcts,
    publish,
    run_main,
    sse_text,
    start_olp,
    stop,
    sync_client,
    table,
)

FAKE = Path(__file__).resolve().parent / "fake_timestamp_cli.py"
MODEL = "claude-sonnet-4-6"
SECTION = "spawn-overhead"
WARMUP = 10
BODY = chat_body(MODEL, True)

T = TypeVar("T")


# -- samples -----------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class ProxySample:
    t_send_ns: int
    t_headers_ns: int
    t_first_byte_ns: int
    exec_ns: int
    first_line_ns: int


@dataclass(frozen=True, slots=True)
class BareSample:
    t_popen_ns: int
    exec_ns: int
    first_line_ns: int
    t_read_ns: int


@dataclass(frozen=True, slots=True)
class Row:
    label: str
    values_ms: list[float]


def ms(ns: int) -> float:
    return ns / 1e6


# -- the proxy ---------------------------------------------------------------------------------

def proxy_config(max_concurrent: int) -> dict[str, Any]:
    return {
        "providers": {
            "enabled": {"openai": False, "mistral": False},
            "anthropic": {"binary": str(FAKE), "max_concurrent": max_concurrent,
                          "env": {"ANTHROPIC_API_KEY": "sk-bench"},
                          "timeouts": {"first_output_s": 20, "idle_s": 20, "total_s": 30}},
        },
        "server": {"drain_grace_s": 2, "kill_grace_s": 1},
        # Every request is the same question: the cache would answer all but the first.
        "cache": {"enabled": False},
    }


def start_proxy(root: Path, max_concurrent: int, path: str) -> Server:
    """``olp start`` with the fake as the anthropic CLI, ``path`` as its ``PATH``."""
    return start_olp(root, proxy_config(max_concurrent), ["anthropic"], path=path)


# -- one request through the proxy -------------------------------------------------------------

def one_request(client: httpx.Client) -> ProxySample:
    request = client.build_request("POST", "/v1/chat/completions", content=BODY,
                                   headers={"Content-Type": "application/json"})
    t_send = time.time_ns()
    response = client.send(request, stream=True)
    t_headers = time.time_ns()
    try:
        if response.status_code != 200:
            response.read()
            raise BenchError(f"HTTP {response.status_code}: {response.text[:500]}")
        body = bytearray()
        t_first_byte = 0
        for chunk in response.iter_raw():
            if not t_first_byte and chunk:
                t_first_byte = time.time_ns()
            body += chunk
    finally:
        response.close()
    text = sse_text(bytes(body))
    try:
        stamps = json.loads(text)
        return ProxySample(t_send, t_headers, t_first_byte, int(stamps["exec_ns"]),
                           int(stamps["first_line_ns"]))
    except (ValueError, KeyError, TypeError) as exc:
        raise BenchError(f"unexpected answer text {text[:200]!r}") from exc


# -- one bare spawn of the fake (the baseline) -------------------------------------------------

def bare_env(root: Path, path: str) -> dict[str, str]:
    """Close to what the proxy gives a CLI: a few passed-through variables, a private home."""
    home = root / "bare-home"
    (home / "tmp").mkdir(parents=True, exist_ok=True)
    env = {k: os.environ[k] for k in ("LANG", "LC_ALL", "TZ") if k in os.environ}
    env["PATH"] = path
    env.setdefault("LANG", "C.UTF-8")
    env.update(HOME=str(home), TMPDIR=str(home / "tmp"), TERM="dumb", NO_COLOR="1",
               ANTHROPIC_API_KEY="sk-bench", CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
               DISABLE_AUTOUPDATER="1")
    return env


def fake_argv(workdir: Path) -> list[str]:
    """The argv the anthropic adapter builds (the fake only looks at ``--model``)."""
    return [str(FAKE), "-p", "--output-format", "stream-json", "--verbose",
            "--include-partial-messages", "--tools", "", "--no-session-persistence",
            "--model", MODEL, "--system-prompt-file", str(workdir / "system-prompt.txt")]


def one_bare_spawn(workdir: Path, env: dict[str, str]) -> BareSample:
    argv = fake_argv(workdir)
    t_popen = time.time_ns()
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, cwd=workdir, env=env,
                            start_new_session=True)
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    proc.stdin.write(b"Say hello.")
    proc.stdin.close()
    t_read = 0
    stamps: dict[str, Any] = {}
    for line in proc.stdout:
        t_line = time.time_ns()
        obj = json.loads(line)
        delta = (obj.get("event") or {}).get("delta") or {}
        if delta.get("type") == "text_delta":
            t_read = t_line
            stamps = json.loads(delta["text"])
    stderr = proc.stderr.read()  # the fake writes (almost) nothing there: no deadlock
    proc.wait(timeout=REQUEST_TIMEOUT_S)
    proc.stdout.close()
    proc.stderr.close()
    if proc.returncode != 0 or not stamps:
        raise BenchError(f"{FAKE} exited with {proc.returncode} (stderr: {stderr[-300:]!r}); "
                         "it needs `python3` on PATH and an `env` that supports -S")
    return BareSample(t_popen, int(stamps["exec_ns"]), int(stamps["first_line_ns"]), t_read)


# -- running passes ----------------------------------------------------------------------------

def run_pass(workers: Sequence[Callable[[], T]], n: int, deadline: float
             ) -> tuple[list[T], bool]:
    """``n`` calls spread over ``workers`` (one thread each; inline for a single worker),
    none started after ``deadline`` (monotonic); the results, and whether it cut the pass."""
    results: list[T] = []
    errors: list[BaseException] = []
    lock = threading.Lock()
    issued = 0
    cut = False
    start = threading.Barrier(len(workers))

    def loop(call: Callable[[], T]) -> None:
        nonlocal issued, cut
        start.wait()
        while True:
            with lock:
                if errors or issued >= n:
                    return
                if time.monotonic() > deadline:
                    cut = True
                    return
                issued += 1
            try:
                result = call()
            except BaseException as exc:  # re-raised in the main thread below
                with lock:
                    errors.append(exc)
                return
            with lock:
                results.append(result)

    if len(workers) == 1:
        loop(workers[0])
    else:
        threads = [threading.Thread(target=loop, args=(w,), daemon=True) for w in workers]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    if errors:
        raise errors[0]
    return results, cut


@dataclass
class Pass:
    """One concurrency level: proxy requests and bare spawns, interleaved in blocks."""

    concurrency: int
    proxy: list[ProxySample]
    bare: list[BareSample]
    cut: bool = False


def interleaved(proxy: Server, root: Path, path: str, n: int, concurrency: int,
                deadline: float, *, warmup: int = WARMUP) -> Pass:
    """``warmup`` + ``n`` of each, alternating blocks of bare spawns and proxy requests (one
    each when sequential, 10 × concurrency otherwise) so both see the same background load."""
    env = bare_env(root, path)
    bare_workers: list[Callable[[], BareSample]] = []
    for i in range(concurrency):
        workdir = root / f"bare-work-{concurrency}-{i}"
        workdir.mkdir()
        (workdir / "system-prompt.txt").write_text("Be terse.")
        bare_workers.append(partial(one_bare_spawn, workdir, env))
    clients = [sync_client(proxy.url) for _ in range(concurrency)]
    proxy_workers = [partial(one_request, client) for client in clients]
    block = 1 if concurrency == 1 else 10 * concurrency
    result = Pass(concurrency, [], [])
    try:
        run_pass(bare_workers, warmup, deadline)
        run_pass(proxy_workers, warmup, deadline)
        while len(result.proxy) < n and not result.cut:
            k = min(block, n - len(result.proxy))
            bare, cut_bare = run_pass(bare_workers, k, deadline)
            samples, cut_proxy = run_pass(proxy_workers, k, deadline)
            result.bare += bare
            result.proxy += samples
            result.cut = cut_bare or cut_proxy
    finally:
        for client in clients:
            client.close()
    return result


# -- the fake's python3 and the report ---------------------------------------------------------

@dataclass(frozen=True, slots=True)
class FakePython:
    """The ``python3`` the fake's shebang finds, and the ``PATH`` the benchmark runs with."""

    path: str  # PATH for the proxy (hence its CLIs) and for the bare baseline
    version: str
    executable: str
    shim: str | None  # what ``python3`` on the caller's PATH was, when not the interpreter


def resolve_python3() -> FakePython:
    """Find ``python3`` on PATH and the interpreter behind it.

    A version manager's shim (pyenv's is a bash script running ``pyenv exec``) can cost more
    per spawn than the interpreter itself, and varies a lot; it is no part of the proxy, so
    the interpreter's own directory is put first on PATH for the proxy and the baseline alike.
    """
    path = os.environ.get("PATH", os.defpath)
    python3 = shutil.which("python3", path=path)
    if python3 is None:
        raise BenchError("no python3 on PATH: the fake CLI's shebang needs one")
    try:
        out = subprocess.run(
            [python3, "-S", "-c", "import sys; print(sys.version.split()[0]); "
                                  "print(sys.executable)"],
            capture_output=True, text=True, timeout=30, check=True).stdout.split("\n")
    except (OSError, subprocess.SubprocessError) as exc:
        raise BenchError(f"{python3} -S does not run: {exc}") from exc
    version, executable = out[0].strip(), out[1].strip()
    if not executable or os.path.realpath(executable) == os.path.realpath(python3):
        return FakePython(path, version, python3, None)
    return FakePython(os.path.dirname(executable) + os.pathsep + path, version, executable,
                      python3)


def fake_python_info(fake_python: FakePython) -> str:
    """The report's description of the fake's interpreter."""
    return (f"{fake_python.version} (`{fake_python.executable}`"
            + (f", found directly instead of the shim `{fake_python.shim}`"
               if fake_python.shim else "") + ")")


def build_rows(passes: Sequence[Pass]) -> list[Row]:
    rows: list[Row] = []
    for p in passes:
        mode = "sequential" if p.concurrency == 1 else f"{p.concurrency} concurrent"
        rows += [
            Row(f"(a) request → CLI exec, {mode}",
                [ms(s.exec_ns - s.t_send_ns) for s in p.proxy]),
            Row(f"(b) CLI content line → client's first SSE byte, {mode}",
                [ms(s.t_first_byte_ns - s.first_line_ns) for s in p.proxy]),
            Row(f"(c) baseline: bare Popen → exec, {mode}",
                [ms(s.exec_ns - s.t_popen_ns) for s in p.bare]),
            Row(f"(a) − (c), each request paired with its neighbouring bare spawn, {mode}",
                [ms((s.exec_ns - s.t_send_ns) - (b.exec_ns - b.t_popen_ns))
                 for s, b in zip(p.proxy, p.bare, strict=False)]),
            Row(f"(d) baseline: bare pipe, content line → parent read it, {mode}",
                [ms(s.t_read_ns - s.first_line_ns) for s in p.bare]),
            Row(f"fake's own work, exec → content line, {mode}",
                [ms(s.first_line_ns - s.exec_ns) for s in p.proxy]),
            Row(f"request → first SSE byte (= a + fake + b), {mode}",
                [ms(s.t_first_byte_ns - s.t_send_ns) for s in p.proxy]),
            Row(f"response headers → first SSE byte, {mode}",
                [ms(s.t_first_byte_ns - s.t_headers_ns) for s in p.proxy]),
        ]
    return rows


def render(rows: list[Row], info: dict[str, str], args: argparse.Namespace,
           notes: list[str]) -> str:
    by = {row.label: pcts(row.values_ms) for row in rows}
    a, b = by["(a) request → CLI exec, sequential"], \
        by["(b) CLI content line → client's first SSE byte, sequential"]
    c, d = by["(c) baseline: bare Popen → exec, sequential"], \
        by["(d) baseline: bare pipe, content line → parent read it, sequential"]
    pair = by["(a) − (c), each request paired with its neighbouring bare spawn, sequential"]
    lines = [
        "## Spawn-path overhead",
        "",
        "How long the proxy takes around a CLI spawn: request received → CLI exec, and the "
        "CLI's first content line → the client's first SSE byte, with a fake `claude` that "
        "timestamps itself. Measured with:",
        "",
        "```sh",
        "./dev bench   # = .venv/bin/python -m bench.spawn_overhead --write docs/benchmarks.md",
        "```",
        "",
        f"- run: {info['date']}; `--requests {args.requests} --concurrency {args.concurrency}`"
        f", after {WARMUP} warm-up requests per pass; proxy requests and bare-spawn baselines "
        "interleaved so both see the same background load",
        f"- machine: {info['platform']}, {info['cpus']} CPUs ({info['cpu']}), "
        f"{info['load']}",
        f"- proxy and client: {info['python']}; olp {info['olp']}",
        f"- fake CLI: `python3 -S` {info['fake_python']}",
        "",
        "**Sequential requests, medians (p99):**",
        "",
        f"- (a) request received → CLI exec: **{f2(a['p50'])} ms** "
        f"(p99 {f2(a['p99'])} ms), of which (c) interpreter start-up of the fake, measured "
        f"with a bare `Popen`, is {f2(c['p50'])} ms (p99 {f2(c['p99'])} ms); so the "
        f"proxy's own cost before the exec ≈ (a) − (c): **{f2(pair['p50'])} ms** as the "
        f"median of paired differences ({f2(a['p50'] - c['p50'])} ms as the difference of "
        "the medians). Start-up noise is of the same order, so take this as a few ms, not "
        "to the decimal.",
        f"- (b) CLI's first content line → client's first SSE byte: **{f2(b['p50'])} ms** "
        f"(p99 {f2(b['p99'])} ms), against {f2(d['p50'])} ms (p99 {f2(d['p99'])} ms) "
        "for a bare pipe read (d).",
        "",
        *table(["measure (ms)", "n", "p50", "p90", "p99", "max"], "lrrrrr",
               ([row.label, len(row.values_ms),
                 *(f2(by[row.label][k]) for k in ("p50", "p90", "p99", "max"))]
                for row in rows)),
    ]
    lines += [
        "",
        "What the numbers mean (all from `time.time_ns()` on one machine, so clocks agree):",
        "",
        "- **(a) request → CLI exec**: from just before the client hands the request to "
        "httpx (a keep-alive connection) to the first statement of the fake CLI "
        "(`bench/fake_timestamp_cli.py`). Covers HTTP parsing, the API-key check, request "
        "decoding, routing, the actor hand-off, the job's temporary directories, the spawn "
        "itself and the fake's interpreter start-up.",
        "- **(b) CLI content line → client's first SSE byte**: from just before the fake writes "
        "its one text delta to when the first body byte reaches the client. Covers the pipe, "
        "line splitting, parsing, the actor → engine channel, the engine's first-chunk rule "
        "(status and headers are only sent once content is in hand), SSE encoding and the "
        "socket. The fake's `system/init` and `message_start` lines come before it.",
        "- **(c) bare Popen → exec**: the same fake, same argv, a similar minimal environment, "
        "`start_new_session=True`, spawned by `subprocess.Popen` straight from Python: the "
        "floor for (a) on this machine (fork/exec, `env -S`, interpreter start-up). A "
        "version-manager shim for `python3` (pyenv's) is bypassed for both (see *fake CLI*).",
        "- **(a) − (c) paired**: each proxy request minus the bare spawn run right before it "
        "(same block when concurrent), so slow changes in background load cancel; its median "
        "is the estimate of the proxy's own cost before the exec.",
        "- **(d) bare pipe**: the fake's content line read by a parent blocked on the pipe: "
        "the floor for (b).",
        "- **fake's own work**: exec → content line inside the fake (reading stdin to EOF, "
        "two lines); not proxy time, shown so the rows add up.",
        "- **request → first SSE byte**: time to first byte as the client sees it.",
        "- **response headers → first SSE byte**: ~0 when headers and the first chunk arrive "
        "together.",
        "- *N concurrent*: the same with N client threads, each with its own connection, "
        "keeping N requests in flight (baselines likewise N spawns at a time, in alternating "
        "blocks of 10 × N). With few CPUs these rows mostly show CPU contention between the "
        "fakes' start-ups, the proxy and the client threads.",
    ]
    return finish(lines, notes)


# -- main --------------------------------------------------------------------------------------

def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = arg_parser("bench.spawn_overhead", __doc__)
    parser.add_argument("--requests", type=int, default=200, metavar="N",
                        help="measured requests per pass (default 200, after 10 warm-ups)")
    parser.add_argument("--concurrency", type=int, default=4, metavar="C",
                        help="also run a pass with C requests in flight (default 4; 1 = only "
                             "the sequential pass)")
    add_write(parser, SECTION)
    add_budget(parser)
    args = parser.parse_args(argv)
    if args.requests < 1 or args.concurrency < 1:
        parser.error("--requests and --concurrency must be at least 1")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    deadline = time.monotonic() + args.budget_s
    n, conc = args.requests, args.concurrency
    notes: list[str] = []
    fake_python = resolve_python3()
    info = machine_info()
    info["fake_python"] = fake_python_info(fake_python)
    passes: list[Pass] = []
    with tempfile.TemporaryDirectory(prefix="olp-bench-") as tmp:
        root = Path(tmp)
        # fail early and clearly if the fake cannot run here (no python3, no `env -S`)
        one_bare_spawn(root, bare_env(root, fake_python.path))
        print("starting the proxy...", file=sys.stderr)
        proxy = start_proxy(root, max(16, 2 * conc), fake_python.path)
        try:
            for c in (1, conc) if conc > 1 else (1,):
                print(f"proxy at {proxy.url}: {WARMUP} warm-up + {n} requests and as many "
                      f"bare spawns, {c} at a time...", file=sys.stderr)
                passes.append(interleaved(proxy, root, fake_python.path, n, c, deadline))
        finally:
            stop(proxy)
        notes += logged_errors_note(proxy.log_path, "the proxy")
    info["load"] = load_before_after(info["load"])
    if not passes[0].proxy:
        raise BenchError("no proxy samples within the time budget")
    if any(p.cut for p in passes):
        notes.append(f"the {args.budget_s:g} s budget ran out: some passes have fewer than "
                     f"{n} samples (see n).")
    rows = build_rows(passes)
    publish(render(rows, info, args, notes), args.write, SECTION)
    return 0


if __name__ == "__main__":
    run_main(main, "bench.spawn_overhead")
