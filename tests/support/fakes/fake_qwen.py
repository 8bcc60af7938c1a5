#!/usr/bin/env python3
"""A fake ``qwen`` executable (qwen-code 0.24.4) that replays the real CLI's recorded output.

Stdlib only. The contract, in short (the real behaviour is in
tests/fixtures/cli-reference/qwen/README.md):

  argv     the real CLI's options as OLP uses them (``-o stream-json``,
           ``--include-partial-messages``, ``--approval-mode M``, ``--max-tool-calls N``,
           ``--exclude-tools A,B``, ``--chat-recording B``, ``--allowed-mcp-server-names N``,
           ``-m/--model M``, ``-p``/``--prompt`` ``T``, ``--debug``); an unknown option exits 1
           (yargs' ``Unknown argument``). Only ``-o stream-json`` is faked (else exit 1).
           Without ``--include-partial-messages`` the ``stream_event`` lines are left out, as
           qwen does.
  stdin    read to EOF before anything is printed; empty (and no ``-p``) → the real stderr
           ``No input provided via stdin. ...``, exit 1, nothing on stdout. A prompt whose
           first character is ``/`` is refused as a disabled command (the real recipe's
           ``result`` error, exit 1).
  key      ``OPENAI_API_KEY`` in the environment; none → exit 1 and the fake's own stderr line
           ``fake_qwen: no OPENAI_API_KEY`` (qwen's own wording was not captured).
  tools    ``system/init`` lists ``"tools": []`` only when ``$HOME/.qwen/settings.json`` denies
           every tool (``permissions.deny``) and turns the memory agent off, as in the real
           recipe; otherwise the stock run's tool names. With OLP's bridge configured
           (``mcpServers.olp``) it lists ``mcp__olp__<name>`` for each tool of the bridge's
           tools file (its last argument); the bridge itself is not started.
  output   the lines of the scenario's transcript (``<case>.stdout.jsonl``), the model name
           replaced by ``-m``'s, the exit code and stderr the transcript's.
  env      FAKE_QWEN_SCENARIO   success (default) | auth | rate_limit | tool_call | hang |
                                crash_mid_answer | bridge_call (``tools/single``: the model
                                calls ``mcp__olp__get_weather``, then exit 55)
           FAKE_QWEN_DELAY_S    pause before each stdout line (default 0.01; the real CLI takes
                                ~2-4 s to start)
           FAKE_QWEN_ECHO=1     the answer text (one delta) is a JSON digest of what the fake
                                received
           FAKE_QWEN_PIDFILE    append "<pid> <grandchild_pid>" before printing anything
           FAKE_QWEN_ARGV_FILE  write argv (a JSON list, argv[0] included) to this file
           FAKE_QWEN_HOLD_FILE  after the first text delta, wait for this file (up to 30 s,
                                else exit 3)
           FAKE_QWEN_TRANSCRIPTS_DIR  override the transcript folder
  signals  SIGTERM -> like qwen's group SIGTERM: ``Operation cancelled.`` on stderr, no
           ``result``, killed by the signal (the grandchild is left for the caller's group
           kill).
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "cli-reference"
TRANSCRIPTS = {
    "success": "success",
    "auth": "auth_401",
    "rate_limit": "rate_limit_429.max_retries_0",
    "tool_call": "tool_call_bait",
    "hang": "success",
    "crash_mid_answer": "success",
    "bridge_call": "../tools/single",
}
VALUE_FLAGS = {"-o", "--output-format", "--approval-mode", "--max-tool-calls", "--exclude-tools",
               "--chat-recording", "--allowed-mcp-server-names", "-m", "--model", "-p",
               "--prompt"}
BOOL_FLAGS = {"--include-partial-messages", "--debug", "-d"}
STOCK_TOOLS = ["agent", "get_goal", "glob", "grep_search", "list_agents", "read_file", "skill",
               "tool_call", "tool_search", "update_goal"]
NO_INPUT = ("No input provided via stdin. Input can be provided by piping data into gemini or "
            "using the --prompt option.\n")


def parse_argv(argv: list[str]) -> dict[str, str]:
    values: dict[str, str] = {}
    i = 0
    while i < len(argv):
        arg = argv[i]
        name, eq, inline = arg.partition("=")
        if eq and name in VALUE_FLAGS:
            values[name] = inline
        elif arg in VALUE_FLAGS and i + 1 < len(argv):
            values[arg] = argv[i + 1]
            i += 1
        elif arg in BOOL_FLAGS:
            values[arg] = "true"
        else:
            sys.stderr.write(f"Unknown argument: {arg.lstrip('-')}\n")
            sys.exit(1)
        i += 1
    for short, long in (("-o", "--output-format"), ("-m", "--model"), ("-p", "--prompt")):
        if long in values:
            values[short] = values.pop(long)
    return values


class Fake:
    def __init__(self, values: dict[str, str]) -> None:
        self.values = values
        self.delay = float(os.environ.get("FAKE_QWEN_DELAY_S", "0.01"))
        self.partial = "--include-partial-messages" in values
        self.home = Path(os.environ.get("HOME", "/nonexistent"))
        self.grandchild: subprocess.Popen[bytes] | None = None
        self.held = False

    def settings(self) -> dict[str, Any]:
        try:
            data = json.loads((self.home / ".qwen" / "settings.json").read_text("utf-8"))
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def tools_offered(self) -> list[str]:
        s = self.settings()
        deny = set(s.get("permissions", {}).get("deny", []))
        memory_off = s.get("memory", {}).get("enableManagedAutoMemory") is False
        if not (deny >= set(STOCK_TOOLS) and memory_off):
            return list(STOCK_TOOLS)
        bridge = s.get("mcpServers", {}).get("olp")
        if not bridge:
            return []
        try:
            tools = json.loads(Path(bridge["args"][-1]).read_text("utf-8"))["tools"]
        except (OSError, ValueError, KeyError, IndexError):
            return []
        return [f"mcp__olp__{t['name']}" for t in tools]

    def load(self, case: str) -> tuple[list[dict[str, Any]], str, int]:
        folder = Path(os.environ.get("FAKE_QWEN_TRANSCRIPTS_DIR")
                      or FIXTURES / "qwen" / "transcripts")
        try:
            stdout = (folder / f"{case}.stdout.jsonl").read_text("utf-8")
            stderr = (folder / f"{case}.stderr").read_text("utf-8")
            meta = json.loads((folder / f"{case}.meta.json").read_text("utf-8"))
        except OSError as exc:
            sys.stderr.write(f"fake_qwen: cannot read transcript {case!r} in {folder}: {exc}\n")
            sys.exit(2)
        return [json.loads(ln) for ln in stdout.splitlines() if ln.strip()], stderr, \
            int(meta["exit_code"])

    def emit(self, obj: dict[str, Any]) -> None:
        if obj.get("type") == "stream_event" and not self.partial:
            return
        if self.delay > 0:
            time.sleep(self.delay)
        sys.stdout.write(json.dumps(obj, separators=(",", ":"), ensure_ascii=False) + "\n")
        sys.stdout.flush()
        if self._is_text_delta(obj) and not self.held:
            self.held = True
            self.hold()

    @staticmethod
    def _is_text_delta(obj: dict[str, Any]) -> bool:
        event = obj.get("event") or {}
        return event.get("type") == "content_block_delta" and \
            (event.get("delta") or {}).get("type") == "text_delta"

    def hold(self) -> None:
        hold = os.environ.get("FAKE_QWEN_HOLD_FILE")
        if not hold:
            return
        deadline = time.monotonic() + 30
        while not os.path.exists(hold):
            if time.monotonic() > deadline:
                self.finish(3)
            time.sleep(0.02)

    def finish(self, code: int) -> None:
        if self.grandchild is not None:
            self.grandchild.kill()
            self.grandchild.wait()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)

    def on_sigterm(self, signum: int, frame: object) -> None:
        sys.stderr.write("Operation cancelled.\n")
        sys.stderr.flush()
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)  # the grandchild is left for the group kill

    def echo(self, prompt: str) -> str:
        system_md = os.environ.get("QWEN_SYSTEM_MD")
        system = None
        if system_md:
            try:
                system = Path(system_md).read_text("utf-8")
            except OSError:
                system = "<unreadable>"
        s = self.settings()
        return json.dumps({
            "argv_model": self.values.get("-m"), "prompt": prompt,
            "prompt_sha256": hashlib.sha256(prompt.encode()).hexdigest(),
            "system_md": system_md, "system": system, "cwd": os.getcwd(),
            "cwd_files": sorted(os.listdir(".")), "home": str(self.home),
            "env_keys": sorted(os.environ), "tools_offered": self.tools_offered(),
            "deny": len(s.get("permissions", {}).get("deny", [])),
            "max_retries": s.get("model", {}).get("generationConfig", {}).get("maxRetries"),
            "unattended_retry": os.environ.get("QWEN_CODE_UNATTENDED_RETRY"),
        }, sort_keys=True)

    def run(self, scenario: str, prompt: str) -> None:
        lines, stderr, code = self.load(TRANSCRIPTS[scenario])
        model = self.values.get("-m") or os.environ.get("OPENAI_MODEL") or "coder-model"
        echo = self.echo(prompt) if os.environ.get("FAKE_QWEN_ECHO") == "1" else None
        echoed = False
        for obj in lines:
            if obj.get("type") == "system" and obj.get("subtype") == "init":
                obj = {**obj, "model": model, "tools": self.tools_offered()}
            text = json.dumps(obj).replace('"model": "M"', f'"model": {json.dumps(model)}')
            obj = json.loads(text)
            if echo is not None and self._is_text_delta(obj):
                if echoed:
                    continue
                obj["event"]["delta"]["text"] = echo
                echoed = True
            if echo is not None and obj.get("type") == "result" and "result" in obj:
                obj["result"] = echo
            if scenario == "hang" and self._is_text_delta(obj):
                while True:
                    time.sleep(1)
            self.emit(obj)
            if scenario == "crash_mid_answer" and self._is_text_delta(obj):
                sys.stderr.write("fake_qwen: crashed mid-answer\n")
                self.finish(1)
        sys.stderr.write(stderr)
        self.finish(code)


def main() -> None:
    argv_file = os.environ.get("FAKE_QWEN_ARGV_FILE")
    if argv_file:
        with open(argv_file, "w", encoding="utf-8") as f:
            json.dump(sys.argv, f)
    values = parse_argv(sys.argv[1:])
    if values.get("-o") != "stream-json":
        sys.stderr.write("fake_qwen: only -o stream-json is faked\n")
        sys.exit(1)
    scenario = os.environ.get("FAKE_QWEN_SCENARIO", "success")
    if scenario not in TRANSCRIPTS:
        sys.stderr.write(f"fake_qwen: unknown scenario {scenario!r}\n")
        sys.exit(2)
    fake = Fake(values)
    signal.signal(signal.SIGTERM, fake.on_sigterm)
    # A grandchild in our process group (qwen runs two Node processes): only a group kill (or
    # our own normal exit) removes it.
    fake.grandchild = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(3600)"],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    pidfile = os.environ.get("FAKE_QWEN_PIDFILE")
    if pidfile:
        fd = os.open(pidfile, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            os.write(fd, f"{os.getpid()} {fake.grandchild.pid}\n".encode())
        finally:
            os.close(fd)
    stdin = sys.stdin.buffer.read().decode("utf-8", "replace")
    prompt = stdin + ("\n\n" + values["-p"] if "-p" in values else "")
    if not stdin and "-p" not in values:
        sys.stderr.write(NO_INPUT)
        fake.finish(1)
    if not os.environ.get("OPENAI_API_KEY"):
        sys.stderr.write("fake_qwen: no OPENAI_API_KEY\n")
        fake.finish(1)
    if prompt.startswith("/") and not prompt.startswith(("//", "/*")):
        command = prompt[1:].split(None, 1)[0] if prompt[1:].split() else ""
        sys.stdout.write(json.dumps({
            "type": "result", "subtype": "error_during_execution", "is_error": True,
            "error": {"message": f'The command "/{command}" is disabled by the current '
                                 'configuration.'}}) + "\n")
        fake.finish(1)
    try:
        fake.run(scenario, prompt)
    finally:
        if fake.grandchild.poll() is None:
            fake.grandchild.kill()
            fake.grandchild.wait()


if __name__ == "__main__":
    main()
