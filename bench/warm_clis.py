"""Warm CLIs: time to first content with and without a warm pool, with the real claude, codex
and vibe.

    python -m bench.warm_clis [--requests N] [--vibe-requests N] [--warmup W]
                              [--clis claude,codex,vibe] [--mock-delay-s S]
                              [--write docs/benchmarks.md]

For each real CLI (``OLP_REAL_CLAUDE``, ``OLP_REAL_CODEX``, ``OLP_REAL_VIBE``, as
``scripts/install-real-clis`` prints them; when one is unset the installer is run, and a CLI it
does not provide is skipped with a note) this starts the loopback mock upstream the real-CLI
tests use (``python -m mock_anthropic`` / ``mock_openai_responses`` / ``mock_mistral`` from
``tests/support``, in a child process, scenario ``success``, answering at once: ``--delay 0``
unless ``--mock-delay-s`` says otherwise) and two ``python -m olp start`` (temporary
``OLP_HOME``, port 0, loopback only, cache off), configured as
``tests/realcli/test_proxy_real_*.py`` do, one with ``providers.<name>.warm`` = 0 (*cold*:
every request spawns the CLI) and one with ``warm`` = 1 (*warm*: a CLI started ahead of time
waits on stdin for the next request; for vibe, a session made ahead of time on a long-lived
``vibe-acp`` server, ``olp/providers/vibe/_acp_units.py``). codex: *cold* is
``codex_mode: "exec"`` with no pool, *warm* its long-lived ``codex app-server`` (the default
mode; a thread per request, ``olp/providers/codex/_app_units.py``), whose ``served`` count
stands for the pool's hits.

Requests alternate between the two proxies (ABBA), one at a time: streaming ``POST
/v1/chat/completions`` with raw httpx on a keep-alive connection, the same system message every
time and a distinct user message. Before each request both proxies are let settle: the cold
one has no CLI left, the warm one's ``/health`` shows ``warm`` == 1 and its waiting CLI has
stopped using CPU (so it finished starting up). The warm request must then be a pool hit
(``hits`` grows by one). The first settle of the warm vibe proxy includes starting its
``vibe-acp`` server (~5-10 s), so vibe's settles may take ``Cli.settle_timeout_s`` (120 s:
OLP itself allows 60 s for the server's ``initialize``). Per request, from just before it is
handed to httpx: the time to the first SSE event with non-empty ``delta.content`` and to the
last byte. Reported: medians and p90 of N (default 10; vibe's ``--vibe-requests``, default N:
a cold vibe takes ~5 s) after W (default 2) warm-up requests per mode, the warm/cold ratio of
the medians against the goals (claude ≤ 0.4×, codex ≤ 0.3×, vibe ≤ 0.3× and at most 1.5 s
to first content warm), the pool's idle memory (``memory_bytes`` from ``/health``; for vibe
the ``vibe-acp`` server's, shared by its sessions) and the load average. Afterwards each
mock's request log must hold every user message exactly once. Nothing leaves 127.0.0.1; every
process is stopped with SIGTERM and the temporary directory is removed.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import select
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import httpx

from bench._common import (
    REPO,
    START_TIMEOUT_S,
    BenchError,
    Server,
    add_budget,
    add_write,
    arg_parser,
    base_env,
    command_line,
    descendants,
    finish,
    load_average,
    load_before_after,
    logged_errors_note,
    machine_info,
    percentile,
    process_cpu_s,
    publish,
    run_main,
    sse_event_text,
    sse_text,
    start_olp,
    stop,
    sync_client,
    table,
    tail,
)

SECTION = "warm-clis"
SUPPORT = REPO / "tests" / "support"
INSTALLER = REPO / "scripts" / "install-real-clis"
SYSTEM = "You are terse. Answer in one line."
ANSWER = "Hello from the mock upstream."  # every mock's success answer
SETTLE_WINDOW_S = 0.5  # a proxy's CLIs are idle after two windows with ...
SETTLE_CPU_S = 0.02  # ... at most this much CPU (two 10 ms ticks) each
SETTLE_TIMEOUT_S = 60.0  # claude, codex (vibe: its Cli.settle_timeout_s)
MISTRAL_KEY = "mock-mistral-key-0000"  # as tests/realcli/test_proxy_real_vibe.py
UPSTREAM_ROUTES = ("/v1/messages", "/v1/responses", "/v1/chat/completions")  # not bootstrap
LIBS = ("httpx",)

Mode = Literal["cold", "warm"]
MODES: tuple[Mode, ...] = ("cold", "warm")


@dataclass(frozen=True, slots=True)
class Cli:
    """One real CLI and how the real-CLI tests run it."""

    name: str  # claude, codex, vibe
    env_var: str  # OLP_REAL_CLAUDE
    provider: str  # the OLP provider that runs it
    model: str  # the model the requests ask for
    mock_module: str  # the loopback mock upstream (in tests/support)
    goal: float  # warm ÷ cold of the median time to first content, at most
    goal_first_s: float | None = None  # and the warm median first content, at most (seconds)
    settle_timeout_s: float = SETTLE_TIMEOUT_S  # how long one settle may take


CLIS = {
    "claude": Cli("claude", "OLP_REAL_CLAUDE", "anthropic", "sonnet", "mock_anthropic", 0.4),
    # cold: `codex exec` spawned per request; warm: its long-lived app-server (ADR 0032)
    "codex": Cli("codex", "OLP_REAL_CODEX", "openai", "gpt-5.5", "mock_openai_responses", 0.3),
    # the first warm settle starts vibe-acp (~5-10 s; OLP allows 60 s) and makes a session
    "vibe": Cli("vibe", "OLP_REAL_VIBE", "mistral", "devstral", "mock_mistral", 0.3,
                goal_first_s=1.5, settle_timeout_s=120.0),
}


# -- the real CLIs -----------------------------------------------------------------------------

def find_binaries(clis: Sequence[Cli], notes: list[str]) -> dict[str, str]:
    """Each CLI's binary from its ``OLP_REAL_*`` variable; when one is unset, from what
    ``scripts/install-real-clis`` prints (it installs the pinned CLIs into a cache outside the
    repository, as ``./dev realcli`` does). A CLI still not found is skipped with a note."""
    found = {c.name: os.environ[c.env_var] for c in clis if os.environ.get(c.env_var)}
    missing = [c for c in clis if c.name not in found]
    if missing:
        names = ", ".join(c.env_var for c in missing)
        print(f"{names} not set: running {INSTALLER.relative_to(REPO)}...", file=sys.stderr)
        try:
            out = subprocess.run([str(INSTALLER)], cwd=REPO, stdout=subprocess.PIPE,
                                 text=True, timeout=900, check=True).stdout
        except (OSError, subprocess.SubprocessError) as exc:
            out = ""
            notes.append(f"`scripts/install-real-clis` failed ({exc}).")
        printed = dict(line.split("=", 1) for line in out.splitlines()
                       if line.startswith("OLP_REAL_") and "=" in line)
        for cli in missing:
            if printed.get(cli.env_var):
                found[cli.name] = printed[cli.env_var]
            else:
                notes.append(f"{cli.name} skipped: `{cli.env_var}` is not set and "
                             "`scripts/install-real-clis` did not provide it (no npm?).")
    for name, binary in found.items():
        if not os.access(binary, os.X_OK):
            raise BenchError(f"{name}: {binary} is not an executable file")
    return found


def cli_version(binary: str) -> str:
    try:
        out = subprocess.run([binary, "--version"], capture_output=True, text=True,
                             timeout=60, check=False).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "?"
    return out.splitlines()[0] if out else "?"


# -- the mock upstream (a child process) -------------------------------------------------------

def start_mock(root: Path, cli: Cli, delay_s: float) -> Server:
    """``python -m <mock> --scenario success --delay <delay_s>`` (seconds before each text
    delta) with ``tests/support`` on ``PYTHONPATH``;
    returns once it printed ``LISTENING <base URL>`` (the URL is the Server's)."""
    log_path = root / f"{cli.name}-mock.log"
    env = {**base_env(root, root), "PYTHONPATH": str(SUPPORT), "PYTHONDONTWRITEBYTECODE": "1"}
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", cli.mock_module, "--scenario", "success", "--delay",
             repr(delay_s)], env=env,
            cwd=SUPPORT, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=log,
            start_new_session=True)
    server = Server(f"{cli.name} mock upstream", process, log_path)
    assert process.stdout is not None
    try:
        ready, _, _ = select.select([process.stdout], [], [], START_TIMEOUT_S)
        line = process.stdout.readline().decode(errors="replace") if ready else ""
        if not line.startswith("LISTENING "):
            raise BenchError(f"the {server.name} did not start; log:\n{tail(log_path)}")
        server.url = line.split(None, 1)[1].strip()
        return server
    except BaseException:
        stop(server)
        raise


