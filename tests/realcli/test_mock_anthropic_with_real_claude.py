"""The loopback Anthropic mock is faithful: the REAL `claude` CLI runs against it as the proxy
will run it (prompt on stdin, system text in a file, own process group, fresh HOME and cwd,
minimal environment).

Needs ``OLP_REAL_CLAUDE`` (printed by ``scripts/install-real-clis``). Without it the tests skip on
a developer's machine and fail in CI (``CI=true``).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import signal
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import trio
from mock_anthropic import DEFAULT_DELTAS, MockAnthropic, serve_mock

MODEL = "claude-sonnet-4-6"
API_KEY = "sk-ant-mock"
PROMPT = "PROMPT-MARKER-7f3a: say hello in four words."
SYSTEM = "SYSTEM-MARKER-c21b: you are a terse test assistant.\nSecond line of the system text."
ANSWER = "".join(DEFAULT_DELTAS)
HANG_GUARD_S = 60


@pytest.fixture
def claude_bin() -> str:
    path = os.environ.get("OLP_REAL_CLAUDE", "")
    reason = (
        "OLP_REAL_CLAUDE is not set (or not executable): run scripts/install-real-clis and "
        "export the OLP_REAL_CLAUDE=... line it prints"
    )
    if not path or not os.access(path, os.X_OK):
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    return path


class _Lines:
    """Lines from a trio ReceiveStream (class-based, no async generator)."""

    def __init__(self, stream: trio.abc.ReceiveStream) -> None:
        self._stream = stream
        self._buf = bytearray()
        self._eof = False

    def feed(self, data: bytes) -> None:
        self._buf += data

    async def next(self) -> bytes | None:
        while True:
            i = self._buf.find(b"\n")
            if i >= 0:
                line = bytes(self._buf[:i])
                del self._buf[: i + 1]
                return line
            if self._eof:
                rest, self._buf = bytes(self._buf), bytearray()
                return rest or None
            data = await self._stream.receive_some(65536)
            if not data:
                self._eof = True
            self._buf += data


@dataclass
class Seen:
    """One stdout line, with what the mock had seen when it arrived."""

    obj: dict[str, Any]
    mock_requests: int
    exited: bool


@dataclass
class Run:
    returncode: int = -1
    lines: list[Seen] = field(default_factory=list)
    stderr: bytes = b""
    before_eof: bytes = b""  # stdout printed while stdin was still open
    requests_before_eof: int = 0

    @property
    def objs(self) -> list[dict[str, Any]]:
        return [s.obj for s in self.lines]

    def of(self, kind: str, subtype: str | None = None) -> list[dict[str, Any]]:
        return [o for o in self.objs if o["type"] == kind and o.get("subtype", subtype) == subtype]

    @property
    def text_deltas(self) -> list[str]:
        return [
            o["event"]["delta"]["text"]
            for o in self.of("stream_event")
            if o["event"]["type"] == "content_block_delta"
        ]

    @property
    def result(self) -> dict[str, Any]:
        (result,) = self.of("result", "success")
        return result


def _env(mock: MockAnthropic, home: Path) -> dict[str, str]:
    return {
        "PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"),
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "TERM": "dumb",
        "NO_COLOR": "1",
        "TMPDIR": str(home / "tmp"),
        "ANTHROPIC_BASE_URL": mock.base_url,
        "ANTHROPIC_API_KEY": API_KEY,
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_AUTOUPDATER": "1",
        "CLAUDE_CODE_MAX_RETRIES": "1",
    }


async def run_claude(
    claude: str,
    mock: MockAnthropic,
    tmp_path: Path,
    *,
    sigterm_after_first_delta: bool = False,
    stdin_open_s: float = 0,
) -> Run:
    """Spawn claude as the proxy will, feed the prompt on stdin, read stdout line by line."""
    home, work = tmp_path / "home", tmp_path / "work"
    (home / "tmp").mkdir(parents=True)
    work.mkdir()
    system_file = work / "system-prompt.txt"
    system_file.write_text(SYSTEM, encoding="utf-8")
    argv = [
        claude,
        "-p",
        "--output-format",
        "stream-json",
        "--verbose",
        "--include-partial-messages",
        "--tools",
        "",
        "--no-session-persistence",
        "--model",
        MODEL,
        "--system-prompt-file",
        str(system_file),
    ]
    assert not any(PROMPT in a or SYSTEM in a for a in argv)
    run = Run()
    proc = await trio.lowlevel.open_process(
        argv,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=work,
        env=_env(mock, home),
        start_new_session=True,
    )
    try:
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        stderr_stream = proc.stderr

        async def drain_stderr() -> None:
            chunks = []
            while data := await stderr_stream.receive_some(65536):
                chunks.append(data)
            run.stderr = b"".join(chunks)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(drain_stderr)
            lines = _Lines(proc.stdout)
            await proc.stdin.send_all(PROMPT.encode())
            if stdin_open_s:
                # the prompt is written but stdin stays open: the CLI must wait for EOF
                with trio.move_on_after(stdin_open_s):
                    run.before_eof = await proc.stdout.receive_some(65536)
                lines.feed(run.before_eof)
                run.requests_before_eof = mock.request_count
            await proc.stdin.aclose()
            while (line := await lines.next()) is not None:
                obj = json.loads(line)
                run.lines.append(Seen(obj, mock.request_count, proc.poll() is not None))
                if sigterm_after_first_delta and run.text_deltas:
                    sigterm_after_first_delta = False
                    proc.send_signal(signal.SIGTERM)  # the leader only, as the proxy does first
            run.returncode = await proc.wait()
        # a real CLI leaves no process behind in its group
        with pytest.raises(ProcessLookupError):
            os.killpg(proc.pid, 0)
    finally:
        if proc.returncode is None or _group_alive(proc.pid):
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        with trio.CancelScope(shield=True):
            await proc.wait()
            for pipe in (proc.stdin, proc.stdout, proc.stderr):
                if pipe is not None:
                    await trio.aclose_forcefully(pipe)
    return run


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def _check_request_body(record: dict[str, Any]) -> None:
    """What the CLI sent: the model, the system file's text, the prompt from stdin, the key."""
    assert record["method"] == "POST"
    assert record["path"] == "/v1/messages?beta=true"
    assert record["credential_sha256"] == hashlib.sha256(API_KEY.encode()).hexdigest()
    assert record["headers"]["x-api-key"] == f"<redacted len={len(API_KEY)}>"
    body = record["body"]
    assert body["model"] == MODEL
    assert body["stream"] is True
    assert body["tools"] == []  # `--tools ""`: an empty list (not an absent key)
    system_texts = [block["text"] for block in body["system"]]
    assert SYSTEM in system_texts  # --system-prompt-file: one system block, verbatim
    user_texts = [
        block["text"]
        for message in body["messages"]
        if message["role"] == "user"
        for block in message["content"]
        if block.get("type") == "text"
    ]
    assert user_texts[-1] == PROMPT  # stdin became the prompt, as the last user text block
    assert SYSTEM not in json.dumps(body["messages"])


