"""What the bubblewrap sandbox adds to one CLI spawn, measured without the proxy.

    python -m bench.sandbox_overhead [--runs N] [--real-runs M] [--write docs/benchmarks.md]

For each target, runs its argv unconfined and confined (``olp.actors._sandbox.Sandbox.wrap``
around it, with the read-only roots ``install_roots`` finds, as
``olp/runtime/provider_actors.py`` computes them), alternating — one pair after another, the
order flipped every pair — so background load hits both. Every run gets a fresh job directory
laid out as ``CliRunner`` makes it
(``mkdtemp(prefix="olp-job-")`` holding ``work/`` and ``home/tmp/``), the runner's minimal
environment (``PATH``, ``LANG``, ``HOME`` = job/home, ``TMPDIR`` = job/home/tmp, ``TERM``,
``NO_COLOR``), ``cwd`` = job/work, piped stdin (written, then closed), stdout and stderr, and
``start_new_session=True``. Timed with ``time.perf_counter_ns``, from just before the argv is
wrapped (confined) or spawned (unconfined): to the first stdout line, and to the exit (both
pipes at EOF and the process reaped).

Targets: ``/bin/echo ok`` (the floor: fork/exec and nothing else), the fake ``claude`` of
``bench/spawn_overhead.py`` (``bench/fake_timestamp_cli.py``: ``env -S python3 -S``), and, when
``OLP_REAL_CLAUDE`` / ``OLP_REAL_CODEX`` / ``OLP_REAL_VIBE`` name a real CLI (see
``scripts/install-real-clis``), its ``--version``. Nothing leaves the machine.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from bench._common import (
    REQUEST_TIMEOUT_S,
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
from bench.spawn_overhead import FAKE, fake_argv, fake_python_info, resolve_python3
from olp.actors._sandbox import Sandbox, find_bwrap, install_roots

SECTION = "sandbox-overhead"
WARMUP = 3  # pairs run first and not counted (page cache, bwrap's and the CLI's first start)
REAL_CLIS = (("OLP_REAL_CLAUDE", "claude"), ("OLP_REAL_CODEX", "codex"),
             ("OLP_REAL_VIBE", "vibe"))


# -- targets and one run -----------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Target:
    """One thing to spawn: ``argv(workdir)``, the bytes for its stdin, its ``PATH``."""

    name: str
    shown: str  # the command as the report shows it
    argv: Callable[[Path], list[str]]
    stdin: bytes
    path: str
    sandbox: Sandbox
    runs: int
    same_output: bool = True  # the confined first line must equal the unconfined one


@dataclass(frozen=True, slots=True)
class Run:
    first_line_ns: int  # start → first stdout line read
    exit_ns: int  # start → stdout and stderr at EOF and the process reaped
    wrap_ns: int  # Sandbox.wrap (0 unconfined)
    first_line: str


@dataclass
class Result:
    target: Target
    unconfined: list[Run] = field(default_factory=list)
    confined: list[Run] = field(default_factory=list)


def job_env(path: str, home: Path) -> dict[str, str]:
    """What ``CliRunner.environment`` gives every CLI before the adapter's own variables."""
    env = {k: os.environ[k] for k in ("LANG", "LC_ALL", "TZ", "SSL_CERT_FILE", "SSL_CERT_DIR")
           if k in os.environ}
    env["PATH"] = path
    env.setdefault("LANG", "C.UTF-8")
    env.update(HOME=str(home), TMPDIR=str(home / "tmp"), TERM="dumb", NO_COLOR="1")
    return env