def mock_requests(mock: Server) -> list[dict[str, Any]]:
    """The mock's recorded requests (``GET /_mock/requests``)."""
    base = mock.url.removesuffix("/v1")
    with httpx.Client(trust_env=False, timeout=30) as client:
        response = client.get(base + "/_mock/requests")
    response.raise_for_status()
    requests: list[dict[str, Any]] = response.json()["requests"]
    return requests


# -- the proxies -------------------------------------------------------------------------------

def codex_config_toml(mock_url: str) -> str:
    """As ``tests/realcli/test_proxy_real_codex.py``: codex pointed at the mock."""
    return ('model_provider = "mock"\n'
            "check_for_update_on_startup = false\n\n"
            "[model_providers.mock]\n"
            'name = "Mock upstream"\n'
            f'base_url = "{mock_url}"\n'
            'env_key = "OPENAI_API_KEY"\n'
            'wire_api = "responses"\n'
            "request_max_retries = 1\nstream_max_retries = 1\n\n"
            "[analytics]\nenabled = false\n")


def vibe_config_toml(mock_url: str) -> str:
    """As ``vibe_config`` of ``tests/realcli/test_proxy_real_vibe.py``: vibe pointed at the
    mock (``mock_url`` has no ``/v1``), its retry budget low."""
    return ("enable_telemetry = false\n"
            "enable_update_checks = false\n"
            "api_retry_max_elapsed_time = 3.0\n\n"
            "[[providers]]\n"
            'name = "mistral"\n'
            f'api_base = "{mock_url.rstrip("/")}/v1"\n'
            'api_key_env_var = "MISTRAL_API_KEY"\n'
            'backend = "mistral"\n')


