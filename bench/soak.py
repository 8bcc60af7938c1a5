"""Fault soak: many requests through ``olp start`` with faults at every stage; checks for leaks.

    python -m bench.soak [--requests N] [--concurrency C] [--seed S] [--write docs/benchmarks.md]

Starts the loopback mock upstream ``tests/support/mock_openai_upstream`` (a child process of
its own serving one mock per fault, :data:`MOCKS`) and ``olp start`` whose providers are those
mocks (``openai-compatible``, one provider per mock) and the three CLI providers running the
fake CLIs of ``tests/support/fakes`` through a small dispatcher that reads the scenario from
the prompt (``soak-scenario=NAME``), so each prompt maps to one fault. Deadlines are short
(:data:`TIMEOUTS`) so hangs resolve in seconds. Then C workers (httpx on Trio, one keep-alive
connection each) send N requests drawn by a seeded RNG: a kind (a chain and a fault, see
:func:`kinds`), streaming or JSON, and a client behaviour: read normally, read slowly, or
disconnect at a random moment or after a random number of events. Every answer is classified:
*complete* (finish reason, and ``[DONE]`` when streamed), *error* (an error status with an
OpenAI error body, an in-stream error event, or a JSON answer with the partial text marked as
the README says: ``finish_reason: "length"`` and ``X-OLP-Truncated: true``), *disconnected*
(the client left first) or
*BAD* (anything else: a stream that ended without ``[DONE]`` and without an error event, no
answer within a minute, or a complete answer from a route that always fails).

Afterwards it checks: no process of the proxy's left (descendants in ``/proc``, and any process
carrying this run's marker in its environment, also after shutdown), no limiter slot held
(``GET /health``), no flight left and no cache entry from a failed answer (``GET /cache/stats``,
then every stored entry decoded and traced back to its prompt's fault), no BAD answer, and the
proxy's RSS growth between request N/5 (2,000 of 10,000) and the end within
``--max-rss-growth-pct``. Exit status 1 on any violation. Nothing leaves 127.0.0.1.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import json
import random
import re
import select
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import trio

from bench._common import (
    REPO,
    START_TIMEOUT_S,
    BenchError,
    Server,
    add_write,
    arg_parser,
    async_client,
    base_env,
    cmdline,
    command_line,
    descendants,
    finish,
    load_before_after,
    log_entries,
    machine_info,
    processes_with_env,
    publish,
    rss_kib,
    run_main,
    start_olp,
    stop,
    table,
    tail,
)

SECTION = "soak"
PATH = "/v1/chat/completions"
TIMEOUTS = {"first_output_s": 2, "idle_s": 2, "total_s": 5}
GUARD_S = 60.0  # a request without an end after this long is BAD (a hang)
SETTLE_S = 20.0  # after the last request: time for slots, flights and processes to go
ROUTER_KEY = "sk-soak-router"
FAKES = REPO / "tests" / "support" / "fakes"
# CLI provider -> (fake, its FAKE_<PREFIX>_* knobs, model, API-key variable)
CLIS = {"anthropic": (FAKES / "fake_claude.py", "CLAUDE", "claude-sonnet-4-6",
                      "ANTHROPIC_API_KEY"),
        "openai": (FAKES / "fake_codex.py", "CODEX", "gpt-5.5", "OPENAI_API_KEY"),
        "mistral": (FAKES / "fake_vibe.py", "VIBE", "devstral", "MISTRAL_API_KEY")}
# mock name -> (scenario, options, can a one-hop chain to it complete?)
MOCKS: dict[str, tuple[str, dict[str, Any], bool]] = {
    "ok": ("success", {}, True),
    "slow_first": ("slow_first", {"first_delay": 0.5, "interval": 0.1}, True),
    "malformed": ("success", {"malformed": True}, True),
    "reset": ("reset", {}, False),
    "drop": ("drop", {}, False),
    "hang": ("hang", {}, False),
    "unavailable": ("unavailable", {}, False),
    "server_error": ("server_error", {}, False),
    "rate_limit": ("rate_limit", {"retry_after": 1}, False),
    "stall": ("stall", {"cut_after": 2}, False),
    "cut": ("cut", {"cut_after": 2}, False),
    "stream_error": ("stream_error", {"cut_after": 2}, False),
    "early_eof": ("success", {"finish": False, "done": False}, False),
}
PRE_CONTENT_FAULTS = ("reset", "drop", "hang", "unavailable", "server_error", "rate_limit")
# CLI provider -> {scenario: can it complete?}; crash_before, exit_nonzero and stall are the
# dispatcher's (a SIGSEGV before any output; exit 2 with a message; the fake's hold file that
# never appears, i.e. silence after the first chunk), the others the fakes' own
CLI_SCENARIOS: dict[str, dict[str, bool]] = {
    "anthropic": {"success": True, "garbage": True, "crash_before": False,
                  "exit_nonzero": False, "server_error": False, "hang": False, "stall": False,
                  "crash_mid_stream": False, "slow": False},
    "openai": {"success": True, "garbage": True, "crash_before": False, "exit_nonzero": False,
               "server_error": False, "hang": False, "stall": False,
               "crash_mid_answer": False, "slow": False},
    "mistral": {"success": True, "crash_before": False, "exit_nonzero": False,
                "server_error": False, "hang": False, "crash_mid_answer": False},
}
FALLBACK_CLI_FAULTS = ("crash_before", "exit_nonzero", "hang")
DISPATCHER = r"""#!/usr/bin/env bash
# Written by bench/soak.py: run $SOAK_FAKE with the scenario named in the prompt.
prompt=$(cat; printf x); prompt=${prompt%x}
scenario=success
[[ $prompt =~ soak-scenario=([a-z_]+) ]] && scenario=${BASH_REMATCH[1]}
case $scenario in
  crash_before) ulimit -c 0; kill -SEGV $$ ;;
  exit_nonzero) echo "soak: the CLI failed before any output" >&2; exit 2 ;;
  stall) export "FAKE_${SOAK_PREFIX}_HOLD_FILE=/nonexistent/soak-hold"; scenario=success ;;
