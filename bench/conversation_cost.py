"""Conversation cost: the upstream input a vendor's prompt cache cannot serve, per agent turn,
through OLP and with the CLI's own resumed session, with the real claude and codex.

    python -m bench.conversation_cost [--turns 4,20] [--flattened-turns 4,20]
                                      [--clis claude,codex] [--codex-mode exec|app-server]
                                      [--write docs/benchmarks.md]

Issue #25 and ``docs/adr/0023-conversation-continuity.md``. A coding agent re-sends the whole
conversation on every turn: system text, then turn 1, its answer, turn 2, …, turn k. Each turn
here is ~3,700 characters (``Turn k. Please read these notes and reply briefly. <words>``,
the text of the research in ``tests/fixtures/cli-reference/{claude,codex}/sessions/``), the
system text ``You are terse.``; the mock answers every turn ``Hello from the mock upstream.``

For each real CLI (``OLP_REAL_CLAUDE``, ``OLP_REAL_CODEX``, as ``scripts/install-real-clis``
prints them; run when unset, as ``bench.warm_clis`` does) this starts the real-CLI tests' loopback
mock upstream (``python -m mock_anthropic`` / ``mock_openai_responses`` from ``tests/support``, a
child process, scenario ``success``, answering at once), which logs every request body, and
runs the same N-turn conversation (N = 4 and 20 by default) three ways, the mock's log cleared
before each:

(a) *through OLP*: ``python -m olp start`` (a fresh ``OLP_HOME`` per conversation, loopback,
    sandboxed spawns), configured as ``tests/realcli/test_proxy_real_{claude,codex}.py`` do,
    cache off, ``providers.<name>.sessions`` left at its default (on for claude and codex), and
    ``warm: 0`` (a resumed turn always spawns cold, so a warm unit would never serve a turn
    here; it would only take CPU). The agent is raw httpx: one non-streaming ``POST
    /v1/chat/completions`` per turn with the whole history, ``X-OLP-Session`` recorded.
(b) *the CLI's own session*, driven directly in the same run: OLP's own argv, built by the
    provider's adapter (``olp/providers/{anthropic,codex}/_invocation.py``) without
    ``--no-session-persistence`` / ``--ephemeral`` (``SessionKit.fresh_argv``), confined by
    OLP's bubblewrap ``Sandbox`` exactly as the runner wraps it (read-only install roots from
    ``install_roots`` and the bridge's, the job directory bound at ``/olp/job``), with OLP's
    minimal environment and the provider's ``env`` and ``home_files``. One job directory (home
    and workdir) persists for the whole conversation. Turn 1 is a fresh session with the
    system text and turn 1; turn k ≥ 2 sends only turn k, with ``--resume <session id>``
    (claude; no ``--fork-session``: the CLI appends to its own session file) or ``resume
    <thread id> -`` (codex), the id read from the first turn's ``system/init`` /
    ``thread.started``. This is what a user of the CLI itself gets.
(c) *OLP flattened*, for reference: as (a) with ``providers.<name>.sessions: false``, OLP's
    old behaviour (every turn flattened into one new prompt, a new session per spawn).

From the mock's request bodies, for each turn k ≥ 2 and its previous request (the research's
definition, ``tests/fixtures/cli-reference/*/sessions/README.md``):

- claude: every content block of ``messages`` serialised (with its role, ``cache_control``
  removed); the characters of the blocks after the previous request's last ``cache_control``
  breakpoint, when that breakpoint lies within the common block prefix of the two requests
  (else every block); plus the serialised ``system`` + ``tools`` (``cache_control`` removed)
  when they differ from the previous request's.
- codex: every ``input`` item serialised whole; the characters of the items after the longest
  common item prefix with the previous request; plus the serialised ``instructions`` +
  ``tools`` when they differ. Also: the distinct ``prompt_cache_key`` values over the turns
  (OpenAI routes a cache by it: a key changed between two turns loses the whole prefix, which
  the character count does not add).

Reported per CLI and length: the total over turns 2..N for (a), (b), (c), (a) ÷ (b) against
the goal of issue #25 (≤ 1.25×), (c) ÷ (b), per-turn mean and maximum, the first request's
size, the distinct cache keys, the ``X-OLP-Session`` states and on how many turns (a)'s
upstream request held exactly (b)'s blocks / items and head. Exit status 1 when (a) ÷ (b)
exceeds 1.25 for any case measured. Nothing leaves 127.0.0.1; every process is stopped and
the temporary directory removed. About 2 minutes for both CLIs on 2 CPUs.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path
from typing import Any, Literal

import httpx

from bench._common import (
    BenchError,
    Server,
    add_write,
    arg_parser,
    command_line,
    finish,
    load_before_after,
    logged_errors_note,
    machine_info,
    publish,
    run_main,
    start_olp,
    stop,
    sync_client,
    table,
)
from bench.warm_clis import (
    ANSWER,
    CLIS,
    Cli,
    cli_version,
    find_binaries,
    mock_requests,
    proxy_config,
    start_mock,
)
from olp.actors._sandbox import JOB_DIR_INSIDE, Sandbox, find_bwrap, install_roots
from olp.actors._sessions import SessionKit
from olp.actors._toolbridge import bridge_read_roots
from olp.ir import ChatRequest, Message, TextPart
from olp.providers._adapter import ProviderAdapter

SECTION = "conversation-cost"
SYSTEM = "You are terse."
TURN_CHARS = 3700
WORDS = ("alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike "
         "november oscar papa quebec romeo sierra tango uniform victor whiskey xray yankee "
         "zulu").split()
GOAL = 1.25  # (a) ÷ (b), at most (issue #25)
REQUEST_TIMEOUT_S = 120.0  # one turn through OLP (a spawn; the proxy's own total is 55 s)
SPAWN_TIMEOUT_S = 120.0  # one direct CLI run
CLI_NAMES = ("claude", "codex")
UPSTREAM_ROUTE = {"claude": "/v1/messages", "codex": "/v1/responses"}
BASE_PASSTHROUGH = ("PATH", "LANG", "LC_ALL", "TZ", "SSL_CERT_FILE", "SSL_CERT_DIR")  # the runner's
LIBS = ("httpx",)

Mode = Literal["olp", "cli", "flat"]
MODE_LABEL: dict[Mode, str] = {"olp": "(a) through OLP (sessions on)",
                               "cli": "(b) the CLI's own session",
                               "flat": "(c) OLP flattened (`sessions: false`)"}


def turn_text(k: int, n: int = TURN_CHARS) -> str:
    """Turn ``k``'s user text: ``n`` characters, as the research's ``claude_cases.py``."""
    out, i = [f"Turn {k}. Please read these notes and reply briefly."], 0
    while len(" ".join(out)) < n:
        out.append(WORDS[(i * 7 + k) % len(WORDS)] + str(i % 97))
        i += 1
    return " ".join(out)[:n]


# -- what the prefix cache cannot serve --------------------------------------------------------

def _canon(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _strip_cc(value: Any) -> Any:
    """``value`` without any ``cache_control`` key (where breakpoints sit is not content)."""
    if isinstance(value, dict):
        return {k: _strip_cc(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [_strip_cc(v) for v in value]
    return value


def _common_prefix(a: Sequence[str], b: Sequence[str]) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


@dataclass(frozen=True, slots=True)
class Shape:
    """One upstream request as the prefix cache sees it."""

    units: list[str]  # claude: message content blocks; codex: input items (serialised)
    breakpoints: list[int]  # claude: indexes of the blocks with cache_control
    head: str  # claude: system + tools; codex: instructions + tools (serialised)
    cache_key: str | None  # codex: prompt_cache_key
    bare: list[str]  # the units without codex's per-thread item ids (to compare paths)

    @property
    def chars(self) -> int:
        return len(self.head) + sum(len(u) for u in self.units)


def shape(cli: str, body: Mapping[str, Any]) -> Shape:
    if cli == "claude":
        units: list[str] = []
        breakpoints: list[int] = []
        for message in body.get("messages") or []:
            content = message.get("content")
            blocks = content if isinstance(content, list) else [{"type": "text",
                                                                  "text": content}]
            for block in blocks:
                if isinstance(block, dict) and "cache_control" in block:
                    breakpoints.append(len(units))
                units.append(_canon({"role": message.get("role"), **_strip_cc(block)})
                             if isinstance(block, dict) else _canon(block))
        head = _canon(_strip_cc({"system": body.get("system"), "tools": body.get("tools")}))
        return Shape(units, breakpoints, head, None, units)
    items = body.get("input") or []
    units = [_canon(item) for item in items]
    bare = [_canon({k: v for k, v in item.items() if k != "id"} if isinstance(item, dict)
                   else item) for item in items]
    head = _canon({"instructions": body.get("instructions"), "tools": body.get("tools")})
    key = body.get("prompt_cache_key")
    return Shape(units, [], head, key if isinstance(key, str) else None, bare)


def uncached(cli: str, prev: Shape, this: Shape) -> int:
    """The characters of ``this`` request the prefix cache cannot serve after ``prev``."""
    common = _common_prefix(prev.units, this.units)
    if cli == "claude":
        last = max(prev.breakpoints, default=-1)
        cached_upto = last + 1 if last < common else 0
    else:
        cached_upto = common
    head = 0 if this.head == prev.head else len(this.head)
    return head + sum(len(u) for u in this.units[cached_upto:])


# -- one conversation --------------------------------------------------------------------------

@dataclass
class Conversation:
    cli: str
    mode: Mode
    turns: int
    shapes: list[Shape] = field(default_factory=list)
    states: list[str] = field(default_factory=list)  # X-OLP-Session per turn (a), (c)
    models: set[str] = field(default_factory=set)  # the upstream requests' model
    seconds: float = 0.0

    @property
    def per_turn(self) -> list[int]:
        """Uncached characters of turns 2..N."""
        return [uncached(self.cli, a, b) for a, b in pairwise(self.shapes)]

    @property
    def total(self) -> int:
        return sum(self.per_turn)

    @property
    def head_changes(self) -> int:
        return sum(a.head != b.head for a, b in pairwise(self.shapes))

    @property
    def cache_keys(self) -> int:
        return len({s.cache_key for s in self.shapes if s.cache_key is not None})


def history_messages(k: int) -> list[dict[str, str]]:
    """What the agent sends on turn ``k``: the system text and the whole conversation."""
    messages = [{"role": "system", "content": SYSTEM}]
    for j in range(1, k):
        messages += [{"role": "user", "content": turn_text(j)},
                     {"role": "assistant", "content": ANSWER}]
    messages.append({"role": "user", "content": turn_text(k)})
    return messages


def collect(cli: Cli, mock: Server, conv: Conversation) -> None:
    """The conversation's upstream requests from the mock's log (one per turn, in order,
    turn k's text in the k-th and not before)."""
    bodies = [r["body"] for r in mock_requests(mock)
              if r.get("route") == UPSTREAM_ROUTE[cli.name] and isinstance(r.get("body"), dict)]
    if len(bodies) != conv.turns:
        raise BenchError(f"{cli.name} {conv.mode} {conv.turns} turns: the mock logged "
                         f"{len(bodies)} upstream requests")
    for k, body in enumerate(bodies, 1):
        text = json.dumps(body, ensure_ascii=False)
        if f"Turn {k}. " not in text or f"Turn {k + 1}. " in text:
            raise BenchError(f"{cli.name} {conv.mode}: upstream request {k} is not turn {k}'s")
        conv.models.add(str(body.get("model")))
        conv.shapes.append(shape(cli.name, body))


def clear_mock(mock: Server) -> None:
    with httpx.Client(trust_env=False, timeout=30) as client:
        client.delete(mock.url.removesuffix("/v1") + "/_mock/requests").raise_for_status()


def through_olp(root: Path, cli: Cli, binary: str, mock: Server, turns: int, mode: Mode,
                notes: list[str], codex_mode: str = "exec") -> Conversation:
    """(a) or (c): the agent's conversation through a fresh ``olp start`` (codex in
    ``codex_mode``)."""
    conv = Conversation(cli.name, mode, turns)
    config = proxy_config(cli, binary, mock.url, 0)
    if cli.name == "codex":
        config["providers"][cli.provider]["codex_mode"] = codex_mode
    if mode == "flat":
        config["providers"][cli.provider]["sessions"] = False
    home = root / f"{cli.name}-{mode}-{turns}"
    user_home = home / "user-home"  # no developer's own login is linked into a spawn
    user_home.mkdir(parents=True)
    clear_mock(mock)
    server = start_olp(home, config, [cli.provider], name=f"{cli.name} {mode} proxy",
                       env={"HOME": str(user_home)})
    client = sync_client(server.url)
    client.timeout = httpx.Timeout(REQUEST_TIMEOUT_S)
    started = time.monotonic()
    try:
        for k in range(1, turns + 1):
            body = {"model": cli.model, "messages": history_messages(k)}
            response = client.post("/v1/chat/completions", json=body)
            if response.status_code != 200:
                raise BenchError(f"{server.name}, turn {k}: HTTP {response.status_code}: "
                                 f"{response.text[:500]}")
            answer = response.json()["choices"][0]["message"]["content"]
            if answer != ANSWER:
                raise BenchError(f"{server.name}, turn {k}: unexpected answer {answer!r}")
            conv.states.append(response.headers.get("x-olp-session", "-"))
        conv.seconds = time.monotonic() - started
    finally:
        client.close()
        stop(server)
    notes += logged_errors_note(server.log_path, f"the {server.name}")
    collect(cli, mock, conv)
    return conv


def adapter_for(cli: Cli) -> ProviderAdapter:
    if cli.name == "claude":
        from olp.providers.anthropic._spec import ADAPTER as CLAUDE
        return CLAUDE
    from olp.providers.codex._spec import ADAPTER as CODEX
    return CODEX


def sandbox_for(binary: str) -> Sandbox:
    """OLP's confinement for ``binary``, as ``olp/runtime/provider_actors.py`` builds it."""
    bwrap = find_bwrap(os.environ)
    if bwrap is None:
        raise BenchError("bubblewrap (bwrap) not found: the CLI's own session is run "
                         "confined as OLP runs it")
    roots = install_roots(binary, path_env=os.environ.get("PATH"),
                          forbidden=(Path.home(), Path(tempfile.gettempdir())))
    return Sandbox(bwrap, read_only=(*roots, *(r for r in bridge_read_roots()
                                              if r not in roots)))


def run_spawn(argv: Sequence[str], stdin: bytes, env: Mapping[str, str], cwd: Path,
              what: str) -> list[dict[str, Any]]:
    """Run one CLI spawn to its end; its stdout's JSON lines. Raises on a non-zero exit."""
    process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, env=dict(env), cwd=cwd,
                               start_new_session=True)
    try:
        out, err = process.communicate(stdin, timeout=SPAWN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        raise BenchError(f"{what}: no exit after {SPAWN_TIMEOUT_S:g} s") from None
    if process.returncode != 0:
        raise BenchError(f"{what}: exit {process.returncode}; stderr:\n"
                         f"{err.decode(errors='replace')[-1500:]}")
    lines = []
    for line in out.splitlines():
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if isinstance(obj, dict):
            lines.append(obj)
    return lines


def session_id(cli: Cli, lines: Sequence[Mapping[str, Any]]) -> str | None:
    for obj in lines:
        if cli.name == "claude" and obj.get("type") == "system" \
                and obj.get("subtype") == "init":
            return str(obj["session_id"])
        if cli.name == "codex" and obj.get("type") == "thread.started":
            return str(obj["thread_id"])
    return None


def own_session(root: Path, cli: Cli, binary: str, mock: Server, turns: int,
                model: str) -> Conversation:
    """(b): the CLI's own session, resumed turn after turn in one persistent job directory."""
    conv = Conversation(cli.name, "cli", turns)
    adapter = adapter_for(cli)
    kit: SessionKit | None = adapter.sessions
    if kit is None:
        raise BenchError(f"{cli.name}: OLP's adapter has no SessionKit")
    provider = proxy_config(cli, binary, mock.url, 0)["providers"][cli.provider]
    job = root / f"{cli.name}-cli-{turns}"
    work, home = job / "work", job / "home"
    work.mkdir(parents=True, mode=0o700)
    (home / "tmp").mkdir(parents=True, mode=0o700)
    for rel, text in (provider.get("home_files") or {}).items():
        (home / rel).parent.mkdir(parents=True, exist_ok=True)
        (home / rel).write_text(text)
    seen = JOB_DIR_INSIDE  # as the runner's seen_job_dir for a sandboxed spawn
    env = {k: os.environ[k] for k in BASE_PASSTHROUGH if k in os.environ}
    env.setdefault("LANG", "C.UTF-8")
    env.update(HOME=str(seen / "home"), TMPDIR=str(seen / "home" / "tmp"), TERM="dumb",
               NO_COLOR="1")
    env.update(adapter.spawn_env({}))
    env.update(provider.get("env") or {})
    sandbox = sandbox_for(binary)
    system = Message(role="system", content=(TextPart(text=SYSTEM),))
    sid: str | None = None
    clear_mock(mock)
    started = time.monotonic()
    for k in range(1, turns + 1):
        user = Message(role="user", content=(TextPart(text=turn_text(k)),))
        # turn 1: the system text and turn 1; then only the new turn (claude reads its
        # system text from a file on every start; codex has it in its thread already)
        messages = (system, user) if k == 1 or not kit.system_in_prompt else (user,)
        invocation = adapter.invocation(ChatRequest(model=model, messages=messages),
                                        binary=binary, model=model, workdir=seen / "work")
        for name, text in invocation.files.items():
            (work / name).write_text(text)
        for name, data in invocation.binary_files.items():
            (work / name).write_bytes(data)
        argv = kit.fresh_argv(invocation.argv)
        if sid is not None:
            argv = [*argv, "--resume", sid] if cli.name == "claude" else \
                kit.resume_argv(invocation.argv, sid)
        lines = run_spawn(sandbox.wrap(argv, job_dir=job, workdir=seen / "work", inside=seen),
                          invocation.stdin, {**env, **invocation.env}, work,
                          f"{cli.name} (own session), turn {k}")
        this = session_id(cli, lines)
        if sid is None:
            sid = this
            if sid is None:
                raise BenchError(f"{cli.name} (own session): no session id on turn 1")
        elif this != sid:
            raise BenchError(f"{cli.name} (own session), turn {k}: session {this}, not {sid}")
        if ANSWER not in json.dumps(lines):
            raise BenchError(f"{cli.name} (own session), turn {k}: the answer is missing")
    conv.seconds = time.monotonic() - started
    collect(cli, mock, conv)
    return conv


# -- one CLI -----------------------------------------------------------------------------------

@dataclass
class Case:
    cli: str
    turns: int
    convs: dict[Mode, Conversation] = field(default_factory=dict)

    def same_as_own(self) -> int:
        """On how many turns (a)'s upstream request had exactly (b)'s blocks or items and
        head (codex's per-thread item ids aside)."""
        olp, own = self.convs["olp"].shapes, self.convs["cli"].shapes
        return sum(a.bare == b.bare and a.head == b.head
                   for a, b in zip(olp, own, strict=True))

    def ratio(self, mode: Mode = "olp") -> float:
        if mode not in self.convs or "cli" not in self.convs:
            return float("nan")
        return self.convs[mode].total / max(self.convs["cli"].total, 1)


def run_cli(root: Path, cli: Cli, binary: str, args: argparse.Namespace,
            notes: list[str]) -> tuple[str, list[Case]]:
    version = cli_version(binary)
    cases = []
    mock = start_mock(root, cli, 0.0)
    print(f"{cli.name} ({version}): mock at {mock.url}", file=sys.stderr)
    try:
        for turns in args.turn_list:
            case = Case(cli.name, turns)
            cases.append(case)
            for mode in ("olp", "cli", "flat"):
                if mode == "flat" and turns not in args.flat_list:
                    continue
                print(f"  {turns} turns, {MODE_LABEL[mode]}...", file=sys.stderr)
                if mode == "cli":
                    model = sorted(case.convs["olp"].models)[0]  # the model OLP's spawn sent
                    conv = own_session(root, cli, binary, mock, turns, model)
                else:
                    conv = through_olp(root, cli, binary, mock, turns, mode, notes,
                                       args.codex_mode)
                case.convs[mode] = conv
                print(f"    uncached over turns 2..{turns}: {conv.total:,} characters "
                      f"({conv.seconds:.0f} s; sessions {summarise(conv.states)})",
                      file=sys.stderr)
            models = {m for c in case.convs.values() for m in c.models}
            if len(models) != 1:
                notes.append(f"{cli.name}, {turns} turns: the upstream requests named "
                             f"different models ({', '.join(sorted(models))}).")
    finally:
        stop(mock)
    return version, cases


# -- the report --------------------------------------------------------------------------------

def summarise(states: Sequence[str]) -> str:
    """``new, resumed ×3`` from the X-OLP-Session values, runs of equal values merged."""
    if not states:
        return "–"
    if set(states) == {"-"}:
        return "not sent"
    runs: list[list[Any]] = []
    for state in states:
        if runs and runs[-1][0] == state:
            runs[-1][1] += 1
        else:
            runs.append([state, 1])
    return ", ".join(f"`{s}`" + (f" ×{n}" if n > 1 else "") for s, n in runs)


def _k(chars: float) -> str:
    return "–" if chars != chars else f"{chars / 1000:,.1f} k"


def _x(ratio: float) -> str:
    return "–" if ratio != ratio else f"{ratio:.2f}×"


def verdict(case: Case) -> str:
    ratio = case.ratio()
    if ratio != ratio:
        return "–"
    return "met" if ratio <= GOAL else "**not met**"


def total_rows(cases: Sequence[Case]) -> list[list[str]]:
    rows = []
    for c in cases:
        flat = c.convs.get("flat")
        rows.append([c.cli, str(c.turns), _k(c.convs["olp"].total), _k(c.convs["cli"].total),
                     f"**{_x(c.ratio())}**", verdict(c),
                     _k(flat.total) if flat else "–", _x(c.ratio("flat"))])
    return rows


def turn_rows(cases: Sequence[Case]) -> list[list[str]]:
    rows = []
    for c in cases:
        for mode, conv in c.convs.items():
            per = conv.per_turn
            rows.append([
                c.cli if mode == "olp" else "", str(c.turns) if mode == "olp" else "",
                MODE_LABEL[mode].split(" ", 1)[0], f"{conv.shapes[0].chars:,}",
                f"{sum(per) / len(per):,.0f}" if per else "–",
                f"{max(per):,}" if per else "–", f"{per[-1]:,}" if per else "–",
                str(conv.cache_keys) if c.cli == "codex" else "–",
                str(conv.head_changes),
                summarise(conv.states) if mode != "cli" else "(direct)",
                f"{conv.seconds / conv.turns:.1f}"])
    return rows


def render(results: Sequence[tuple[Cli, str, list[Case]]], info: dict[str, str],
           command: str, args: argparse.Namespace, notes: Sequence[str]) -> str:
    cases = [c for _, _, cs in results for c in cs]
    lines = [
        "## Conversation cost: upstream input the prompt cache cannot serve, per agent turn",
        "",
        "Issue #25 ([ADR 0023](adr/0023-conversation-continuity.md)): an agent re-sends the "
        "whole conversation every turn. The real `claude` and `codex` against the real-CLI "
        "tests' loopback mocks, which log every request body; each conversation has turns of "
        f"{TURN_CHARS:,} characters (`Turn k. Please read these notes and reply briefly. "
        "<words>`) and the system text `" + SYSTEM + "`, run three ways: **(a)** through "
        "`olp start` (cache off, `sessions` at its default: on, `warm: 0`), the whole history "
        "sent each turn; **(b)** the CLI's own session, driven directly in the same run with "
        "OLP's own argv (minus `--no-session-persistence` / `--ephemeral`), sandbox "
        "(bubblewrap, job directory at `/olp/job`) and environment, one home and workdir for "
        "the whole conversation, turn 1 fresh, then only the new turn with `--resume <id>` "
        "(claude) / `resume <thread> -` (codex); **(c)** through `olp start` with "
        "`sessions: false` (every turn flattened into one new prompt, as before #25). "
        "Measured with:",
        "",
        "```sh",
        command,
        "```",
        "",
        f"- run: {info['date']}; conversations of {', '.join(map(str, args.turn_list))} "
        f"turns; (c) for {', '.join(map(str, args.flat_list)) or 'none'}",
        f"- machine: {info['platform']}, {info['cpus']} CPUs ({info['cpu']}); {info['load']}",
        f"- bench and proxy: {info['python']}; {info['libs']}; olp {info['olp']}",
        "- CLIs: " + "; ".join(
            f"{cli.name} `{version}` (model `{cli.model}`, upstream "
            + ", ".join(f"`{m}`" for m in sorted({m for c in cases for v in c.convs.values()
                                                  for m in v.models}))
            + f", mock `tests/support/{cli.mock_module}`)" for cli, version, cases in results),
        "",
        f"**Uncached characters over turns 2..N** (goal of issue #25: (a) ÷ (b) ≤ {GOAL:g}× "
        "for every CLI and length):",
        "",
        *table(["CLI", "turns", "(a) through OLP", "(b) CLI's own session", "(a) ÷ (b)",
                f"goal ≤ {GOAL:g}×", "(c) OLP flattened", "(c) ÷ (b)"], "lrrrrlrr",
               total_rows(cases)),
        "",
        "**Per turn** (characters; turn 1 = the whole first request, the same for every "
        "path up to the CLI's own framing; mean, max and last over turns 2..N; keys = "
        "distinct `prompt_cache_key` over the conversation; head changes = turns whose "
        "system + tools (claude) / instructions + tools (codex) differ from the previous "
        "request's; s/turn = wall time per turn, spawn included):",
        "",
        *table(["CLI", "turns", "path", "turn 1", "uncached mean", "max", "last turn",
                "keys", "head changes", "X-OLP-Session", "s/turn"], "lllrrrrrrlr",
               turn_rows(cases)),
    ]
    summary = []
    for c in cases:
        flat = c.convs.get("flat")
        unit = "block" if c.cli == "claude" else "item"
        summary.append(
            f"- {c.cli}, {c.turns} turns: **{_x(c.ratio())}** the CLI's own session through "
            f"OLP ({_k(c.convs['olp'].total)} against {_k(c.convs['cli'].total)}; goal ≤ "
            f"{GOAL:g}×: {verdict(c)}; the upstream request the same as the CLI's own, "
            f"{unit} for {unit}{'' if c.cli == 'claude' else ' (ids aside)'}, on "
            f"{c.same_as_own()} "
            f"of {c.turns} turns)"
            + (f"; flattened, as before, {_x(c.ratio('flat'))} ({_k(flat.total)})"
               if flat else "") + ".")
    lines += ["", "**In short:**", "", *summary, "",
              "What the numbers mean:", "",
              "- **Uncached characters** (the research's definition, "
              "`tests/fixtures/cli-reference/{claude,codex}/sessions/README.md`): claude — "
              "every content block of `messages` serialised with its role, `cache_control` "
              "removed; the characters of the blocks after the previous request's last "
              "`cache_control` breakpoint, when it lies within the two requests' common block "
              "prefix (else all blocks), plus `system` + `tools` when they changed. codex — "
              "every `input` item serialised whole; the characters of the items after the "
              "longest common item prefix with the previous request, plus `instructions` + "
              "`tools` when they changed. A changed `prompt_cache_key` is not added in: it "
              "would cost the whole prefix (see *keys*).",
              "- **(a) against (b)**: OLP resumes with `--resume <id> --fork-session` "
              "(claude) / `resume <thread> -` (codex) in a fresh job directory each turn, "
              "with the kept session copied in and only the new turn sent; the CLI sees the "
              "same `/olp/job` paths as (b). What is left is each turn's new content: the "
              "previous answer, the new turn and the CLI's own per-turn reminders (claude: "
              "a `total_tokens` reminder). *The same as the CLI's own* compares (a)'s and "
              "(b)'s requests turn by turn: codex gives every input item an id of its thread "
              "(a replay keeps them, so they do not change within one conversation), and "
              "(a) and (b) are different threads, so ids are left out of that comparison "
              "(not of the counts).",
              "- **(c)**: the flattened prompt is new every turn, so each turn re-sends the "
              "whole history uncached, growing with the conversation; codex also gets a new "
              "thread, and so a new `prompt_cache_key`, on every spawn.",
              "- Characters, not tokens: the mocks report fixed usage, so the vendors' "
              "token counts are not measured here; the ratio is what matters."]
    return finish(lines, notes)


def parse_lengths(text: str, parser: argparse.ArgumentParser, flag: str) -> list[int]:
    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        parser.error(f"{flag}: comma-separated numbers of turns")
    if any(v < 2 for v in values):
        parser.error(f"{flag}: at least 2 turns")
    return values


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = arg_parser("bench.conversation_cost", __doc__)
    parser.add_argument("--turns", default="4,20", metavar="LIST",
                        help="conversation lengths, comma-separated (default 4,20)")
    parser.add_argument("--flattened-turns", default="4,20", metavar="LIST",
                        help="the lengths also run with sessions: false (default 4,20; "
                             "empty: none)")
    parser.add_argument("--clis", default="claude,codex", metavar="LIST",
                        help="comma-separated, from claude, codex (default both)")
    parser.add_argument("--codex-mode", default="exec", choices=("exec", "app-server"),
                        help="providers.openai.codex_mode through OLP (default exec)")
    add_write(parser, SECTION)
    args = parser.parse_args(argv)
    args.turn_list = parse_lengths(args.turns, parser, "--turns")
    args.flat_list = [t for t in parse_lengths(args.flattened_turns, parser,
                                               "--flattened-turns") if t in args.turn_list]
    if not args.turn_list:
        parser.error("--turns: at least one length")
    args.cli_list = [c.strip() for c in args.clis.split(",") if c.strip()]
    if not args.cli_list or set(args.cli_list) - set(CLI_NAMES):
        parser.error(f"--clis: choose from {', '.join(CLI_NAMES)}")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    command = command_line("bench.conversation_cost", argv)
    notes: list[str] = []
    clis = [CLIS[name] for name in args.cli_list]
    binaries = find_binaries(clis, notes)
    if not binaries:
        raise BenchError("no real CLI to measure: " + " ".join(notes))
    info = machine_info(LIBS)
    results: list[tuple[Cli, str, list[Case]]] = []
    with tempfile.TemporaryDirectory(prefix="olp-bench-") as tmp:
        for cli in clis:
            if cli.name in binaries:
                version, cases = run_cli(Path(tmp), cli, binaries[cli.name], args, notes)
                results.append((cli, version, cases))
    info["load"] = load_before_after(info["load"])
    for _, _, cases in results:
        for case in cases:
            states = case.convs["olp"].states
            if states != ["new"] + ["resumed"] * (case.turns - 1):
                notes.append(f"{case.cli}, {case.turns} turns through OLP: X-OLP-Session "
                             f"{summarise(states)}, not `new` then `resumed` on every turn.")
    publish(render(results, info, command, args, notes), args.write, SECTION)
    failed = [c for _, _, cs in results for c in cs if not c.ratio() <= GOAL]
    for c in failed:
        print(f"bench.conversation_cost: {c.cli}, {c.turns} turns: (a) ÷ (b) = "
              f"{c.ratio():.2f}, above the goal of {GOAL:g}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    run_main(main, "bench.conversation_cost")