async def test_success(claude_bin: str, tmp_path: Path) -> None:
    with trio.fail_after(HANG_GUARD_S):
        async with trio.open_nursery() as nursery:
            mock: MockAnthropic = await nursery.start(serve_mock)
            run = await run_claude(claude_bin, mock, tmp_path)
            nursery.cancel_scope.cancel()
    assert run.returncode == 0, run.stderr
    assert run.stderr == b""
    init = run.objs[0]
    assert (init["type"], init["subtype"], init["model"]) == ("system", "init", MODEL)
    assert init["tools"] == [] and init["apiKeySource"] == "ANTHROPIC_API_KEY"
    assert run.text_deltas == list(DEFAULT_DELTAS)
    events = [o["event"]["type"] for o in run.of("stream_event")]
    assert events[0] == "message_start" and events[-1] == "message_stop"
    assert "ping" not in events  # the CLI does not forward pings
    (assistant,) = run.of("assistant")
    assert assistant["message"]["model"] == MODEL
    assert assistant["request_id"] == "req_mock000001"
    result = run.result
    assert result["is_error"] is False and result["result"] == ANSWER
    assert result["stop_reason"] == "end_turn" and result["terminal_reason"] == "completed"
    assert (result["usage"]["input_tokens"], result["usage"]["output_tokens"]) == (25, 7)
    assert run.objs[-1] is result
    assert mock.request_count == 1
    (record,) = mock.requests
    _check_request_body(record)
    assert record["status"] == 200 and record["outcome"] == "completed"


async def test_nothing_happens_before_stdin_eof(claude_bin: str, tmp_path: Path) -> None:
    """`-p` with no positional prompt waits for stdin's EOF before printing or requesting
    anything: the proxy must close stdin after writing the prompt."""
    with trio.fail_after(HANG_GUARD_S):
        async with trio.open_nursery() as nursery:
            mock = await nursery.start(serve_mock)
            run = await run_claude(claude_bin, mock, tmp_path, stdin_open_s=2)
            nursery.cancel_scope.cancel()
    assert run.before_eof == b""
    assert run.requests_before_eof == 0
    assert run.returncode == 0
    assert run.result["result"] == ANSWER
    _check_request_body(mock.requests[0])


