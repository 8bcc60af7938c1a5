"""The claude stream-json parser against the real CLI's captured transcripts.

The transcripts are copied from ``cli-reference/claude/transcripts`` into
``tests/fixtures/cli-reference/claude/transcripts`` (claude 2.1.332 against a loopback mock;
the mock's answer is always "Hello from the mock upstream." in four deltas, usage 25/7).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st
from transcript_edits import edit_json_lines

from olp.ir import (
    Error,
    Event,
    ReasoningDelta,
    Retrying,
    Start,
    Stop,
    TextDelta,
    Usage,
    is_terminal,
)
from olp.providers.anthropic import AnthropicParser
from olp.providers.anthropic._classify import Failure, classify, parse_reset, retry_category

FIXTURES = (Path(__file__).resolve().parents[2] / "fixtures" / "cli-reference" / "claude"
            / "transcripts")
NOW = 1767225600.0  # 2026-01-01T00:00:00Z
MODEL = "claude-opus-5-5"
ANSWER = "Hello from the mock upstream."


def replay(case: str) -> tuple[list[Event], Event]:
    """Feed a transcript as the actor does: stop at the first terminal event, else finish."""
    meta = json.loads((FIXTURES / f"{case}.meta.json").read_text(encoding="utf-8"))
    parser = AnthropicParser(now=lambda: NOW)
    events: list[Event] = []
    for line in (FIXTURES / f"{case}.stdout").read_bytes().splitlines():
        for event in parser.feed(line):
            if is_terminal(event):
                assert parser.finish(meta["exit_code"], b"") == event  # finish repeats it
                return events, event
            events.append(event)
    stderr = (FIXTURES / f"{case}.stderr").read_bytes()
    return events, parser.finish(meta["exit_code"], stderr)


def retry_shape(events: list[Event]) -> list[tuple[int, str, int | None, int | None]]:
    """(attempt, category, status, max_retries) of Retrying events; each has a delay."""
    assert all(isinstance(e, Retrying) and e.delay_s and e.delay_s > 0 for e in events)
    return [(e.attempt, e.category, e.status, e.max_retries)
            for e in events if isinstance(e, Retrying)]


HELLO_STREAM = [TextDelta(text=t) for t in ("Hello", " from", " the mock", " upstream.")]
USAGE = Usage(prompt_tokens=25, completion_tokens=7)

SUCCESS_CASES: dict[str, list[Event]] = {
    "success.partial": [Start(model=MODEL), *HELLO_STREAM, USAGE],
    # Without --include-partial-messages the text comes once, from the assistant line.
    "success.stream-json": [Start(model=MODEL), TextDelta(text=ANSWER), USAGE],
    "stdin.stream-json": [Start(model=MODEL), TextDelta(text=ANSWER), USAGE],
    "stdin_multiturn.stream-json": [Start(model=MODEL), TextDelta(text=ANSWER), USAGE,
                                    TextDelta(text=ANSWER), USAGE],
    "options.system_model_tools": [Start(model="claude-sonnet-4-5"), TextDelta(text=ANSWER),
                                   USAGE],
    # --output-format json prints only the result line; its text is the answer.
    "success.json": [TextDelta(text=ANSWER), USAGE],
    "success.auth_token_bearer.json": [TextDelta(text=ANSWER), USAGE],
}


@pytest.mark.parametrize("case", sorted(SUCCESS_CASES))
def test_success_transcripts(case: str) -> None:
    events, terminal = replay(case)
    assert events == SUCCESS_CASES[case]
    assert terminal == Stop(finish_reason="stop")


# case -> (retry lines: (count, category, status, max_retries) or None, code, category, status)
ERROR_CASES: dict[str, tuple[tuple[int, str, int | None, int] | None, str, str, int | None]] = {
    "rate_limit.stream-json": ((10, "rate_limited", 429, 10), "RATE_LIMITED", "rate_limited",
                               429),
    "rate_limit.json": (None, "RATE_LIMITED", "rate_limited", 429),
    "auth.stream-json": (None, "UPSTREAM_AUTH", "auth", 401),
    "auth.json": (None, "UPSTREAM_AUTH", "auth", 401),
    "no_api_key.stream-json": (None, "AUTH_MISSING", "auth", None),
    "server_error_500.stream-json": ((3, "unavailable", 500, 3), "UPSTREAM_5XX", "unavailable",
                                     500),
    "overloaded_529.stream-json": ((2, "unavailable", 529, 10), "OVERLOADED", "unavailable",
                                   529),
    # claude reports a dropped connection's retries as error "unknown" with no status.
    "conn_drop": ((10, "unknown", None, 10), "CONNECTION_FAILED", "unavailable", None),
    "hang.api_timeout_5s.stream-json": ((1, "unknown", None, 1), "UPSTREAM_TIMEOUT",
                                        "unavailable", None),
    "hang.noretry_default_timeout.stream-json": (None, "UPSTREAM_TIMEOUT", "unavailable",
                                                 None),
}


@pytest.mark.parametrize("case", sorted(ERROR_CASES))
def test_error_transcripts(case: str) -> None:
    retry, code, category, status = ERROR_CASES[case]
    events, terminal = replay(case)
    if retry is None:
        assert events == []
    else:
        count, retry_category, retry_status, max_retries = retry
        assert retry_shape(events) == [(i + 1, retry_category, retry_status, max_retries)
                                       for i in range(count)]
    assert isinstance(terminal, Error)
    assert (terminal.code, terminal.category, terminal.status) == (code, category, status)
    result = _result_text(case)
    assert terminal.message == (result if len(result) <= 300 else result[:299] + "…")
    assert len(terminal.message) <= 300


def _result_text(case: str) -> str:
    for line in (FIXTURES / f"{case}.stdout").read_text(encoding="utf-8").splitlines():
        obj = json.loads(line)
        if obj.get("type") == "result":
            return str(obj["result"])
    raise AssertionError(f"{case} has no result line")


def test_rate_limit_retry_after_exact() -> None:
    events, terminal = replay("rate_limit_retry_after.stream-json")
    assert events == [
        Retrying(attempt=1, max_retries=2, delay_s=4.492, status=429, category="rate_limited"),
        Retrying(attempt=2, max_retries=2, delay_s=4.149, status=429, category="rate_limited"),
    ]
    assert isinstance(terminal, Error)
    assert (terminal.code, terminal.category, terminal.status) == (
        "RATE_LIMITED", "rate_limited", 429)
    assert terminal.message.startswith("API Error: Request rejected (429) · ")


def test_sigterm_mid_stream_is_cli_failed() -> None:
    events, terminal = replay("sigterm.stream-json")
    assert events == [Start(model=MODEL), TextDelta(text=" chunk0"), TextDelta(text=" chunk1"),
                      TextDelta(text=" chunk2")]
    assert isinstance(terminal, Error)
    assert (terminal.code, terminal.category) == ("CLI_FAILED", "unknown")
    assert "143" in terminal.message and "SIGTERM" in terminal.message


def test_sigterm_json_mode_prints_nothing() -> None:
    events, terminal = replay("sigterm.json")
    assert events == []
    assert isinstance(terminal, Error) and terminal.code == "CLI_FAILED"
    assert "143" in terminal.message


@pytest.mark.parametrize("case", ["hang.default.stream-json", "stall_midstream.stream-json"])
def test_harness_killed_runs(case: str) -> None:
    events, terminal = replay(case)
    if case.startswith("stall"):
        assert events == [Start(model=MODEL), TextDelta(text="Hello")]
    else:
        assert events == []
    assert isinstance(terminal, Error)
    assert (terminal.code, terminal.category) == ("CLI_FAILED", "unknown")
    assert "signal 9" in terminal.message and "SIGKILL" in terminal.message


def test_stall_default_abandon_after_text_is_terminal() -> None:
    events, terminal = replay("stall_default.stream-json")
    assert events == [Start(model=MODEL), TextDelta(text="Hello")]
    assert isinstance(terminal, Error)
    assert (terminal.code, terminal.category) == ("STREAM_ABANDONED", "unavailable")


def test_stall_default_abandon_before_text_yields_the_reask_once() -> None:
    lines = [line for line in (FIXTURES / "stall_default.stream-json.stdout").read_bytes()
             .splitlines() if b'"text_delta"' not in line]
    parser = AnthropicParser()
    events = [e for line in lines for e in parser.feed(line)]
    assert events == [Start(model=MODEL), TextDelta(text=ANSWER),
                      Usage(prompt_tokens=50, completion_tokens=8)]
    assert parser.finish(0, b"") == Stop()


def test_text_mode_outputs_are_not_protocol() -> None:
    _, ok = replay("success.text")
    assert isinstance(ok, Error) and ok.code == "PROTOCOL_ERROR" and ok.category == "unknown"
    _, failed = replay("auth.text")
    assert isinstance(failed, Error) and failed.code == "CLI_FAILED"


def test_every_transcript_is_covered() -> None:
    covered = {*SUCCESS_CASES, *ERROR_CASES, "rate_limit_retry_after.stream-json",
               "sigterm.stream-json", "sigterm.json", "hang.default.stream-json",
               "stall_midstream.stream-json", "stall_default.stream-json", "success.text",
               "auth.text"}
    # the tool-calling cases are replayed in test_anthropic_tools.py
    covered |= {f"tools.{case}.stream-json" for case in (
        "call", "parallel", "result", "bridge_failed", "ask_bash")}
    present = {p.name.removesuffix(".stdout") for p in FIXTURES.glob("*.stdout")}
    assert present == covered


# ---- synthetic lines -------------------------------------------------------------------

def _line(obj: object) -> bytes:
    return json.dumps(obj).encode()


def _result(**fields: object) -> bytes:
    base: dict[str, object] = {"type": "result", "subtype": "success", "is_error": False,
                               "result": "x", "stop_reason": "end_turn",
                               "usage": {"input_tokens": 10, "output_tokens": 3}}
    return _line({**base, **fields})


def _delta(text: str, mid: str = "m1", kind: str = "text_delta") -> bytes:
    return _line({"type": "stream_event", "api_message_id": mid, "event": {
        "type": "content_block_delta", "index": 0, "delta": {"type": kind, kind[:-6]: text}}})


def test_usage_sums_cache_tokens_and_comes_before_stop() -> None:
    parser = AnthropicParser()
    parser.feed(_delta("hi"))
    usage = {"input_tokens": 3, "cache_creation_input_tokens": 100,
             "cache_read_input_tokens": 2000, "output_tokens": 9}
    assert parser.feed(_result(usage=usage)) == [Usage(
        prompt_tokens=2103, completion_tokens=9, cached_tokens=2000, cache_write_tokens=100)]
    assert parser.finish(0, b"") == Stop(finish_reason="stop")


def _cache_figures(usage: dict[str, Any]) -> bool:
    usage.update(input_tokens=3, cache_creation_input_tokens=100, cache_read_input_tokens=2000)
    return True


def test_cached_input_comes_from_the_real_result_line() -> None:
    """The captured result line with cache figures written in: prompt tokens are every input
    token (as the ledger has always counted them), the cached and written ones told apart."""
    lines = edit_json_lines(
        (FIXTURES / "success.partial.stdout").read_bytes().splitlines(),
        lambda o: o.get("type") == "result" and _cache_figures(o["usage"]))
    parser = AnthropicParser(now=lambda: NOW)
    events = [e for line in lines for e in parser.feed(line)]
    assert events == [Start(model=MODEL), *HELLO_STREAM, Usage(
        prompt_tokens=2103, completion_tokens=7, cached_tokens=2000, cache_write_tokens=100)]
    assert parser.finish(0, b"") == Stop()


def test_a_tool_call_stop_takes_the_cached_input_of_its_message_start() -> None:
    """A run ended at the tool call has no result line: the figures of the real
    ``message_start`` (here written in) and the ``message_delta``'s output count."""
    lines = edit_json_lines(
        (FIXTURES / "tools.call.stream-json.stdout").read_bytes().splitlines(),
        lambda o: (o.get("event") or {}).get("type") == "message_start"
        and _cache_figures(o["event"]["message"]["usage"]))
    parser = AnthropicParser(now=lambda: NOW)
    events: list[Event] = []
    for line in lines:
        events += parser.feed(line)
        if events and is_terminal(events[-1]):
            break
    assert events[-2:] == [Usage(prompt_tokens=2103, completion_tokens=7, cached_tokens=2000,
                                 cache_write_tokens=100), Stop(finish_reason="tool_calls")]


