"""What the benchmarks share: ``olp start`` as a child process, machine information,
percentiles, Markdown tables, and the ``<!-- name:begin -->`` sections of docs/benchmarks.md."""

from __future__ import annotations

import argparse
import datetime
import functools
import json
import os
import platform
import shlex
import signal
import ssl
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any, NoReturn

import httpx

REPO = Path(__file__).resolve().parents[1]
OWNER_TOKEN = "olp_bench_owner_token_0123456789abcdef"  # also bench.bare_app's default token
START_TIMEOUT_S = 30.0
REQUEST_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 15.0
MESSAGES = [{"role": "system", "content": "Be terse."}, {"role": "user", "content": "Say hello."}]
DOC_HEADER = """\
# Benchmarks

Numbers on this page are written by `./dev bench` (the `bench/` package; see
[bench/README.md](../bench/README.md)). They are measurements taken on one machine at one
time, recorded so changes can be compared — not guarantees or assertions about performance.
Each benchmark owns a section between its own `<!-- name:begin -->` / `<!-- name:end -->`
markers and rewrites only that section; other benchmarks will add their own sections.
"""


class BenchError(Exception):
    """The benchmark could not run (a server did not start, a request failed, ...)."""


def chat_body(model: str, stream: bool) -> bytes:
    """The chat completion every benchmark sends: a system and a user message."""
    return json.dumps({"model": model, "stream": stream, "messages": MESSAGES}).encode()


# -- child processes ---------------------------------------------------------------------------

@dataclass
class Server:
    """A child process in its own session, its output in ``log_path``."""

    name: str
    process: subprocess.Popen[bytes]
    log_path: Path
    url: str = ""


def base_env(home: Path, tmp: Path, path: str | None = None) -> dict[str, str]:
    """A minimal environment: ``PATH`` (the caller's unless given), ``HOME``, ``TMPDIR`` and
    the locale and time zone variables that are set."""
    env = {"PATH": os.environ.get("PATH", os.defpath) if path is None else path,
           "HOME": os.environ.get("HOME", str(home)), "TMPDIR": str(tmp)}
    for name in ("LANG", "LC_ALL", "TZ"):
        if name in os.environ:
            env[name] = os.environ[name]
    return env


def unchecked(config: Mapping[str, Any]) -> dict[str, Any]:
    """``config`` with ``lockdown_check: false`` for every CLI provider that does not set it:
    the benchmarks measure requests, and the fakes talk to no API for the check to see (the
    check's own cost: docs/adr/0024-lockdown-self-check.md)."""
    from olp.providers import kit

    out = json.loads(json.dumps(config))
    providers = out.setdefault("providers", {})
    for spec in kit.builtin_specs():
        if spec.kind == "cli":
            block = providers.setdefault(spec.name, {})
            if isinstance(block, dict):
                block.setdefault("lockdown_check", False)
    return out


def start_olp(root: Path, config: Mapping[str, Any], providers: Iterable[str], *,
              name: str = "proxy", path: str | None = None,
              env: Mapping[str, str] | None = None, prefix: Sequence[str] = (),
              start_timeout_s: float = START_TIMEOUT_S) -> Server:
    """``python -m olp start`` in its own session: ``OLP_HOME`` and ``TMPDIR`` under ``root``,
    ``config`` as its config.json, port 0 on 127.0.0.1, ``OWNER_TOKEN``, JSON logs (stderr) to
    a file. Returns once it logs ``listening``, which must list every one of ``providers``.
    ``prefix``: a command that runs it (``valgrind ...``: :mod:`bench.instructions`)."""
    home, tmp = root / "olp-home", root / "olp-tmp"  # tmp: the proxy's per-job directories
    home.mkdir()
    tmp.mkdir()
    (home / "config.json").write_text(json.dumps(unchecked(config)))
    full_env = {**base_env(home, tmp, path), "OLP_HOME": str(home), "OLP_PORT": "0",
                "OLP_BIND": "127.0.0.1", "OLP_OWNER_TOKEN": OWNER_TOKEN,
                "OLP_LOG_LEVEL": "info", **(env or {})}
    log_path = root / "olp.log"
    with open(log_path, "wb") as log:
        process = subprocess.Popen([*prefix, sys.executable, "-m", "olp", "start"], env=full_env,
                                   cwd=home, stdin=subprocess.DEVNULL,
                                   stdout=subprocess.DEVNULL, stderr=log,
                                   start_new_session=True)
    server = Server(name, process, log_path)
    wanted = set(providers)

    def listening() -> str | None:
        for entry in log_entries(log_path):
            if entry.get("msg") == "listening":
                missing = wanted - set(entry.get("providers", []))
                if missing:
                    raise BenchError(f"the {name} started without the provider(s) "
                                     f"{', '.join(sorted(missing))}; log:\n{tail(log_path)}")
                return str(entry["urls"][0]).replace("0.0.0.0", "127.0.0.1")
        return None

    return wait_listening(server, listening, start_timeout_s)