def one_run(target: Target, confined: bool) -> Run:
    """Spawn ``target`` once in a fresh job directory (removed afterwards, untimed)."""
    base = Path(tempfile.mkdtemp(prefix="olp-job-"))
    try:
        workdir, home = base / "work", base / "home"
        workdir.mkdir(mode=0o700)
        (home / "tmp").mkdir(mode=0o700, parents=True)
        env = job_env(target.path, home)
        argv = target.argv(workdir)
        t0 = time.perf_counter_ns()
        if confined:
            argv = target.sandbox.wrap(argv, job_dir=base, workdir=workdir)
        t_wrap = time.perf_counter_ns()
        proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, cwd=workdir, env=env,
                                start_new_session=True)
        assert proc.stdin is not None and proc.stdout is not None
        try:
            if target.stdin:
                proc.stdin.write(target.stdin)
            proc.stdin.close()
        except BrokenPipeError:
            pass
        proc.stdin = None  # closed: communicate() below must not flush it
        line = proc.stdout.readline()
        t_line = time.perf_counter_ns()
        try:
            _, stderr = proc.communicate(timeout=REQUEST_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)  # its own session: pgid == pid
            proc.communicate()
            raise BenchError(f"{target.shown} did not exit within {REQUEST_TIMEOUT_S:g} s "
                             f"({'confined' if confined else 'unconfined'})") from None
        t_exit = time.perf_counter_ns()
    finally:
        shutil.rmtree(base, ignore_errors=True)
    if proc.returncode != 0 or not line:
        raise BenchError(f"{target.shown} ({'confined' if confined else 'unconfined'}) "
                         f"exited with {proc.returncode}, first line {line[:200]!r}, "
                         f"stderr {stderr[-300:]!r}")
    return Run(t_line - t0, t_exit - t0, t_wrap - t0 if confined else 0,
               line.decode(errors="replace").strip())


def measure(target: Target) -> Result:
    """``WARMUP`` uncounted pairs, then ``target.runs`` pairs, unconfined and confined
    alternating, the order flipped every pair (U C, C U, U C, ...)."""
    result = Result(target)
    for i in range(WARMUP + target.runs):
        order = (False, True) if i % 2 == 0 else (True, False)
        runs = {confined: one_run(target, confined) for confined in order}
        if target.same_output and runs[True].first_line != runs[False].first_line:
            raise BenchError(f"{target.shown}: confined, the first line was "
                             f"{runs[True].first_line[:200]!r}, unconfined "
                             f"{runs[False].first_line[:200]!r}")
        if i >= WARMUP:
            result.unconfined.append(runs[False])
            result.confined.append(runs[True])
    return result


# -- which targets -----------------------------------------------------------------------------

def forbidden_dirs(environ: Mapping[str, str]) -> tuple[Path, Path]:
    """The owner's home and OLP's home, as ``olp/runtime/provider_actors.py`` fences
    ``install_roots``."""
    real_home = Path(environ.get("HOME") or Path.home())
    raw = environ.get("OLP_HOME", "").strip()
    olp_home = Path(raw).expanduser() if raw else real_home / ".olp"
    return real_home, olp_home.absolute()


def targets(args: argparse.Namespace, bwrap: str, notes: list[str]) -> list[Target]:
    environ = os.environ
    path = environ.get("PATH", os.defpath)
    fences = forbidden_dirs(environ)

    def sandbox(binary: str, path_env: str) -> Sandbox:
        return Sandbox(bwrap, read_only=install_roots(binary, path_env=path_env,
                                                      forbidden=fences))

    fake_python = resolve_python3()
    found = [
        Target("echo", "/bin/echo ok", lambda _w: ["/bin/echo", "ok"], b"", path,
               sandbox("/bin/echo", path), args.runs),
        Target("fake", "fake claude (`bench/fake_timestamp_cli.py`)", fake_argv,
               b"Say hello.", fake_python.path, sandbox(str(FAKE), fake_python.path),
               args.runs, same_output=False),
    ]
    for variable, command in REAL_CLIS:
        binary = environ.get(variable, "").strip()
        if not binary:
            notes.append(f"`{command} --version` not measured: `{variable}` is not set.")
            continue
        if not os.access(binary, os.X_OK):
            raise BenchError(f"{variable}={binary} is not an executable file")
        found.append(Target(command, f"{command} --version",
                            lambda _w, b=binary: [b, "--version"], b"", path,
                            sandbox(binary, path), args.real_runs))
    return found


# -- the report --------------------------------------------------------------------------------

def ms(ns: float) -> float:
    return ns / 1e6


def exit_of(run: Run) -> int:
    return run.exit_ns


def line_of(run: Run) -> int:
    return run.first_line_ns


def paired(result: Result, measure_of: Callable[[Run], int]) -> dict[str, float]:
    u = [ms(measure_of(r)) for r in result.unconfined]
    c = [ms(measure_of(r)) for r in result.confined]
    d = pcts([ci - ui for ci, ui in zip(c, u, strict=True)])
    return {"u50": pcts(u)["p50"], "c50": pcts(c)["p50"], "u90": pcts(u)["p90"],
            "c90": pcts(c)["p90"], "d50": d["p50"], "d90": d["p90"],
            "umin": min(u), "cmin": min(c), "dmin": min(c) - min(u)}