@pytest.mark.parametrize(("stop_reason", "finish"), [
    ("end_turn", "stop"), ("stop_sequence", "stop"), ("max_tokens", "length"),
    ("tool_use", "tool_calls"), (None, "stop"), ("something_new", "stop"),
])
def test_stop_reason_mapping(stop_reason: str | None, finish: str) -> None:
    parser = AnthropicParser()
    parser.feed(_result(stop_reason=stop_reason))
    assert parser.finish(0, b"") == Stop(finish_reason=finish)  # type: ignore[arg-type]


def test_other_stream_events_are_ignored() -> None:
    parser = AnthropicParser()
    assert not parser.feed(_line({"type": "stream_event", "event": {"type": "ping"}}))
    assert not parser.feed(_line({"type": "rate_limit_event", "rate_limit_info": {}}))
    assert not parser.feed(_line({"type": "system", "subtype": "status"}))
    assert not parser.feed(_line({"type": "some_future_type", "x": 1}))


def test_assistant_after_deltas_of_same_message_is_not_repeated() -> None:
    parser = AnthropicParser()
    assert list(parser.feed(_delta("Hel"))) == [TextDelta(text="Hel")]
    assistant = {"type": "assistant", "message": {"id": "m1", "model": MODEL,
                                                  "content": [{"type": "text", "text": "Hel"}]}}
    assert list(parser.feed(_line(assistant))) == []
    other = {"type": "assistant", "message": {
        "id": "m2", "model": MODEL, "content": [{"type": "thinking", "thinking": "…"},
                                                {"type": "text", "text": "B"}]}}
    # its thinking was not streamed either (issue #27: cli-reference/claude/reasoning)
    assert list(parser.feed(_line(other))) == [Start(model=MODEL), ReasoningDelta(text="…"),
                                               TextDelta(text="B")]


