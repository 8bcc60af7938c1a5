#!/usr/bin/env python3
"""A fake ``codex`` executable that replays the real CLI's recorded ``exec --json`` output.

Stdlib only, so it runs under any python3. It mirrors fake_claude.py (tests/support/README.md);
its contract, in short:

  argv     ``exec --json --skip-git-repo-check --ephemeral --sandbox read-only -m M
           [--image=F ...] [--output-schema F] [-c k=v ...] -`` (codex-cli 0.171.0's flags;
           an unknown one exits 2 with clap's message). ``-``, or no prompt argument, reads
           the whole prompt from stdin (to EOF, before anything is printed); empty stdin exits
           1 with "No prompt provided via stdin.". Without ``--json`` it exits 2.
  env      FAKE_CODEX_SCENARIO   success (default) | rate_limit | quota | usage_limit | auth |
                                 no_key | server_error | overloaded | slow | hang |
                                 crash_mid_answer | garbage
           FAKE_CODEX_DELAY_S    pause before each line after the first (default 0.01);
                                 also the message interval of ``slow``
           FAKE_CODEX_ECHO=1     the answer text is a JSON digest of what the fake received
           FAKE_CODEX_PIDFILE    append "<pid> <grandchild_pid>" before printing anything
           FAKE_CODEX_HOLD_FILE  after the first agent_message, wait for this file (up to
                                 FAKE_CODEX_HOLD_TIMEOUT_S, default 30 s, else exit 3)
           FAKE_CODEX_ARGV_FILE  write argv (a JSON list, argv[0] included) to this file
           FAKE_CODEX_TRANSCRIPTS_DIR  override the transcript folder
           FAKE_CODEX_MCP_PIDFILE  append each launched MCP server's pid
           FAKE_CODEX_MCP_LOG    append every MCP message ({"server", "dir": in|out, "msg"})
  tools    ``-c mcp_servers.<name>.command=... .args=[...] .env={...} .required=true
           .startup_timeout_sec=N`` (TOML values): after stdin, each server is launched (its
           own env: codex's default variables plus ``env``) and handshaken as codex 0.171.0 does
           (``initialize`` protocolVersion 2025-06-18, ``notifications/initialized``,
           ``tools/list``; 10 s unless ``startup_timeout_sec``). A ``required`` server that
           exits or does not answer → exit 1, no stdout, the recorded stderr ("required MCP
           servers failed to initialize: ..."); one not required is dropped silently. With a
           server's tools listed, the transcripts of tests/fixtures/cli-reference/codex/tools/
           are replayed (server and tool renamed to the first listed one): ``success`` → the
           ``single`` call, or ``result`` (prose) when the prompt holds a rendered tool result
           (a line starting ``Tool result``); ``tools_preamble``, ``tools_parallel``,
           ``tools_malformed`` (prose: codex never prints a call whose arguments are not JSON).
           After the last ``mcp_tool_call`` item.completed the fake never exits on its own
           (the real CLI goes on to a second upstream request): the caller must kill it.
           ``tools/call`` is never sent (exec refuses the approval). ``tools_ignore``: the plain
           ``success`` prose with the server connected; ``tools_bridge_crash``: the server is
           killed before the handshake. Without a connected server every tool scenario is
           ``success``.
  signals  SIGTERM/SIGINT kill the fake at once (like the real CLI: it dies from the signal,
           printing nothing more); the grandchild is left for the caller's group kill.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import select
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

#: The recorded CLI transcripts this fake replays (tests/fixtures/cli-reference/<cli>).
FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "cli-reference"
TOOLS_DIR = FIXTURES / "codex" / "tools"

# like the real CLI: killed by the signal itself (exit status -15 / shell 143), nothing printed
signal.signal(signal.SIGTERM, signal.SIG_DFL)
signal.signal(signal.SIGINT, signal.SIG_DFL)

TRANSCRIPTS = {
    "success": "success.json",
    "rate_limit": "rate_limit_retry_after.json",
    "quota": "quota.json",
    "auth": "auth.json",
    "no_key": "no_api_key.json",
    "server_error": "server_error_500.json",
    "overloaded": "overloaded_503.json",
}
# built from success.json; usage_limit carries the real CLI's message for a ChatGPT plan's
# usage limit (captured against tests/support/mock_openai_responses, scenario usage_limit)
SYNTHETIC = {"usage_limit", "slow", "hang", "crash_mid_answer", "garbage"}
USAGE_LIMIT_MESSAGE = (
    "You\u2019ve hit your usage limit. Upgrade to Pro (https://chatgpt.com/explore/pro), visit "
    "https://chatgpt.com/settings/usage to purchase more credits or try again later."
)
HOLD_TIMEOUT_S = 30.0
RECORDED_MODEL = "gpt-mock"

# tool calling through an MCP server (tests/fixtures/cli-reference/codex/tools/, see its README)
TOOL_SCENARIOS = {"tools_preamble", "tools_parallel", "tools_malformed", "tools_ignore",
                  "tools_bridge_crash"}
TOOL_CASES = {"success": "single", "tools_preamble": "preamble", "tools_parallel": "parallel",
              "tools_malformed": "malformed"}
TOOLS_RECORDED = {"model": "gpt-5.5", "server": "olp", "tool": "get_weather"}
TOOL_RESULT = re.compile(r"(?m)^Tool result\b")  # a rendered tool result's label line
MCP_STARTUP_TIMEOUT_S = 10.0  # codex's default startup_timeout_sec
MCP_CLIENT = {"protocolVersion": "2025-06-18",
              "capabilities": {"experimental": {"codex/auth-change": {}},
                               "elicitation": {"form": {}, "url": {}}},
              "clientInfo": {"name": "codex-mcp-client", "title": "Codex", "version": "0.171.0"}}
# what codex passes a stdio MCP server of its own environment (the server's `env` is added)
MCP_DEFAULT_ENV = ("HOME", "LOGNAME", "PATH", "SHELL", "USER", "__CF_USER_TEXT_ENCODING",
                   "LANG", "LC_ALL", "TERM", "TMPDIR", "TZ")

# flags of `codex exec` 0.171.0 (from `codex exec --help`)
VALUE_FLAGS = {
    "-c", "--config", "--enable", "--disable", "--remote", "--remote-auth-token-env",
    "-m", "--model", "--local-provider", "-p", "--profile", "-s", "--sandbox", "-C", "--cd",
    "--add-dir", "--thread-source", "--cyber-access-program", "--output-schema", "--color",
    "-o", "--output-last-message",
}  # fmt: skip
MULTI_VALUE_FLAGS = {"-i", "--image"}  # `-i a b c` takes every following non-flag argument
BOOL_FLAGS = {
    "--json", "--skip-git-repo-check", "--ephemeral", "--oss", "--strict-config",
    "--approve-for-me", "--dangerously-bypass-approvals-and-sandbox",
    "--dangerously-bypass-hook-trust", "--worktree", "--trust", "--ignore-user-config",
    "--ignore-rules",
}  # fmt: skip
USAGE = (
    "Usage: codex exec [OPTIONS] [PROMPT]\n       codex exec [OPTIONS] <COMMAND> [ARGS]\n\n"
    "For more information, try '--help'.\n"
)


def _fail(message: str, code: int = 1) -> None:
    sys.stderr.write(message + "\n")
    sys.stderr.flush()
    sys.exit(code)


def _parse_argv(argv: list[str]) -> tuple[dict[str, list[str]], set[str], list[str]]:
    """(values of value flags, boolean flags, positionals) — clap's behaviour for codex exec."""
    values: dict[str, list[str]] = {}
    flags: set[str] = set()
    positional: list[str] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        name, eq, inline = arg.partition("=")
        if arg.startswith("--") and eq and (name in VALUE_FLAGS or name in MULTI_VALUE_FLAGS):
            values.setdefault(_canonical(name), []).append(inline)
        elif arg in VALUE_FLAGS:
            if i + 1 >= len(argv):
                _fail(f"error: a value is required for '{arg} <VALUE>' but none was supplied"
                      f"\n\n{USAGE}", 2)
            values.setdefault(_canonical(arg), []).append(argv[i + 1])
            i += 1
        elif arg in MULTI_VALUE_FLAGS:
            taken = []
            while i + 1 < len(argv) and (argv[i + 1] == "-" or not argv[i + 1].startswith("-")):
                taken.append(argv[i + 1])
                i += 1
            if not taken:
                _fail(f"error: a value is required for '{arg} <FILE>...' but none was supplied"
                      f"\n\n{USAGE}", 2)
            values.setdefault("--image", []).extend(taken)
        elif arg in BOOL_FLAGS:
            flags.add(arg)
        elif arg.startswith("-") and arg != "-":
            _fail(f"error: unexpected argument '{arg}' found\n\n  tip: to pass '{arg}' as a "
                  f"value, use '-- {arg}'\n\n{USAGE}", 2)
        else:
            positional.append(arg)
        i += 1
    return values, flags, positional


