#!/usr/bin/env python3
"""A fake ``vibe`` executable (Mistral Vibe 3.0.2) that replays the real CLI's recorded output.

Stdlib only (Python >= 3.11, for ``tomllib`` and ``datetime.UTC``).
The contract, in short (the real behaviour is in tests/fixtures/cli-reference/vibe/README.md):

  argv     the real CLI's options (``-p [PROMPT] --output streaming --output-dir DIR``,
           ``--max-turns N``, ``--trust``, ...); an unknown option exits 1 with clap's message;
           ``-v``/``--version`` prints ``vibe 3.0.2``. Only ``-p`` with ``--output streaming`` is
           faked. The prompt is read from stdin (to EOF) when ``-p`` has no value; an empty one
           exits 1 with ``Error: No prompt provided for programmatic mode``.
  key      like vibe: ``MISTRAL_API_KEY`` in the environment, else in ``$VIBE_HOME/.env``
           (default ``$HOME/.vibe/.env``); none → the real no-key run (exit 1).
  model    like vibe: ``VIBE_ACTIVE_MODEL`` is an alias looked up in ``VIBE_MODELS`` (JSON) and
           ``$VIBE_HOME/config.toml`` ``[[models]]``; an unknown alias silently becomes the
           default ``mistral-vibe-cli-latest``.
  output   one JSONL line per entry: the echoed user prompt, then the assistant message
           (``outcome: committed``); ``export.json`` in ``--output-dir`` on every exit, from the
           transcript of the scenario (fresh session id and timestamps). Exit code: the
           transcript's.
  env      FAKE_VIBE_SCENARIO   success (default) | rate_limit | auth | server_error | hang |
                                crash_mid_answer
           FAKE_VIBE_DELAY_S    pause before each stdout line (default 0.01; the real CLI takes
                                ~5 s to start)
           FAKE_VIBE_ECHO=1     the answer text is a JSON digest of what the fake received
           FAKE_VIBE_PIDFILE    append "<pid> <grandchild_pid>" before printing anything
           FAKE_VIBE_ARGV_FILE  write argv (a JSON list, argv[0] included) to this file
           FAKE_VIBE_TRANSCRIPTS_DIR  override the transcript folder
  signals  SIGTERM -> like vibe: ``Stopped: terminated`` on stderr, export.json with outcome
           ``terminated``, exit 3 (the grandchild is left for the caller's group kill).
"""

from __future__ import annotations

import datetime
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

VERSION = "3.0.2"
DEFAULT_MODEL = "mistral-vibe-cli-latest"
DEFAULT_ALIAS = "mistral-medium-3.5"
TRANSCRIPTS = {
    "success": "success_with_export.streaming",
    "rate_limit": "rate_limit.fast.streaming",
    "auth": "auth.streaming",
    "server_error": "server_error_500.streaming",
}
SCENARIOS = {"success", "rate_limit", "auth", "server_error", "hang", "crash_mid_answer"}

VALUE_FLAGS = {
    "--output", "--output-dir", "--max-turns", "--max-price", "--max-tokens", "--time-limit",
    "--prompt-file", "--agent", "--enabled-tools", "--disabled-tools", "--workdir", "--add-dir",
}  # fmt: skip
OPTIONAL_VALUE_FLAGS = {"-p", "--prompt", "--resume", "--worktree"}
BOOL_FLAGS = {
    "-c", "--continue", "--setup", "--auto-approve", "--yolo", "--smart-approve", "--trust",
    "--check-upgrade", "-v", "--version", "-h", "--help",
}  # fmt: skip


def _clap_error(arg: str) -> None:
    sys.stderr.write(
        f"error: unexpected argument '{arg}' found\n\n"
        f"  tip: to pass '{arg}' as a value, use '-- {arg}'\n\n"
        "Usage: vibe --prompt [<PROMPT>] [INITIAL_PROMPT]\n\n"
        "For more information, try '--help'.\n"
    )
    sys.exit(1)