esac
export "FAKE_${SOAK_PREFIX}_SCENARIO=$scenario"
exec "$SOAK_FAKE" "$@" <<<"$prompt"
"""


def mock_text(name: str) -> str:
    return f"soak {name} answer."


# -- what is sent ------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Kind:
    name: str  # "http ok", "anthropic stall", "fallback hang → ok", ...
    model: str  # the chain
    scenario: str = ""  # the CLI scenario named in the prompt
    must_fail: bool = False  # no complete answer is possible: one would be truncated

    def prompt(self, variant: int) -> str:
        marker = f" soak-scenario={self.scenario}" if self.scenario else ""
        return f"Say hello. [soak kind={self.name}{marker} variant={variant}]"


def kinds() -> list[Kind]:
    """Every chain × fault: one-hop chains to each mock and each CLI scenario, and two-hop
    chains whose first hop fails before any content and whose second is the ``ok`` mock."""
    out = [Kind(f"http {m}", f"h-{m}", must_fail=not ok) for m, (_, _, ok) in MOCKS.items()]
    out += [Kind(f"fallback {m} → ok", f"f-{m}") for m in PRE_CONTENT_FAULTS]
    for provider, scenarios in CLI_SCENARIOS.items():
        out += [Kind(f"{provider} {s}", f"c-{provider}", s, not ok) for s, ok in scenarios.items()]
    out += [Kind(f"fallback anthropic {s} → ok", "f-anthropic", s) for s in FALLBACK_CLI_FAULTS]
    return out


@dataclass(frozen=True, slots=True)
class Planned:
    n: int
    kind: Kind
    prompt: str
    stream: bool
    behaviour: str  # normal | slow | disconnect
    cut_after_s: float | None = None  # disconnect after this long
    cut_after_events: int | None = None  # disconnect after this many SSE events
    read_pause_s: float = 0.0  # slow: pause after each read of at most 1 KiB


def plan(requests: int, seed: int) -> list[Planned]:
    """The requests, from ``random.Random(seed)``: the same seed gives the same run. Half
    the prompts come from a small pool per kind (so cache hits and shared flights happen),
    half are unique."""
    rng, all_kinds, out = random.Random(seed), kinds(), []
    for n in range(requests):
        kind = rng.choice(all_kinds)
        variant = rng.randrange(4) if rng.random() < 0.5 else 1000 + n
        stream, roll = rng.random() < 0.8, rng.random()
        if roll < 0.7:
            out.append(Planned(n, kind, kind.prompt(variant), stream, "normal"))
        elif roll < 0.85:
            out.append(Planned(n, kind, kind.prompt(variant), stream, "slow",
                               read_pause_s=rng.uniform(0.005, 0.05)))
        elif stream and rng.random() < 0.5:
            out.append(Planned(n, kind, kind.prompt(variant), stream, "disconnect",
                               cut_after_events=rng.randrange(0, 6)))
        else:
            out.append(Planned(n, kind, kind.prompt(variant), stream, "disconnect",
                               cut_after_s=rng.uniform(0.0, 2.5)))
    return out


# -- one request and its classification --------------------------------------------------------

@dataclass(slots=True)
class Outcome:
    request: Planned
    outcome: str  # complete | error | disconnected | BAD
    detail: str = ""  # the error's status/code, or why it is BAD


def _error_of(obj: Any) -> dict[str, Any] | None:
    error = obj.get("error") if isinstance(obj, dict) else None
    return error if isinstance(error, dict) and "message" in error else None


def classify(req: Planned, status: int, body: bytes, cut: bool, problem: str,
             truncated: bool = False) -> Outcome:
    """Sort one answer into complete / error / disconnected / BAD (see the module doc).
    ``truncated``: the ``X-OLP-Truncated: true`` header, with which a JSON answer whose every
    hop failed mid-answer carries the partial text (``finish_reason: "length"``, README)."""
    outcome = _classify(req, status, body, cut, problem, truncated)
    if outcome.outcome == "complete" and req.kind.must_fail:
        return Outcome(req, "BAD", "a complete answer from a route that always fails")
    return outcome


def _classify(req: Planned, status: int, body: bytes, cut: bool, problem: str,
              truncated: bool) -> Outcome:
    def bad(why: str) -> Outcome:
        return Outcome(req, "BAD", why)

    def code(error: dict[str, Any]) -> str:
        return str(error.get("code") or error.get("type"))

    if status == 0:
        return Outcome(req, "disconnected") if cut else bad(problem or "no response")
    if status != 200:
        try:
            error = _error_of(json.loads(body))
        except ValueError:
            error = None
        if error is not None:
            return Outcome(req, "error", f"{status} {code(error)}")
        return Outcome(req, "disconnected") if cut else bad(
            f"HTTP {status} without an OpenAI error body: {body[:120]!r}")
    if not req.stream:
        try:
            choice = json.loads(body)["choices"][0]
            if truncated and choice["finish_reason"] == "length":
                return Outcome(req, "error", "200 X-OLP-Truncated")
            if choice["finish_reason"] and "message" in choice and not truncated:
                return Outcome(req, "complete")
        except (ValueError, LookupError, TypeError):
            pass
        return Outcome(req, "disconnected") if cut else bad(f"200 JSON, not a completion "
                                                            f"({problem}): {body[:120]!r}")
    events = body.replace(b"\r\n", b"\n").split(b"\n\n")
    if not body.endswith(b"\n\n"):
        events = events[:-1]  # a partial last event (the client or the server cut it)
    done = finished = False
    error = None
    for event in events:
        for line in event.split(b"\n"):
            if not line.startswith(b"data:"):
                continue
            data = line[5:].strip()
            if data == b"[DONE]":
                done = True
                continue
            try:
                obj = json.loads(data)
            except ValueError:
                return bad(f"an undecodable SSE event: {data[:120]!r}")
            error = error or _error_of(obj)
            finished = finished or any(c.get("finish_reason") for c in obj.get("choices") or ())
    if error is not None:
        return bad("[DONE] after an error event") if done else Outcome(
            req, "error", f"stream {code(error)}")
    if done and finished:
        return Outcome(req, "complete")
    if cut:
        return Outcome(req, "disconnected")
    return bad("a 200 stream ended without [DONE] and without an error event"
               + (f" ({problem})" if problem else ""))


async def send(client: httpx.AsyncClient, req: Planned) -> Outcome:
    """One request with its client behaviour; never raises (except Cancelled)."""
    body: dict[str, Any] = {"model": req.kind.model, "stream": req.stream,
                            "messages": [{"role": "user", "content": req.prompt}]}
    if req.stream:
        body["stream_options"] = {"include_usage": True}
    status, received, cut, problem, truncated = 0, bytearray(), False, "", False
    with trio.move_on_after(GUARD_S) as guard:
        with trio.move_on_after(req.cut_after_s if req.cut_after_s is not None
                                else float("inf")) as timer:
            try:
                async with client.stream("POST", PATH, json=body) as response:
                    status = response.status_code
                    truncated = response.headers.get("x-olp-truncated") == "true"
                    async for chunk in response.aiter_raw(1024 if req.read_pause_s else None):
                        received += chunk
                        if req.read_pause_s:
                            await trio.sleep(req.read_pause_s)
                        if (req.cut_after_events is not None
                                and received.count(b"\n\n") >= req.cut_after_events):
                            cut = True
                            break
            except httpx.HTTPError as exc:
                problem = f"{type(exc).__name__}: {exc}"[:200]
        cut = cut or timer.cancelled_caught
    if guard.cancelled_caught:
        return Outcome(req, "BAD", f"no end of the answer after {GUARD_S:g} s")
    return classify(req, status, bytes(received), cut, problem, truncated)


# -- the run -----------------------------------------------------------------------------------

@dataclass
class Run:
    outcomes: list[Outcome] = field(default_factory=list)
    rss_at: int = 0  # completed requests when the baseline was taken
    rss_base_kib: int = 0
    rss_curve: list[int] = field(default_factory=list)  # KiB, every `step` requests
    step: int = 500
    wall_s: float = 0.0


async def drive(url: str, requests: Sequence[Planned], concurrency: int, pid: int,
                rss_at: int) -> Run:
    """Send every request, ``concurrency`` at a time; sample the proxy's RSS when ``rss_at``
    requests have ended."""
    run, queue = Run(rss_at=rss_at, step=max(1, len(requests) // 20)), iter(requests)
    t0 = time.monotonic()

    async def worker(todo: Iterator[Planned]) -> None:
        async with async_client(url) as client:
            for req in todo:
                run.outcomes.append(await send(client, req))
                done = len(run.outcomes)
                if done == rss_at:
                    run.rss_base_kib = rss_kib(pid)
                if done % run.step == 0:
                    run.rss_curve.append(rss_kib(pid))
                    bad = sum(o.outcome == "BAD" for o in run.outcomes)
                    print(f"  {done}/{len(requests)} done, {bad} BAD, "
                          f"proxy RSS {run.rss_curve[-1] / 1024:.1f} MiB", file=sys.stderr)

    async with trio.open_nursery() as nursery:
        for _ in range(concurrency):
            nursery.start_soon(worker, queue)
    run.wall_s = time.monotonic() - t0
    return run


async def settle(url: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """``/health`` and ``/cache/stats`` once no slot and no flight is busy, or after
    ``SETTLE_S``."""
    async with async_client(url) as client:
        with trio.move_on_after(SETTLE_S):
            while True:
                health = (await client.get("/health")).json()
                stats = (await client.get("/cache/stats")).json()
                if slots_held(health) == 0 and stats.get("in_flight", 0) == 0:
                    break
                await trio.sleep(0.2)
        return health, stats


def slots_held(health: dict[str, Any]) -> int:
    return sum(int(p.get("in_flight", 0)) for p in health.get("providers", {}).values())


def wait_gone(find: Callable[[], set[int]], within_s: float) -> set[int]:
    """Poll ``find()`` (a set of pids) until it is empty or ``within_s`` passed."""
    deadline = time.monotonic() + within_s
    while (left := find()) and time.monotonic() < deadline:
        time.sleep(0.2)
    return set(left)


# -- the cache: every entry traced back to its prompt ------------------------------------------

def cache_entry_problems(db: Path) -> tuple[int, list[str]]:
    """Read every stored answer (after the proxy stopped); return how many and the problems:
    an entry that is not a complete answer, or that answers a prompt whose fault cannot end
    in one. The fakes run with ``FAKE_*_ECHO=1``, so a CLI answer is a JSON digest whose
    ``stdin_tail`` holds the prompt (a cut answer does not parse); a mock's answer names it."""
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        rows = conn.execute("SELECT provider, events FROM cache_entries").fetchall()
    problems = []
    for provider, blob in rows:
        events = json.loads(blob)
        types = [e.get("type") for e in events]
        text = "".join(e.get("text", "") for e in events if e.get("type") == "text_delta")
        if "error" in types or not types or types[-1] != "stop":
            problems.append(f"{provider}: not a complete answer: {types}")
        elif provider in MOCKS:
            if not MOCKS[provider][2] or text != mock_text(provider):
                problems.append(f"{provider}: a cached answer from a failing mock: {text!r}")
        elif provider in CLI_SCENARIOS:
            try:
                tail_ = json.loads(text)["stdin_tail"]
            except (ValueError, KeyError, TypeError):
                problems.append(f"{provider}: a cut answer was cached: {text[:120]!r}")
                continue
            found = re.search(r"soak-scenario=([a-z_]+)", tail_)
            scenario = found.group(1) if found else "?"
            if not CLI_SCENARIOS[provider].get(scenario, False):
                problems.append(f"{provider}: cached an answer to scenario {scenario}")
        else:
            problems.append(f"{provider}: an entry from an unknown provider")
    return len(rows), problems