def _canonical(flag: str) -> str:
    return {"-c": "--config", "-m": "--model", "-p": "--profile", "-s": "--sandbox",
            "-C": "--cd", "-o": "--output-last-message", "-i": "--image"}.get(flag, flag)


def _toml_value(text: str) -> Any:
    """A ``-c key=value`` value as codex reads it: TOML (JSON strings, lists and booleans are
    TOML too), else the literal string."""
    try:
        return json.loads(text)
    except ValueError:
        pass
    try:
        import tomllib

        return tomllib.loads(f"v = {text}")["v"]
    except (ImportError, ValueError):  # an older python, or not TOML: the raw string
        return text


def _mcp_config(overrides: list[str]) -> dict[str, dict[str, Any]]:
    """The ``mcp_servers.<name>.<key>[.<var>]=<value>`` overrides, per server name."""
    servers: dict[str, dict[str, Any]] = {}
    for override in overrides:
        key, eq, value = override.partition("=")
        parts = key.strip().split(".")
        if not eq or parts[0] != "mcp_servers" or len(parts) not in (3, 4):
            continue
        server = servers.setdefault(parts[1], {})
        if len(parts) == 4:
            server.setdefault(parts[2], {})[parts[3]] = _toml_value(value.strip())
        else:
            server[parts[2]] = _toml_value(value.strip())
    return servers