def proxy_config(cli: Cli, binary: str, mock_url: str, warm: int) -> dict[str, Any]:
    """The ``config`` of ``tests/realcli/test_proxy_real_{claude,codex,vibe}.py`` (vibe's with
    the key in the provider's env), with ``warm`` set, the cache off and a long keep-alive
    (the client's connection outlives the waits)."""
    timeouts = {"first_output_s": 45, "idle_s": 20, "total_s": 55}
    if cli.name == "claude":
        enabled = {"openai": False, "mistral": False}
        provider: dict[str, Any] = {
            "env": {"ANTHROPIC_BASE_URL": mock_url, "ANTHROPIC_API_KEY": "sk-ant-mock-0000",
                    "CLAUDE_CODE_MAX_RETRIES": "1"}}
    elif cli.name == "vibe":
        enabled = {"anthropic": False, "openai": False, "mistral": True}
        provider = {"home_files": {".vibe/config.toml": vibe_config_toml(mock_url)},
                    "env": {"MISTRAL_API_KEY": MISTRAL_KEY}}
    else:
        enabled = {"openai": True, "anthropic": False, "mistral": False}
        provider = {"home_files": {".codex/config.toml": codex_config_toml(mock_url)},
                    "env": {"OPENAI_API_KEY": "sk-mock-0000"}}
    provider.update(binary=binary, metered=True, max_concurrent=2, timeouts=timeouts,
                    warm=warm)
    if cli.name == "codex":  # warm: its long-lived app-server (no pool); cold: `codex exec`
        provider.update(codex_mode="app-server" if warm else "exec", warm=0)
    return {"providers": {"enabled": enabled, cli.provider: provider},
            "cache": {"enabled": False},
            "server": {"kill_grace_s": 1, "keep_alive_s": 300}}


@dataclass
class Proxy:
    """One ``olp start`` (cold or warm) and its clients: one for the measured requests (a
    keep-alive connection), one for ``/health``."""

    mode: Mode
    server: Server
    client: httpx.Client
    health: httpx.Client
    provider: str
    seen_request: bool = False  # the pool warms only for a request it has seen

    def pool(self) -> dict[str, Any] | None:
        response = self.health.get("/health")
        if response.status_code != 200:
            raise BenchError(f"GET /health: HTTP {response.status_code}: {response.text[:300]}")
        slot = response.json()["providers"][self.provider]
        server = slot.get("app_server")
        if server is not None:  # codex's app-server, read as a pool of one (ADR 0032)
            up = 1 if server["running"] else 0
            return {"warm": up, "size": 1, "booting": 0, "hits": server["served"],
                    "memory_bytes": server["memory_bytes"]}
        stats: dict[str, Any] | None = slot["warm"]
        return stats