# -- the mocks (a child process running this module with --serve-mocks) and the proxy ----------

def serve_mocks() -> None:
    """Serve one mock per entry of :data:`MOCKS` until SIGTERM; print their URLs first."""
    sys.path.insert(0, str(REPO / "tests" / "support"))
    mock: Any = importlib.import_module("mock_openai_upstream")

    async def run() -> None:
        with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async with trio.open_nursery() as nursery:
                urls = {}
                for name, (scenario, options, _) in MOCKS.items():
                    deltas = ("soak", f" {name}", " answer", ".")
                    handle = await nursery.start(functools.partial(
                        mock.serve_mock, scenario=scenario, deltas=deltas, delay=0.01,
                        **options))
                    urls[name] = handle.base_url
                print(json.dumps(urls), flush=True)
                async for _ in signals:
                    nursery.cancel_scope.cancel()
                    break

    trio.run(run)


def start_mocks(root: Path) -> tuple[Server, dict[str, str]]:
    log_path = root / "mocks.log"
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "bench.soak", "--serve-mocks"],
            env={**base_env(root, root), "PYTHONDONTWRITEBYTECODE": "1"}, cwd=REPO,
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=log,
            start_new_session=True)
    server = Server("mock upstreams", process, log_path)
    assert process.stdout is not None
    try:
        ready, _, _ = select.select([process.stdout], [], [], START_TIMEOUT_S)
        try:
            urls: dict[str, str] = json.loads(process.stdout.readline() if ready else b"")
        except ValueError:
            raise BenchError(f"the mocks did not start; log:\n{tail(log_path)}") from None
        return server, urls
    except BaseException:
        stop(server)
        raise