class McpServer:
    """One stdio MCP server of the config, launched and handshaken like codex 0.171.0."""

    def __init__(self, name: str, config: dict[str, Any]) -> None:
        self.name = name
        self.config = config
        self.required = config.get("required") is True
        self.timeout = float(config.get("startup_timeout_sec", MCP_STARTUP_TIMEOUT_S))
        self.proc: subprocess.Popen[bytes] | None = None
        self.status = "failed"
        self.tools: list[dict[str, Any]] = []
        self.next_id = 0

    def start(self, crash: bool) -> None:
        """Launch; then initialize, notifications/initialized, tools/list. ``crash``: the
        server is killed right after its launch (status ``failed``)."""
        command, args = self.config.get("command"), self.config.get("args", [])
        if not isinstance(command, str) or not command or not isinstance(args, list):
            return
        env = {k: os.environ[k] for k in MCP_DEFAULT_ENV if k in os.environ}
        extra = self.config.get("env")
        if isinstance(extra, dict):
            env.update({str(k): str(v) for k, v in extra.items()})
        try:
            self.proc = subprocess.Popen([command, *map(str, args)], stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                         env=env)
        except OSError:
            return
        pidfile = os.environ.get("FAKE_CODEX_MCP_PIDFILE")
        if pidfile:
            with open(pidfile, "a", encoding="utf-8") as f:
                f.write(f"{self.proc.pid}\n")
        if crash:
            self.stop()
            return
        deadline = time.monotonic() + self.timeout
        init = self.request("initialize", MCP_CLIENT, deadline)
        if init is None or "result" not in init:
            return
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        listed = self.request("tools/list", {"_meta": {"progressToken": 0}}, deadline)
        result = listed.get("result") if listed is not None else None
        if not isinstance(result, dict) or not isinstance(result.get("tools"), list):
            return
        self.tools = [t for t in result["tools"]
                      if isinstance(t, dict) and isinstance(t.get("name"), str)]
        self.status = "connected"

    def send(self, message: dict[str, Any]) -> bool:
        assert self.proc is not None and self.proc.stdin is not None
        self.log("in", message)
        try:
            self.proc.stdin.write(json.dumps(message).encode("utf-8") + b"\n")
            self.proc.stdin.flush()
        except OSError:
            return False
        return True

    def request(self, method: str, params: dict[str, Any],
                deadline: float) -> dict[str, Any] | None:
        """Send one request; its answer, or None when the server is gone or too slow."""
        assert self.proc is not None and self.proc.stdout is not None
        rid = self.next_id
        self.next_id += 1
        if not self.send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}):
            return None
        while (left := deadline - time.monotonic()) > 0:
            ready, _, _ = select.select([self.proc.stdout], [], [], min(left, 0.1))
            if not ready:
                continue
            line = self.proc.stdout.readline()
            if not line:
                return None
            try:
                answer = json.loads(line)
            except ValueError:
                continue
            if isinstance(answer, dict):
                self.log("out", answer)
                if answer.get("id") == rid:
                    return answer
        return None

    def log(self, direction: str, message: dict[str, Any]) -> None:
        path = os.environ.get("FAKE_CODEX_MCP_LOG")
        if path:
            with open(path, "a", encoding="utf-8") as f:
                f.write(json.dumps({"server": self.name, "dir": direction, "msg": message})
                        + "\n")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
        if self.proc is not None:
            self.proc.wait()


