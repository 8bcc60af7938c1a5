"""The codex ``exec --json`` parser against the real CLI's captured transcripts.

The transcripts are copied from ``cli-reference/codex/transcripts`` into
``tests/fixtures/cli-reference/codex/transcripts`` (codex-cli 0.171.0 against a loopback mock;
the answer is always "Hello from the mock upstream.", usage 25/7). Every captured case is
replayed and its exact event list asserted.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from transcript_edits import edit_json_lines

from olp.ir import Error, Event, ReasoningDelta, Retrying, Stop, TextDelta, Usage, is_terminal
from olp.providers.codex import CodexParser

FIXTURES = (Path(__file__).resolve().parents[2] / "fixtures" / "cli-reference" / "codex"
            / "transcripts")
NOW = 1796020800.0  # 2026-11-30T06:40:00Z
ANSWER = "Hello from the mock upstream."
URL_FREE_401 = (
    "unexpected status 401 Unauthorized: Incorrect API key provided: sk-mock*****1234. You can "
    "find your API key at https://platform.openai.com/account/api-keys., request id: "
    "req_mock000006")
SUCCESS: list[Event] = [TextDelta(text=ANSWER), Usage(prompt_tokens=25, completion_tokens=7),
                        Stop()]


def replay(case: str, *, exit_code: int | None = None) -> list[Event]:
    """Feed a transcript as the runner does: stop at the first terminal event, else finish.
    Returns every event, the terminal one last."""
    meta = json.loads((FIXTURES / f"{case}.meta.json").read_text(encoding="utf-8"))
    code = meta["exit_code"] if exit_code is None else exit_code
    parser = CodexParser(now=lambda: NOW)
    events: list[Event] = []
    for line in (FIXTURES / f"{case}.stdout").read_bytes().splitlines():
        for event in parser.feed(line):
            events.append(event)
            if is_terminal(event):
                assert parser.finish(code, b"") == event  # finish repeats it
                return events
    stderr = (FIXTURES / f"{case}.stderr").read_bytes()
    events.append(parser.finish(code, stderr))
    return events


def retries(n: int, category: str, status: int | None, of: int = 5) -> list[Event]:
    return [Retrying(attempt=i, max_retries=of, category=category,  # type: ignore[arg-type]
                     status=status) for i in range(1, n + 1)]


def test_cached_input_comes_from_turn_completed() -> None:
    """``turn.completed`` usage: ``input_tokens`` counts every input token, of which
    ``cached_input_tokens`` were read from the prompt cache and ``cache_write_input_tokens``
    written to it. The captured line with those figures written in (the mock keeps no cache)."""
    def cached(obj: dict[str, Any]) -> bool:
        if obj.get("type") != "turn.completed":
            return False
        obj["usage"].update(input_tokens=1025, cached_input_tokens=1000,
                            cache_write_input_tokens=20)
        return True

    lines = edit_json_lines((FIXTURES / "success.json.stdout").read_bytes().splitlines(), cached)
    parser = CodexParser(now=lambda: NOW)
    events = [e for line in lines for e in parser.feed(line)]
    assert events == [TextDelta(text=ANSWER), Usage(
        prompt_tokens=1025, completion_tokens=7, cached_tokens=1000, cache_write_tokens=20)]
    assert parser.finish(0, b"") == Stop()


def test_every_transcript_is_covered() -> None:
    cases = {p.name.removesuffix(".stdout") for p in FIXTURES.glob("*.stdout")}
    assert cases == set(EXPECTED) | {"success.text"}


EXPECTED: dict[str, list[Event]] = {
    "success.json": SUCCESS,
    "success.known_model.json": SUCCESS,
    "stdin_prompt.json": SUCCESS,
    "options.model_instructions": SUCCESS,
    "rate_limit.json": [Error(
        code="RATE_LIMITED", category="rate_limited", status=429,
        message="exceeded retry limit, last status: 429 Too Many Requests, request id: "
                "req_mock000001")],
    "rate_limit_plain.json": [Error(
        code="RATE_LIMITED", category="rate_limited", status=429,
        message="exceeded retry limit, last status: 429 Too Many Requests, request id: "
                "req_mock000001")],
    "rate_limit_retry_after.json": [*retries(5, "rate_limited", 429), Error(
        code="RATE_LIMITED", category="rate_limited", status=429,
        message="exceeded retry limit, last status: 429 Too Many Requests, request id: "
                "req_mock000006")],
    "quota.json": [Error(code="BILLING", category="billing",
                         message="Quota exceeded. Check your plan and billing details.")],
    "auth.json": [*retries(5, "auth", 401),
                  Error(code="UPSTREAM_AUTH", category="auth", status=401,
                        message=URL_FREE_401)],
    "no_api_key.json": [Error(code="AUTH_MISSING", category="auth",
                              message="Missing environment variable: `MOCK_OPENAI_API_KEY`.")],
    "server_error_500.json": [*retries(5, "unavailable", None), Error(
        code="UPSTREAM_5XX", category="unavailable",
        message="We’re currently experiencing high demand, which may cause temporary errors.")],
    "overloaded_503.json": [*retries(5, "unavailable", 503), Error(
        code="OVERLOADED", category="unavailable", status=503,
        message="unexpected status 503 Service Unavailable: The engine is currently overloaded, "
                "please try again later., request id: req_mock000030")],
    "stall_midstream.json": [*retries(1, "unavailable", None, of=1), Error(
        code="UPSTREAM_TIMEOUT", category="unavailable",
        message="stream disconnected before completion: idle timeout waiting for SSE")],
    # the capture harness SIGKILLed (-9) or SIGTERMed (-15) these; codex printed nothing more
    "stall_default.json": [*retries(1, "unavailable", None, of=1), Error(
        code="CLI_FAILED", category="unknown", message="codex was killed by signal 9 (SIGKILL)")],
    "hang.default.json": [Error(code="CLI_FAILED", category="unknown",
                                message="codex was killed by signal 9 (SIGKILL)")],
    "hang.idle_5s.json": [Error(code="CLI_FAILED", category="unknown",
                                message="codex was killed by signal 9 (SIGKILL)")],
    "hang.long.json": [Error(code="CLI_FAILED", category="unknown",
                             message="codex was killed by signal 9 (SIGKILL)")],
    "sigterm.json": [Error(code="CLI_FAILED", category="unknown",
                           message="codex was killed by signal 15 (SIGTERM)")],
}


@pytest.mark.parametrize("case", sorted(EXPECTED))
def test_transcript_events_are_exact(case: str) -> None:
    assert replay(case) == EXPECTED[case]


def test_text_mode_output_is_a_protocol_error() -> None:
    # `codex exec` without --json prints only the answer: not what the parser reads
    assert replay("success.text") == [Error(
        code="PROTOCOL_ERROR", category="unknown",
        message="codex exited with code 0 without a turn.completed line")]


def test_sigterm_exit_status_from_a_shell_is_named() -> None:
    [error] = replay("sigterm.json", exit_code=143)
    assert error == Error(code="CLI_FAILED", category="unknown",
                          message="codex exited with code 143 (signal 15, SIGTERM)")


def test_non_zero_exit_after_a_complete_answer_is_a_failure() -> None:
    events = replay("success.json", exit_code=1)
    assert events[:2] == SUCCESS[:2]
    assert events[2] == Error(code="CLI_FAILED", category="unknown",
                              message="codex exited with code 1 after a complete answer")


def test_killed_between_the_error_line_and_turn_failed_keeps_the_error() -> None:
    parser = CodexParser(now=lambda: NOW)
    lines = (FIXTURES / "quota.json.stdout").read_bytes().splitlines()
    assert [e for line in lines[:-1] for e in parser.feed(line)] == []  # no turn.failed
    final = parser.finish(-15, b"")
    assert isinstance(final, Error) and (final.code, final.category) == ("BILLING", "billing")


def test_stderr_excerpt_is_sanitised_and_drops_the_stdin_notice() -> None:
    parser = CodexParser()
    stderr = (b"Reading additional input from stdin...\n"
              b"Error: boom with key sk-abcd1234567890 and Bearer tok.en\x1b[0m\n")
    error = parser.finish(1, stderr)
    assert isinstance(error, Error) and error.code == "CLI_FAILED"
    assert error.message == ("codex exited with code 1; stderr: Error: boom with key sk-abcd… "
                             "and Bearer … [0m")
    assert "Reading" not in error.message
    assert "No prompt provided via stdin." in str(
        CodexParser().finish(1, b"No prompt provided via stdin.\n"))


def test_later_agent_messages_follow_after_a_blank_line_and_warnings_are_ignored() -> None:
    parser = CodexParser()
    lines = [
        {"type": "thread.started", "thread_id": "t"},
        {"type": "turn.started"},
        {"type": "item.completed", "item": {"id": "item_0", "type": "error",
                                            "message": "Falling back from WebSockets ..."}},
        {"type": "item.completed", "item": {"id": "item_1", "type": "reasoning", "text": "hm"}},
        {"type": "item.completed", "item": {"id": "item_2", "type": "agent_message",
                                            "text": "Let me look."}},
        {"type": "item.started", "item": {"id": "item_3", "type": "command_execution"}},
        {"type": "item.completed", "item": {"id": "item_3", "type": "command_execution"}},
        {"type": "item.completed", "item": {"id": "item_4", "type": "agent_message",
                                            "text": "Done."}},
        {"type": "turn.completed", "usage": {"input_tokens": 30, "cached_input_tokens": 20,
                                             "output_tokens": 9,
                                             "reasoning_output_tokens": 4}},
    ]
    events = [e for line in lines for e in parser.feed(json.dumps(line).encode())]
    assert events == [ReasoningDelta(text="hm"), TextDelta(text="Let me look."),
                      TextDelta(text="\n\nDone."),
                      Usage(prompt_tokens=30, completion_tokens=9, cached_tokens=20,
                            reasoning_tokens=4)]
    assert parser.finish(0, b"") == Stop()


def test_waiting_for_network_retries_are_counted() -> None:
    parser = CodexParser()
    line = json.dumps({"type": "error", "message": "Reconnecting... waiting for network "
                       "(Connection failed: error sending request)"}).encode()
    assert [*parser.feed(line), *parser.feed(line)] == [
        Retrying(attempt=1, category="unavailable"), Retrying(attempt=2, category="unavailable")]


def test_turn_failed_without_a_message_uses_the_last_error_line() -> None:
    parser = CodexParser()
    parser.feed(b'{"type":"error","message":"unexpected status 500 Internal Server Error: x"}')
    [error] = parser.feed(b'{"type":"turn.failed","error":{}}')
    assert isinstance(error, Error) and (error.code, error.status) == ("UPSTREAM_5XX", 500)
    assert parser.feed(b'{"type":"item.completed","item":{"type":"agent_message",'
                       b'"text":"late"}}') == ()  # nothing after a terminal event


@pytest.mark.parametrize("line", [
    b"", b"not json", b"[1, 2]", b'{"type":', b"\xff\xfe", b'{"type": 3}',
    b'{"type":"item.completed","item":"x"}', b'{"type":"turn.completed","usage":{"input_tokens'
    b'":"many"}}', b'{"type":"error","message":7}', b'{"type":"future.event"}',
])
def test_odd_lines_give_nothing(line: bytes) -> None:
    parser = CodexParser()
    assert parser.feed(line) == ()
    assert isinstance(parser.finish(0, b""), Error)  # and never a fake success


@given(st.binary(max_size=200))
def test_feed_never_raises(data: bytes) -> None:
    parser = CodexParser()
    for line in data.split(b"\n"):
        parser.feed(line)
    assert is_terminal(parser.finish(1, data))