def signed(value: float) -> str:
    """A difference with its sign and two decimals."""
    return f"{value:+.2f}"


def short(path: Path) -> str:
    home = str(Path.home())
    text = str(path)
    return "~" + text[len(home):] if text == home or text.startswith(home + os.sep) else text


def render(results: Sequence[Result], info: dict[str, str], args: argparse.Namespace,
           notes: list[str]) -> str:
    by = {r.target.name: r for r in results}
    rows = []
    for r in results:
        for label, of in (("first line", line_of), ("exit", exit_of)):
            s = paired(r, of)
            rows.append([r.target.shown, label, len(r.unconfined), f2(s["u50"]), f2(s["c50"]),
                         f"**{signed(s['d50'])}**", signed(s["d90"]), f2(s["umin"]),
                         f2(s["cmin"]), signed(s["dmin"]), f2(s["u90"]), f2(s["c90"])])
    wraps = [ms(run.wrap_ns) for r in results for run in r.confined]
    echo = paired(by["echo"], exit_of)
    fake = paired(by["fake"], line_of)
    lines = [
        "## Sandbox overhead per CLI spawn",
        "",
        "What confining a spawn with bubblewrap (`olp/actors/_sandbox.py`) adds, measured "
        "without the proxy: the same argv spawned unconfined and confined, in pairs. "
        "Measured with:",
        "",
        "```sh",
        command_line("bench.sandbox_overhead", args.argv),
        "```",
        "",
        f"- run: {info['date']}; per target {WARMUP} warm-up pairs, then n pairs (`--runs "
        f"{args.runs}` for `/bin/echo` and the fake, `--real-runs {args.real_runs}` for the "
        "real CLIs), unconfined and confined alternating, the order flipped every pair, so "
        "both see the same background load",
        f"- machine: {info['platform']}, {info['cpus']} CPUs ({info['cpu']}), "
        f"{info['load']}",
        f"- {info['bwrap']}; bench: {info['python']}; olp {info['olp']}",
        f"- fake CLI: `python3 -S` {info['fake_python']}",
        "- each run: a fresh job directory as `CliRunner` makes it (`mkdtemp(prefix=\"olp-job-\")`"
        " with `work/` and `home/tmp/`), the runner's minimal environment (`PATH`, `LANG`, "
        "`HOME` = job/home, `TMPDIR` = job/home/tmp, `TERM`, `NO_COLOR`), `cwd` = job/work, "
        "piped stdin/stdout/stderr, `start_new_session=True`; `subprocess.Popen` from Python, "
        "timed with `time.perf_counter_ns`",
        "- confined: `Sandbox(bwrap, read_only=install_roots(binary, path_env=PATH, "
        "forbidden=(HOME, OLP_HOME))).wrap(argv, job_dir=job, workdir=job/work)`, as "
        "`olp/runtime/provider_actors.py` and `CliRunner` do; read-only roots found: "
        + "; ".join(f"{r.target.name}: " + (", ".join(f"`{short(p)}`"
                                                      for p in r.target.sandbox.read_only)
                                              or "none") for r in results),
        "- output (first stdout line, the same confined and unconfined): "
        + "; ".join(f"{r.target.name}: `{r.unconfined[0].first_line}`"
                    for r in results if r.target.same_output),
        "",
        "**Time from spawn to the first stdout line and to exit** (ms; Δ = confined − "
        "unconfined of each pair, its median and p90):",
        "",
        *table(["target", "to", "n", "unconfined p50", "confined p50", "Δ p50", "Δ p90",
                "unconfined min", "confined min", "Δ of mins", "unconfined p90",
                "confined p90"], "llrrrrrrrrrr", rows),
        "",
        f"Confinement costs about **{f2(echo['d50'])} ms** per spawn (`/bin/echo` to exit, "
        f"median of the pairs; {f2(echo['dmin'])} ms between the fastest runs): bwrap "
        "setting up its namespaces and mounts before the exec and tearing them down after, "
        "a fixed cost paid once per spawn before the CLI's own start-up. "
        + interpretation(by),
        "",
        "What the numbers mean:",
        "",
        "- **first line**: from just before `Sandbox.wrap` (confined) or `Popen` (unconfined) "
        "to the first stdout line read by the parent; for the fake that is its `system/init` "
        "line, after it read stdin to EOF; for the others, their whole output.",
        "- **exit**: the same start to stdout and stderr at EOF and the process reaped "
        "(confined: bwrap's exit, after its PID namespace is gone).",
        f"- **`Sandbox.wrap`** (building the bwrap argv; a few `stat`s of system paths) is "
        f"inside the confined time: median {pcts(wraps)['p50']:.3f} ms.",
        f"- The fake's start-up is {f2(fake['u50'])} ms unconfined to its first line. "
        "`--version` is about the quickest thing a real CLI does; a real request also reads "
        "settings and credentials and waits for the vendor's API (typically seconds), so there "
        "the sandbox's fixed cost is a far smaller share. Not measured: the credential files a "
        "real request links into the job's home (one more `--bind-try` each).",
        "- **Δ p50, Δ p90**: of the pairs' differences (confined − unconfined, run one "
        "after the other), so slow changes in background load cancel out; its median is the "
        "estimate to quote. **Δ of mins**: the fastest confined run minus the fastest "
        "unconfined one, the runs least disturbed by other processes; when the machine is "
        "busy (see the load and the p90s), the slower CLIs' medians wander by more than the "
        "sandbox's cost and this is the steadier figure. A confined spawn is three processes "
        "(bwrap, its init in the new PID namespace, the CLI) against one, so under CPU "
        "contention it waits for a CPU more often: the Δ medians and p90s grow with the load, "
        "the Δ of mins hardly.",
    ]
    return finish(lines, notes)