class Fake:
    def __init__(self, values: dict[str, list[str]], positional: list[str]) -> None:
        self.values = values
        self.positional = positional
        self.model = (values.get("--model") or [RECORDED_MODEL])[-1]
        self.delay = float(os.environ.get("FAKE_CODEX_DELAY_S", "0.01"))
        self.hold_file = os.environ.get("FAKE_CODEX_HOLD_FILE") or None
        self.held = False
        self.lines_out = 0
        self.thread_id = str(uuid.uuid4())
        self.grandchild: subprocess.Popen[bytes] | None = None
        self.mcp = [McpServer(name, config) for name, config
                    in _mcp_config(values.get("--config", [])).items()]

    # -- transcripts ------------------------------------------------------------------------
    def transcript_dir(self) -> Path:
        override = os.environ.get("FAKE_CODEX_TRANSCRIPTS_DIR")
        if override:
            return Path(override)
        base = FIXTURES / "codex"
        return base / "transcripts" if (base / "transcripts").is_dir() else base

    def load(self, case: str) -> tuple[list[dict[str, Any]], str, int]:
        folder = self.transcript_dir()
        try:
            stdout = (folder / f"{case}.stdout").read_text(encoding="utf-8")
            stderr = (folder / f"{case}.stderr").read_text(encoding="utf-8")
            meta = json.loads((folder / f"{case}.meta.json").read_text(encoding="utf-8"))
        except OSError as exc:
            _fail(f"fake_codex: cannot read transcript {case!r} in {folder}: {exc}", 2)
            raise  # unreachable
        lines = [self.adapt(json.loads(line)) for line in stdout.splitlines() if line.strip()]
        # the captures gave the prompt as an argument: main() prints the notice that fits
        stderr = "".join(ln for ln in stderr.splitlines(keepends=True)
                         if ln.strip() != "Reading additional input from stdin...")
        return lines, stderr, int(meta["exit_code"])

    def adapt(self, obj: dict[str, Any], recorded: str = RECORDED_MODEL) -> dict[str, Any]:
        """A fresh thread id; the -m model in the unknown-model warning."""
        if obj.get("type") == "thread.started":
            obj = dict(obj, thread_id=self.thread_id)
        item = obj.get("item")
        if isinstance(item, dict) and item.get("type") == "error":
            message = str(item.get("message", "")).replace(f"`{recorded}`", f"`{self.model}`")
            obj = dict(obj, item=dict(item, message=message))
        return obj

    # -- output -----------------------------------------------------------------------------
    def emit(self, obj: dict[str, Any] | bytes) -> None:
        if isinstance(obj, dict):
            data = json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
        else:
            data = obj
        if self.lines_out and self.delay > 0:
            time.sleep(self.delay)
        try:
            sys.stdout.buffer.write(data + b"\n")
            sys.stdout.buffer.flush()
        except BrokenPipeError:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            self.finish(1)
        self.lines_out += 1
        if isinstance(obj, dict) and _is_answer(obj):
            self.hold()

    def hold(self) -> None:
        if self.held or not self.hold_file:
            return
        self.held = True
        timeout = float(os.environ.get("FAKE_CODEX_HOLD_TIMEOUT_S", HOLD_TIMEOUT_S))
        deadline = time.monotonic() + timeout
        while not os.path.exists(self.hold_file):
            if time.monotonic() > deadline:
                sys.stderr.write(f"fake_codex: hold file {self.hold_file} never appeared\n")
                self.finish(3)
            time.sleep(0.01)

    def finish(self, code: int) -> None:
        """A normal exit: a real CLI leaves no process behind, so reap the grandchild and
        the MCP servers."""
        if self.grandchild is not None:
            self.grandchild.kill()
            self.grandchild.wait()
        for server in self.mcp:
            server.stop()
        sys.stderr.flush()
        sys.exit(code)

    # -- scenarios --------------------------------------------------------------------------
    def run(self, scenario: str, prompt: str) -> None:
        for server in self.mcp:
            server.start(crash=scenario == "tools_bridge_crash")
        failed = [s for s in self.mcp if s.required and s.status != "connected"]
        if failed:
            self.required_failed(failed[0].name)
        bridge = next((s for s in self.mcp if s.status == "connected" and s.tools), None)
        if bridge is not None and scenario in TOOL_CASES:
            answered = TOOL_RESULT.search(prompt) and scenario != "tools_malformed"
            self.run_tool_case("result" if answered else TOOL_CASES[scenario], bridge, prompt)
        if scenario in TOOL_SCENARIOS:
            scenario = "success"
        lines, stderr, exit_code = self.load(TRANSCRIPTS.get(scenario, "success.json"))
        if os.environ.get("FAKE_CODEX_ECHO") == "1":
            lines = [_with_text(o, self.echo_text(prompt)) if _is_answer(o) else o
                     for o in lines]
        if scenario in TRANSCRIPTS:
            for obj in lines:
                self.emit(obj)
            if stderr:
                sys.stderr.write(stderr)
            self.finish(exit_code)

        head = [o for o in lines if o.get("type") in ("thread.started", "turn.started")
                or (o.get("item") or {}).get("type") == "error"]
        answer = next(o for o in lines if _is_answer(o))
        if scenario == "hang":
            for obj in head:
                self.emit(obj)
            _sleep_forever()
        elif scenario == "usage_limit":
            for obj in head:
                self.emit(obj)
            self.emit({"type": "error", "message": USAGE_LIMIT_MESSAGE})
            self.emit({"type": "turn.failed", "error": {"message": USAGE_LIMIT_MESSAGE}})
            self.finish(1)
        elif scenario == "slow":
            for obj in head:
                self.emit(obj)
            i = 0
            while True:
                self.emit(_with_text(answer, f" chunk{i}", item_id=f"item_{i + 1}"))
                i += 1
        elif scenario == "crash_mid_answer":
            for obj in head:
                self.emit(obj)
            self.emit(_with_text(answer, "Hello from"))
            sys.stderr.write("fake_codex: simulated crash in the middle of the turn\n")
            self.finish(1)
        elif scenario == "garbage":
            for raw in GARBAGE:
                self.emit(raw)
            for obj in lines:
                self.emit(obj)
            self.finish(exit_code)

    def required_failed(self, name: str) -> None:
        """A required MCP server did not start: codex prints nothing on stdout and exits 1."""
        stderr = (TOOLS_DIR / "bridge_failed_required.stderr").read_text(encoding="utf-8")
        sys.stderr.write(stderr.replace("failed to initialize: olp:",
                                        f"failed to initialize: {name}:"))
        self.finish(1)

    def run_tool_case(self, case: str, server: McpServer, prompt: str) -> None:
        """Replay ``tools/<case>`` with ``server``'s name and first tool. After the last call
        codex would report the refused call upstream and ask again: the fake waits instead,
        so only the caller's kill ends it."""
        stdout = (TOOLS_DIR / f"{case}.stdout.jsonl").read_text(encoding="utf-8")
        lines = [self.adapt_tool(json.loads(ln), server)
                 for ln in stdout.splitlines() if ln.strip()]
        if os.environ.get("FAKE_CODEX_ECHO") == "1":
            lines = [_with_text(o, self.echo_text(prompt)) if _is_answer(o) else o
                     for o in lines]
        sys.stderr.write((TOOLS_DIR / f"{case}.stderr").read_text(encoding="utf-8"))
        sys.stderr.flush()
        calls = [i for i, o in enumerate(lines) if _is_mcp_call(o)]
        for i, obj in enumerate(lines):
            self.emit(obj)
            if calls and i == calls[-1]:
                _sleep_forever()
        self.finish(0)

    def adapt_tool(self, obj: dict[str, Any], server: McpServer) -> dict[str, Any]:
        obj = self.adapt(obj, TOOLS_RECORDED["model"])
        item = obj.get("item")
        if isinstance(item, dict) and item.get("type") == "mcp_tool_call":
            obj = dict(obj, item=dict(item, server=server.name, tool=server.tools[0]["name"]))
        return obj

    def echo_text(self, prompt: str) -> str:
        images = []
        for path in self.values.get("--image", []):
            try:
                data = Path(path).read_bytes()
                images.append({"path": path, "bytes": len(data),
                               "sha256": hashlib.sha256(data).hexdigest()})
            except OSError as exc:
                images.append({"path": path, "error": str(exc)})
        schemas = self.values.get("--output-schema") or []
        schema = Path(schemas[-1]).read_text(encoding="utf-8") if schemas else None
        digest = {
            "model": self.model,
            "stdin_head": prompt[:40],
            "stdin_tail": prompt[-200:],
            "stdin_chars": len(prompt),
            "stdin_sha256": hashlib.sha256(prompt.encode("utf-8")).hexdigest(),
            "argv_prompt": " ".join(p for p in self.positional if p != "-") or None,
            "images": images,
            "output_schema": schema,
            "config": self.values.get("--config", []),
            "cwd": os.getcwd(),
            "home": os.environ.get("HOME", ""),
            "codex_home": os.environ.get("CODEX_HOME"),
            "env_keys": sorted(os.environ),
            "mcp_servers": {s.name: {"status": s.status, "required": s.required,
                                     "tools": s.tools} for s in self.mcp},
        }
        return json.dumps(digest, ensure_ascii=False, sort_keys=True)