def start_proxy(root: Path, cli: Cli, binary: str, mock: Server, mode: Mode) -> Proxy:
    home = root / f"{cli.name}-{mode}"
    user_home = home / "user-home"  # no developer's own login is linked into a spawn
    user_home.mkdir(parents=True)
    server = start_olp(home, proxy_config(cli, binary, mock.url, 1 if mode == "warm" else 0),
                       [cli.provider], name=f"{cli.name} {mode} proxy",
                       env={"HOME": str(user_home)})
    return Proxy(mode, server, sync_client(server.url), sync_client(server.url),
                 cli.provider)


def close_proxy(proxy: Proxy) -> None:
    proxy.client.close()
    proxy.health.close()
    stop(proxy.server)


# -- settling and one request ------------------------------------------------------------------

def children_cpu(pid: int) -> tuple[int, dict[int, float]]:
    """How many processes run below ``pid``, and their CPU seconds so far."""
    pids = descendants(pid)
    return len(pids), {p: process_cpu_s(p) for p in pids}


def settle(proxy: Proxy, timeout_s: float) -> dict[str, Any] | None:
    """Wait until ``proxy`` is idle: the warm one's pool holds its unit (once it has seen a
    request) and whatever runs below it has used at most ``SETTLE_CPU_S`` in each of two
    ``SETTLE_WINDOW_S`` windows; the cold one has no process left. Returns the pool's
    statistics then (``None`` for the cold proxy). Raises after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    quiet = 0
    _, before = children_cpu(proxy.server.process.pid)
    while True:
        time.sleep(SETTLE_WINDOW_S)
        count, now = children_cpu(proxy.server.process.pid)
        used = sum(cpu - before.get(p, 0.0) for p, cpu in now.items())
        before = now
        stats = proxy.pool()
        if proxy.mode == "cold":
            if stats is not None:
                raise BenchError(f"the cold proxy has a warm pool: {stats}")
            ready = count == 0
        else:
            if stats is None:
                raise BenchError("the warm proxy's /health shows no warm pool")
            ready = not proxy.seen_request or (stats["warm"] == stats["size"] == 1
                                               and stats["booting"] == 0)
        quiet = quiet + 1 if ready and used <= SETTLE_CPU_S else 0
        if quiet >= 2:
            return stats
        if time.monotonic() > deadline:
            raise BenchError(f"the {proxy.server.name} did not settle within "
                             f"{timeout_s:g} s (pool {stats}, {count} process(es) "
                             f"below it, {used:.2f} s CPU in the last window); log:\n"
                             f"{tail(proxy.server.log_path)}")


@dataclass(frozen=True, slots=True)
class Sample:
    first_s: float  # send → first SSE event with content
    last_s: float  # send → last byte


def chat_body(cli: Cli, text: str) -> bytes:
    return json.dumps({"model": cli.model, "stream": True, "messages": [
        {"role": "system", "content": SYSTEM}, {"role": "user", "content": text}]}).encode()


def one_request(proxy: Proxy, body: bytes) -> Sample:
    """One streaming chat completion; times from just before it is handed to httpx."""
    request = proxy.client.build_request("POST", "/v1/chat/completions", content=body)
    t_send = time.perf_counter()
    response = proxy.client.send(request, stream=True)
    try:
        if response.status_code != 200:
            response.read()
            raise BenchError(f"{proxy.server.name}: HTTP {response.status_code}: "
                             f"{response.text[:500]}")
        received = bytearray()
        pending = b""
        t_first = t_last = 0.0
        for chunk in response.iter_raw():
            if not chunk:
                continue
            t_last = time.perf_counter()
            received += chunk
            if t_first:
                continue
            pending += chunk.replace(b"\r\n", b"\n")
            *events, pending = pending.split(b"\n\n")
            if any(sse_event_text(event) for event in events):
                t_first = t_last
    finally:
        response.close()
    text = sse_text(bytes(received))
    if text != ANSWER or not t_first:
        raise BenchError(f"{proxy.server.name}: unexpected answer {text[:200]!r}")
    return Sample(t_first - t_send, t_last - t_send)


# -- one CLI: both proxies, interleaved --------------------------------------------------------

@dataclass
class Result:
    cli: Cli
    version: str
    samples: dict[Mode, list[Sample]] = field(default_factory=lambda: {m: [] for m in MODES})
    hits: int = 0  # measured warm requests that were pool hits
    memory_bytes: list[int] = field(default_factory=list)  # the idle pool, before each
    loads: list[float] = field(default_factory=list)  # 1-min load before each measured request
    mock_requests: int = 0
    cut: bool = False


def run_cli(root: Path, cli: Cli, binary: str, args: argparse.Namespace, deadline: float,
            notes: list[str]) -> Result:
    n, warmup = requests_for(cli, args), args.warmup
    result = Result(cli, cli_version(binary))
    run_id = secrets.token_hex(4)
    texts: list[str] = []
    mock = start_mock(root, cli, args.mock_delay_s)
    proxies: dict[Mode, Proxy] = {}
    try:
        for mode in MODES:
            proxies[mode] = start_proxy(root, cli, binary, mock, mode)
        print(f"{cli.name} ({result.version}): mock at {mock.url}, cold proxy at "
              f"{proxies['cold'].server.url}, warm at {proxies['warm'].server.url}; "
              f"{warmup} warm-up + {n} requests each, one at a time...", file=sys.stderr)
        for k in range(warmup + n):
            if time.monotonic() > deadline:
                result.cut = True
                break
            measured = k >= warmup
            for mode in (MODES if k % 2 == 0 else MODES[::-1]):  # ABBA
                proxy = proxies[mode]
                before: dict[str, Any] | None = None
                for other in proxies.values():  # both idle: neither disturbs the request
                    stats = settle(other, cli.settle_timeout_s)
                    if other is proxy:
                        before = stats
                text = f"Request {run_id}-{mode}-{k}: say hello."
                texts.append(text)
                if measured:
                    result.loads.append(os.getloadavg()[0])
                sample = one_request(proxy, chat_body(cli, text))
                proxy.seen_request = True
                if mode == "warm":
                    assert before is not None
                    after = proxy.pool()
                    assert after is not None
                    hit = after["hits"] == before["hits"] + 1
                    if not hit and measured:
                        notes.append(f"{cli.name}: warm request {k} was not a pool hit "
                                     f"(pool before {before}, after {after}).")
                    if measured:
                        result.hits += hit
                        result.memory_bytes.append(before["memory_bytes"])
                if measured:
                    result.samples[mode].append(sample)
                print(f"  {mode} {'#' + str(k - warmup) if measured else 'warm-up'}: first "
                      f"content {sample.first_s * 1000:.0f} ms, last byte "
                      f"{sample.last_s * 1000:.0f} ms", file=sys.stderr)
    finally:
        for proxy in proxies.values():
            close_proxy(proxy)
        try:
            recorded = mock_requests(mock) if mock.process.poll() is None else []
        finally:
            stop(mock)
    for proxy in proxies.values():
        notes += logged_errors_note(proxy.server.log_path, f"the {proxy.server.name}")
    check_mock(cli, recorded, texts, notes)
    result.mock_requests = len(recorded)
    return result


def check_mock(cli: Cli, recorded: list[dict[str, Any]], texts: Sequence[str],
               notes: list[str]) -> None:
    """Every user message reached the upstream exactly once, with the system text, and no
    upstream request carried another request's message."""
    bodies = [json.dumps(r.get("body")) for r in recorded
              if r.get("route") in UPSTREAM_ROUTES]
    problems = []
    for text in texts:
        carrying = [b for b in bodies if text in b]
        if len(carrying) != 1:
            problems.append(f"{text!r} in {len(carrying)} upstream requests")
        elif SYSTEM not in carrying[0]:
            problems.append(f"the upstream request for {text!r} lacks the system text")
    if len(bodies) != len(texts):
        problems.append(f"{len(bodies)} upstream requests for {len(texts)} chat requests")
    if problems:
        notes.append(f"{cli.name}: the mock's request log is not as expected: "
                     + "; ".join(problems[:5]))


