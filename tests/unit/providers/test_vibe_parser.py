"""The vibe ``--output streaming`` parser against the real CLI's captured transcripts.

The transcripts are copied from ``cli-reference/vibe/transcripts`` into
``tests/fixtures/cli-reference/vibe/transcripts`` (vibe 3.0.2 against a loopback mock; the
answer is always "Hello from the mock upstream.", usage 25/7). Each case is replayed as the
runner does it: stdout lines through ``feed``, then the case's ``export.json`` placed where
``--output-dir <workdir>/out`` puts it, then ``trailer`` and ``finish`` with the exit code and
the captured stderr.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from olp.actors import LineParser
from olp.ir import Error, Event, Stop, TextDelta, Usage, is_terminal
from olp.providers.vibe import ADAPTER, VibeParser

FIXTURES = (Path(__file__).resolve().parents[2] / "fixtures" / "cli-reference" / "vibe"
            / "transcripts")
NOW = 1767225600.0  # 2026-01-01T00:00:00Z
ANSWER = "Hello from the mock upstream."
CASES = sorted(p.name.removesuffix(".meta.json") for p in FIXTURES.glob("*.meta.json"))


def replay(case: str, workdir: Path) -> tuple[list[Event], list[Event], Event]:
    """(events from stdout, trailer events, terminal) for one captured case."""
    meta = json.loads((FIXTURES / f"{case}.meta.json").read_text(encoding="utf-8"))
    export = FIXTURES / f"{case}.export.json"
    if export.exists():
        (workdir / "out").mkdir(parents=True)
        shutil.copy(export, workdir / "out" / "export.json")
    parser = VibeParser(workdir, now=lambda: NOW)
    events: list[Event] = []
    for line in (FIXTURES / f"{case}.stdout").read_bytes().splitlines():
        for event in parser.feed(line):
            assert not is_terminal(event)
            events.append(event)
    stderr = (FIXTURES / f"{case}.stderr").read_bytes()
    trailer = list(parser.trailer(meta["exit_code"], stderr))
    terminal = parser.finish(meta["exit_code"], stderr)
    assert parser.finish(meta["exit_code"], stderr) == terminal  # idempotent
    assert list(parser.trailer(meta["exit_code"], stderr)) == trailer
    return events, trailer, terminal


def test_cached_input_comes_from_the_export(tmp_path: Path) -> None:
    """``export.json`` usage: ``input_tokens`` counts every prompt token, of which
    ``cached_input_tokens`` were cached. The captured export with a cache figure written in
    (the mock keeps no cache)."""
    case = "success_with_export.streaming"
    export = json.loads((FIXTURES / f"{case}.export.json").read_text(encoding="utf-8"))
    export["usage"].update(input_tokens=1025, cached_input_tokens=1000)
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "export.json").write_text(json.dumps(export), encoding="utf-8")
    parser = VibeParser(tmp_path, now=lambda: NOW)
    for line in (FIXTURES / f"{case}.stdout").read_bytes().splitlines():
        parser.feed(line)
    assert list(parser.trailer(0, b"")) == [
        Usage(prompt_tokens=1025, completion_tokens=7, cached_tokens=1000)]
    assert parser.finish(0, b"") == Stop()


def test_every_transcript_is_covered_below() -> None:
    assert set(CASES) == set(EXPECTED) | set(NOT_STREAMING) | {"hang.default.streaming"}


USAGE = Usage(prompt_tokens=25, completion_tokens=7)
HELLO: list[Event] = [TextDelta(text=ANSWER)]

# case -> (content events, trailer, terminal: Stop or (code, category))
EXPECTED: dict[str, tuple[list[Event], list[Event], Stop | tuple[str, str]]] = {
    "success_with_export.streaming": (HELLO, [USAGE], Stop()),
    "stdin_prompt.streaming": (HELLO, [USAGE], Stop()),
    "options.agents_md_trust": (HELLO, [USAGE], Stop()),
    "options.max_turns_tools": (HELLO, [USAGE], Stop()),
    "options.model_system_prompt": (HELLO, [USAGE], Stop()),
    # captured without --output-dir: no export.json, so no usage, still a clean stop
    "success.streaming": (HELLO, [], Stop()),
    "auth.streaming": ([], [], ("UPSTREAM_AUTH", "auth")),
    "no_api_key.streaming": ([], [], ("AUTH_MISSING", "auth")),
    "rate_limit.fast.streaming": ([], [], ("RATE_LIMITED", "rate_limited")),
    "rate_limit_retry_after.streaming": ([], [], ("RATE_LIMITED", "rate_limited")),
    "rate_limit.streaming": ([], [], ("RATE_LIMITED", "rate_limited")),  # no export: stderr
    "server_error_500.streaming": ([], [], ("UPSTREAM_5XX", "unavailable")),
    "overloaded_503.streaming": ([], [], ("UPSTREAM_5XX", "unavailable")),
    "hang.timeout_5s.streaming": ([], [], ("UPSTREAM_TIMEOUT", "unavailable")),
    # the partial "Hello" has outcome discarded: it is never sent
    "stall_midstream.streaming": ([], [], ("UPSTREAM_TIMEOUT", "unavailable")),
    "sigterm.streaming": ([], [], ("CLI_TERMINATED", "unavailable")),
    "time_limit.streaming": ([], [], ("UPSTREAM_TIMEOUT", "unavailable")),
}
# --output json / text captures: the proxy never runs these modes; the parser ignores a
# pretty-printed array and plain text, and classifies from exit code + export + stderr.
NOT_STREAMING: dict[str, Stop | tuple[str, str]] = {
    "success.json": ("PROTOCOL_ERROR", "unknown"),
    "success.text": ("PROTOCOL_ERROR", "unknown"),
    "auth.json": ("UPSTREAM_AUTH", "auth"),
    "sigterm.json": ("CLI_TERMINATED", "unavailable"),
}


@pytest.mark.parametrize("case", sorted(EXPECTED))
def test_streaming_transcripts(case: str, tmp_path: Path) -> None:
    events, trailer, terminal = replay(case, tmp_path)
    want_events, want_trailer, want_terminal = EXPECTED[case]
    assert events == want_events
    assert trailer == want_trailer
    if isinstance(want_terminal, Stop):
        assert terminal == want_terminal
    else:
        assert isinstance(terminal, Error)
        assert (terminal.code, terminal.category) == want_terminal
        assert terminal.message and len(terminal.message) <= 300


@pytest.mark.parametrize("case", sorted(NOT_STREAMING))
def test_other_output_modes_are_not_mistaken_for_answers(case: str, tmp_path: Path) -> None:
    events, _, terminal = replay(case, tmp_path)
    assert events == []
    want = NOT_STREAMING[case]
    assert isinstance(terminal, Error) and (terminal.code, terminal.category) == want


def test_hang_default_killed_by_the_harness(tmp_path: Path) -> None:
    events, trailer, terminal = replay("hang.default.streaming", tmp_path)
    assert events == [] and trailer == []
    assert isinstance(terminal, Error) and terminal.code == "CLI_FAILED"
    assert "signal 9 (SIGKILL)" in terminal.message


def test_error_messages_are_vibes_own_text(tmp_path: Path) -> None:
    _, _, terminal = replay("rate_limit.fast.streaming", tmp_path / "a")
    assert isinstance(terminal, Error)
    assert terminal.message.startswith("API error occurred: Status 429.")
    assert terminal.status == 429
    _, _, terminal = replay("no_api_key.streaming", tmp_path / "b")
    assert isinstance(terminal, Error)
    assert terminal.message == "Missing MISTRAL_API_KEY environment variable for mistral provider"
    _, _, terminal = replay("auth.streaming", tmp_path / "c")
    assert isinstance(terminal, Error) and terminal.message.startswith("Invalid API key")


def test_stderr_alone_classifies_when_export_json_is_missing(tmp_path: Path) -> None:
    for case, code in [("auth.streaming", "UPSTREAM_AUTH"),
                       ("no_api_key.streaming", "AUTH_MISSING"),
                       ("server_error_500.streaming", "UPSTREAM_5XX"),
                       ("hang.timeout_5s.streaming", "UPSTREAM_TIMEOUT"),
                       ("sigterm.streaming", "CLI_TERMINATED"),
                       ("time_limit.streaming", "UPSTREAM_TIMEOUT")]:
        meta = json.loads((FIXTURES / f"{case}.meta.json").read_text(encoding="utf-8"))
        parser = VibeParser(tmp_path / "nowhere")
        terminal = parser.finish(meta["exit_code"], (FIXTURES / f"{case}.stderr").read_bytes())
        assert isinstance(terminal, Error) and terminal.code == code, case
        assert parser.trailer(meta["exit_code"], b"") == ()


def test_discarded_then_committed_sends_only_the_committed_text(tmp_path: Path) -> None:
    lines = (FIXTURES / "stall_midstream.streaming.stdout").read_bytes().splitlines()
    committed = (FIXTURES / "success.streaming.stdout").read_bytes().splitlines()[1]
    parser = VibeParser(tmp_path)
    events = [e for line in [*lines, committed] for e in parser.feed(line)]
    assert events == [TextDelta(text=ANSWER)]
    assert parser.finish(0, b"") == Stop()


def test_later_assistant_messages_are_separated_by_a_blank_line(tmp_path: Path) -> None:
    def line(text: str) -> bytes:
        return json.dumps({"type": "message", "role": "assistant", "outcome": None,
                           "content": [{"type": "text", "text": text}]}).encode()

    parser = VibeParser(tmp_path)
    events = [e for t in ("First.", "", "Second.") for e in parser.feed(line(t))]
    assert events == [TextDelta(text="First."), TextDelta(text="\n\nSecond.")]


def test_length_outcome_after_text_is_a_length_stop(tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "export.json").write_text(json.dumps(
        {"outcome": "token_limit", "error": None,
         "usage": {"input_tokens": 10, "output_tokens": 90}}))
    parser = VibeParser(tmp_path)
    committed = (FIXTURES / "success.streaming.stdout").read_bytes().splitlines()[1]
    assert parser.feed(committed) == (TextDelta(text=ANSWER),)
    assert parser.trailer(3, b"Stopped: token_limit\n") == (Usage(prompt_tokens=10,
                                                                  completion_tokens=90),)
    assert parser.finish(3, b"") == Stop(finish_reason="length")


def test_usage_of_a_failed_run_is_reported_only_when_tokens_were_spent(tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    export = tmp_path / "out" / "export.json"
    export.write_text(json.dumps({"outcome": "infrastructure_failure",
                                  "error": {"message": "boom", "code": "backend_error"},
                                  "usage": {"input_tokens": 40, "output_tokens": 3}}))
    parser = VibeParser(tmp_path)
    assert parser.trailer(2, b"") == (Usage(prompt_tokens=40, completion_tokens=3),)
    terminal = parser.finish(2, b"")
    assert isinstance(terminal, Error) and terminal.category == "unavailable"


@pytest.mark.parametrize("content", [b"", b"not json", b"[1, 2]", b'{"usage": "many"}',
                                     b'{"outcome": 3}', b"\xff\xfe"])
def test_a_broken_export_json_is_tolerated(tmp_path: Path, content: bytes) -> None:
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "export.json").write_bytes(content)
    parser = VibeParser(tmp_path)
    committed = (FIXTURES / "success.streaming.stdout").read_bytes().splitlines()[1]
    parser.feed(committed)
    assert parser.trailer(0, b"") == ()
    assert parser.finish(0, b"") == Stop()


def test_exit_zero_without_an_answer_is_a_protocol_error(tmp_path: Path) -> None:
    parser = VibeParser(tmp_path)
    echo = (FIXTURES / "success.streaming.stdout").read_bytes().splitlines()[0]
    assert parser.feed(echo) == ()  # the echoed prompt is not content
    terminal = parser.finish(0, b"")
    assert isinstance(terminal, Error) and terminal.code == "PROTOCOL_ERROR"


def test_killed_by_a_signal_names_it_and_masks_secrets(tmp_path: Path) -> None:
    parser = VibeParser(tmp_path)
    terminal = parser.finish(-15, b"boom Authorization: Bearer abcdefsecret\n")
    assert isinstance(terminal, Error) and terminal.code == "CLI_FAILED"
    assert "signal 15 (SIGTERM)" in terminal.message
    assert "abcdefsecret" not in terminal.message
    terminal = VibeParser(tmp_path).finish(143, b"")
    assert isinstance(terminal, Error) and "143 (signal 15, SIGTERM)" in terminal.message


def test_feed_after_finish_gives_nothing(tmp_path: Path) -> None:
    parser = VibeParser(tmp_path)
    parser.finish(1, b"Error: Missing MISTRAL_API_KEY environment variable\n")
    committed = (FIXTURES / "success.streaming.stdout").read_bytes().splitlines()[1]
    assert parser.feed(committed) == ()


def test_the_adapter_gives_a_parser_reading_the_spawns_export(tmp_path: Path) -> None:
    parser: LineParser = ADAPTER.parser(tmp_path)
    (tmp_path / "out").mkdir()
    shutil.copy(FIXTURES / "success_with_export.streaming.export.json",
                tmp_path / "out" / "export.json")
    for line in (FIXTURES / "success_with_export.streaming.stdout").read_bytes().splitlines():
        parser.feed(line)
    assert isinstance(parser, VibeParser)
    assert parser.trailer(0, b"") == (USAGE,)


@given(st.binary(max_size=300))
def test_feed_never_raises_on_garbage(data: bytes) -> None:
    parser = VibeParser(None)
    for event in parser.feed(data):
        assert isinstance(event, TextDelta)


@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=20),
                    lambda c: st.lists(c, max_size=3) | st.dictionaries(
                        st.sampled_from(["type", "role", "content", "outcome", "text"]), c,
                        max_size=5), max_leaves=12))
def test_feed_never_raises_on_odd_json(value: object) -> None:
    parser = VibeParser(None)
    for event in parser.feed(msgspec.json.encode(value)):
        assert isinstance(event, TextDelta)


def test_a_crash_without_export_or_error_line_is_cli_failed(tmp_path: Path) -> None:
    stderr = (b"Traceback (most recent call last):\n  File \"x.py\", line 1\n"
              b"RuntimeError: boom\n")
    terminal = VibeParser(tmp_path).finish(1, stderr)
    assert isinstance(terminal, Error) and terminal.code == "CLI_FAILED"
    assert terminal.category == "unknown"
    assert terminal.message.startswith("vibe exited with code 1; stderr: Traceback")
    # a bad extra_args option is reported by clap the same way (no export, no "Error:")
    clap = b"error: unexpected argument '--bogus' found\n"
    terminal = VibeParser(tmp_path).finish(1, clap)
    assert isinstance(terminal, Error) and "unexpected argument" in terminal.message
