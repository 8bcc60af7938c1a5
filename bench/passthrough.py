"""Pass-through overhead and fallback-hop cost of the proxy, against a loopback mock upstream.

    python -m bench.passthrough [--requests N] [--concurrency C] [--write docs/benchmarks.md]

Starts three mock OpenAI-compatible upstreams (``tests/mock_openai_upstream``, in a child
process of their own): ``up`` answers (4 deltas, no delay), ``down`` answers 503 and
``down-nr`` answers 503 with ``Retry-After: 60``. Then ``python -m olp start`` (temporary
``OLP_HOME``, port 0, loopback only, cache off, circuits that never open) with three chains:
``direct`` = [up], ``fallback`` = [down, up], ``fallback-nr`` = [down-nr, up]. The same client
(httpx on Trio, one keep-alive connection per worker) then sends the same chat completion,
streamed and not, one at a time and C at a time, to four targets, interleaved:

* (a) ``upstream``: straight to the ``up`` mock;
* (b) ``direct``: through OLP, one hop;
* (c) ``fallback``: through OLP, a failed hop (503, retried once on the hop after a jittered
  backoff, as OLP does by default) and then ``up``;
* (c') ``fallback-nr``: the same without the retry: OLP's per-hop retry has no config switch,
  but a 503 whose ``Retry-After`` exceeds the retry policy's ``max_retry_after_s`` is never
  retried, so ``down-nr`` measures the failed hop alone.

Per request: time to the first content byte (streamed: the SSE event with the first
non-empty ``delta.content``; JSON: the first body byte) and to the complete response, both from
just before the request is handed to httpx. Reported: p50/p90/p99, requests/s, the proxy's CPU
per request, (b) − (a) as the pass-through overhead and (c) − (b) as the fallback-hop cost.
Nothing leaves 127.0.0.1; every process is stopped with SIGTERM and the temporary directory
is removed.
"""

from __future__ import annotations

import argparse
import datetime
import functools
import importlib
import json
import os
import platform
import select
import shlex
import signal
import ssl
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any, Literal

import httpx
import trio

REPO = Path(__file__).resolve().parents[1]
OWNER_TOKEN = "olp_bench_owner_token_0123456789"
ROUTER_KEY = "sk-bench-router"
UPSTREAM_MODEL = "gpt-bench"
DELTAS = ("Hello", " from", " the mock", " upstream.")
EXPECTED = "".join(DELTAS)
DOWN_NR_RETRY_AFTER_S = 60
BEGIN = "<!-- passthrough:begin -->"
END = "<!-- passthrough:end -->"
WARMUP = 10
SEQ_BLOCK = 1  # sequential: targets alternate request by request
CONC_BLOCK = 5  # concurrent: blocks of C x 5 requests per target
START_TIMEOUT_S = 30.0
REQUEST_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 15.0
DOC_HEADER = """\
# Benchmarks

Numbers on this page are written by the `bench/` package (see
[bench/README.md](../bench/README.md)). They are measurements taken on one machine at one
time, recorded so changes can be compared — not guarantees or assertions about performance.
Each benchmark owns a section between its own `<!-- name:begin -->` / `<!-- name:end -->`
markers and rewrites only that section.
"""

TargetName = Literal["upstream", "direct", "fallback", "fallback-nr"]
TARGETS: tuple[TargetName, ...] = ("upstream", "direct", "fallback", "fallback-nr")
LABELS: dict[TargetName, str] = {
    "upstream": "(a) straight to the upstream",
    "direct": "(b) OLP `direct` = [up]",
    "fallback": "(c) OLP `fallback` = [down, up], retry as is",
    "fallback-nr": "(c′) OLP `fallback-nr` = [down-nr, up], no retry",
}


class BenchError(Exception):
    """The benchmark could not run (a server did not start, a request failed, ...)."""


# -- statistics --------------------------------------------------------------------------------