def interpretation(by: Mapping[str, Result]) -> str:
    """A sentence setting the sandbox's cost against the CLIs' own start-up."""
    parts = []
    for name in ("fake", "claude", "codex", "vibe"):
        if name not in by:
            continue
        s = paired(by[name], line_of if name == "fake" else exit_of)
        what = "the fake to its first line" if name == "fake" else f"`{name} --version`"
        parts.append(f"{what} {f2(s['u50'])} ms, {signed(s['d50'])} ms confined "
                     f"({100 * s['d50'] / s['u50']:+.0f} %; fastest runs {f2(s['umin'])} → "
                     f"{f2(s['cmin'])} ms)")
    return ("Relative to the CLIs' own start-up (median unconfined, then the median paired "
            "Δ): " + "; ".join(parts) + ". Next to a "
            "real request, which waits on the vendor's API for seconds, a few ms per spawn "
            "is lost in the noise.")


# -- main --------------------------------------------------------------------------------------

def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = arg_parser("bench.sandbox_overhead", __doc__)
    parser.add_argument("--runs", type=int, default=40, metavar="N",
                        help="measured pairs for /bin/echo and the fake CLI (default 40)")
    parser.add_argument("--real-runs", type=int, default=30, metavar="M",
                        help="measured pairs for each real CLI's --version (default 30)")
    add_write(parser, SECTION)
    args = parser.parse_args(argv)
    if args.runs < 1 or args.real_runs < 1:
        parser.error("--runs and --real-runs must be at least 1")
    args.argv = argv
    return args


def bwrap_version(bwrap: str) -> str:
    try:
        out = subprocess.run([bwrap, "--version"], capture_output=True, text=True,
                             timeout=10, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        out = "bubblewrap (version unknown)"
    return f"{out} (`{bwrap}`)"


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    bwrap = find_bwrap(os.environ)
    if bwrap is None:
        raise BenchError("bubblewrap (bwrap) not found on PATH (or OLP_BWRAP_BIN)")
    notes: list[str] = []
    info = machine_info()
    info["bwrap"] = bwrap_version(bwrap)
    info["fake_python"] = fake_python_info(resolve_python3())
    results = []
    for target in targets(args, bwrap, notes):
        print(f"{target.shown}: {WARMUP} + {target.runs} pairs...", flush=True,
              file=sys.stderr)
        results.append(measure(target))
    info["load"] = load_before_after(info["load"])
    publish(render(results, info, args, notes), args.write, SECTION)
    return 0


if __name__ == "__main__":
    run_main(main, "bench.sandbox_overhead")