def wait_listening(server: Server, listening: Callable[[], str | None],
                   timeout_s: float = START_TIMEOUT_S) -> Server:
    """Poll ``listening`` (the URL, or None while not yet) until it answers, the process
    exits or ``timeout_s`` pass; on any failure the server is stopped."""
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            url = listening()
            if url is not None:
                server.url = url
                return server
            if server.process.poll() is not None:
                raise BenchError(f"the {server.name} exited with {server.process.returncode} "
                                 f"before listening; log:\n{tail(server.log_path)}")
            time.sleep(0.02)
        raise BenchError(f"the {server.name} was not listening after {timeout_s:g} s; "
                         f"log:\n{tail(server.log_path)}")
    except BaseException:
        stop(server)
        raise


def stop(server: Server) -> None:
    """SIGTERM (OLP drains, kills its CLIs' groups, exits); SIGKILL to the group if it
    lingers. Closes its stdout pipe, if any."""
    if server.process.poll() is None:
        server.process.send_signal(signal.SIGTERM)
    try:
        server.process.wait(timeout=STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        print(f"warning: the {server.name} did not stop on SIGTERM; killing it",
              file=sys.stderr)
        try:
            os.killpg(server.process.pid, signal.SIGKILL)  # its own session: pgid == pid
        except (ProcessLookupError, PermissionError):
            pass
        server.process.wait()
    if server.process.stdout is not None:
        server.process.stdout.close()


def log_entries(path: Path) -> list[dict[str, Any]]:
    """The JSON objects among the lines of a log file."""
    entries = []
    for line in path.read_bytes().splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict):
            entries.append(entry)
    return entries


def tail(path: Path, lines: int = 20) -> str:
    """The last ``lines`` lines of a file."""
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


def logged_errors_note(path: Path, who: str) -> list[str]:
    """A note for the report if the JSON log at ``path`` has errors (or worse), else none."""
    problems = [e for e in log_entries(path) if e.get("level") in ("error", "critical")]
    if not problems:
        return []
    return [f"{who} logged {len(problems)} error(s), e.g. {json.dumps(problems[0])[:300]}"]


# -- HTTP clients and SSE ----------------------------------------------------------------------

def sync_client(base_url: str, token: str = OWNER_TOKEN) -> httpx.Client:
    """A blocking client for JSON requests with ``token``; ``trust_env=False``: no
    HTTP(S)_PROXY from the environment, only loopback."""
    return httpx.Client(base_url=base_url, trust_env=False, timeout=REQUEST_TIMEOUT_S,
                        headers={"Authorization": f"Bearer {token}",
                                 "Content-Type": "application/json"})


@functools.cache
def _tls() -> ssl.SSLContext:
    return ssl.create_default_context()  # never used (plain HTTP); made once, not per client


def async_client(base_url: str, token: str = OWNER_TOKEN, connections: int = 1
                 ) -> httpx.AsyncClient:
    """Like :func:`sync_client`, async, with a pool of ``connections`` keep-alive
    connections."""
    return httpx.AsyncClient(
        base_url=base_url, trust_env=False, timeout=REQUEST_TIMEOUT_S, verify=_tls(),
        limits=httpx.Limits(max_connections=connections,
                            max_keepalive_connections=connections),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})


def sse_event_text(event: bytes) -> str:
    """The ``delta.content`` of one OpenAI SSE event; raises on an error event."""
    text = []
    for line in event.replace(b"\r", b"").split(b"\n"):
        if not line.startswith(b"data:"):
            continue
        data = line[5:].strip()
        if data == b"[DONE]":
            continue
        obj = json.loads(data)
        if "error" in obj:
            raise BenchError(f"error event in the stream: {obj['error']}")
        for choice in obj.get("choices") or []:
            text.append((choice.get("delta") or {}).get("content") or "")
    return "".join(text)