def test_success_after_nonzero_exit_is_cli_failed() -> None:
    parser = AnthropicParser()
    parser.feed(_delta("hi"))
    parser.feed(_result())
    terminal = parser.finish(1, b"")
    assert isinstance(terminal, Error) and terminal.code == "CLI_FAILED"
    assert "exited with code 1" in terminal.message


def test_error_assistant_without_result_is_classified_on_exit() -> None:
    parser = AnthropicParser()
    line = {"type": "assistant", "error": "rate_limit", "is_api_error_message": True,
            "api_error_status": 429, "api_error_type": "rate_limit_error",
            "message": {"id": "x", "model": "<synthetic>",
                        "content": [{"type": "text", "text": "API Error: 429"}]}}
    assert not parser.feed(_line(line))
    terminal = parser.finish(143, b"")
    assert isinstance(terminal, Error)
    assert (terminal.code, terminal.status, terminal.message) == (
        "RATE_LIMITED", 429, "API Error: 429")


def test_error_result_without_text_still_has_a_message() -> None:
    parser = AnthropicParser()
    (terminal,) = parser.feed(_line({"type": "result", "subtype": "error_during_execution",
                                     "is_error": True}))
    assert isinstance(terminal, Error) and terminal.category == "unknown"
    assert terminal.message == "claude reported error_during_execution"
    assert not parser.feed(_delta("late"))  # nothing after a terminal
    assert parser.finish(1, b"") is terminal