def _parse_argv(argv: list[str]) -> tuple[dict[str, str | None], list[str]]:
    values: dict[str, str | None] = {}
    positional: list[str] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        name, eq, inline = arg.partition("=")
        if arg.startswith("--") and eq and name in VALUE_FLAGS | OPTIONAL_VALUE_FLAGS:
            values[name] = inline
        elif arg in VALUE_FLAGS:
            if i + 1 >= len(argv):
                sys.stderr.write(f"error: a value is required for '{arg} <{arg[2:].upper()}>'"
                                 " but none was supplied\n")
                sys.exit(1)
            values[arg] = argv[i + 1]
            i += 1
        elif arg in OPTIONAL_VALUE_FLAGS:
            if i + 1 < len(argv) and not argv[i + 1].startswith("-"):
                values[arg] = argv[i + 1]
                i += 1
            else:
                values[arg] = None
        elif arg in BOOL_FLAGS:
            values[arg] = "true"
        elif arg.startswith("-") and arg != "-":
            _clap_error(arg)
        else:
            positional.append(arg)
        i += 1
    if "--prompt" in values:
        values["-p"] = values.pop("--prompt")
    return values, positional


class Fake:
    def __init__(self, values: dict[str, str | None], positional: list[str]) -> None:
        self.values = values
        self.positional = positional
        self.delay = float(os.environ.get("FAKE_VIBE_DELAY_S", "0.01"))
        self.session_id = str(uuid.uuid4())
        self.turn = uuid.uuid4().hex
        self.started = datetime.datetime.now(datetime.UTC)
        self.cwd = os.getcwd()
        self.home = os.environ.get("HOME", "")
        self.vibe_home = Path(os.environ.get("VIBE_HOME") or os.path.join(self.home, ".vibe"))
        output_dir = values.get("--output-dir")
        self.output_dir = Path(output_dir) if output_dir else None
        self.grandchild: subprocess.Popen[bytes] | None = None
        self.exported = False

    # -- transcripts ------------------------------------------------------------------------
    def transcript_dir(self) -> Path:
        override = os.environ.get("FAKE_VIBE_TRANSCRIPTS_DIR")
        if override:
            return Path(override)
        return FIXTURES / "vibe" / "transcripts"

    def load(self, case: str) -> tuple[list[dict[str, Any]], str, int, dict[str, Any] | None]:
        folder = self.transcript_dir()
        try:
            stdout = (folder / f"{case}.stdout").read_text(encoding="utf-8")
            stderr = (folder / f"{case}.stderr").read_text(encoding="utf-8")
            meta = json.loads((folder / f"{case}.meta.json").read_text(encoding="utf-8"))
            export_file = folder / f"{case}.export.json"
            export = (json.loads(export_file.read_text(encoding="utf-8"))
                      if export_file.exists() else None)
        except OSError as exc:
            sys.stderr.write(f"fake_vibe: cannot read transcript {case!r} in {folder}: {exc}\n")
            sys.exit(2)
        lines = [json.loads(line) for line in stdout.splitlines() if line.strip()]
        return lines, stderr, int(meta["exit_code"]), export

    # -- what vibe would do with its environment ----------------------------------------------
    def api_key(self) -> str | None:
        key = os.environ.get("MISTRAL_API_KEY")
        if key:
            return key
        try:
            text = (self.vibe_home / ".env").read_text(encoding="utf-8")
        except OSError:
            return None
        for line in text.splitlines():
            name, eq, value = line.strip().removeprefix("export ").partition("=")
            if eq and name.strip() == "MISTRAL_API_KEY" and value.strip().strip("\"'"):
                return value.strip().strip("\"'")
        return None

    def models(self) -> dict[str, str]:
        """alias -> upstream name, as vibe merges them (defaults, config.toml, VIBE_MODELS)."""
        models = {DEFAULT_ALIAS: DEFAULT_MODEL}
        try:
            import tomllib

            with open(self.vibe_home / "config.toml", "rb") as f:
                config = tomllib.load(f)
            for entry in config.get("models", []):
                models[entry.get("alias") or entry["name"]] = entry["name"]
        except (ImportError, OSError, ValueError, KeyError, TypeError, AttributeError):
            pass
        try:
            extra = json.loads(os.environ.get("VIBE_MODELS", "[]"))
            entries = extra.values() if isinstance(extra, dict) else extra
            for entry in entries:
                models[entry.get("alias") or entry["name"]] = entry["name"]
        except (ValueError, KeyError, TypeError, AttributeError):
            pass
        return models

    def upstream_model(self) -> str:
        alias = os.environ.get("VIBE_ACTIVE_MODEL", "")
        return self.models().get(alias, DEFAULT_MODEL)  # unknown: silently the default

    # -- output -----------------------------------------------------------------------------
    def emit(self, obj: dict[str, Any]) -> None:
        if self.delay > 0:
            time.sleep(self.delay)
        data = json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
        try:
            sys.stdout.buffer.write(data + b"\n")
            sys.stdout.buffer.flush()
        except BrokenPipeError:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            self.finish(1)

    def entry(self, template: dict[str, Any], text: str) -> dict[str, Any]:
        now = int(time.time() * 1000)
        out = dict(template, sessionId=self.session_id, turnId=f"turn-{self.turn}",
                   createdAt=now, updatedAt=now, content=[{"type": "text", "text": text}])
        if out.get("role") == "user":
            out["id"] = f"user-turn-{self.turn}-1"
        else:
            out["id"] = f"assistant-{uuid.uuid4()}"
            out["inputEntryId"] = f"user-turn-{self.turn}-1"
        return out

    def write_export(self, template: dict[str, Any] | None, exit_code: int,
                     **changes: Any) -> None:
        if self.output_dir is None or self.exported:
            return
        self.exported = True
        export = dict(template or {}, **changes)
        if export.get("session_id") is not None:
            export["session_id"] = self.session_id
        export["started_at"] = self.started.isoformat().replace("+00:00", "Z")
        export["ended_at"] = (datetime.datetime.now(datetime.UTC).isoformat()
                              .replace("+00:00", "Z"))
        export["exit_code"] = exit_code
        self.output_dir.mkdir(parents=True, exist_ok=True)
        (self.output_dir / "export.json").write_text(json.dumps(export, indent=1),
                                                     encoding="utf-8")

    def finish(self, code: int) -> None:
        """A normal exit: a real CLI leaves no process behind, so reap the grandchild."""
        if self.grandchild is not None:
            self.grandchild.kill()
            self.grandchild.wait()
        sys.stderr.flush()
        sys.exit(code)

    def on_sigterm(self, signum: int, frame: Any) -> None:
        _, _, _, export = self.load("sigterm.streaming")
        sys.stderr.write("Stopped: terminated\n")
        sys.stderr.flush()
        self.write_export(export, 3)
        os._exit(3)  # the grandchild is left for the caller's process-group kill

    # -- scenarios --------------------------------------------------------------------------
    def run(self, scenario: str, prompt: str) -> None:
        if not self.api_key():
            _, stderr, code, export = self.load("no_api_key.streaming")
            sys.stderr.write(stderr)
            self.write_export(export, code)
            self.finish(code)
        case = TRANSCRIPTS.get(scenario, "success_with_export.streaming")
        lines, stderr, code, export = self.load(case)
        user = next(o for o in lines if o.get("role") == "user")
        self.emit(self.entry(user, prompt))
        if scenario == "hang":
            while True:
                time.sleep(3600)
        if scenario == "crash_mid_answer":
            success_lines = self.load("success_with_export.streaming")[0]
            partial = dict(next(o for o in success_lines if o.get("role") == "assistant"),
                           outcome={"type": "discarded", "cause": "failure"})
            self.emit(self.entry(partial, "Hello"))
            sys.stderr.write(
                "Traceback (most recent call last):\n"
                '  File "vibe/app_server/main.py", line 1, in <module>\n'
                "RuntimeError: fake_vibe: simulated crash in the middle of the answer\n")
            self.finish(1)  # no export.json: a crash, not one of vibe's own exits
        for obj in lines:
            if obj.get("role") == "assistant":
                text = obj["content"][0]["text"]
                if os.environ.get("FAKE_VIBE_ECHO") == "1":
                    text = self.echo_text(prompt)
                self.emit(self.entry(obj, text))
        if stderr:
            sys.stderr.write(stderr)
        self.write_export(export, code)
        self.finish(code)

    def echo_text(self, prompt: str) -> str:
        env_link = self.vibe_home / ".env"
        digest = {
            "stdin_head": prompt[:40],
            "stdin_tail": prompt[-200:],
            "stdin_chars": len(prompt),
            "stdin_sha256": hashlib.sha256(prompt.encode("utf-8")).hexdigest(),
            "argv_prompt": self.values.get("-p") or (" ".join(self.positional) or None),
            "active_model": os.environ.get("VIBE_ACTIVE_MODEL"),
            "upstream_model": self.upstream_model(),
            "vibe_home": str(self.vibe_home),
            "env_link": os.readlink(env_link) if env_link.is_symlink() else None,
            "config_toml": (self.vibe_home / "config.toml").exists(),
            "output_dir": str(self.output_dir) if self.output_dir else None,
            "cwd": self.cwd,
            "home": self.home,
            "env_keys": sorted(os.environ),
        }
        return json.dumps(digest, ensure_ascii=False, sort_keys=True)