def sse_text(body: bytes) -> str:
    """The concatenated ``delta.content`` of a whole OpenAI SSE stream, which must end with
    ``[DONE]``; raises on an error event."""
    text = "".join(sse_event_text(e) for e in body.replace(b"\r\n", b"\n").split(b"\n\n"))
    if not body.rstrip().endswith(b"data: [DONE]"):
        raise BenchError("the stream ended without [DONE]")
    return text


# -- machine information -----------------------------------------------------------------------

def machine_info(libs: Sequence[str] = ()) -> dict[str, str]:
    """Date, platform, CPUs, load average, Python, olp's version and commit, and the versions
    of the distributions ``libs`` (key ``libs``, when given)."""
    def version(dist: str) -> str:
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            return "?"

    info = {
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "platform": platform.platform(),
        "cpus": str(os.cpu_count()),
        "cpu": cpu_model(),
        "load": load_average(),
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "olp": olp_version(),
    }
    if libs:
        info["libs"] = ", ".join(f"{d} {version(d)}" for d in libs)
    return info


def load_average() -> str:
    """The 1, 5 and 15 min load averages, or ``unknown``."""
    try:
        return " / ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "unknown"


def load_before_after(before: str) -> str:
    """The report's load line: ``before`` (from :func:`machine_info`) and now."""
    return f"load average (1/5/15 min) {before} before, {load_average()} after"