# -- the report --------------------------------------------------------------------------------

def _ms(seconds: float) -> str:
    return "–" if seconds != seconds else f"{seconds * 1000:,.0f}"


def _p(values: Sequence[float], q: float) -> float:
    return percentile(sorted(values), q)


def ratios(result: Result) -> tuple[float, float]:
    """Warm ÷ cold of the medians: time to first content, time to the last byte."""
    cold, warm = result.samples["cold"], result.samples["warm"]
    if not cold or not warm:
        return float("nan"), float("nan")
    return (_p([s.first_s for s in warm], 50) / _p([s.first_s for s in cold], 50),
            _p([s.last_s for s in warm], 50) / _p([s.last_s for s in cold], 50))


def warm_first_s(result: Result) -> float:
    """The warm median time to first content."""
    return _p([s.first_s for s in result.samples["warm"]], 50)


def goal_met(result: Result) -> bool | None:
    """Whether the warm ÷ cold ratio of the median first content is within the goal (and,
    for vibe, the warm median itself)."""
    first, _ = ratios(result)
    if first != first:
        return None
    limit = result.cli.goal_first_s
    return first <= result.cli.goal and (limit is None or warm_first_s(result) <= limit)


def goal_text(cli: Cli) -> str:
    return f"≤ {cli.goal:g}×" + (f", ≤ {cli.goal_first_s:g} s" if cli.goal_first_s else "")