GARBAGE: list[bytes] = [
    b"this is not json at all",
    b'{"type":"item.completed","item":',  # cut in the middle
    b"[1, 2, 3]",  # JSON, but not an object
    b"\xff\xfe not utf-8 \xc3",  # undecodable bytes
    b'{"type":"future.event","detail":"an event type this proxy does not know"}',
    b"",  # an empty line
]


def _is_answer(obj: dict[str, Any]) -> bool:
    item = obj.get("item")
    return (obj.get("type") == "item.completed" and isinstance(item, dict)
            and item.get("type") == "agent_message")


def _is_mcp_call(obj: dict[str, Any]) -> bool:
    """A call's ``item.completed`` (codex prints it right after its ``item.started``)."""
    item = obj.get("item")
    return (obj.get("type") == "item.completed" and isinstance(item, dict)
            and item.get("type") == "mcp_tool_call")


def _with_text(obj: dict[str, Any], text: str, item_id: str | None = None) -> dict[str, Any]:
    item = dict(obj["item"], text=text)
    if item_id is not None:
        item["id"] = item_id
    return dict(obj, item=item)


def _sleep_forever() -> None:
    while True:
        time.sleep(3600)


def main() -> None:
    argv_file = os.environ.get("FAKE_CODEX_ARGV_FILE")
    if argv_file:
        with open(argv_file, "w", encoding="utf-8") as f:
            json.dump(sys.argv, f)

    args = sys.argv[1:]
    if not args or args[0] != "exec":
        _fail("fake_codex: only `codex exec` is faked", 2)
    values, flags, positional = _parse_argv(args[1:])
    if "--json" not in flags:
        _fail("fake_codex: only `codex exec --json` is faked", 2)
    scenario = os.environ.get("FAKE_CODEX_SCENARIO", "success")
    if scenario not in TRANSCRIPTS and scenario not in SYNTHETIC | TOOL_SCENARIOS:
        _fail(f"fake_codex: unknown FAKE_CODEX_SCENARIO {scenario!r}", 2)

    fake = Fake(values, positional)
    # A grandchild in our own process group: only a group kill (or our own normal exit)
    # removes it, so a proxy that kills just the leader leaves a stray process behind (the
    # real codex is a Node wrapper whose native child is orphaned by a SIGKILL of the wrapper).
    fake.grandchild = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(3600)"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    pidfile = os.environ.get("FAKE_CODEX_PIDFILE")
    if pidfile:
        fd = os.open(pidfile, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(fd, f"{os.getpid()} {fake.grandchild.pid}\n".encode())
        finally:
            os.close(fd)

    try:
        prompt_args = [p for p in positional if p != "-"]
        if prompt_args:
            # a prompt argument and piped stdin: the real CLI appends stdin as a block
            sys.stderr.write("Reading additional input from stdin...\n")
            extra = sys.stdin.buffer.read().decode("utf-8", "replace")
            prompt = " ".join(prompt_args)
            if extra.strip():
                prompt = f"{prompt}\n\n<stdin>\n{extra}\n</stdin>"
        else:
            if not positional:
                sys.stderr.write("Reading prompt from stdin...\n")
            prompt = sys.stdin.buffer.read().decode("utf-8", "replace")  # to EOF, first
            if not prompt.strip():
                sys.stderr.write("No prompt provided via stdin.\n")
                fake.finish(1)
        fake.run(scenario, prompt)
    finally:
        if fake.grandchild.poll() is None:  # only on an unexpected error: finish() reaps it
            fake.grandchild.kill()
            fake.grandchild.wait()
        for server in fake.mcp:
            server.stop()


if __name__ == "__main__":
    main()