def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default), ``q`` in 0..100."""
    if not sorted_values:
        return float("nan")
    pos = (len(sorted_values) - 1) * q / 100
    lo = int(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def pcts(values: Sequence[float]) -> dict[str, float]:
    s = sorted(values)
    return {"p50": percentile(s, 50), "p90": percentile(s, 90), "p99": percentile(s, 99)}


# -- the mock upstreams (a child process running this module with --serve-mocks) ---------------

def serve_mocks() -> None:
    """Serve the three mocks until SIGTERM; print their base URLs as one JSON line first."""
    sys.path.insert(0, str(REPO / "tests"))
    mock: Any = importlib.import_module("mock_openai_upstream")

    async def run() -> None:
        with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async with trio.open_nursery() as nursery:
                up = await nursery.start(functools.partial(
                    mock.serve_mock, scenario="success", deltas=DELTAS, delay=0.0))
                down = await nursery.start(functools.partial(
                    mock.serve_mock, scenario="unavailable"))
                down_nr = await nursery.start(functools.partial(
                    mock.serve_mock, scenario="unavailable",
                    retry_after=DOWN_NR_RETRY_AFTER_S))
                print(json.dumps({"up": up.base_url, "down": down.base_url,
                                  "down-nr": down_nr.base_url}), flush=True)
                async for _ in signals:
                    nursery.cancel_scope.cancel()
                    break

    trio.run(run)


@dataclass
class Server:
    name: str
    process: subprocess.Popen[bytes]
    log_path: Path
    urls: dict[str, str] = field(default_factory=dict)


def _base_env(home: Path, tmp: Path) -> dict[str, str]:
    env = {"PATH": os.environ.get("PATH", os.defpath),
           "HOME": os.environ.get("HOME", str(home)), "TMPDIR": str(tmp)}
    for name in ("LANG", "LC_ALL", "TZ"):
        if name in os.environ:
            env[name] = os.environ[name]
    return env


def start_mocks(root: Path) -> Server:
    log_path = root / "mocks.log"
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "bench.passthrough", "--serve-mocks"],
            env={**_base_env(root, root), "PYTHONDONTWRITEBYTECODE": "1"}, cwd=REPO,
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=log,
            start_new_session=True)
    server = Server("mock upstreams", process, log_path)
    assert process.stdout is not None
    try:
        ready, _, _ = select.select([process.stdout], [], [], START_TIMEOUT_S)
        line = process.stdout.readline() if ready else b""
        try:
            server.urls = json.loads(line)
        except ValueError:
            raise BenchError(f"the mock upstreams did not start; log:\n{_tail(log_path)}"
                             ) from None
        return server
    except BaseException:
        stop(server)
        raise


# -- the proxy ---------------------------------------------------------------------------------

def proxy_config(mocks: dict[str, str], max_concurrent: int) -> dict[str, Any]:
    def provider(name: str) -> dict[str, Any]:
        return {"kind": "openai-compatible", "base_url": mocks[name],
                "api_key_env": "ROUTER_KEY", "metered": True, "max_concurrent": max_concurrent,
                "timeouts": {"first_output_s": 20, "idle_s": 20, "total_s": 30}}

    def hop(name: str) -> dict[str, Any]:
        return {"provider": name, "model": UPSTREAM_MODEL, "metered": True}

    return {
        "providers": {"enabled": {"anthropic": False, "openai": False, "mistral": False},
                      "up": provider("up"), "down": provider("down"),
                      "down-nr": provider("down-nr")},
        "routing": {"chains": {"direct": [hop("up")],
                               "fallback": [hop("down"), hop("up")],
                               "fallback-nr": [hop("down-nr"), hop("up")]},
                    "resilience": {"circuit_failures": 1_000_000}},
        "cache": {"enabled": False},
        "server": {"drain_grace_s": 2, "kill_grace_s": 1},
    }


def start_proxy(root: Path, mocks: dict[str, str], max_concurrent: int) -> Server:
    """``python -m olp start`` in its own session; its JSON logs go to a file we poll."""
    home, tmp = root / "olp-home", root / "olp-tmp"
    home.mkdir()
    tmp.mkdir()
    (home / "config.json").write_text(json.dumps(proxy_config(mocks, max_concurrent)))
    env = {**_base_env(home, tmp), "OLP_HOME": str(home), "OLP_PORT": "0",
           "OLP_BIND": "127.0.0.1", "OLP_OWNER_TOKEN": OWNER_TOKEN, "OLP_LOG_LEVEL": "info",
           "ROUTER_KEY": ROUTER_KEY}
    log_path = root / "olp.log"
    with open(log_path, "wb") as log:
        process = subprocess.Popen([sys.executable, "-m", "olp", "start"], env=env, cwd=home,
                                   stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                   stderr=log, start_new_session=True)
    server = Server("proxy", process, log_path)
    deadline = time.monotonic() + START_TIMEOUT_S
    try:
        while time.monotonic() < deadline:
            for entry in _log_entries(log_path):
                if entry.get("msg") == "listening":
                    missing = {"up", "down", "down-nr"} - set(entry.get("providers", []))
                    if missing:
                        raise BenchError(f"the proxy started without {sorted(missing)}; "
                                         f"log:\n{_tail(log_path)}")
                    server.urls["olp"] = str(entry["urls"][0]).replace("0.0.0.0", "127.0.0.1")
                    return server
            if process.poll() is not None:
                raise BenchError(f"the proxy exited with {process.returncode} before "
                                 f"listening; log:\n{_tail(log_path)}")
            time.sleep(0.02)
        raise BenchError(f"the proxy was not listening after {START_TIMEOUT_S:g} s; "
                         f"log:\n{_tail(log_path)}")
    except BaseException:
        stop(server)
        raise


def stop(server: Server) -> None:
    """SIGTERM; SIGKILL to the process group if it lingers."""
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


def _log_entries(path: Path) -> list[dict[str, Any]]:
    entries = []
    for line in path.read_bytes().splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict):
            entries.append(entry)
    return entries


def _tail(path: Path, lines: int = 20) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


def machine_cpu_s() -> float:
    """CPU seconds all CPUs spent busy since boot (``/proc/stat``, steal included; else
    NaN)."""
    try:
        with open("/proc/stat", encoding="ascii") as f:
            fields = f.readline().split()
    except OSError:
        return float("nan")
    user, nice, system, _idle, _iowait, irq, softirq, steal = map(int, fields[1:9])
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def own_cpu_s(pids: Sequence[int]) -> float:
    """CPU seconds used by this process and by ``pids``."""
    return time.process_time() + sum(process_cpu_s(pid) for pid in pids)


def process_cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process, all its threads (Linux ``/proc``; else NaN)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return float("nan")
    fields = stat[stat.rindex(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# -- one request -------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Target:
    name: TargetName
    base_url: str
    path: str
    model: str
    token: str

    def body(self, stream: bool) -> bytes:
        return json.dumps({
            "model": self.model, "stream": stream,
            "messages": [{"role": "system", "content": "Be terse."},
                         {"role": "user", "content": "Say hello."}],
        }).encode()


@dataclass(frozen=True, slots=True)
class Sample:
    first_ms: float  # to the first content byte
    total_ms: float  # to the complete response


class _FirstContent:
    """Finds the first SSE event carrying non-empty ``delta.content`` as bytes arrive."""

    def __init__(self) -> None:
        self.buffer = bytearray()
        self.scanned = 0

    def feed(self, chunk: bytes) -> bool:
        self.buffer += chunk
        end = self.buffer.find(b"\n\n", self.scanned)
        while end >= 0:
            event = bytes(self.buffer[self.scanned:end])
            self.scanned = end + 2
            if _event_content(event):
                return True
            end = self.buffer.find(b"\n\n", self.scanned)
        return False


def _event_content(event: bytes) -> str:
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


def _check(target: Target, stream: bool, response: httpx.Response, body: bytes) -> None:
    if stream:
        events = body.replace(b"\r\n", b"\n").split(b"\n\n")
        text = "".join(_event_content(e) for e in events)
        if not body.rstrip().endswith(b"data: [DONE]"):
            raise BenchError(f"{target.name}: the stream ended without [DONE]")
    else:
        text = json.loads(body)["choices"][0]["message"]["content"]
    if text != EXPECTED:
        raise BenchError(f"{target.name}: unexpected answer {text!r}")
    if target.name != "upstream":
        used = response.headers.get("x-olp-provider-used")
        hops = response.headers.get("x-olp-fallback-hops")
        want = "0" if target.name == "direct" else "1"
        if used != "up" or hops != want or response.headers.get("x-olp-cache") != "bypass":
            raise BenchError(f"{target.name}: served by {used!r} after {hops!r} hops, cache "
                             f"{response.headers.get('x-olp-cache')!r}")


async def one_request(client: httpx.AsyncClient, target: Target, stream: bool) -> Sample:
    request = client.build_request("POST", target.path, content=target.body(stream))
    t0 = time.perf_counter_ns()
    response = await client.send(request, stream=True)
    try:
        if response.status_code != 200:
            await response.aread()
            raise BenchError(f"{target.name}: HTTP {response.status_code}: "
                             f"{response.text[:300]}")
        t_first = 0
        finder = _FirstContent() if stream else None
        body = bytearray()
        async for chunk in response.aiter_raw():
            now = time.perf_counter_ns()
            body += chunk
            if not t_first and chunk and (finder is None or finder.feed(chunk)):
                t_first = now
        t_end = time.perf_counter_ns()
    finally:
        await response.aclose()
    _check(target, stream, response, bytes(body))
    if not t_first:
        raise BenchError(f"{target.name}: no content in the answer")
    return Sample((t_first - t0) / 1e6, (t_end - t0) / 1e6)


# -- passes ------------------------------------------------------------------------------------

@dataclass
class Result:
    target: TargetName
    stream: bool
    concurrency: int
    samples: list[Sample] = field(default_factory=list)
    wall_s: float = 0.0
    proxy_cpu_s: float = 0.0

    @property
    def rps(self) -> float:
        return len(self.samples) / self.wall_s if self.wall_s else float("nan")


_TLS = ssl.create_default_context()  # never used (plain HTTP); made once, not per client


def new_client(target: Target) -> httpx.AsyncClient:
    # trust_env=False: no HTTP(S)_PROXY from the environment, only loopback.
    return httpx.AsyncClient(
        base_url=target.base_url, trust_env=False, timeout=REQUEST_TIMEOUT_S, verify=_TLS,
        limits=httpx.Limits(max_connections=1, max_keepalive_connections=1),
        headers={"Authorization": f"Bearer {target.token}",
                 "Content-Type": "application/json"})


async def block(clients: Sequence[httpx.AsyncClient], target: Target, stream: bool,
                count: int) -> tuple[list[Sample], float]:
    """``count`` requests, ``len(clients)`` in flight (closed loop); samples and wall time."""
    samples: list[Sample] = []
    remaining = count

    async def worker(client: httpx.AsyncClient) -> None:
        nonlocal remaining
        while remaining > 0:
            remaining -= 1
            samples.append(await one_request(client, target, stream))

    t0 = time.perf_counter()
    async with trio.open_nursery() as nursery:
        for client in clients:
            nursery.start_soon(worker, client)
    return samples, time.perf_counter() - t0


async def run_pass(targets: Sequence[Target], quotas: dict[TargetName, int], stream: bool,
                   concurrency: int, proxy_pid: int, deadline: float
                   ) -> tuple[list[Result], bool]:
    """Warm-up, then the targets in turn, a block each, until every quota is met."""
    clients = {t.name: [new_client(t) for _ in range(concurrency)] for t in targets}
    results = {t.name: Result(t.name, stream, concurrency) for t in targets}
    size = SEQ_BLOCK if concurrency == 1 else CONC_BLOCK * concurrency
    cut = False
    try:
        for t in targets:
            await block(clients[t.name], t, stream, max(WARMUP, concurrency))
        while not cut and any(len(results[t.name].samples) < quotas[t.name] for t in targets):
            for t in targets:
                r = results[t.name]
                k = min(size, quotas[t.name] - len(r.samples))
                if k <= 0:
                    continue
                if time.monotonic() > deadline:
                    cut = True
                    break
                cpu0 = process_cpu_s(proxy_pid)
                samples, wall = await block(clients[t.name], t, stream, k)
                r.proxy_cpu_s += process_cpu_s(proxy_pid) - cpu0
                r.samples += samples
                r.wall_s += wall
    finally:
        for pool in clients.values():
            for client in pool:
                await client.aclose()
    return [results[t.name] for t in targets], cut


async def run_all(targets: Sequence[Target], n: int, retry_n: int, concurrency: int,
                  proxy_pid: int, deadline: float) -> tuple[list[Result], bool]:
    results: list[Result] = []
    cut = False
    for c in (1, concurrency) if concurrency > 1 else (1,):
        quotas: dict[TargetName, int] = {t.name: n for t in targets}
        if c == 1:
            quotas["fallback"] = retry_n
        for stream in (True, False):
            print(f"  {'streaming' if stream else 'JSON'}, {c} at a time...", file=sys.stderr)
            got, was_cut = await run_pass(targets, quotas, stream, c, proxy_pid, deadline)
            results += got
            cut = cut or was_cut
    return results, cut


# -- machine info and the report ---------------------------------------------------------------

def machine_info() -> dict[str, str]:
    def version(dist: str) -> str:
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            return "?"

    return {
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "platform": platform.platform(),
        "cpus": str(os.cpu_count()),
        "cpu": _cpu_model(),
        "load": load_average(),
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "libs": ", ".join(f"{d} {version(d)}" for d in ("trio", "h11", "httpx", "httpcore")),
        "olp": _olp_version(),
    }


def load_average() -> str:
    try:
        return " / ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "unknown"


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _olp_version() -> str:
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


def retry_policy() -> tuple[float, float, float]:
    """The default per-hop retry of a 5xx: (lowest, highest) backoff and ``max_retry_after_s``,
    read from OLP so the text follows the code."""
    try:
        from olp.actors.openai_compat import RetryPolicy
    except ImportError:
        return float("nan"), float("nan"), float("nan")
    p = RetryPolicy()
    ceiling = min(p.backoff_max_s, p.backoff_base_s)
    return ceiling / 2, ceiling, p.max_retry_after_s


def _f(value: float) -> str:
    return f"{value:.2f}"


def _mode(stream: bool) -> str:
    return "streaming" if stream else "JSON"


Key = tuple[bool, int, TargetName]


def _diff_rows(by: dict[Key, Result], concurrency: int) -> list[str]:
    rows = ["| mode | C | to | (b) − (a) p50 | (b) − (a) p99 | (c) − (b) p50 | (c) − (b) p99 "
            "| (c′) − (b) p50 | (c′) − (b) p99 |",
            "|---|---:|---|---:|---:|---:|---:|---:|---:|"]
    for c in (1, concurrency) if concurrency > 1 else (1,):
        for stream in (True, False):
            if any(not by[(stream, c, t)].samples for t in TARGETS):
                continue
            for attr, label in (("first_ms", "first content"), ("total_ms", "complete")):
                s = {t: pcts([getattr(x, attr) for x in by[(stream, c, t)].samples])
                     for t in TARGETS}
                a, b, cc, cn = s["upstream"], s["direct"], s["fallback"], s["fallback-nr"]
                rows.append(
                    f"| {_mode(stream)} | {c} | {label} | **{_f(b['p50'] - a['p50'])}** | "
                    f"{_f(b['p99'] - a['p99'])} | {_f(cc['p50'] - b['p50'])} | "
                    f"{_f(cc['p99'] - b['p99'])} | **{_f(cn['p50'] - b['p50'])}** | "
                    f"{_f(cn['p99'] - b['p99'])} |")
    return rows


def render(results: Sequence[Result], info: dict[str, str], command: str,
           args: argparse.Namespace, notes: Sequence[str]) -> str:
    by: dict[Key, Result] = {(r.stream, r.concurrency, r.target): r for r in results}
    lo, hi, max_after = retry_policy()
    conc = args.concurrency

    def med(stream: bool, c: int, t: TargetName, attr: str = "first_ms") -> float:
        return pcts([getattr(x, attr) for x in by[(stream, c, t)].samples])["p50"]

    lines = [
        "## Pass-through overhead and fallback-hop cost (mock upstream)",
        "",
        "What OLP adds in front of an OpenAI-compatible HTTP upstream, and what one failed hop "
        "costs, next to the same requests sent straight to the upstream. The upstream is the "
        "loopback mock `tests/mock_openai_upstream` (h11 on Trio; 4 deltas, no artificial "
        "delay), so the upstream's own time is about as small as it gets and the differences "
        "are OLP's. Measured with:",
        "",
        "```sh",
        command,
        "```",
        "",
        f"- run: {info['date']}; `--requests {args.requests}` per target, mode and "
        f"concurrency (`--retry-requests {args.retry_requests}` for (c) one at a time) after "
        f"{WARMUP} warm-up requests; concurrency 1 and {conc}; the four targets interleaved "
        f"(one request each in turn when sequential, blocks of {CONC_BLOCK} × C when "
        "concurrent) so all see the same background load",
        f"- machine: {info['platform']}, {info['cpus']} CPUs ({info['cpu']}); {info['load']}",
        f"- client, proxy and mocks: {info['python']}; {info['libs']}; olp {info['olp']}",
        "- OLP: `olp start`, `cache.enabled: false`, `OLP_LOG_LEVEL=info` (JSON log lines to a "
        "file), providers `up`, `down`, `down-nr` of kind `openai-compatible` (metered, "
        "`max_concurrent` 32), `routing.resilience.circuit_failures: 1000000` so `down`'s "
        "circuit never opens and every (c) request pays the failed hop",
        "- client: httpx on Trio in the benchmark's process, one `AsyncClient` (one keep-alive "
        "connection) per worker and target; the mocks run in a second process, OLP in a third, "
        "all on the same CPUs",
        "",
    ]
    if all(by.get((True, 1, t)) and by[(True, 1, t)].samples for t in TARGETS):
        a, b = med(True, 1, "upstream"), med(True, 1, "direct")
        c, cn = med(True, 1, "fallback"), med(True, 1, "fallback-nr")
        lines += [
            "**In short** (one at a time, streaming, medians to the first content byte):",
            "",
            f"- pass-through overhead (b) − (a): **{_f(b - a)} ms** ({_f(b)} ms through OLP "
            f"against {_f(a)} ms straight to the mock);",
            f"- fallback-hop cost without the retry (c′) − (b): **{_f(cn - b)} ms**;",
            f"- fallback-hop cost as configured by default (c) − (b): **{_f(c - b)} ms**, of "
            f"which {_f(c - cn)} ms ((c) − (c′)) is the per-hop retry: a backoff drawn "
            f"uniformly from {lo * 1000:.0f}–{hi * 1000:.0f} ms, then the 503 again.",
            "",
        ]
    lines += [
        "**Differences** (ms; a difference of p50s, or of p99s, not a p50 of differences):",
        "",
        *_diff_rows(by, conc),
        "",
        "**All workloads** (ms; first = to the first content byte; complete = to the end of "
        "the response; proxy CPU = OLP's user + system CPU time per request, all threads):",
        "",
        "| mode | C | target | n | req/s | first p50 | first p90 | first p99 | complete p50 "
        "| complete p90 | complete p99 | proxy CPU/req |",
        "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        first = pcts([s.first_ms for s in r.samples])
        total = pcts([s.total_ms for s in r.samples])
        cpu = (_f(r.proxy_cpu_s * 1000 / len(r.samples))
               if r.samples and r.target != "upstream" else "–")
        lines.append(
            f"| {_mode(r.stream)} | {r.concurrency} | {LABELS[r.target]} | {len(r.samples)} | "
            f"{r.rps:.0f} | {_f(first['p50'])} | {_f(first['p90'])} | {_f(first['p99'])} | "
            f"{_f(total['p50'])} | {_f(total['p90'])} | {_f(total['p99'])} | {cpu} |")
    lines += [
        "",
        "What the numbers mean:",
        "",
        "- **Targets**: (a) `POST {mock}/v1/chat/completions` straight to the `up` mock; "
        "(b) `POST /v1/chat/completions` to OLP with `model: direct` (chain [up]); (c) "
        "`model: fallback` (chain [down, up]: `down` answers 503 \"engine overloaded\"); (c′) "
        "`model: fallback-nr` (chain [down-nr, up]: `down-nr` answers the same 503 with "
        f"`Retry-After: {DOWN_NR_RETRY_AFTER_S}`). Same body (system + user message, "
        "`stream` true or false) and client for all; only the model name differs. Every "
        "answer is checked (status 200, the full text, `[DONE]`, and for OLP "
        "`X-OLP-Provider-Used: up`, the expected `X-OLP-Fallback-Hops`, `X-OLP-Cache: "
        "bypass`); a failure stops the run.",
        f"- **The retry**: OLP's HTTP provider retries a 500/502/503 once on the same hop "
        f"before moving on, after an \"equal jitter\" backoff ({lo * 1000:.0f}–"
        f"{hi * 1000:.0f} ms for the first retry), so (c) pays two 503s and that sleep. "
        "The retry policy (`RetryPolicy` in `olp/actors/openai_compat/_retry.py`) has no "
        "config key (`providers.<name>` accepts none and `olp/providers.py` builds the "
        "default), so it cannot be switched off for the run. (c′) measures the hop without it "
        f"through the upstream instead: a 503 whose `Retry-After` is over the policy's "
        f"`max_retry_after_s` ({max_after:g} s) is never retried, and for an `unavailable` "
        "error the header only feeds the circuit (which never opens here), so (c′) is the "
        "failed request, its classification and the step to the next hop.",
        "- **First content byte**: streaming — when the chunk that completes the first SSE "
        "event with a non-empty `delta.content` arrived (the mock and OLP both send a "
        "role-only chunk first; OLP holds status and headers back until content is in hand); "
        "JSON — when the first body byte arrived. **Complete**: when the body's last byte "
        "arrived. Both from just before the request is handed to httpx "
        "(`time.perf_counter_ns()`).",
        "- **req/s**: requests ÷ the wall time of that target's blocks; one at a time it is "
        "about 1000 ÷ the mean latency.",
        "- **What (b) − (a) covers**: OLP's HTTP server, the API-key check, decoding, routing, "
        "the engine and actor hand-offs, re-encoding the request, its own httpx request to the "
        "upstream (a pooled keep-alive connection), SSE parsing, the first-chunk rule, re-"
        "encoding the answer, a JSON log line (two with a failed hop), and, off the response "
        "path, saving the ledger and health book to SQLite in a worker thread whenever they "
        "change (at the commit measured: after every request here, as the ledger counts metered"
        " requests, and after every failed hop too, though with the circuit closed the saved "
        "health snapshot does not change).",
        "- **Upstream side**: OLP always asks the upstream for a stream with "
        "`stream_options.include_usage` (it needs the usage), also for a JSON request, which it "
        "then assembles; the straight request asks for exactly what the client asked for. "
        "That difference is part of (b) − (a) by design.",
        "- **Concurrent rows**: C workers each with their own keep-alive connection; client, "
        "mocks and OLP share the machine's CPUs, so with few CPUs these rows show CPU "
        "contention as much as latency.",
    ]
    if notes:
        lines += ["", *[f"Note: {note}" for note in notes]]
    return "\n".join(lines) + "\n"


def write_section(path: Path, section: str) -> None:
    """Replace the text between the markers, or append a new section (creating the file)."""
    block_text = f"{BEGIN}\n{section}{END}\n"
    text = path.read_text(encoding="utf-8") if path.exists() else DOC_HEADER
    begin, end = text.find(BEGIN), text.find(END)
    if begin >= 0 and end > begin:
        text = text[:begin] + block_text + text[end + len(END):].lstrip("\n")
    else:
        text = text.rstrip("\n") + "\n\n" + block_text
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


# -- main --------------------------------------------------------------------------------------

def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.passthrough",
                                     description=__doc__.split("\n")[0] if __doc__ else None)
    parser.add_argument("--requests", type=int, default=200, metavar="N",
                        help="measured requests per target, mode and concurrency (default 200, "
                             "after 10 warm-ups)")
    parser.add_argument("--retry-requests", type=int, default=100, metavar="M",
                        help="measured requests of the (c) fallback-with-retry target one at "
                             "a time, each ~0.2 s of backoff (default 100)")
    parser.add_argument("--concurrency", type=int, default=8, metavar="C",
                        help="also run every workload with C requests in flight (default 8; "
                             "1 = sequential only)")
    parser.add_argument("--write", type=Path, metavar="PATH",
                        help="write the results into PATH's passthrough section")
    parser.add_argument("--budget-s", type=float, default=110.0,
                        help="stop starting requests after this many seconds (default 110)")
    parser.add_argument("--serve-mocks", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.requests < 1 or args.retry_requests < 1 or args.concurrency < 1:
        parser.error("--requests, --retry-requests and --concurrency must be at least 1")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.serve_mocks:
        serve_mocks()
        return 0
    deadline = time.monotonic() + args.budget_s
    shown = list(sys.argv[1:] if argv is None else argv)
    python = os.path.relpath(sys.executable, REPO) if sys.executable.startswith(
        str(REPO) + os.sep) else sys.executable
    command = shlex.join([python, "-m", "bench.passthrough", *shown])
    info = machine_info()
    notes: list[str] = []
    with tempfile.TemporaryDirectory(prefix="olp-bench-") as tmp:
        root = Path(tmp)
        print("starting the mock upstreams...", file=sys.stderr)
        mocks = start_mocks(root)
        try:
            print("starting the proxy...", file=sys.stderr)
            proxy = start_proxy(root, mocks.urls, max(32, 2 * args.concurrency))
            try:
                olp = proxy.urls["olp"]
                targets = [
                    Target("upstream", mocks.urls["up"], "/chat/completions", UPSTREAM_MODEL,
                           ROUTER_KEY),
                    *(Target(name, olp, "/v1/chat/completions", name, OWNER_TOKEN)
                      for name in ("direct", "fallback", "fallback-nr"))]
                print(f"proxy at {olp}, upstream at {mocks.urls['up']}", file=sys.stderr)
                pids = (proxy.process.pid, mocks.process.pid)
                t0, machine0, own0 = time.monotonic(), machine_cpu_s(), own_cpu_s(pids)
                results, cut = trio.run(run_all, targets, args.requests, args.retry_requests,
                                        args.concurrency, proxy.process.pid, deadline)
                others = (machine_cpu_s() - machine0 - (own_cpu_s(pids) - own0)) \
                    / (time.monotonic() - t0)
            finally:
                stop(proxy)
        finally:
            stop(mocks)
        problems = [e for e in _log_entries(proxy.log_path)
                    if e.get("level") in ("error", "critical")]
        if problems:
            notes.append(f"OLP logged {len(problems)} error(s), e.g. "
                         f"{json.dumps(problems[0])[:300]}")
    info["load"] = f"load average (1/5/15 min) {info['load']} before, {load_average()} after"
    if others == others:  # not NaN
        info["load"] += (f"; other processes used {max(0.0, others):.2f} of the "
                         f"{info['cpus']} CPUs on average while measuring")
        if others > 0.25 * (os.cpu_count() or 1):
            notes.append("the machine was busy with other work during the run (see "
                         "*machine*): the numbers are higher and noisier than on an idle "
                         "machine.")
    if cut:
        notes.append(f"the {args.budget_s:g} s budget ran out: some workloads have fewer "
                     "samples than asked for (see n).")
    section = render(results, info, command, args, notes)
    print(section)
    if args.write is not None:
        write_section(args.write, section)
        print(f"wrote {args.write}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BenchError as exc:
        sys.exit(f"bench.passthrough: {exc}")