def main() -> None:
    argv_file = os.environ.get("FAKE_VIBE_ARGV_FILE")
    if argv_file:
        with open(argv_file, "w", encoding="utf-8") as f:
            json.dump(sys.argv, f)

    values, positional = _parse_argv(sys.argv[1:])
    if "-v" in values or "--version" in values:
        print(f"vibe {VERSION}")
        sys.exit(0)
    if "-p" not in values:
        sys.stderr.write("fake_vibe: only headless mode (-p) is faked\n")
        sys.exit(2)
    if values.get("--output", "text") != "streaming":
        sys.stderr.write("fake_vibe: only --output streaming is faked\n")
        sys.exit(2)
    scenario = os.environ.get("FAKE_VIBE_SCENARIO", "success")
    if scenario not in SCENARIOS:
        sys.stderr.write(f"fake_vibe: unknown FAKE_VIBE_SCENARIO {scenario!r}\n")
        sys.exit(2)

    fake = Fake(values, positional)
    signal.signal(signal.SIGTERM, fake.on_sigterm)
    # A grandchild in our own process group (vibe itself runs vibe-rs + vibe-app-server): only
    # a group kill (or our own normal exit) removes it, so a proxy that kills just the leader
    # leaves a stray process behind.
    fake.grandchild = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(3600)"],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    pidfile = os.environ.get("FAKE_VIBE_PIDFILE")
    if pidfile:
        fd = os.open(pidfile, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(fd, f"{os.getpid()} {fake.grandchild.pid}\n".encode())
        finally:
            os.close(fd)

    prompt = values.get("-p") or " ".join(positional)
    if not prompt:  # like vibe: the prompt is read from stdin to EOF, trailing newline dropped
        prompt = sys.stdin.buffer.read().decode("utf-8", "replace").rstrip("\n")
    if not prompt.strip():
        sys.stderr.write("Error: No prompt provided for programmatic mode\n")
        fake.write_export({"outcome": "usage_error", "stop_reason": None,
                           "error": {"message": "No prompt provided for programmatic mode",
                                     "code": None},
                           "session_id": None, "usage": None}, 1)
        fake.finish(1)
    try:
        fake.run(scenario, prompt)
    finally:
        if fake.grandchild.poll() is None:  # only on an unexpected error: finish() reaps it
            fake.grandchild.kill()
            fake.grandchild.wait()


if __name__ == "__main__":
    main()
