"""The fake `claude` executable (tests/support/fakes/fake_claude.py) does what the proxy's tests
rely on.

Real subprocesses, each bounded by a timeout; every spawned process group is killed at teardown.
"""

from __future__ import annotations

import hashlib
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

FAKE = Path(__file__).resolve().parents[1] / "support" / "fakes" / "fake_claude.py"
TRANSCRIPTS = (
    Path(__file__).resolve().parent.parent / "fixtures" / "cli-reference" / "claude" / "transcripts"
)
ARGV = [
    "-p",
    "--output-format",
    "stream-json",
    "--verbose",
    "--include-partial-messages",
    "--tools",
    "",
    "--strict-mcp-config",
    "--setting-sources",
    "",
    "--disable-slash-commands",
    "--safe-mode",
    "--no-session-persistence",
    "--model",
    "claude-sonnet-4-6",
]
TIMEOUT = 20.0
ANSWER = "Hello from the mock upstream."


def _alive(pid: int) -> bool:
    """True if the process exists and is not a zombie (orphans may not be reaped here)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _wait_gone(pid: int, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while _alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def _transcript_types(case: str) -> list[tuple[Any, ...]]:
    lines = (TRANSCRIPTS / f"{case}.stdout").read_text(encoding="utf-8").splitlines()
    return [_kind(json.loads(line)) for line in lines if line.strip()]


def _kind(obj: dict[str, Any]) -> tuple[Any, ...]:
    event = obj.get("event") or {}
    return (obj.get("type"), obj.get("subtype"), event.get("type"))


def _deltas(objs: list[dict[str, Any]]) -> list[str]:
    return [
        o["event"]["delta"]["text"]
        for o in objs
        if o.get("type") == "stream_event" and o["event"]["type"] == "content_block_delta"
    ]


class Fake:
    """One running fake: lines are read by a thread so each read can time out."""

    def __init__(self, proc: subprocess.Popen[bytes], prompt: bytes) -> None:
        self.proc = proc
        self.lines: queue.Queue[bytes | None] = queue.Queue()
        self.stderr = b""
        self._threads = [
            threading.Thread(target=self._pump_stdout, daemon=True),
            threading.Thread(target=self._pump_stderr, daemon=True),
        ]
        for t in self._threads:
            t.start()
        assert proc.stdin is not None
        proc.stdin.write(prompt)
        proc.stdin.close()

    def _pump_stdout(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.rstrip(b"\n"))
        self.lines.put(None)

    def _pump_stderr(self) -> None:
        assert self.proc.stderr is not None
        self.stderr = self.proc.stderr.read()

    def next_line(self, timeout: float = TIMEOUT) -> bytes | None:
        """The next stdout line, or None at EOF; raises queue.Empty on timeout."""
        return self.lines.get(timeout=timeout)

    def next_json(self, timeout: float = TIMEOUT) -> dict[str, Any]:
        line = self.next_line(timeout)
        assert line is not None, "unexpected EOF"
        return json.loads(line)

    def read_until_text_delta(self) -> list[dict[str, Any]]:
        seen = []
        while True:
            obj = self.next_json()
            seen.append(obj)
            if _deltas([obj]):
                return seen

    def rest(self) -> list[bytes]:
        out = []
        while (line := self.next_line()) is not None:
            out.append(line)
        return out

    def wait(self, timeout: float = TIMEOUT) -> int:
        code = self.proc.wait(timeout)
        for t in self._threads:
            t.join(timeout)
        return code


@pytest.fixture
def spawn(tmp_path: Path) -> Iterator[Any]:
    """spawn(scenario, *, argv=ARGV, prompt=b"...", **env) -> Fake, in its own process group."""
    fakes: list[Fake] = []
    pidfile = tmp_path / "pids"

    def _spawn(
        scenario: str = "success",
        *,
        argv: list[str] = ARGV,
        prompt: bytes = b"Say hello in four words.",
        **env: str,
    ) -> Fake:
        full_env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(tmp_path),
            "LANG": "C.UTF-8",
            "FAKE_CLAUDE_SCENARIO": scenario,
            "FAKE_CLAUDE_PIDFILE": str(pidfile),
            "FAKE_CLAUDE_DELAY_S": "0.005",
            **env,
        }
        proc = subprocess.Popen(
            [sys.executable, str(FAKE), *argv],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=full_env,
            cwd=tmp_path,
            start_new_session=True,
        )
        fake = Fake(proc, prompt)
        fakes.append(fake)
        return fake

    _spawn.pidfile = pidfile  # type: ignore[attr-defined]
    try:
        yield _spawn
    finally:
        for fake in fakes:
            try:
                os.killpg(fake.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            fake.wait()
            for stream in (fake.proc.stdout, fake.proc.stderr):
                assert stream is not None
                stream.close()
        if pidfile.exists():
            for line in pidfile.read_text().splitlines():
                for pid in map(int, line.split()):
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass


def _pids(spawn: Any) -> list[tuple[int, int]]:
    lines = spawn.pidfile.read_text().splitlines()
    return [tuple(map(int, line.split())) for line in lines]  # type: ignore[misc]


def test_success_replays_the_transcript(spawn: Any, tmp_path: Path) -> None:
    fake = spawn("success")
    objs = [json.loads(line) for line in fake.rest()]
    assert fake.wait() == 0
    assert fake.stderr == b""
    assert [_kind(o) for o in objs] == _transcript_types("success.partial")
    init, result = objs[0], objs[-1]
    assert init["subtype"] == "init" and init["model"] == "claude-sonnet-4-6"
    assert init["cwd"] == str(tmp_path) and init["tools"] == []
    assert len({o["session_id"] for o in objs}) == 1
    message_start = objs[2]["event"]
    assert message_start["type"] == "message_start"
    assert message_start["message"]["model"] == "claude-sonnet-4-6"
    assert _deltas(objs) == ["Hello", " from", " the mock", " upstream."]
    assert result["type"] == "result" and result["is_error"] is False
    assert result["result"] == ANSWER
    assert (result["usage"]["input_tokens"], result["usage"]["output_tokens"]) == (25, 7)


def test_without_partial_messages_there_are_no_stream_events(spawn: Any) -> None:
    argv = [a for a in ARGV if a != "--include-partial-messages"]
    fake = spawn("success", argv=argv)
    objs = [json.loads(line) for line in fake.rest()]
    assert fake.wait() == 0
    assert [_kind(o) for o in objs] == _transcript_types("success.stream-json")


@pytest.mark.parametrize(
    ("scenario", "case", "status", "error"),
    [
        ("rate_limit", "rate_limit_retry_after.stream-json", 429, "rate_limit"),
        ("auth", "auth.stream-json", 401, "authentication_failed"),
        ("server_error", "server_error_500.stream-json", 500, "server_error"),
        ("no_login", "no_api_key.stream-json", None, "authentication_failed"),
    ],
)
def test_error_scenarios_replay_their_transcript(
    spawn: Any, scenario: str, case: str, status: int | None, error: str
) -> None:
    fake = spawn(scenario)
    objs = [json.loads(line) for line in fake.rest()]
    assert fake.wait() == 1
    assert [_kind(o) for o in objs] == _transcript_types(case)
    assert objs[0]["model"] == "claude-sonnet-4-6"
    assistant, result = objs[-2], objs[-1]
    assert assistant["error"] == error and assistant["message"]["model"] == "<synthetic>"
    assert result["is_error"] is True and result["subtype"] == "success"
    assert result["api_error_status"] == status
    retries = [o for o in objs if o.get("subtype") == "api_retry"]
    if scenario in ("rate_limit", "server_error"):
        assert retries and all(r["error_status"] == status for r in retries)
    else:
        assert retries == []


def test_slow_streams_chunks_until_sigterm_and_exits_143(spawn: Any) -> None:
    fake = spawn("slow")
    objs = fake.read_until_text_delta()
    assert [_kind(o)[2] for o in objs[2:]] == [
        "message_start",
        "content_block_start",
        "content_block_delta",
    ]
    more = [fake.next_json() for _ in range(3)]
    assert _deltas(objs + more) == [" chunk0", " chunk1", " chunk2", " chunk3"]
    fake.proc.send_signal(signal.SIGTERM)  # the leader only, as a proxy would first
    assert fake.wait() == 143
    ((pid, grandchild),) = _pids(spawn)
    assert pid == fake.proc.pid
    # killed fakes leave their grandchild behind: only a group kill removes it
    assert _alive(grandchild)
    assert os.getpgid(grandchild) == fake.proc.pid
    os.killpg(fake.proc.pid, signal.SIGKILL)
    assert _wait_gone(grandchild)


def test_hang_prints_init_then_nothing(spawn: Any) -> None:
    fake = spawn("hang")
    init = fake.next_json()
    assert (init["type"], init["subtype"]) == ("system", "init")
    with pytest.raises(queue.Empty):
        fake.next_line(timeout=0.5)
    fake.proc.send_signal(signal.SIGTERM)
    assert fake.wait() == 143
    assert fake.next_line() is None


def test_crash_mid_stream_has_no_result(spawn: Any) -> None:
    fake = spawn("crash_mid_stream")
    objs = [json.loads(line) for line in fake.rest()]
    assert fake.wait() == 1
    assert _deltas(objs) == ["Hello", " from"]
    assert not [o for o in objs if o["type"] in ("assistant", "result")]
    assert b"crash" in fake.stderr
    ((_, grandchild),) = _pids(spawn)
    assert _wait_gone(grandchild)  # a process that exits by itself reaps its grandchild


def test_garbage_lines_then_success(spawn: Any) -> None:
    fake = spawn("garbage")
    lines = fake.rest()
    assert fake.wait() == 0
    parsed = []
    garbage = 0
    for line in lines:
        try:
            obj = json.loads(line)
        except ValueError:  # includes undecodable bytes
            garbage += 1
            continue
        if isinstance(obj, dict) and obj.get("session_id"):
            parsed.append(obj)
        else:
            garbage += 1
    assert garbage >= 4
    assert not json.loads(lines[-1])["is_error"]
    assert "".join(_deltas(parsed)) == ANSWER
    with pytest.raises(UnicodeDecodeError):
        b"\n".join(lines).decode("utf-8")


def test_echo_reports_model_stdin_and_system_prompt(spawn: Any, tmp_path: Path) -> None:
    system = tmp_path / "system.txt"
    system.write_text("You are terse.\nSecond line.")
    prompt = "Tell me about the weather in Paris, please, in detail. " * 3
    argv = [*ARGV, "--system-prompt-file", str(system)]
    fake = spawn("success", argv=argv, prompt=prompt.encode(), FAKE_CLAUDE_ECHO="1")
    objs = [json.loads(line) for line in fake.rest()]
    assert fake.wait() == 0
    text = "".join(_deltas(objs))
    assert len(_deltas(objs)) > 1
    assert text == objs[-1]["result"]
    digest = json.loads(text)
    assert digest["model"] == "claude-sonnet-4-6"
    assert digest["stdin_head"] == prompt[:40]
    assert digest["stdin_tail"] == prompt[-200:]
    assert digest["stdin_sha256"] == hashlib.sha256(prompt.encode()).hexdigest()
    assert digest["stdin_chars"] == len(prompt)
    assert digest["system_prompt"] == "You are terse.\nSecond line."
    assert digest["argv_prompt"] is None
    assert digest["cwd"] == str(tmp_path)
    assert "FAKE_CLAUDE_ECHO" in digest["env_keys"]
    assistant = next(o for o in objs if o["type"] == "assistant")
    assert assistant["message"]["content"][0]["text"] == text


def test_pidfile_and_grandchild_reaped_on_normal_exit(spawn: Any) -> None:
    first = spawn("success")
    first.rest()
    assert first.wait() == 0
    second = spawn("auth")
    second.rest()
    assert second.wait() == 1
    pids = _pids(spawn)
    assert [p for p, _ in pids] == [first.proc.pid, second.proc.pid]
    for _, grandchild in pids:
        assert _wait_gone(grandchild)


def test_hold_file_holds_after_the_first_delta(spawn: Any, tmp_path: Path) -> None:
    hold = tmp_path / "hold"
    fake = spawn("success", FAKE_CLAUDE_HOLD_FILE=str(hold))
    objs = fake.read_until_text_delta()
    assert _deltas(objs) == ["Hello"]
    with pytest.raises(queue.Empty):
        fake.next_line(timeout=0.5)
    hold.touch()
    rest = [json.loads(line) for line in fake.rest()]
    assert fake.wait() == 0
    assert _deltas(rest) == [" from", " the mock", " upstream."]
    assert rest[-1]["type"] == "result"


def test_hold_gives_up_with_exit_3(spawn: Any, tmp_path: Path) -> None:
    fake = spawn(
        "success",
        FAKE_CLAUDE_HOLD_FILE=str(tmp_path / "never"),
        FAKE_CLAUDE_HOLD_TIMEOUT_S="0.2",
    )
    lines = fake.rest()
    assert fake.wait() == 3
    assert _deltas([json.loads(line) for line in lines]) == ["Hello"]


def test_argv_file_records_argv_without_the_prompt(spawn: Any, tmp_path: Path) -> None:
    argv_file = tmp_path / "argv.json"
    prompt = "SECRET-PROMPT-TEXT"
    fake = spawn("success", prompt=prompt.encode(), FAKE_CLAUDE_ARGV_FILE=str(argv_file))
    fake.rest()
    assert fake.wait() == 0
    argv = json.loads(argv_file.read_text())
    assert argv[1:] == ARGV
    assert not any(prompt in a for a in argv)


def test_stream_json_without_verbose_is_refused(spawn: Any) -> None:
    fake = spawn("success", argv=["-p", "--output-format", "stream-json"])
    assert fake.rest() == []
    assert fake.wait() == 1
    assert fake.stderr == (
        b"Error: When using --print, --output-format=stream-json requires --verbose\n"
    )
    assert not spawn.pidfile.exists()  # refused before any process was started


@pytest.mark.parametrize(
    ("prompt", "message"),
    [
        (b"", b"Error: Input must be provided either through stdin"),
        (b"  \n ", b"Error: Input contained only whitespace."),
    ],
)
def test_empty_prompt_is_refused(spawn: Any, prompt: bytes, message: bytes) -> None:
    fake = spawn("success", prompt=prompt)
    assert fake.rest() == []
    assert fake.wait() == 1
    assert fake.stderr.startswith(message)


def test_missing_system_prompt_file_and_unknown_option(spawn: Any, tmp_path: Path) -> None:
    missing = spawn("success", argv=[*ARGV, "--system-prompt-file", str(tmp_path / "nope")])
    assert missing.rest() == []
    assert missing.wait() == 1
    assert missing.stderr.startswith(b"Error: System prompt file not found:")
    unknown = spawn("success", argv=[*ARGV, "--bogus"])
    assert unknown.wait() == 1
    assert unknown.stderr == b"error: unknown option '--bogus'\n"


def test_sigterm_before_stdin_eof_exits_143(tmp_path: Path) -> None:
    """The fake, like the real CLI, prints nothing before stdin's EOF; SIGTERM still works."""
    with subprocess.Popen(
        [sys.executable, str(FAKE), *ARGV],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env={"PATH": os.environ.get("PATH", ""), "FAKE_CLAUDE_PIDFILE": str(tmp_path / "p")},
        cwd=tmp_path,
        start_new_session=True,
    ) as proc:
        try:
            deadline = time.monotonic() + TIMEOUT
            while not (tmp_path / "p").exists():  # started, now blocked reading stdin
                assert time.monotonic() < deadline
                time.sleep(0.01)
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(TIMEOUT) == 143
            assert proc.stdout is not None and proc.stdout.read() == b""
        finally:
            try:
                os.killpg(proc.pid, signal.SIGKILL)  # the grandchild the fake left behind
            except ProcessLookupError:
                pass
            assert proc.stdin is not None
            proc.stdin.close()
            proc.wait(TIMEOUT)