def test_cli_failed_stderr_excerpt_is_short_one_line_and_masked() -> None:
    stderr = b"boot\x1b[31m\n" + b"x" * 500 + b"\nkey sk-ant-api03-SECRETSECRET\tBearer abc.def\n"
    terminal = AnthropicParser().finish(2, stderr)
    assert isinstance(terminal, Error)
    excerpt = terminal.message.split("stderr: ", 1)[1]
    assert len(excerpt) <= 200 and excerpt.startswith("…")
    assert "\n" not in terminal.message and "\x1b" not in terminal.message
    assert "SECRET" not in excerpt and "abc.def" not in excerpt
    assert excerpt.endswith("key sk-ant-… Bearer …")


def test_cli_failed_without_stderr_names_exit_code() -> None:
    terminal = AnthropicParser().finish(7, b"")
    assert terminal == Error(code="CLI_FAILED", category="unknown",
                             message="claude exited with code 7")


@pytest.mark.parametrize("line", [
    b"", b"   ", b"not json", b"[1, 2]", b'"a string"', b"null", b"\xff\xfe{", b'{"type": 5}',
    b'{"type":"result","is_error":"yes"}',
    b'{"type":"stream_event","event":{"type":"content_block_delta",'
    b'"delta":{"type":"text_delta","text":5}}}',
    b'{"type":"system","subtype":"api_retry","attempt":"one"}',
    b'{"type":"assistant","message":"nope"}',
    b'{"type":"result"',
])
def test_odd_lines_give_nothing(line: bytes) -> None:
    parser = AnthropicParser()
    assert list(parser.feed(line)) == []
    assert isinstance(parser.finish(0, b""), Error)


