"""The gemini ``-o stream-json`` parser against the real CLI's captured transcripts.

``tests/fixtures/cli-reference/gemini/transcripts``: gemini-cli 0.61.0 against a loopback mock
of the Gemini API (the answer is "Hello from the mock upstream.", usage 25/7). Each case is
replayed as the runner does it: stdout lines through ``feed``, then ``trailer`` and ``finish``
with the exit code and the captured stderr.
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

from olp.ir import Error, Event, Stop, TextDelta, Usage, is_terminal
from olp.providers.gemini import ADAPTER, GeminiParser
from olp.providers.gemini._classify import daily_reset

FIXTURES = (Path(__file__).resolve().parents[2] / "fixtures" / "cli-reference" / "gemini"
            / "transcripts")
NOW = 1767225600.0  # 2026-01-01T00:00:00Z
ANSWER = "Hello from the mock upstream."
CASES = sorted(p.name.removesuffix(".stdout.jsonl") for p in FIXTURES.glob("*.stdout.jsonl"))


def replay(case: str) -> tuple[list[Event], Event]:
    """(events from stdout and the trailer, terminal) for one captured case."""
    meta = json.loads((FIXTURES / f"{case}.meta.json").read_text(encoding="utf-8"))
    parser = GeminiParser(now=lambda: NOW)
    events: list[Event] = []
    for line in (FIXTURES / f"{case}.stdout.jsonl").read_bytes().splitlines():
        for event in parser.feed(line):
            assert not is_terminal(event)
            events.append(event)
    stderr = (FIXTURES / f"{case}.stderr").read_bytes()
    events += parser.trailer(meta["exit_code"], stderr)
    terminal = parser.finish(meta["exit_code"], stderr)
    assert parser.finish(meta["exit_code"], stderr) == terminal  # idempotent
    return events, terminal


def text_of(events: list[Event]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


@pytest.mark.parametrize("case", ["success.recipe", "success", "success.thoughts",
                                  "tools.no_tools", "rate_limit.once", "server_500.once",
                                  "system_md.no_tools"])
def test_success_streams_token_deltas_then_usage_then_stop(case: str) -> None:
    events, terminal = replay(case)
    deltas = [e for e in events if isinstance(e, TextDelta)]
    assert [d.text for d in deltas] == ["Hello", " from", " the mock", " upstream."]
    assert events[-1] == Usage(prompt_tokens=25, completion_tokens=7)
    assert terminal == Stop(finish_reason="stop")


def test_cached_input_comes_from_the_result_stats() -> None:
    """``result.stats``: ``input_tokens`` is the prompt count, cached ones included (gemini's
    ``input`` is the rest), ``cached`` the cached part. The captured line with a cache figure
    written in (the mock keeps no cache)."""
    def cached(obj: dict[str, Any]) -> bool:
        if obj.get("type") != "result":
            return False
        obj["stats"].update(input_tokens=1025, cached=1000, input=25)
        return True

    lines = edit_json_lines((FIXTURES / "success.stdout.jsonl").read_bytes().splitlines(),
                            cached)
    parser = GeminiParser(now=lambda: NOW)
    events = [e for line in lines for e in parser.feed(line)]
    assert events[-1] == Usage(prompt_tokens=1025, completion_tokens=7, cached_tokens=1000)
    assert parser.finish(0, b"") == Stop()


def test_the_echoed_prompt_is_not_content() -> None:
    for case in ("success.recipe", "slash.init.no_tools", "stdin.p_text_and_stdin"):
        events, _ = replay(case)
        assert text_of(events) == ANSWER


@pytest.mark.parametrize(("case", "code", "category", "status", "retry_after"), [
    ("rate_limit.max_attempts_1", "RATE_LIMITED", "rate_limited", 429, 2.0),
    ("rate_limit.recipe", "RATE_LIMITED", "rate_limited", 429, 2.0),
    ("rate_limit_bare", "RATE_LIMITED", "rate_limited", 429, None),
    ("rate_limit_daily", "USAGE_WINDOW", "usage_window", 429, daily_reset(NOW)),
    ("invalid_key_400", "UPSTREAM_AUTH", "auth", 400, None),
    ("unauthenticated_401", "UPSTREAM_AUTH", "auth", 401, None),
    ("permission_403", "UPSTREAM_AUTH", "auth", 403, None),
    ("not_found_404", "UPSTREAM_CLIENT_ERROR", "client_error", 404, None),
    ("server_500.max_attempts_1", "UPSTREAM_5XX", "unavailable", 500, None),
    ("unavailable_503", "OVERLOADED", "unavailable", 503, None),
    ("conn_drop", "CONNECTION_FAILED", "unavailable", None, None),
    ("empty_response", "UPSTREAM_UNAVAILABLE", "unavailable", None, None),
    ("slash.chat_share.no_tools", "UPSTREAM_CLIENT_ERROR", "client_error", 400, None),
])
def test_error_results(case: str, code: str, category: str, status: int | None,
                       retry_after: float | None) -> None:
    _, terminal = replay(case)
    assert isinstance(terminal, Error)
    assert (terminal.code, terminal.category, terminal.status) == (code, category, status)
    assert terminal.retry_after_s == retry_after
    assert not terminal.message.startswith("[API Error")
    assert "fake-gemini-key" not in terminal.message


def test_the_daily_quota_resets_at_midnight_pacific() -> None:
    # 2026-01-01T00:00Z is 16:00 PST on Dec 31: 8 hours to go
    assert daily_reset(NOW) == 8 * 3600


def test_a_dropped_stream_keeps_the_deltas_it_printed() -> None:
    events, terminal = replay("conn_drop")
    assert text_of(events) == "Hello from"
    assert isinstance(terminal, Error) and "terminated" in terminal.message


def test_an_empty_answer_exits_0_and_is_a_failure() -> None:
    events, terminal = replay("empty_response")
    assert text_of(events) == ""
    assert isinstance(terminal, Error)
    assert "empty response" in terminal.message


@pytest.mark.parametrize("case", ["sigterm.recipe", "sigterm.no_relaunch", "sigterm_group",
                                  "stdout_closed.recipe", "sigkill.recipe", "stall", "hang"])
def test_no_result_line_is_never_success(case: str) -> None:
    events, terminal = replay(case)
    assert isinstance(terminal, Error)
    assert (terminal.code, terminal.category) == ("CLI_TERMINATED", "unavailable")
    assert not any(isinstance(e, Usage) for e in events)


@pytest.mark.parametrize(("case", "code", "category"), [
    ("no_api_key", "AUTH_MISSING", "auth"),
    ("no_auth_setting", "AUTH_MISSING", "auth"),
    ("oauth.no_creds", "AUTH_MISSING", "auth"),
    ("oauth.fake_creds", "AUTH_MISSING", "auth"),
    ("dotenv_parent.no_tools", "AUTH_MISSING", "auth"),
    ("no_trust", "CONFIG_ERROR", "auth"),
    ("bad_flag", "CONFIG_ERROR", "auth"),
    ("stdin.empty.recipe", "UPSTREAM_CLIENT_ERROR", "client_error"),
])
def test_start_up_failures_from_stderr_and_the_exit_code(case: str, code: str,
                                                         category: str) -> None:
    _, terminal = replay(case)
    assert isinstance(terminal, Error)
    assert (terminal.code, terminal.category) == (code, category)
    assert not terminal.message.startswith("Warning:")
    assert not terminal.message.lstrip().startswith("at ")


def test_the_auth_message_is_the_clis_own() -> None:
    _, terminal = replay("no_api_key")
    assert isinstance(terminal, Error)
    assert terminal.message.startswith("When using Gemini API, you must specify")


@pytest.mark.parametrize("case", CASES)
def test_every_capture_ends_in_exactly_one_terminal_event(case: str) -> None:
    events, terminal = replay(case)
    assert is_terminal(terminal)
    assert not any(is_terminal(e) for e in events)
    if isinstance(terminal, Stop):
        assert text_of(events)  # a success always has content


def test_a_non_zero_exit_after_success_is_a_failure() -> None:
    parser = GeminiParser()
    for line in (FIXTURES / "success.recipe.stdout.jsonl").read_bytes().splitlines():
        parser.feed(line)
    terminal = parser.finish(1, b"boom")
    assert isinstance(terminal, Error) and terminal.code == "CLI_FAILED"


def test_lines_after_the_result_are_ignored() -> None:
    parser = GeminiParser()
    for line in (FIXTURES / "success.recipe.stdout.jsonl").read_bytes().splitlines():
        parser.feed(line)
    assert parser.feed(b'{"type":"message","role":"assistant","content":"late"}') == ()


@given(st.binary(max_size=200))
def test_feed_never_raises(line: bytes) -> None:
    GeminiParser().feed(line)


@given(st.dictionaries(st.sampled_from(["type", "role", "content", "status", "stats",
                                        "error", "delta"]),
                       st.one_of(st.none(), st.integers(), st.text(), st.booleans(),
                                 st.sampled_from(["message", "result", "error", "assistant",
                                                  "success"]))))
def test_feed_tolerates_odd_objects(obj: dict[str, object]) -> None:
    parser = GeminiParser()
    parser.feed(msgspec.json.encode(obj))
    assert is_terminal(parser.finish(0, b""))


def test_the_adapter_makes_a_fresh_parser() -> None:
    adapter = ADAPTER
    assert adapter.parser(Path("/w")) is not adapter.parser(Path("/w"))