def proxy_config(root: Path, mocks: dict[str, str], marker: str, slots: int) -> dict[str, Any]:
    """One provider per mock and the three CLIs behind the dispatcher (unconfined: the soak
    is about the proxy, not the sandbox); circuits that never open, so every request meets
    its fault; a cache large enough to never evict."""
    dispatcher = root / "soak-cli"
    dispatcher.write_text(DISPATCHER)
    dispatcher.chmod(0o755)
    name, value = marker.split("=", 1)
    providers: dict[str, Any] = {"enabled": dict.fromkeys(CLIS, True)}
    for provider, (fake, prefix, _, key_var) in CLIS.items():
        providers[provider] = {
            "binary": str(dispatcher), "sandbox": False, "max_concurrent": slots,
            "timeouts": TIMEOUTS,
            "env": {"SOAK_FAKE": str(fake), "SOAK_PREFIX": prefix, name: value,
                    f"FAKE_{prefix}_ECHO": "1", key_var: "sk-soak-fake"}}
    for mock, url in mocks.items():
        providers[mock] = {"kind": "openai-compatible", "base_url": url,
                           "api_key_env": "SOAK_ROUTER_KEY", "metered": True,
                           "max_concurrent": slots, "timeouts": TIMEOUTS}

    def hop(provider: str) -> dict[str, Any]:
        model = CLIS[provider][2] if provider in CLIS else "gpt-soak"
        return {"provider": provider, "model": model, "metered": True}

    chains = {f"h-{m}": [hop(m)] for m in MOCKS}
    chains.update({f"f-{m}": [hop(m), hop("ok")] for m in PRE_CONTENT_FAULTS})
    chains.update({f"c-{p}": [hop(p)] for p in CLIS})
    chains["f-anthropic"] = [hop("anthropic"), hop("ok")]
    return {"providers": providers,
            "routing": {"chains": chains, "resilience": {"circuit_failures": 1_000_000}},
            "cache": {"enabled": True, "max_entries_per_key": 1_000_000},
            "server": {"drain_grace_s": 2, "kill_grace_s": 1}}