def verdict(result: Result) -> str:
    met = goal_met(result)
    if met is None:
        return "–"
    return f"{'met' if met else '**not met**'} ({goal_text(result.cli)})"


def table_rows(results: Sequence[Result]) -> list[list[str]]:
    rows = []
    for r in results:
        first, last = ratios(r)
        for mode in MODES:
            s = r.samples[mode]
            firsts, lasts = [x.first_s for x in s], [x.last_s for x in s]
            warm = mode == "warm"
            mem = _p([float(m) for m in r.memory_bytes], 50) if warm else float("nan")
            rows.append([
                r.cli.name if not warm else "", f"{mode} (`warm: {int(warm)}`)", str(len(s)),
                _ms(_p(firsts, 50)), _ms(_p(firsts, 90)), _ms(_p(lasts, 50)),
                _ms(_p(lasts, 90)),
                f"**{first:.2f}×** / {last:.2f}×" if warm else "1",
                verdict(r) if warm else "",
                f"{mem / 1e6:.0f} MB" if warm and mem == mem else "–",
                f"{r.hits}/{len(s)}" if warm else "–"])
    return rows


def measured_counts(results: Sequence[Result], args: argparse.Namespace) -> str:
    """``10``, or ``10, vibe 6`` when ``--vibe-requests`` differs."""
    counts = f"{args.requests}"
    for r in results:
        if requests_for(r.cli, args) != args.requests:
            counts += f", {r.cli.name} {requests_for(r.cli, args)}"
    return counts


