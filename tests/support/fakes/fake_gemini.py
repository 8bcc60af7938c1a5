#!/usr/bin/env python3
"""A fake ``gemini`` executable (gemini-cli 0.61.0) that replays the real CLI's recorded output.

Stdlib only. The contract, in short (the real behaviour is in
tests/fixtures/cli-reference/gemini/README.md):

  argv     ``-p/--prompt TEXT``, ``-o/--output-format text|json|stream-json``, ``-m/--model M``,
           ``--skip-trust``, ``--approval-mode M``, ``-d/--debug``, ``-v/--version`` (prints
           ``0.61.0``), ``--session-file FILE`` (a JSON session with a ``messages`` list; a
           missing or unreadable one exits 42 with the real message); anything else exits 1
           with ``Unknown arguments: ...``. Only ``-o stream-json`` is faked.
  trust    without ``--skip-trust`` (or ``GEMINI_CLI_TRUST_WORKSPACE=true``) exit 55.
  auth     ``security.auth.selectedType`` from ``$HOME/.gemini/settings.json``, ``${VAR}`` and
           ``${VAR:-default}`` resolved from the environment as the real CLI does;
           ``gemini-api-key`` needs ``GEMINI_API_KEY``, ``oauth-personal`` a
           ``$HOME/.gemini/oauth_creds.json``; else exit 41 with the real messages.
  stdin    read to EOF; the prompt is stdin (``-p ""``), or stdin + "\\n\\n" + the ``-p`` text.
           Empty → exit 42. A prompt that begins with ``/`` once trimmed is a slash command:
           the fake writes ``GEMINI.md`` into its working directory (what ``/init`` does) and
           exits 3, so a proxy that lets one through fails its test. ``GEMINI_SYSTEM_MD``
           naming a missing file → exit 1.
  output   the scenario's transcript (``<case>.stdout.jsonl``), with the ``-m`` model in
           ``init`` and the real prompt in the echoed user message; its stderr; its exit code.
  env      FAKE_GEMINI_SCENARIO   success (default) | rate_limit | rate_limit_daily | auth |
                                  server_error | overloaded | empty | conn_drop | slow
           FAKE_GEMINI_DELAY_S    pause before each stdout line, and the interval of ``slow``
                                  (default 0.01)
           FAKE_GEMINI_ECHO=1     the answer is one delta, a JSON digest of what the fake got:
                                  {model, stdin, system_md, settings_tools_core, cwd_files,
                                  argv, env_keys, session_messages}
           FAKE_GEMINI_PIDFILE    append "<pid> <grandchild_pid>" before printing anything
  signals  SIGTERM → exit 0 without a ``result`` line, as the real CLI does with
           ``GEMINI_CLI_NO_RELAUNCH=true`` (the grandchild is left for the caller's group kill).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

TRANSCRIPTS = Path(__file__).resolve().parents[2] / "fixtures" / "cli-reference" / "gemini" / \
    "transcripts"
VERSION = "0.61.0"
CASES = {
    "success": "success.recipe",
    "rate_limit": "rate_limit.max_attempts_1",
    "rate_limit_daily": "rate_limit_daily",
    "auth": "invalid_key_400",
    "server_error": "server_500.max_attempts_1",
    "overloaded": "unavailable_503",
    "empty": "empty_response",
    "conn_drop": "conn_drop",
}
#: tool scenarios: transcripts of the real CLI with OLP's bridge (cli-reference/gemini/tools/)
TOOL_TRANSCRIPTS = TRANSCRIPTS.parent / "tools"
TOOL_CASES = {"tool_call": "single", "tool_call_parallel": "parallel",
              "tool_bridge_failed": "bridge_failed"}
SCENARIOS = {*CASES, *TOOL_CASES, "slow"}
NO_KEY = ("When using Gemini API, you must specify the GEMINI_API_KEY environment variable.\n"
          "Update your environment and try again (no reload needed if using .env)!")
NO_OAUTH = ("Manual authorization is required but the current session is non-interactive. "
            "Please run the Gemini CLI in an interactive terminal to log in, provide a "
            "GEMINI_API_KEY, or ensure Application Default Credentials are configured.")
UNTRUSTED = ("Gemini CLI is not running in a trusted directory. To proceed, either use "
             "`--skip-trust`, set the `GEMINI_CLI_TRUST_WORKSPACE=true` environment variable, "
             "or trust this directory in interactive mode.")
WARNINGS = ("Warning: Basic terminal detected (TERM=dumb). Visual rendering will be limited. For "
            "the best experience, use a terminal emulator with truecolor support.\n")
_VAR = re.compile(r"\$(?:(\w+)|{([^}]+?)(?::-([^}]*))?})")
_FLAGS = {"-p": "prompt", "--prompt": "prompt", "-o": "output", "--output-format": "output",
          "-m": "model", "--model": "model", "--approval-mode": "approval",
          "--session-file": "session_file"}

grandchild: subprocess.Popen[bytes] | None = None


def leave(code: int, stderr: str = "") -> None:
    if stderr:
        sys.stderr.write(stderr if stderr.endswith("\n") else stderr + "\n")
        sys.stderr.flush()
    if grandchild is not None:
        grandchild.kill()
        grandchild.wait()
    sys.exit(code)


def parse_argv(argv: list[str]) -> dict[str, Any]:
    opts: dict[str, Any] = {"skip_trust": False}
    unknown: list[str] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        name, eq, value = arg.partition("=")
        if name in _FLAGS:
            if not eq:
                i += 1
                if i >= len(argv):
                    leave(1, f"Not enough arguments following: {name.lstrip('-')}")
                value = argv[i]
            opts[_FLAGS[name]] = value
        elif arg == "--skip-trust":
            opts["skip_trust"] = True
        elif arg in ("-d", "--debug"):
            pass
        elif arg in ("-v", "--version"):
            print(VERSION)
            leave(0)
        else:
            unknown.append(arg.lstrip("-"))
        i += 1
    if unknown:
        leave(1, f"Unknown arguments: {', '.join(unknown)}\nUsage: gemini [options] [command]")
    return opts


def resolve(value: str) -> str:
    def sub(m: re.Match[str]) -> str:
        name = m.group(1) or m.group(2)
        if name in os.environ:
            return os.environ[name]
        return m.group(3) if m.group(3) is not None else m.group(0)
    return _VAR.sub(sub, value)


def settings() -> dict[str, Any]:
    path = Path(os.environ.get("HOME", "/nonexistent")) / ".gemini" / "settings.json"
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def check_auth(conf: dict[str, Any]) -> None:
    selected = resolve(str(conf.get("security", {}).get("auth", {}).get("selectedType") or ""))
    if not selected:
        selected = "gemini-api-key" if os.environ.get("GEMINI_API_KEY") else ""
    if selected == "gemini-api-key":
        if not os.environ.get("GEMINI_API_KEY"):
            leave(41, NO_KEY)
    elif selected == "oauth-personal":
        creds = Path(os.environ.get("HOME", "/nonexistent")) / ".gemini" / "oauth_creds.json"
        if not creds.is_file():
            leave(41, f"Error authenticating: FatalAuthenticationError: {NO_OAUTH}")
    else:
        leave(41, "Invalid auth method selected.")


def load_session(path: str | None) -> list[Any] | None:
    """The ``messages`` of ``--session-file``; exit 42 as the real CLI does when the file is
    missing or not a session (tests/fixtures/cli-reference/gemini/sessions/README.md)."""
    if path is None:
        return None
    try:
        data = json.loads(Path(path).read_text())
        messages = data["messages"]
        if not isinstance(messages, list):
            raise TypeError(path)
    except (OSError, ValueError, KeyError, TypeError):
        leave(42, "Error importing session from file: File not found or invalid format: "
                  f"{path}")
    return messages


def emit(obj: dict[str, Any], delay: float) -> None:
    time.sleep(delay)
    sys.stdout.write(json.dumps(obj, separators=(",", ":")) + "\n")
    sys.stdout.flush()


def main() -> None:
    global grandchild
    opts = parse_argv(sys.argv[1:])
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))  # no result line; grandchild left
    if not opts["skip_trust"] and os.environ.get("GEMINI_CLI_TRUST_WORKSPACE") != "true":
        leave(55, UNTRUSTED)
    conf = settings()
    check_auth(conf)
    session_messages = load_session(opts.get("session_file"))
    stdin = sys.stdin.read()
    prompt = f"{stdin}\n\n{opts['prompt']}" if stdin and opts.get("prompt") else \
        (stdin or opts.get("prompt") or "")
    if not prompt:
        leave(42, "No input provided via stdin. Input can be provided by piping data into "
                  "gemini or using the --prompt option.")
    if prompt.strip().startswith("/"):
        Path("GEMINI.md").write_text("")
        leave(3, "fake gemini: ran a slash command")
    system_md = os.environ.get("GEMINI_SYSTEM_MD")
    if system_md and not Path(system_md).is_file():
        leave(1, f"Error: missing system prompt file '{system_md}'")
    scenario = os.environ.get("FAKE_GEMINI_SCENARIO", "success")
    if scenario not in SCENARIOS:
        leave(2, f"fake gemini: unknown FAKE_GEMINI_SCENARIO {scenario!r}")
    grandchild = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
    pidfile = os.environ.get("FAKE_GEMINI_PIDFILE")
    if pidfile:
        with open(pidfile, "a") as f:
            f.write(f"{os.getpid()} {grandchild.pid}\n")
    delay = float(os.environ.get("FAKE_GEMINI_DELAY_S", "0.01"))
    model = opts.get("model") or "auto"
    sys.stderr.write(WARNINGS)
    sys.stderr.flush()
    if scenario == "slow":
        emit({"type": "init", "session_id": "fake", "model": model}, 0)
        emit({"type": "message", "role": "user", "content": prompt}, 0)
        for i in range(1_000_000):
            emit({"type": "message", "role": "assistant", "content": f" chunk{i}",
                  "delta": True}, delay)
    folder = TRANSCRIPTS
    if scenario in TOOL_CASES:
        folder = TOOL_TRANSCRIPTS
        bridged = "olp" in (conf.get("mcpServers") or {}) and (
            conf.get("mcp") or {}).get("allowed") == ["olp"]
        case = TOOL_CASES[scenario] if bridged else TOOL_CASES["tool_bridge_failed"]
    else:
        case = CASES[scenario]
    meta = json.loads((folder / f"{case}.meta.json").read_text())
    lines = [json.loads(line) for line in
             (folder / f"{case}.stdout.jsonl").read_text().splitlines() if line.strip()]
    if folder == TOOL_TRANSCRIPTS:  # the real CLI reports MCP trouble before its answer
        sys.stderr.write("".join(line for line in (folder / f"{case}.stderr").read_text()
                                 .splitlines(keepends=True) if not line.startswith("Warning")))
        sys.stderr.flush()
    echo = os.environ.get("FAKE_GEMINI_ECHO") == "1"
    echoed = False
    for obj in lines:
        if obj.get("type") == "init":
            obj["model"] = model
        elif obj.get("type") == "message" and obj.get("role") == "user":
            obj["content"] = prompt
        elif obj.get("type") == "message" and obj.get("role") == "assistant" and echo:
            if echoed:
                continue
            echoed = True
            obj["content"] = json.dumps({
                "model": model, "stdin": stdin,
                "system_md": Path(system_md).read_text() if system_md else None,
                "settings_tools_core": conf.get("tools", {}).get("core"),
                "cwd_files": sorted(os.listdir(".")), "argv": sys.argv[1:],
                "env_keys": sorted(os.environ), "session_messages": session_messages})
        emit(obj, delay)
    if folder == TOOL_TRANSCRIPTS:
        if meta["exit_code"] == -signal.SIGKILL:  # the real CLI waited on tools/call
            time.sleep(3600)
        leave(meta["exit_code"])
    leave(meta["exit_code"], (TRANSCRIPTS / f"{case}.stderr").read_text()
          if meta["exit_code"] else "")


if __name__ == "__main__":
    main()