@given(st.binary(max_size=300))
def test_feed_never_raises_on_bytes(data: bytes) -> None:
    parser = AnthropicParser()
    for event in parser.feed(data):
        msgspec.json.encode(event)
    parser.finish(0, data)


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner,
                                                                 max_size=3),
    max_leaves=12,
)
_types = st.sampled_from(["system", "stream_event", "assistant", "result", "user", "x"])


@given(_types, st.sampled_from([None, "api_retry", "init"]),
       st.dictionaries(st.sampled_from(["event", "message", "result", "is_error", "usage",
                                        "attempt", "error", "abandoned_blocks",
                                        "api_message_id"]), _json, max_size=5))
def test_feed_never_raises_on_odd_objects(kind: str, subtype: str | None,
                                          fields: dict[str, object]) -> None:
    parser = AnthropicParser()
    parser.feed(_line({"type": kind, "subtype": subtype, **fields}))
    parser.finish(1, b"")


# ---- classification ----------------------------------------------------------------------
# Rows marked "synthetic" use vendor phrasings that are NOT in the captures (the captures were
# made with an API key against a mock, so no subscription window or billing text appears);
# they are what claude / the Anthropic API print for those cases, to the best of our knowledge.

@pytest.mark.parametrize(("failure", "code", "category", "status"), [
    # from the captures
    (Failure(text="API Error: Request rejected (429) · This request would exceed your "
                  "organization's rate limit of 50 requests per minute. Please reduce the "
                  "prompt length or the maximum tokens requested, or try again later.",
             status=429, error_type="rate_limit_error", assistant_error="rate_limit"),
     "RATE_LIMITED", "rate_limited", 429),
    (Failure(text="Invalid API key · Fix external API key", status=401,
             error_type="authentication_error", assistant_error="authentication_failed"),
     "UPSTREAM_AUTH", "auth", 401),
    (Failure(text="Not logged in · Please run /login", assistant_error="authentication_failed"),
     "AUTH_MISSING", "auth", None),
    (Failure(text="API Error: 500 Internal server error.", status=500, error_type="api_error",
             assistant_error="server_error"), "UPSTREAM_5XX", "unavailable", 500),
    (Failure(text="API Error: Repeated 529 Overloaded errors.", status=529,
             error_type="overloaded_error", assistant_error="server_error"),
     "OVERLOADED", "unavailable", 529),
    (Failure(text="API Error: Connection dropped (ECONNRESET). Check the gateway set in "
                  "ANTHROPIC_BASE_URL, then try again.", api_error="connection_failed",
             assistant_error="server_error"), "CONNECTION_FAILED", "unavailable", None),
    (Failure(text="Request timed out. No data arrived for more than 5 minutes. If a proxy or "
                  "gateway on your network holds responses until they complete, set "
                  "CLAUDE_STREAM_IDLE_TIMEOUT_MS above the limit in force.",
             assistant_error="server_error"), "UPSTREAM_TIMEOUT", "unavailable", None),
    # other statuses and types (synthetic lines)
    (Failure(text="x", status=403, error_type="permission_error"), "UPSTREAM_AUTH", "auth",
     403),
    (Failure(text="API Error: 503", status=503), "UPSTREAM_5XX", "unavailable", 503),
    (Failure(text="API Error: 502 Bad Gateway", status=502), "UPSTREAM_5XX", "unavailable", 502),
    (Failure(text="odd", assistant_error="server_error"), "UPSTREAM_UNAVAILABLE", "unavailable",
     None),
    (Failure(text="API Error: 400 prompt is too long: 1200000 tokens > 1000000 maximum",
             status=400, error_type="invalid_request_error"),
     "CONTEXT_LENGTH", "context_length", 400),
    (Failure(text="input length and max_tokens exceed context limit: too many tokens",
             status=400), "CONTEXT_LENGTH", "context_length", 400),
    (Failure(text="API Error: 400 messages: roles must alternate", status=400,
             error_type="invalid_request_error"), "UPSTREAM_CLIENT_ERROR", "client_error", 400),
    (Failure(text="model: not found", status=404, error_type="not_found_error"),
     "UPSTREAM_CLIENT_ERROR", "client_error", 404),
    (Failure(text="request too large", status=413, error_type="request_too_large"),
     "UPSTREAM_CLIENT_ERROR", "client_error", 413),
    (Failure(text="unprocessable", status=422), "UPSTREAM_CLIENT_ERROR", "client_error", 422),
    (Failure(text="Output blocked by content filtering policy"), "UPSTREAM_CLIENT_ERROR",
     "client_error", None),
    (Failure(text="bad", assistant_error="invalid_request"), "UPSTREAM_CLIENT_ERROR",
     "client_error", None),
    (Failure(text="something odd happened"), "UPSTREAM_ERROR", "unknown", None),
    (Failure(), "UPSTREAM_ERROR", "unknown", None),
    # subscription usage windows (synthetic)
    (Failure(text="Claude AI usage limit reached|1767229200", status=429,
             assistant_error="rate_limit"), "USAGE_WINDOW", "usage_window", 429),
    (Failure(text="5-hour limit reached ∙ resets 3pm (UTC)", assistant_error="rate_limit"),
     "USAGE_WINDOW", "usage_window", None),
    (Failure(text="You've hit your limit · resets 5am (Europe/Paris)"), "USAGE_WINDOW",
     "usage_window", None),
    (Failure(text="Claude usage limit reached. Your limit will reset at 3pm.", status=429,
             error_type="rate_limit_error"), "USAGE_WINDOW", "usage_window", 429),
    (Failure(text="Weekly limit reached ∙ resets Oct 9, 10am"), "USAGE_WINDOW", "usage_window",
     None),
    # billing (synthetic)
    (Failure(text="Your credit balance is too low to access the Anthropic API. Please go to "
                  "Plans & Billing to upgrade or purchase credits.", status=400,
             error_type="invalid_request_error"), "BILLING", "billing", 400),
    (Failure(text="Insufficient credit for this request", status=429,
             error_type="rate_limit_error"), "BILLING", "billing", 429),
    (Failure(text="no", assistant_error="billing_error"), "BILLING", "billing", None),
    (Failure(text="Please check your billing details", status=403), "BILLING", "billing", 403),
])
def test_classify(failure: Failure, code: str, category: str, status: int | None) -> None:
    error = classify(failure, now=NOW)
    assert (error.code, error.category, error.status) == (code, category, status)
    assert error.message and len(error.message) <= 300