async def test_rate_limit_with_retry_after(claude_bin: str, tmp_path: Path) -> None:
    with trio.fail_after(HANG_GUARD_S):
        async with trio.open_nursery() as nursery:
            mock = await nursery.start(
                functools.partial(serve_mock, scenario="rate_limit", retry_after=1)
            )
            run = await run_claude(claude_bin, mock, tmp_path)
            nursery.cancel_scope.cancel()
    assert run.returncode == 1
    assert run.stderr == b""
    (retry,) = run.of("system", "api_retry")
    assert (retry["attempt"], retry["max_retries"]) == (1, 1)
    assert (retry["error_status"], retry["error"]) == (429, "rate_limit")
    assert retry["retry_delay_ms"] >= 1000  # the retry-after header was honoured
    # live: the api_retry line arrived while the CLI was still waiting to retry
    seen = next(s for s in run.lines if s.obj is retry)
    assert seen.mock_requests == 1 and not seen.exited
    (assistant,) = run.of("assistant")
    assert assistant["error"] == "rate_limit" and assistant["api_error_status"] == 429
    result = run.result
    assert result["is_error"] is True
    assert (result["api_error_status"], result["api_error_type"]) == (429, "rate_limit_error")
    assert result["result"].startswith("API Error: Request rejected (429) · This request would")
    assert run.text_deltas == []
    assert mock.request_count == 2
    assert [r["status"] for r in mock.requests] == [429, 429]
    _check_request_body(mock.requests[0])


@pytest.mark.parametrize("should_retry", [False, None], ids=["x-should-retry-false", "no-header"])
async def test_auth_error(claude_bin: str, tmp_path: Path, should_retry: bool | None) -> None:
    """401: no retry when the upstream says `x-should-retry: false` (as the Anthropic API does);
    without that header claude 2.1.332 retries a 401 like a 5xx (`api_retry` lines with
    error "authentication_failed")."""
    with trio.fail_after(HANG_GUARD_S):
        async with trio.open_nursery() as nursery:
            mock = await nursery.start(
                functools.partial(serve_mock, scenario="auth", should_retry=should_retry)
            )
            run = await run_claude(claude_bin, mock, tmp_path)
            nursery.cancel_scope.cancel()
    assert run.returncode == 1
    retries = run.of("system", "api_retry")
    if should_retry is False:
        assert retries == []
        assert mock.request_count == 1
    else:
        assert [(r["error_status"], r["error"]) for r in retries] == [
            (401, "authentication_failed")
        ]
        assert mock.request_count == 2  # CLAUDE_CODE_MAX_RETRIES=1
    (assistant,) = run.of("assistant")
    assert assistant["error"] == "authentication_failed"
    result = run.result
    assert result["is_error"] is True
    assert (result["api_error_status"], result["api_error_type"]) == (401, "authentication_error")
    assert result["result"] == "Invalid API key · Fix external API key"


async def test_server_error(claude_bin: str, tmp_path: Path) -> None:
    with trio.fail_after(HANG_GUARD_S):
        async with trio.open_nursery() as nursery:
            mock = await nursery.start(functools.partial(serve_mock, scenario="server_error"))
            run = await run_claude(claude_bin, mock, tmp_path)
            nursery.cancel_scope.cancel()
    assert run.returncode == 1
    (retry,) = run.of("system", "api_retry")
    assert (retry["error_status"], retry["error"]) == (500, "server_error")
    (assistant,) = run.of("assistant")
    assert assistant["error"] == "server_error"
    result = run.result
    assert result["is_error"] is True
    assert (result["api_error_status"], result["api_error_type"]) == (500, "api_error")
    assert result["result"].startswith("API Error: 500 Internal server error.")
    assert mock.request_count == 2


async def test_sigterm_mid_stream(claude_bin: str, tmp_path: Path) -> None:
    """SIGTERM to the CLI mid-stream: exit 143, no result line, the mock sees the disconnect."""
    with trio.fail_after(HANG_GUARD_S):
        async with trio.open_nursery() as nursery:
            mock = await nursery.start(functools.partial(serve_mock, scenario="slow", interval=0.2))
            run = await run_claude(claude_bin, mock, tmp_path, sigterm_after_first_delta=True)
            record = await mock.wait_for_outcome(1)
            nursery.cancel_scope.cancel()
    assert run.returncode in (143, -signal.SIGTERM)
    assert run.text_deltas[0] == " chunk0"
    assert run.of("result", "success") == [] and run.of("assistant") == []
    assert record["outcome"] == "client_disconnected"
