#!/usr/bin/env python3
"""A fake ``claude`` executable that replays the real CLI's recorded stream-json output.

Stdlib only, so it runs under any python3. See tests/support/README.md for the contract; in short:

  argv     the real CLI's (``-p --output-format stream-json --verbose
           --include-partial-messages --tools "" --strict-mcp-config --setting-sources ""
           --disable-slash-commands --safe-mode --no-session-persistence --model M
           --system-prompt-file F``); ``--output-format stream-json`` needs ``--verbose``
           (else exit 1 with the real message). The prompt is read from stdin to EOF before
           anything is printed, as the real CLI does; with ``--input-format stream-json`` it
           is the text blocks of the ``user`` lines (image blocks are counted, by media
           type, in the echo digest). The system prompt file is read at start.
  env      FAKE_CLAUDE_SCENARIO   success (default) | rate_limit | auth | server_error |
                                  no_login | slow | hang | crash_mid_stream | garbage
           FAKE_CLAUDE_DELAY_S    pause before each line after the first (default 0.01);
                                  also the chunk interval of ``slow``
           FAKE_CLAUDE_ECHO=1     the answer text is a JSON digest of what the fake received
                                  (``login``: the token it would use, see _login_seen)
           FAKE_CLAUDE_PIDFILE    append "<pid> <grandchild_pid>" before printing anything
           FAKE_CLAUDE_HOLD_FILE  after the first text delta, wait for this file (up to
                                  FAKE_CLAUDE_HOLD_TIMEOUT_S, default 30 s, else exit 3)
           FAKE_CLAUDE_ARGV_FILE  write argv (a JSON list, argv[0] included) to this file
           FAKE_CLAUDE_TRANSCRIPTS_DIR  override the transcript folder
           FAKE_CLAUDE_UPSTREAM=1 also POST the request the real CLI would send to
                                  ``$ANTHROPIC_BASE_URL`` (the lockdown self-check's mock);
                                  FAKE_CLAUDE_EXTRA_TOOLS=A,B adds tools OLP did not ask for
  tools    with ``--mcp-config F``: the ``olp`` stdio server of F is launched as the real CLI
           does (``server/discover``, ``initialize``, ``notifications/initialized``,
           ``tools/list``) and reported in ``system/init`` (``connected``, or ``failed`` when
           it exits or does not answer within 10 s); ``tools`` lists the ``--allowedTools``.
           With the server connected and its tools listed, ``success`` replays a recorded
           tool call (``tools.call.stream-json``, renamed to the first listed tool) unless
           the prompt holds a rendered result (``returned]``), then the recorded answer
           (``tools.result.stream-json``); after a call the fake sends ``tools/call`` and
           waits for an answer, as claude does. Scenarios: tools_parallel (two calls),
           tools_malformed (no text, arguments that are not JSON), tools_ignore (prose, no call),
           tools_bridge_crash (the server is killed before the handshake: ``failed``).
  signals  SIGTERM -> exit 143 at once (the grandchild is left for the caller's group kill);
           SIGINT -> exit 130.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

#: The recorded CLI transcripts this fake replays (tests/fixtures/cli-reference/<cli>).
FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "cli-reference"


def _die_on_signal(code: int) -> Any:
    def handler(signum: int, frame: Any) -> None:
        os._exit(code)

    return handler


signal.signal(signal.SIGTERM, _die_on_signal(143))
signal.signal(signal.SIGINT, _die_on_signal(130))

TRANSCRIPTS = {
    "success": "success.partial",
    "rate_limit": "rate_limit_retry_after.stream-json",
    "auth": "auth.stream-json",
    "server_error": "server_error_500.stream-json",
    "no_login": "no_api_key.stream-json",
}
SYNTHETIC = {"slow", "hang", "crash_mid_stream", "garbage"}  # built from success.partial
TOOL_SCENARIOS = {"tools_parallel", "tools_malformed", "tools_ignore", "tools_bridge_crash"}
MCP_TIMEOUT_S = 10.0
HOLD_TIMEOUT_S = 30.0

# flags of claude 2.1.332 that take a value (from `claude --help`; `--thinking`,
# `--thinking-display` and `--max-thinking-tokens` are hidden there but accepted, measured in
# cli-reference/claude/reasoning), and those that do not
VALUE_FLAGS = {
    "--output-format", "--input-format", "--model", "--system-prompt", "--system-prompt-file",
    "--append-system-prompt", "--append-system-prompt-file", "--tools", "--allowedTools",
    "--allowed-tools", "--disallowedTools", "--disallowed-tools", "--permission-mode",
    "--max-budget-usd", "--fallback-model", "--json-schema", "--session-id", "--resume", "-r",
    "--mcp-config", "--effort", "--max-turns", "--settings", "--add-dir", "--agents",
    "--setting-sources", "--betas", "--debug-file", "--thinking", "--thinking-display",
    "--max-thinking-tokens",
}  # fmt: skip
BOOL_FLAGS = {
    "-p", "--print", "--verbose", "--include-partial-messages", "--no-session-persistence",
    "--bare", "--dangerously-skip-permissions", "--continue", "-c", "--strict-mcp-config",
    "--replay-user-messages", "--fork-session", "-d", "--debug", "--disable-slash-commands",
    "--safe-mode", "--restricted",
}  # fmt: skip


def _stream_json_turns(raw: str) -> tuple[str, list[str]]:
    """The text and the image media types of the ``user`` lines of stream-json input."""
    texts: list[str] = []
    images: list[str] = []
    for line in raw.splitlines():
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except ValueError:
            _fail(f"Error parsing streaming input line: {line[:80]}")
        if not isinstance(obj, dict) or obj.get("type") != "user":
            continue
        content = obj.get("message", {}).get("content", [])
        if isinstance(content, str):
            texts.append(content)
            continue
        for block in content:
            if block.get("type") == "text":
                texts.append(block.get("text", ""))
            elif block.get("type") == "image":
                images.append(block.get("source", {}).get("media_type", "?"))
    return "".join(texts), images


def _fail(message: str, code: int = 1) -> None:
    sys.stderr.write(message + "\n")
    sys.stderr.flush()
    sys.exit(code)


def _parse_argv(argv: list[str]) -> tuple[dict[str, str], set[str], list[str]]:
    values: dict[str, str] = {}
    flags: set[str] = set()
    positional: list[str] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        name, eq, inline = arg.partition("=")
        if arg.startswith("-") and eq and name in VALUE_FLAGS:
            values[name] = inline
        elif arg in VALUE_FLAGS:
            if i + 1 >= len(argv):
                _fail(f"error: option '{arg} <value>' argument missing")
            values[arg] = argv[i + 1]
            i += 1
        elif arg in BOOL_FLAGS:
            flags.add(arg)
        elif arg.startswith("-") and arg != "-":
            _fail(f"error: unknown option '{arg}'")
        else:
            positional.append(arg)
        i += 1
    return values, flags, positional


class Fake:
    def __init__(self, values: dict[str, str], flags: set[str], positional: list[str]) -> None:
        self.values = values
        self.partial = "--include-partial-messages" in flags
        self.positional = positional
        self.images: list[str] = []
        self.delay = float(os.environ.get("FAKE_CLAUDE_DELAY_S", "0.01"))
        self.hold_file = os.environ.get("FAKE_CLAUDE_HOLD_FILE") or None
        self.held = False
        self.lines_out = 0
        self.session_id = str(uuid.uuid4())
        self.cwd = os.getcwd()
        self.home = os.environ.get("HOME", "")
        self.grandchild: subprocess.Popen[bytes] | None = None
        self.mcp: subprocess.Popen[bytes] | None = None
        self.mcp_status: str | None = None  # None: no --mcp-config
        self.mcp_tools: list[str] = []
        self.mcp_next_id = 0

    # -- transcripts ------------------------------------------------------------------------
    def transcript_dir(self) -> Path:
        override = os.environ.get("FAKE_CLAUDE_TRANSCRIPTS_DIR")
        if override:
            return Path(override)
        base = FIXTURES / "claude"
        return base / "transcripts" if (base / "transcripts").is_dir() else base

    def load(self, case: str) -> tuple[list[dict[str, Any]], str, int]:
        folder = self.transcript_dir()
        try:
            stdout = (folder / f"{case}.stdout").read_text(encoding="utf-8")
            stderr = (folder / f"{case}.stderr").read_text(encoding="utf-8")
            meta = json.loads((folder / f"{case}.meta.json").read_text(encoding="utf-8"))
        except OSError as exc:
            _fail(f"fake_claude: cannot read transcript {case!r} in {folder}: {exc}", 2)
            raise  # unreachable
        lines = [json.loads(line) for line in stdout.splitlines() if line.strip()]
        return lines, stderr, int(meta["exit_code"])

    def adapt(self, obj: dict[str, Any], recorded_model: str) -> dict[str, Any]:
        """Fresh session id and uuids, real cwd/home, the requested model."""
        model = self.values.get("--model", recorded_model)
        encoded = self.cwd.replace("/", "-")

        def walk(value: Any) -> Any:
            if isinstance(value, dict):
                return {walk(k): walk(v) for k, v in value.items()}
            if isinstance(value, list):
                return [walk(v) for v in value]
            if isinstance(value, str):
                if value == recorded_model:
                    return model
                return (
                    value.replace("<ENCODED_WORKDIR>", encoded)
                    .replace("<WORKDIR>", self.cwd)
                    .replace("<HOME>", self.home)
                )
            return value

        out = walk(obj)
        if "session_id" in out:
            out["session_id"] = self.session_id
        if "uuid" in out:
            out["uuid"] = str(uuid.uuid4())
        if out.get("type") == "system" and out.get("subtype") == "init":
            tools = self.values.get("--tools")
            if tools is not None:
                out["tools"] = [t for t in tools.replace(",", " ").split() if t]
            if self.mcp_status is not None:
                out["mcp_servers"] = [{"name": "olp", "status": self.mcp_status,
                                       "source": "dynamic"}]
                allowed = self.values.get("--allowedTools", "").replace(",", " ").split()
                out["tools"] = [t for t in allowed if self.mcp_status == "connected"
                                and t.removeprefix("mcp__olp__") in self.mcp_tools]
            else:
                out["mcp_servers"] = []
        return out

    # -- the MCP server of --mcp-config ----------------------------------------------------
    def start_mcp(self, crash: bool) -> None:
        """Launch and handshake the ``olp`` server like claude 2.1.332 (see the module doc)."""
        config_file = self.values.get("--mcp-config")
        if config_file is None:
            return
        self.mcp_status = "failed"
        try:
            config = json.loads(Path(config_file).read_text(encoding="utf-8"))
            server = config["mcpServers"]["olp"]
            self.mcp = subprocess.Popen([server["command"], *server.get("args", [])],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.DEVNULL)
        except (OSError, ValueError, KeyError, TypeError):
            return
        if crash:
            self.mcp.kill()
            self.mcp.wait()
            return
        probe = self.request("server/discover", {}, rid="server-discover-probe-1")
        init = self.request("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                           "clientInfo": {"name": "claude-code",
                                                          "version": "2.1.332"}})
        if probe is None or init is None or "result" not in init:
            return
        self.notify("notifications/initialized")
        listed = self.request("tools/list", {})
        if listed is None or "result" not in listed:
            return
        self.mcp_tools = [t["name"] for t in listed["result"].get("tools", [])]
        self.mcp_status = "connected"

    def notify(self, method: str) -> None:
        assert self.mcp is not None and self.mcp.stdin is not None
        try:
            self.mcp.stdin.write(json.dumps({"jsonrpc": "2.0", "method": method}).encode() + b"\n")
            self.mcp.stdin.flush()
        except OSError:
            pass

    def request(self, method: str, params: dict[str, Any], *, rid: Any = None,
                wait: bool = True) -> dict[str, Any] | None:
        """Send one request; its answer (None when the server is gone or silent)."""
        assert self.mcp is not None and self.mcp.stdin is not None and self.mcp.stdout is not None
        if rid is None:
            rid = self.mcp_next_id
            self.mcp_next_id += 1
        message = {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}
        try:
            self.mcp.stdin.write(json.dumps(message).encode() + b"\n")
            self.mcp.stdin.flush()
        except OSError:
            return None
        if not wait:
            return None
        import select

        deadline = time.monotonic() + MCP_TIMEOUT_S
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self.mcp.stdout], [], [], 0.05)
            if not ready:
                continue
            line = self.mcp.stdout.readline()
            if not line:
                return None
            try:
                answer = json.loads(line)
            except ValueError:
                continue
            if answer.get("id") == rid:
                return answer
        return None

    # -- output -----------------------------------------------------------------------------
    def emit(self, obj: dict[str, Any] | bytes) -> None:
        if isinstance(obj, dict):
            if not self.partial and (
                obj.get("type") == "stream_event"
                or (obj.get("type") == "system" and obj.get("subtype") == "status")
            ):
                return  # the real CLI prints these only with --include-partial-messages
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
        if isinstance(obj, dict) and _is_content(obj, self.partial):
            self.hold()

    def hold(self) -> None:
        if self.held or not self.hold_file:
            return
        self.held = True
        timeout = float(os.environ.get("FAKE_CLAUDE_HOLD_TIMEOUT_S", HOLD_TIMEOUT_S))
        deadline = time.monotonic() + timeout
        while not os.path.exists(self.hold_file):
            if time.monotonic() > deadline:
                sys.stderr.write(f"fake_claude: hold file {self.hold_file} never appeared\n")
                self.finish(3)
            time.sleep(0.01)

    def finish(self, code: int) -> None:
        """A normal exit: a real CLI leaves no process behind, so reap the grandchild."""
        for child in (self.grandchild, self.mcp):
            if child is not None:
                child.kill()
                child.wait()
        sys.stderr.flush()
        sys.exit(code)

    # -- scenarios --------------------------------------------------------------------------
    def run(self, scenario: str, prompt: str, system: str | None) -> None:
        self.start_mcp(crash=scenario == "tools_bridge_crash")
        if self.mcp_status == "connected" and self.mcp_tools and scenario in (
                "success", "tools_parallel", "tools_malformed"):
            self.run_tool_call(scenario, prompt)
            return
        if scenario in TOOL_SCENARIOS:
            scenario = "success"
        case = TRANSCRIPTS.get(scenario, "success.partial")
        lines, stderr, exit_code = self.load(case)
        recorded_model = next(
            (o.get("model") for o in lines if o.get("subtype") == "init"), "claude-opus-5-5"
        )
        lines = [self.adapt(o, recorded_model) for o in lines]
        if os.environ.get("FAKE_CLAUDE_ECHO") == "1":
            lines = _retext(lines, self.echo_text(prompt, system))

        if scenario in TRANSCRIPTS:
            for obj in lines:
                self.emit(obj)
            if stderr:
                sys.stderr.write(stderr)
            self.finish(exit_code)

        head = _head(lines)  # init, status, message_start, content_block_start
        deltas = [o for o in lines if _is_text_delta(o)]
        if scenario == "hang":
            self.emit(head[0])
            _sleep_forever()
        elif scenario == "slow":
            for obj in head:
                self.emit(obj)
            i = 0
            while True:
                self.emit(_with_text(deltas[0], f" chunk{i}"))
                i += 1
        elif scenario == "crash_mid_stream":
            for obj in [*head, *deltas[:2]]:
                self.emit(obj)
            sys.stderr.write("fake_claude: simulated crash in the middle of the stream\n")
            self.finish(1)
        elif scenario == "garbage":
            for raw in GARBAGE:
                self.emit(raw)
            for obj in lines:
                self.emit(obj)
            self.finish(exit_code)

    def run_tool_call(self, scenario: str, prompt: str) -> None:
        """Replay a recorded tool call (or, with a rendered result in the prompt, the recorded
        answer quoting it); after a call, send ``tools/call`` and wait, as claude does."""
        answered = "returned]" in prompt
        case = ("tools.result.stream-json" if answered else
                "tools.parallel.stream-json" if scenario == "tools_parallel" else
                "tools.call.stream-json")
        lines, stderr, exit_code = self.load(case)
        recorded_model = next(
            (o.get("model") for o in lines if o.get("subtype") == "init"), "claude-sonnet-4-6"
        )
        tool = "mcp__olp__" + self.mcp_tools[0]
        text = json.dumps(lines).replace("mcp__olp__get_weather", tool)
        lines = [self.adapt(o, recorded_model) for o in json.loads(text)]
        if scenario == "tools_malformed":
            lines = _malformed(lines)
        calls = []
        for obj in lines:
            self.emit(obj)
            if obj.get("type") == "assistant":
                calls += [b for b in obj.get("message", {}).get("content", [])
                          if b.get("type") == "tool_use"]
        if answered or not calls:
            if stderr:
                sys.stderr.write(stderr)
            self.finish(exit_code if exit_code >= 0 else 0)
        for call in calls:  # claude dispatches each call to the server and waits
            self.request("tools/call", {"name": call["name"].removeprefix("mcp__olp__"),
                                        "arguments": call.get("input", {})}, wait=False)
        _sleep_forever()

    def echo_text(self, prompt: str, system: str | None) -> str:
        digest = {
            "model": self.values.get("--model"),
            "stdin_head": prompt[:40],
            "stdin_tail": prompt[-200:],
            "stdin_chars": len(prompt),
            "stdin_sha256": hashlib.sha256(prompt.encode("utf-8")).hexdigest(),
            "system_prompt": system,
            "images": self.images,
            "pid": os.getpid(),
            "argv_prompt": " ".join(self.positional) or None,
            "cwd": self.cwd,
            "home": self.home,
            "env_keys": sorted(os.environ),
            "login": _login_seen(),
        }
        return json.dumps(digest, ensure_ascii=False, sort_keys=True)


def _login_seen() -> str | None:
    """The login this run would use, as claude looks for it: ``CLAUDE_CODE_OAUTH_TOKEN``,
    else the access token of ``$CLAUDE_CONFIG_DIR`` or ``~/.claude``'s ``.credentials.json``
    (test tokens only: which account's login reached the spawn)."""
    token = os.environ.get("CLAUDE_CODE_OAUTH_TOKEN")
    if token:
        return token
    base = os.environ.get("CLAUDE_CONFIG_DIR") or os.path.join(os.environ.get("HOME", ""),
                                                               ".claude")
    try:
        with open(os.path.join(base, ".credentials.json"), encoding="utf-8") as f:
            return json.load(f)["claudeAiOauth"]["accessToken"]
    except (OSError, ValueError, KeyError, TypeError):
        return None


GARBAGE: list[bytes] = [
    b"this is not json at all",
    b'{"type":"stream_event","event":',  # cut in the middle
    b"[1, 2, 3]",  # JSON, but not an object
    b"\xff\xfe not utf-8 \xc3",  # undecodable bytes
    b'{"type":"future_event_type","detail":"an event type this proxy does not know"}',
    b"",  # an empty line
]


def _is_text_delta(obj: dict[str, Any]) -> bool:
    event = obj.get("event") if obj.get("type") == "stream_event" else None
    return (
        isinstance(event, dict)
        and event.get("type") == "content_block_delta"
        and event.get("delta", {}).get("type") == "text_delta"
    )


def _is_content(obj: dict[str, Any], partial: bool) -> bool:
    """The first answer text: a text delta, or (without --include-partial-messages) an
    `assistant` line that is not a synthetic API-error message."""
    if _is_text_delta(obj):
        return True
    if not partial and obj.get("type") == "assistant" and not obj.get("is_api_error_message"):
        content = obj.get("message", {}).get("content") or []
        return any(block.get("type") == "text" and block.get("text") for block in content)
    return False


def _head(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    head = []
    for obj in lines:
        if _is_text_delta(obj):
            break
        head.append(obj)
    return head


def _with_text(delta_line: dict[str, Any], text: str) -> dict[str, Any]:
    out = json.loads(json.dumps(delta_line))
    out["event"]["delta"]["text"] = text
    out["uuid"] = str(uuid.uuid4())
    return out


def _retext(lines: list[dict[str, Any]], text: str) -> list[dict[str, Any]]:
    """Replace the answer text: the deltas (text cut in 4), the assistant line, the result."""
    deltas = [o for o in lines if _is_text_delta(o)]
    if not deltas:
        return lines
    step = max(1, -(-len(text) // 4))
    pieces = [text[i : i + step] for i in range(0, len(text), step)] or [""]
    out: list[dict[str, Any]] = []
    for obj in lines:
        if _is_text_delta(obj):
            if obj is deltas[0]:
                out.extend(_with_text(obj, piece) for piece in pieces)
            continue
        if obj.get("type") == "assistant":
            obj = json.loads(json.dumps(obj))
            obj["message"]["content"] = [{"type": "text", "text": text}]
        elif obj.get("type") == "result" and not obj.get("is_error"):
            obj = dict(obj, result=text)
        out.append(obj)
    return out


def _malformed(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The tool call without its text preamble, its argument fragments cut short: not JSON."""
    out = []
    for obj in lines:
        if _is_text_delta(obj):
            continue
        if obj.get("type") == "assistant" and any(
                b.get("type") == "text" for b in obj.get("message", {}).get("content", [])):
            continue
        event = obj.get("event") if obj.get("type") == "stream_event" else None
        if isinstance(event, dict) and event.get("delta", {}).get("type") == "input_json_delta":
            obj = json.loads(json.dumps(obj))
            obj["event"]["delta"]["partial_json"] = obj["event"]["delta"]["partial_json"][:-2]
        out.append(obj)
    return out


def _sleep_forever() -> None:
    while True:
        time.sleep(3600)


def _send_upstream(values: dict[str, str], prompt: str, system: str | None) -> None:
    """With ``FAKE_CLAUDE_UPSTREAM=1`` and ``ANTHROPIC_BASE_URL``: POST the Messages request
    the real CLI would send (its ``system``, the prompt, one tool per name in ``--tools``
    plus ``FAKE_CLAUDE_EXTRA_TOOLS``, comma-separated: a claude version that offers a tool
    OLP does not know), through the proxy variables as the real CLI does; the answer is read
    and ignored (the transcript is replayed as usual)."""
    base = os.environ.get("ANTHROPIC_BASE_URL")
    if os.environ.get("FAKE_CLAUDE_UPSTREAM") != "1" or not base:
        return
    import urllib.request

    names = [t for t in values.get("--tools", "").split(",") if t.strip()]
    names += [t for t in os.environ.get("FAKE_CLAUDE_EXTRA_TOOLS", "").split(",") if t.strip()]
    body = {"model": values.get("--model", "claude"), "max_tokens": 64, "stream": False,
            "system": [{"type": "text", "text": system or ""}],
            "messages": [{"role": "user", "content": [{"type": "text", "text": prompt}]}],
            "tools": [{"name": n, "description": n, "input_schema": {"type": "object"}}
                      for n in names]}
    request = urllib.request.Request(
        base.rstrip("/") + "/v1/messages", data=json.dumps(body).encode(), method="POST",
        headers={"content-type": "application/json",
                 "x-api-key": os.environ.get("ANTHROPIC_API_KEY", "")})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            response.read()
    except OSError as exc:
        sys.stderr.write(f"fake_claude: upstream: {exc}\n")


def main() -> None:
    argv_file = os.environ.get("FAKE_CLAUDE_ARGV_FILE")
    if argv_file:
        with open(argv_file, "w", encoding="utf-8") as f:
            json.dump(sys.argv, f)

    values, flags, positional = _parse_argv(sys.argv[1:])
    output_format = values.get("--output-format", "text")
    if output_format == "stream-json" and "--verbose" not in flags:
        _fail("Error: When using --print, --output-format=stream-json requires --verbose")
    if output_format != "stream-json":
        _fail(f"fake_claude: only --output-format stream-json is faked (got {output_format!r})")
    if not flags & {"-p", "--print"}:
        _fail("fake_claude: only print mode (-p) is faked")
    scenario = os.environ.get("FAKE_CLAUDE_SCENARIO", "success")
    if scenario not in TRANSCRIPTS and scenario not in SYNTHETIC | TOOL_SCENARIOS:
        _fail(f"fake_claude: unknown FAKE_CLAUDE_SCENARIO {scenario!r}", 2)

    fake = Fake(values, flags, positional)
    # A grandchild in our own process group: only a group kill (or our own normal exit)
    # removes it, so a proxy that kills just the leader leaves a stray process behind.
    fake.grandchild = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(3600)"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    pidfile = os.environ.get("FAKE_CLAUDE_PIDFILE")
    if pidfile:
        fd = os.open(pidfile, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(fd, f"{os.getpid()} {fake.grandchild.pid}\n".encode())
        finally:
            os.close(fd)

    system: str | None = None
    system_file = values.get("--system-prompt-file")
    if system_file is not None:  # read at start, as the real CLI does
        try:
            system = Path(system_file).read_text(encoding="utf-8")
        except OSError:
            sys.stderr.write(f"Error: System prompt file not found: {system_file}\n")
            fake.finish(1)
    elif "--system-prompt" in values:
        system = values["--system-prompt"]
    # like the real CLI: nothing is printed before stdin reaches EOF
    raw = sys.stdin.buffer.read().decode("utf-8", "replace")
    if values.get("--input-format", "text") == "stream-json":
        prompt, fake.images = _stream_json_turns(raw)
    else:
        prompt = raw
    if not prompt and not positional and not fake.images:
        sys.stderr.write(
            "Error: Input must be provided either through stdin or as a prompt argument "
            "when using --print\n"
        )
        fake.finish(1)
    if not positional and not fake.images and not prompt.strip():
        sys.stderr.write(
            "Error: Input contained only whitespace. Provide a prompt with text through stdin "
            "or as a prompt argument when using --print\n"
        )
        fake.finish(1)
    _send_upstream(values, prompt, system)
    try:
        fake.run(scenario, prompt, system)
    finally:
        if fake.grandchild.poll() is None:  # only on an unexpected error: finish() reaps it
            fake.grandchild.kill()
            fake.grandchild.wait()


if __name__ == "__main__":
    main()