# -- checks and the report ---------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Check:
    what: str
    measured: str
    limit: str
    ok: bool


def check_run(run: Run, health: dict[str, Any], stats: dict[str, Any], children: set[int],
              marked: set[int], orphans: set[int], rss_end_kib: int, entries: int,
              entry_problems: list[str], max_growth_pct: float) -> list[Check]:
    bad = sum(o.outcome == "BAD" for o in run.outcomes)
    completed = {o.request.prompt for o in run.outcomes if o.outcome == "complete"}
    can_complete = {o.request.prompt for o in run.outcomes if not o.request.kind.must_fail}
    growth = (rss_end_kib - run.rss_base_kib) * 100 / run.rss_base_kib if run.rss_base_kib \
        else float("nan")
    return [
        Check("answers neither complete nor a clear error (BAD)", str(bad), "0", bad == 0),
        Check("child processes of the proxy after the run", str(len(children)), "0",
              not children),
        Check("fake-CLI processes of this run left (while running / after shutdown)",
              f"{len(marked)} / {len(orphans)}", "0 / 0", not marked and not orphans),
        Check("limiter slots held (`/health`, every provider's `in_flight`)",
              str(slots_held(health)), "0", slots_held(health) == 0),
        Check("cache flights in progress (`/cache/stats` `in_flight`)",
              str(stats.get("in_flight")), "0", stats.get("in_flight") == 0),
        Check("cache entries from failed answers (every entry traced to its prompt)",
              str(len(entry_problems)), "0", not entry_problems),
        Check("cache entries ≤ distinct prompts to routes that can complete "
              f"({len(completed)} of them got a complete answer)",
              f"{entries} ≤ {len(can_complete)}", "", entries <= len(can_complete)),
        Check(f"proxy RSS growth from request {run.rss_at:,} to the end",
              f"{run.rss_base_kib / 1024:.1f} → {rss_end_kib / 1024:.1f} MiB "
              f"({growth:+.1f} %)", f"≤ {max_growth_pct:g} %",
              growth == growth and growth <= max_growth_pct),
    ]


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


# -- main --------------------------------------------------------------------------------------

def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = arg_parser("bench.soak", __doc__)
    parser.add_argument("--requests", type=int, default=10_000, metavar="N",
                        help="requests in all (default 10,000)")
    parser.add_argument("--concurrency", type=int, default=16, metavar="C",
                        help="requests in flight (default 16)")
    parser.add_argument("--seed", type=int, default=9, help="the RNG seed (default 9)")
    parser.add_argument("--max-rss-growth-pct", type=float, default=5.0, metavar="P",
                        help="largest allowed RSS growth from request N/5 to the end "
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
                               args.requests // 5)
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