def render(results: Sequence[Result], info: dict[str, str], command: str,
           args: argparse.Namespace, notes: Sequence[str]) -> str:
    lines = [
        "## Warm CLIs: time to first content, cold spawn against a warm pool",
        "",
        "What `providers.<name>.warm` buys ([ADR 0019](adr/0019-warm-clis.md)): the real "
        "`claude`, `codex` and `vibe` through `olp start` against the real-CLI tests' "
        "loopback mock upstreams, every request spawning the CLI (`warm: 0`) against a CLI "
        "started ahead of time and waiting on stdin (`warm: 1`; for vibe a session made ahead "
        "of time on a long-lived `vibe-acp` server). Measured with:",
        "",
        "```sh",
        command,
        "```",
        "",
        f"- run: {info['date']}; per CLI and mode {args.warmup} warm-up requests, then n "
        f"measured ({measured_counts(results, args)}), one at a time, alternating between "
        "the cold and the warm proxy (ABBA)",
        f"- machine: {info['platform']}, {info['cpus']} CPUs ({info['cpu']}); "
        f"{info['load']}; {info['load_during']}",
        f"- bench and proxy: {info['python']}; {info['libs']}; olp {info['olp']}",
        "- CLIs: " + "; ".join(f"{r.cli.name} `{r.version}` (model `{r.cli.model}`, "
                               f"mock `tests/support/{r.cli.mock_module}`, "
                               f"{r.mock_requests} upstream requests checked)"
                               for r in results),
        "- proxies: `olp start` per CLI and mode, configured as "
        "`tests/realcli/test_proxy_real_{claude,codex,vibe}.py` do (sandboxed spawns, metered "
        "mock key, vibe's in the provider's `env`, a fresh `HOME`), `cache.enabled: false`, "
        "`server.keep_alive_s: 300`; the mocks "
        f"answer `{ANSWER}` in 4 text deltas, " + (
            f"{args.mock_delay_s * 1000:g} ms before each" if args.mock_delay_s
            else "at once (`--delay 0`, as the ADR's timing runs: the times are the CLIs' "
            "and the proxy's own; a real upstream adds its own latency to both modes, which "
            "brings the ratios toward 1)"),
        "",
        "**Streaming, one request at a time** (ms from just before the request is handed to "
        "httpx; ratio = warm ÷ cold of the medians, first content / last byte; goal on the "
        "first-content ratio (vibe's also on the warm median); idle RSS = the waiting CLI's "
        "process group (vibe: the `vibe-acp` server's, which all its sessions share), "
        "`memory_bytes` of `/health`, median; hits = measured warm requests the pool "
        "served):",
        "",
        *table(["CLI", "mode", "n", "first content p50", "p90", "last byte p50", "p90",
                "ratio", "goal", "idle RSS", "hits"], "llrrrrrrlrr", table_rows(results)),
    ]
    summary = []
    for r in results:
        first, last = ratios(r)
        cold = _p([s.first_s for s in r.samples["cold"]], 50)
        warm = _p([s.first_s for s in r.samples["warm"]], 50)
        if first == first:
            holder = ("the `vibe-acp` server holding the waiting session"
                      if r.cli.name == "vibe" else "the waiting CLI")
            summary.append(
                f"- {r.cli.name}: first content after **{_ms(warm)} ms** warm against "
                f"{_ms(cold)} ms cold, **{first:.2f}×** ({1 / first:.1f}× sooner; goal "
                f"{goal_text(r.cli)}: {'met' if goal_met(r) else '**not met**'}); the whole "
                f"answer {last:.2f}×; {holder} holds "
                f"{_p([float(m) for m in r.memory_bytes], 50) / 1e6:.0f} MB.")
    if summary:
        lines += ["", "**In short:**", "", *summary]
    lines += [
        "",
        "What the numbers mean:",
        "",
        "- **first content**: until the first SSE event with a non-empty `delta.content` has "
        "been read; **last byte**: until the last body byte (`[DONE]`). Raw httpx, one "
        "keep-alive connection per proxy; every answer was checked (`" + ANSWER + "`, "
        "`[DONE]`). claude streams the mock's deltas as they come; codex `exec` and "
        "`vibe -p` (cold vibe) print no deltas, only the whole message, so their first "
        "content is close to the end of the answer. A cold vibe's last byte still comes "
        "about a second after its first content: the stream ends only once `vibe -p` has "
        "exited (OLP reads the usage from its `export.json` then); a warm vibe session's "
        "turn ends with its `session/prompt` result.",
        "- **cold**: the request spawns the CLI (sandboxed, fresh job directory and home) and "
        "it starts up, then calls the upstream. **warm**: the CLI was spawned for the previous "
        "request's system text and has been idle on stdin; the request only writes its turn. "
        "Its pool starts the replacement at hand-out, so the next CLI's start-up runs on the "
        "same CPUs while the request is answered — included here, as in use. vibe is the "
        "exception: `vibe -p` reads its prompt before it starts up, so its warm unit is a "
        "session (`session/new`, ~0.4–1.8 s) made ahead of time on a `vibe-acp` server "
        "started once (~5–10 s, with the first warm-up request) and kept; the request sends "
        "`session/prompt`, and the replacement is a new session on the same server. codex "
        "too: *cold* is `codex exec` (`codex_mode: \"exec\"`, no pool), *warm* its "
        "long-lived `codex app-server` (the default mode; ADR 0032), up since the first "
        "warm-up request: the request starts a thread and its turn (`served` stands for the "
        "pool's hits; idle RSS is the server's).",
        "- **Settling**: before every request both proxies are let settle — the cold one has "
        "no process left, the warm one's `/health` shows `warm: 1`, `booting: 0`, and what "
        f"runs below it used ≤ {SETTLE_CPU_S * 1000:.0f} ms of CPU in each of two "
        f"{SETTLE_WINDOW_S:g} s windows, i.e. the waiting CLI had finished starting up (a "
        "client's think time between requests is usually longer; a settle may take "
        f"{SETTLE_TIMEOUT_S:g} s, vibe's {CLIS['vibe'].settle_timeout_s:g} s, as its first "
        "includes starting `vibe-acp`). Each warm request had to be a pool hit (`hits` + 1); "
        "the first warm-up request is a miss by design (a pool warms only for system texts "
        "it has seen).",
        "- **Proxy's own cost**: not separated here; around a spawn it is a few ms (see "
        "*Spawn-path overhead* and *Sandbox overhead per CLI spawn* above), next to CLI "
        "start-ups of about a second (vibe: ~5 s).",
        "- The machine runs other work (tests) meanwhile: see the load averages; cold and "
        "warm requests alternate, so both see the same load on average, and the ratio is the "
        "steadier figure.",
    ]
    return finish(lines, notes)


