"""The qwen stream-json parser against the verbatim transcripts of cli-reference/qwen (each
case's stdout lines, exit code and stderr), plus the lines they show, edited, for what the
captures cannot hit at will. Whatever the case: an "[API Error: ...]" delta is never content."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from transcript_edits import edit_json_lines

from olp.ir import Error, Event, Retrying, Stop, TextDelta, Usage
from olp.providers.qwen import QwenParser

TRANSCRIPTS = (Path(__file__).resolve().parents[2]
               / "fixtures/cli-reference/qwen/transcripts")
NOW = 1_800_000_000.0


def transcript(case: str) -> tuple[list[bytes], int, bytes]:
    """The case's stdout lines, exit code and stderr; skips while the capture has not
    written it yet."""
    meta_path = TRANSCRIPTS / f"{case}.meta.json"
    if not meta_path.exists():
        pytest.skip(f"transcript {case} not captured yet")
    meta = json.loads(meta_path.read_text())
    lines = (TRANSCRIPTS / f"{case}.stdout.jsonl").read_bytes().splitlines()
    stderr = (TRANSCRIPTS / f"{case}.stderr").read_bytes()
    return [ln for ln in lines if ln.strip()], meta["exit_code"], stderr


def run(lines: list[bytes], returncode: int, stderr: bytes = b"") -> tuple[list[Event], Event]:
    parser = QwenParser(now=lambda: NOW)
    events: list[Event] = []
    for line in lines:
        events.extend(parser.feed(line))
    terminal = parser.finish(returncode, stderr)
    assert parser.finish(returncode, stderr) == terminal  # idempotent
    return events, terminal


def texts(events: list[Event]) -> list[str]:
    return [e.text for e in events if isinstance(e, TextDelta)]


def line(**fields: Any) -> bytes:
    return json.dumps({"uuid": "u", "session_id": "s", **fields}).encode()


def delta(text: str) -> bytes:
    return line(type="stream_event", parent_tool_use_id=None,
                event={"type": "content_block_delta", "index": 0,
                       "delta": {"type": "text_delta", "text": text}})


def result_error(message: str) -> bytes:
    return line(type="result", subtype="error_during_execution", is_error=True,
                duration_ms=1, num_turns=1, usage={"input_tokens": 0, "output_tokens": 0},
                permission_denials=[], error={"message": message})


def result_ok(text: str, usage: tuple[int, int] = (21, 4)) -> bytes:
    return line(type="result", subtype="success", is_error=False, result=text,
                usage={"input_tokens": usage[0], "output_tokens": usage[1],
                       "cache_read_input_tokens": 0, "total_tokens": sum(usage)})


def test_success_streams_token_deltas_then_usage_then_stop() -> None:
    lines, code, stderr = transcript("success")
    events, terminal = run(lines, code, stderr)
    assert events == [TextDelta(text="Hello"), TextDelta(text=" from"),
                      TextDelta(text=" the mock"), TextDelta(text=" upstream."),
                      Usage(prompt_tokens=21, completion_tokens=4)]
    assert terminal == Stop(finish_reason="stop")


def test_cached_input_comes_from_the_result_line() -> None:
    """qwen's result usage: ``input_tokens`` is the upstream's prompt count, cached ones
    included (OpenAI's ``prompt_tokens``), ``cache_read_input_tokens`` the cached part. The
    captured line with a cache figure written in (the mock keeps no cache)."""
    def cached(obj: dict[str, Any]) -> bool:
        if obj.get("type") != "result":
            return False
        obj["usage"].update(input_tokens=1021, cache_read_input_tokens=1000)
        return True

    lines, code, stderr = transcript("success")
    events, terminal = run(edit_json_lines(lines, cached), code, stderr)
    assert events[-1] == Usage(prompt_tokens=1021, completion_tokens=4, cached_tokens=1000)
    assert terminal == Stop(finish_reason="stop")


def test_a_tool_call_is_a_failure_never_an_answer() -> None:
    lines, code, stderr = transcript("tool_call_bait")
    assert code == 55
    parser = QwenParser(now=lambda: NOW)
    events = [e for ln in lines for e in parser.feed(ln)]
    assert texts(events) == []
    [terminal] = events  # at the tool_use block's start; nothing after it
    assert isinstance(terminal, Error) and terminal.code == "TOOL_CALL_INVALID"
    assert "run_shell_command" in terminal.message
    assert parser.finish(code, stderr) == terminal


def test_tool_budget_exit_without_the_block_is_classified_from_stderr() -> None:
    _, terminal = run([], 55, b"Run aborted: tool-call budget of 0 exceeded "
                              b"(--max-tool-calls); observed 1.\n")
    assert isinstance(terminal, Error) and terminal.code == "TOOL_CALL_INVALID"


def test_rate_limit_rounds_become_retrying_events() -> None:
    lines, code, stderr = transcript("rate_limit_429")  # default settings: killed at 420 s
    events, terminal = run(lines, code, stderr)
    retries = [e for e in events if isinstance(e, Retrying)]
    assert retries and events == retries  # nothing else: no content
    assert retries[0] == Retrying(attempt=1, max_retries=10, delay_s=60.0,
                                  category="rate_limited")
    assert [r.attempt for r in retries] == list(range(1, len(retries) + 1))
    # killed mid-storm: its stderr ("Retrying in 60s ...: [API Error: 429 ...]") says why
    assert isinstance(terminal, Error) and terminal.code == "RATE_LIMITED"


API_ERROR_429 = ("[API Error: 429 Rate limit reached for requests in organization org-mock.]\n"
                 "Possible quota limitations in place or slow response times detected. "
                 "Please wait and try again later.")


@pytest.mark.parametrize(("message", "code", "status"), [
    (API_ERROR_429, "RATE_LIMITED", 429),
    ("[API Error: 401 Incorrect API key provided: sk-mock***. You can find your API key in "
     "your account settings.]", "UPSTREAM_AUTH", 401),
    ("[API Error: 400 This model's maximum context length is 128000 tokens. However, your "
     "messages resulted in 200000 tokens.]", "CONTEXT_LENGTH", 400),
    ("[API Error: 500 The server had an error while processing your request. Sorry about "
     "that!]", "UPSTREAM_5XX", 500),
])
def test_api_errors_streamed_as_text_are_never_content(message: str, code: str,
                                                       status: int) -> None:
    lines = [delta(message),
             line(type="assistant", message={"id": "m", "type": "message", "role": "assistant",
                                             "model": "M", "content": [
                                                 {"type": "text", "text": message}],
                                             "stop_reason": None,
                                             "usage": {"input_tokens": 0,
                                                       "output_tokens": 0}}),
             line(type="stream_event", event={"type": "message_stop"}),
             result_error(message)]
    events, terminal = run(lines, 1)
    assert events == [terminal]
    assert isinstance(terminal, Error) and terminal.code == code and terminal.status == status
    assert "Possible quota" not in terminal.message


@pytest.mark.parametrize(("case", "code"), [
    ("auth_401", "UPSTREAM_AUTH"),
    ("context_length_400", "CONTEXT_LENGTH"),
    ("rate_limit_429.max_retries_0", "RATE_LIMITED"),
    ("server_500", "UPSTREAM_5XX"),
    ("server_500.max_retries_0", "UPSTREAM_5XX"),
    ("empty_stdin", "UPSTREAM_CLIENT_ERROR"),
    ("devnull_stdin", "UPSTREAM_CLIENT_ERROR"),
    ("stdin_late_8s", "UPSTREAM_CLIENT_ERROR"),
    ("sigterm_group_mid_answer", "CLI_TERMINATED"),
    ("sigterm_mid_answer", "CLI_TERMINATED"),
    ("sigkill_mid_answer", "CLI_TERMINATED"),
    ("slash_init", "CONFIG_ERROR"),
    ("oauth.resource_url_mock", "CONFIG_ERROR"),
    ("stall_midstream", "STREAM_ABANDONED"),
    ("stdin_left_open", "CLI_TERMINATED"),
])
def test_failing_transcripts_end_in_their_code(case: str, code: str) -> None:
    lines, returncode, stderr = transcript(case)
    events, terminal = run(lines, returncode, stderr)
    assert not any(t.startswith("[API Error") for t in texts(events))
    assert isinstance(terminal, Error) and terminal.code == code, terminal


@pytest.mark.parametrize("case", ["success.no_relaunch", "success.network_strace",
                                  "rate_limit_429.then_success", "whitespace_stdin",
                                  "stdin_late_3s", "large_stdin_300k", "system_md_file",
                                  "slash_init.leading_newline", "at_file_relative"])
def test_succeeding_transcripts_stop_with_usage(case: str) -> None:
    lines, returncode, stderr = transcript(case)
    events, terminal = run(lines, returncode, stderr)
    assert terminal == Stop(finish_reason="stop")
    assert texts(events) and not any(t.startswith("[API Error") for t in texts(events))
    assert isinstance(events[-1], Usage) and events[-1].completion_tokens > 0


def test_a_bracket_is_held_only_until_it_cannot_be_an_api_error() -> None:
    events, terminal = run([delta("["), delta("1, 2]"), result_ok("[1, 2]")], 0)
    assert texts(events) == ["[1, 2]"]
    assert terminal == Stop(finish_reason="stop")


def test_held_text_is_sent_when_the_result_says_success() -> None:
    events, _ = run([delta("Here: "), delta("[API Err"), result_ok("Here: [API Err")], 0)
    assert texts(events) == ["Here: ", "[API Err"]


def test_an_api_error_after_content_is_dropped() -> None:
    events, terminal = run([delta("Hel"), delta(API_ERROR_429), result_error(API_ERROR_429)], 1)
    assert texts(events) == ["Hel"]
    assert isinstance(terminal, Error) and terminal.code == "RATE_LIMITED"


def test_the_result_text_is_sent_when_nothing_streamed() -> None:
    events, _ = run([result_ok("whole")], 0)
    assert events == [TextDelta(text="whole"), Usage(prompt_tokens=21, completion_tokens=4)]


def test_a_re_ask_after_streamed_text_is_abandoned() -> None:
    retry = line(type="system", subtype="retry",
                 data={"reason": "retry", "discardedToolCalls": 0, "preserveText": True})
    events, terminal = run([delta("partial"), retry, delta(" more")], -9)
    assert texts(events) == ["partial"]
    assert isinstance(terminal, Error) and terminal.code == "STREAM_ABANDONED"


def test_a_retry_start_line_without_text_is_nothing() -> None:
    retry = line(type="system", subtype="retry",
                 data={"reason": "retry", "discardedToolCalls": 0, "preserveText": False})
    events, _ = run([retry, delta("ok"), result_ok("ok")], 0)
    assert texts(events) == ["ok"]


def test_an_init_with_tools_ends_the_job() -> None:
    init = line(type="system", subtype="init", tools=["run_shell_command"], model="M")
    events, terminal = run([init, delta("x")], 0)
    assert isinstance(terminal, Error) and terminal.code == "CONFIG_ERROR"
    assert events == [terminal]


def test_odd_lines_give_nothing() -> None:
    events, terminal = run([b"", b"not json", b"[]", b'{"type": 3}',
                            b'{"type": "result", "usage": "x"}',
                            b'{"type": "stream_event", "event": {"type": "content_block_delta",'
                            b' "delta": {"type": "text_delta", "text": 5}}}'], 0)
    assert events == []
    assert isinstance(terminal, Error) and terminal.code == "PROTOCOL_ERROR"


def test_an_unexplained_exit_names_the_code_and_masks_secrets() -> None:
    _, terminal = run([], 3, b"boom with Bearer sk-abcdefghijklmnop\n")
    assert isinstance(terminal, Error) and terminal.code == "CLI_FAILED"
    assert "exited with code 3" in terminal.message and "abcdefghijklmnop" not in terminal.message