def test_classify_message_is_cut_to_300() -> None:
    error = classify(Failure(text="API Error: " + "z" * 1000, status=500), now=NOW)
    assert len(error.message) == 300 and error.message.endswith("…")


@pytest.mark.parametrize(("text", "seconds"), [
    ("Claude AI usage limit reached|1767229200", 3600.0),
    ("Claude AI usage limit reached|1767000000", 0.0),  # already past
    ("usage limit reached, try again in 2 hours", 7200.0),
    ("usage limit reached; resets in 2 hours 30 minutes", 9000.0),
    ("usage limit reached, try again in 45 minutes", 2700.0),
    ("5-hour limit reached ∙ resets 3pm (UTC)", 15 * 3600.0),
    ("5-hour limit reached ∙ resets at 3:30 pm (UTC)", 15.5 * 3600.0),
    ("limit will reset at 00:00 (UTC)", 24 * 3600.0),  # the next midnight, not now
    ("Weekly limit reached ∙ resets Jan 2, 10am (UTC)", 34 * 3600.0),
    ("5-hour limit reached ∙ resets 1am (Europe/London)", 3600.0),  # GMT in winter
    ("Claude usage limit reached.", None),
    ("limit reached, resets 3 (UTC)", None),  # a bare hour is ambiguous
])
def test_parse_reset(text: str, seconds: float | None) -> None:
    assert parse_reset(text, now=NOW) == seconds


def test_usage_window_error_carries_retry_after() -> None:
    error = classify(Failure(text="Claude AI usage limit reached|1767229200", status=429),
                     now=NOW)
    assert (error.category, error.retry_after_s) == ("usage_window", 3600.0)


@pytest.mark.parametrize(("error", "status", "category"), [
    ("rate_limit", 429, "rate_limited"), ("rate_limit", None, "rate_limited"),
    (None, 429, "rate_limited"), ("server_error", 500, "unavailable"),
    ("overloaded", 529, "unavailable"), ("unknown", 503, "unavailable"),
    ("unknown", None, "unknown"), (None, None, "unknown"), ("unknown", 401, "auth"),
    ("authentication_failed", None, "auth"),
])
def test_retry_category(error: str | None, status: int | None, category: str) -> None:
    assert retry_category(error, status) == category