# -- main --------------------------------------------------------------------------------------

def requests_for(cli: Cli, args: argparse.Namespace) -> int:
    """Measured requests per mode for ``cli``: ``--requests``, vibe's ``--vibe-requests``."""
    if cli.name == "vibe" and args.vibe_requests is not None:
        return int(args.vibe_requests)
    return int(args.requests)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = arg_parser("bench.warm_clis", __doc__)
    parser.add_argument("--requests", type=int, default=10, metavar="N",
                        help="measured requests per CLI and mode (default 10)")
    parser.add_argument("--vibe-requests", type=int, metavar="N",
                        help="vibe's measured requests per mode (default: --requests; a cold "
                             "vibe takes ~5 s, so fewer keep the run short)")
    parser.add_argument("--warmup", type=int, default=2, metavar="W",
                        help="warm-up requests per CLI and mode, first (default 2, at least 1)")
    parser.add_argument("--clis", default="claude,codex,vibe", metavar="LIST",
                        help="comma-separated, from claude, codex, vibe (default all)")
    parser.add_argument("--mock-delay-s", type=float, default=0.0, metavar="S",
                        help="the mocks wait S seconds before each of their 4 text deltas "
                             "(default 0: they answer at once, so the times are the CLIs' and "
                             "the proxy's own; the real-CLI tests use the mocks' 0.05)")
    add_write(parser, SECTION)
    add_budget(parser, 1200.0)
    args = parser.parse_args(argv)
    if (args.requests < 1 or args.warmup < 1 or args.mock_delay_s < 0
            or (args.vibe_requests is not None and args.vibe_requests < 1)):
        parser.error("--requests, --vibe-requests and --warmup must be at least 1, "
                     "--mock-delay-s not negative")
    args.cli_list = [c.strip() for c in args.clis.split(",") if c.strip()]
    unknown = set(args.cli_list) - set(CLIS)
    if unknown or not args.cli_list:
        parser.error(f"--clis: choose from {', '.join(CLIS)}")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    command = command_line("bench.warm_clis", argv)
    deadline = time.monotonic() + args.budget_s
    notes: list[str] = []
    clis = [CLIS[name] for name in args.cli_list]
    binaries = find_binaries(clis, notes)
    if not binaries:
        raise BenchError("no real CLI to measure: " + " ".join(notes))
    info = machine_info(LIBS)
    results: list[Result] = []
    with tempfile.TemporaryDirectory(prefix="olp-bench-") as tmp:
        for cli in clis:
            if cli.name in binaries:
                results.append(run_cli(Path(tmp), cli, binaries[cli.name], args, deadline,
                                       notes))
    info["load"] = load_before_after(info["load"])
    loads = sorted(x for r in results for x in r.loads)
    info["load_during"] = (f"1-min load before the measured requests: median "
                           f"{percentile(loads, 50):.2f}, max {loads[-1]:.2f}"
                           if loads else f"load now {load_average()}")
    if any(r.cut for r in results):
        notes.append(f"the {args.budget_s:g} s budget ran out: some rows have fewer than "
                     "the requests asked for (see n).")
    if any(not r.samples["warm"] or not r.samples["cold"] for r in results):
        raise BenchError("a CLI has no measured requests (the budget ran out first)")
    publish(render(results, info, command, args, notes), args.write, SECTION)
    return 0


if __name__ == "__main__":
    run_main(main, "bench.warm_clis")