def cpu_model() -> str:
    """The CPU's model name."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def olp_version() -> str:
    """``olp.__version__``, the commit and whether tracked files have changes."""
    try:
        from olp import __version__
    except ImportError:
        __version__ = "?"
    try:
        commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
                                capture_output=True, text=True, timeout=5, check=True)
        dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain",
                                "--untracked-files=no"],
                               capture_output=True, text=True, timeout=5, check=True)
    except (OSError, subprocess.SubprocessError):
        return __version__
    suffix = " + uncommitted changes" if dirty.stdout.strip() else ""
    return f"{__version__} at {commit.stdout.strip()}{suffix}"


def machine_cpu_s() -> float:
    """CPU seconds all processes used since boot, plus time the hypervisor gave to others
    (``/proc/stat``: user, nice, system, steal; not interrupts, which loopback traffic
    causes and no process is charged for); NaN if unknown."""
    try:
        with open("/proc/stat", encoding="ascii") as f:
            fields = f.readline().split()
    except OSError:
        return float("nan")
    user, nice, system, _idle, _iowait, _irq, _softirq, steal = map(int, fields[1:9])
    return (user + nice + system + steal) / os.sysconf("SC_CLK_TCK")


def process_cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process, all its threads (Linux ``/proc``; else NaN)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return float("nan")
    fields = stat[stat.rindex(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# -- statistics and Markdown -------------------------------------------------------------------

def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default), ``q`` in 0..100."""
    if not sorted_values:
        return float("nan")
    pos = (len(sorted_values) - 1) * q / 100
    lo = int(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def pcts(values: Sequence[float]) -> dict[str, float]:
    """p50, p90, p99 and max of ``values`` (NaN when empty)."""
    s = sorted(values)
    return {"p50": percentile(s, 50), "p90": percentile(s, 90), "p99": percentile(s, 99),
            "max": s[-1] if s else float("nan")}


def f2(value: float) -> str:
    """A number with two decimals."""
    return f"{value:.2f}"


def mode_name(stream: bool) -> str:
    """How the reports name a response mode."""
    return "streaming" if stream else "JSON"


def table(header: Sequence[str], align: str, rows: Iterable[Sequence[object]]) -> list[str]:
    """A Markdown table's lines; ``align`` has an ``l`` (left) or ``r`` (right) per column."""
    if len(align) != len(header):
        raise ValueError(f"{len(header)} columns but alignment {align!r}")
    rule = "|" + "|".join("---:" if a == "r" else "---" for a in align) + "|"
    return ["| " + " | ".join(header) + " |", rule,
            *("| " + " | ".join(str(cell) for cell in row) + " |" for row in rows)]


def finish(lines: Sequence[str], notes: Sequence[str]) -> str:
    """A report section: ``lines``, then a ``Note:`` paragraph per note."""
    if notes:
        lines = [*lines, "", *[f"Note: {note}" for note in notes]]
    return "\n".join(lines) + "\n"


def write_section(path: Path, name: str, section: str) -> None:
    """Replace the text between ``<!-- name:begin -->`` and ``<!-- name:end -->``, or append
    a new section (creating the file with ``DOC_HEADER``)."""
    begin_mark, end_mark = f"<!-- {name}:begin -->", f"<!-- {name}:end -->"
    block = f"{begin_mark}\n{section}{end_mark}\n"
    text = path.read_text(encoding="utf-8") if path.exists() else DOC_HEADER
    begin, end = text.find(begin_mark), text.find(end_mark)
    if begin >= 0 and end > begin:
        text = text[:begin] + block + text[end + len(end_mark):].lstrip("\n")
    else:
        text = text.rstrip("\n") + "\n\n" + block
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def publish(section: str, write: Path | None, name: str) -> None:
    """Print the section; with ``write``, also put it into that file's ``name`` section."""
    print(section)
    if write is not None:
        write_section(write, name, section)
        print(f"wrote {write}", file=sys.stderr)


# -- command line ------------------------------------------------------------------------------

def arg_parser(module: str, doc: str | None) -> argparse.ArgumentParser:
    """A parser for ``python -m <module>``, described by the first line of ``doc``."""
    return argparse.ArgumentParser(prog=f"python -m {module}",
                                   description=doc.split("\n")[0] if doc else None)


def add_write(parser: argparse.ArgumentParser, name: str) -> None:
    """``--write PATH``: put the results into PATH's ``name`` section."""
    parser.add_argument("--write", type=Path, metavar="PATH",
                        help=f"write the results into PATH's {name} section")


def add_budget(parser: argparse.ArgumentParser, default_s: float = 110.0) -> None:
    """``--budget-s``: stop starting requests after that many seconds."""
    parser.add_argument("--budget-s", type=float, default=default_s,
                        help="stop starting requests after this many seconds "
                             f"(default {default_s:g})")


def command_line(module: str, argv: Sequence[str] | None) -> str:
    """How this run was started, for the report: the interpreter (relative to the repository
    when inside it), ``-m module`` and the arguments."""
    shown = list(sys.argv[1:] if argv is None else argv)
    python = (os.path.relpath(sys.executable, REPO)
              if sys.executable.startswith(str(REPO) + os.sep) else sys.executable)
    return shlex.join([python, "-m", module, *shown])


def checkout_label(checkout: Path) -> str:
    """A checkout's commit (short hash) for a report, or its directory when it is no git
    checkout (a ``--baseline``)."""
    try:
        out = subprocess.run(["git", "-C", str(checkout), "rev-parse", "--short", "HEAD"],
                             capture_output=True, text=True, timeout=10, check=True)
        return out.stdout.strip() or str(checkout)
    except (OSError, subprocess.SubprocessError):
        return str(checkout)


def run_main(main: Callable[[], int], module: str) -> NoReturn:
    """Exit with ``main()``'s status; a :class:`BenchError` becomes a one-line message."""
    try:
        sys.exit(main())
    except BenchError as exc:
        sys.exit(f"{module}: {exc}")


# -- /proc: processes and memory (Linux) -------------------------------------------------------

def _stat_fields(pid: int) -> list[str] | None:
    """The fields of ``/proc/<pid>/stat`` after the command name (state first), or None."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat[stat.rindex(")") + 2:].split()


def live(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie."""
    fields = _stat_fields(pid)
    return fields is not None and fields[0] != "Z"


def all_pids() -> list[int]:
    """Every process id in ``/proc``."""
    return [int(entry) for entry in os.listdir("/proc") if entry.isdigit()]


def descendants(pid: int) -> set[int]:
    """Every live process below ``pid`` (children, grandchildren, …), from ``/proc``."""
    children: dict[int, list[int]] = {}
    for child in all_pids():
        fields = _stat_fields(child)
        if fields is not None:
            children.setdefault(int(fields[1]), []).append(child)
    found: set[int] = set()
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return {p for p in found if live(p)}


def processes_with_env(entry: str) -> set[int]:
    """Live processes whose environment holds ``entry`` (``NAME=value``); only the caller's
    own processes are readable, which is all this is for."""
    wanted = entry.encode()
    found = set()
    for pid in all_pids():
        try:
            env = Path(f"/proc/{pid}/environ").read_bytes()
        except OSError:
            continue
        if wanted in env.split(b"\0") and live(pid):
            found.add(pid)
    return found


def cmdline(pid: int) -> str:
    """A process's command line, arguments joined by spaces ('' if gone)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(
            errors="replace").strip()
    except OSError:
        return ""


def rss_kib(pid: int) -> int:
    """A process's resident set size (``VmRSS``) in KiB; 0 if unknown."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0
