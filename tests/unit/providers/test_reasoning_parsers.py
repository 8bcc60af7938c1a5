"""The model's thinking out of each CLI (issue #27), from the real CLIs' captures.

``tests/fixtures/cli-reference/claude/reasoning/`` (claude 2.1.332, mock scenario ``thinking``:
thinking "The user wants a greeting." + " Four words will do.", 5 of the 7 output tokens
thinking) and ``tests/fixtures/cli-reference/codex/reasoning/`` (codex 0.171.0, mock scenario
``reasoning``: one summary part, 5 of the 7 output tokens reasoning), and
``tests/fixtures/cli-reference/qwen/reasoning/`` (qwen 0.24.4 against an upstream streaming
``reasoning_content``), ``tests/fixtures/cli-reference/vibe/reasoning/`` (vibe 3.0.2 against the
mock Mistral API streaming two thinking chunks). What each capture asked for and what went
upstream: the README beside them.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from olp.ir import Event, ReasoningDelta, Start, Stop, TextDelta, Usage, is_terminal
from olp.providers.anthropic import AnthropicParser
from olp.providers.codex import CodexParser
from olp.providers.qwen import QwenParser
from olp.providers.vibe import VibeParser
from olp.providers.vibe._acp_parser import VibeAcpParser
from olp.providers.vibe._acp_protocol import RESULT_KEY

REFERENCE = Path(__file__).resolve().parents[2] / "fixtures" / "cli-reference"
CLAUDE = REFERENCE / "claude" / "reasoning"
CODEX = REFERENCE / "codex" / "reasoning"
QWEN = REFERENCE / "qwen" / "reasoning"
ANSWER = "Hello from the mock upstream."
THOUGHT = ("The user wants a greeting.", " Four words will do.")
SUMMARY = "**Planning a short greeting**\n\nThe user wants four words, so a brief hello will do."


def replay(parser: AnthropicParser | CodexParser | QwenParser, stdout: Path) -> list[Event]:
    """Every event of a capture, the terminal one last (from ``finish`` at the exit)."""
    meta = json.loads(stdout.with_name(stdout.name.split(".")[0] + ".meta.json").read_text())
    events: list[Event] = []
    for line in stdout.read_bytes().splitlines():
        events += parser.feed(line)
        if events and is_terminal(events[-1]):
            return events
    return [*events, parser.finish(meta["exit"], b"")]


def claude(case: str) -> list[Event]:
    return replay(AnthropicParser(now=lambda: 0.0), CLAUDE / f"{case}.stream-json.stdout")


def codex(case: str) -> list[Event]:
    return replay(CodexParser(now=lambda: 0.0), CODEX / f"{case}.jsonl")


def text_of(events: list[Event]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


def reasoning_of(events: list[Event]) -> list[str]:
    return [e.text for e in events if isinstance(e, ReasoningDelta)]


def usage_of(events: list[Event]) -> Usage:
    [usage] = [e for e in events if isinstance(e, Usage)]
    return usage


# -- claude -------------------------------------------------------------------------------

@pytest.mark.parametrize("case", ["low_show", "minimal_show", "medium_opus47", "show_only",
                                  "haiku_low_show", "haiku_budget"])
def test_claude_summarized_thinking_streams_as_reasoning(case: str) -> None:
    events = claude(case)
    assert reasoning_of(events) == list(THOUGHT)  # the thinking_delta events, not repeated
    assert isinstance(events[0], Start)
    first_text = next(i for i, e in enumerate(events) if isinstance(e, TextDelta))
    assert all(isinstance(e, ReasoningDelta) for e in events[1:first_text])  # before the text
    assert text_of(events) == ANSWER
    assert usage_of(events) == Usage(prompt_tokens=25, completion_tokens=7, reasoning_tokens=5)
    assert events[-1] == Stop()


@pytest.mark.parametrize("case", ["default", "low", "high_opus48"])
def test_claude_thinking_without_its_text_gives_only_the_token_count(case: str) -> None:
    # display "updates" (claude's own in stream-json): the block carries a signature only
    events = claude(case)
    assert reasoning_of(events) == []
    assert text_of(events) == ANSWER
    assert usage_of(events).reasoning_tokens == 5


@pytest.mark.parametrize("case", ["none", "haiku_none"])
def test_claude_thinking_off(case: str) -> None:
    events = claude(case)
    assert reasoning_of(events) == [] and text_of(events) == ANSWER
    assert usage_of(events).reasoning_tokens == 0


def test_claude_exact_events_of_a_shown_thinking_run() -> None:
    assert claude("low_show") == [
        Start(model="claude-sonnet-4-6"), *(ReasoningDelta(text=t) for t in THOUGHT),
        *(TextDelta(text=t) for t in ("Hello", " from", " the mock", " upstream.")),
        Usage(prompt_tokens=25, completion_tokens=7, reasoning_tokens=5), Stop()]


def test_claude_thinking_seen_only_in_the_assistant_message_is_reported_once() -> None:
    # the same capture without its stream_event lines (claude without
    # --include-partial-messages): the whole thinking block, then the text, from `assistant`
    lines = [line for line in (CLAUDE / "low_show.stream-json.stdout").read_bytes().splitlines()
             if b'"type":"stream_event"' not in line]
    parser = AnthropicParser(now=lambda: 0.0)
    events = [e for line in lines for e in parser.feed(line)]
    assert reasoning_of(events) == ["".join(THOUGHT)]
    assert text_of(events) == ANSWER


# -- codex --------------------------------------------------------------------------------

@pytest.mark.parametrize("case", ["default", "low", "minimal_show", "high_detailed",
                                  "medium_concise", "raw_effort_xhigh"])
def test_codex_reasoning_item_is_one_reasoning_delta(case: str) -> None:
    events = codex(case)
    assert events == [ReasoningDelta(text=SUMMARY), TextDelta(text=ANSWER),
                      Usage(prompt_tokens=25, completion_tokens=7, reasoning_tokens=5), Stop()]


def test_codex_summary_parts_come_joined_in_one_item() -> None:
    assert reasoning_of(codex("two_parts")) == [
        "**Part one**\n\nFirst.\n**Part two**\n\nSecond."]


def test_codex_without_a_summary_or_reasoning() -> None:
    hidden = codex("raw_summary_none")  # a reasoning item with no summary: nothing printed
    assert reasoning_of(hidden) == [] and usage_of(hidden).reasoning_tokens == 5
    off = codex("none")  # effort none: the mock sends no reasoning item
    assert reasoning_of(off) == [] and usage_of(off).reasoning_tokens == 0
    assert text_of(off) == ANSWER


def test_codex_later_reasoning_items_follow_after_a_blank_line() -> None:
    parser = CodexParser()
    lines = [{"type": "item.completed", "item": {"id": f"item_{i}", "type": "reasoning",
                                                 "text": text}}
             for i, text in enumerate(("First.", "", "Second."))]
    events = [e for line in lines for e in parser.feed(json.dumps(line).encode())]
    assert events == [ReasoningDelta(text="First."), ReasoningDelta(text="\n\nSecond.")]


# -- qwen ---------------------------------------------------------------------------------

@pytest.mark.parametrize("case", ["default", "raw_effort_low"])
def test_qwen_reasoning_content_streams_as_reasoning(case: str) -> None:
    # qwen prints the upstream's reasoning_content as Anthropic thinking_delta events (and a
    # whole thinking block in an `assistant` line, not repeated); the usage has no count of it
    events = replay(QwenParser(now=lambda: 0.0), QWEN / f"{case}.stdout")
    assert events == [*(ReasoningDelta(text=t) for t in THOUGHT),
                      *(TextDelta(text=t) for t in ("Hello", " from", " the mock", " upstream.")),
                      Usage(prompt_tokens=21, completion_tokens=9), Stop()]


# -- vibe ---------------------------------------------------------------------------------

VIBE = REFERENCE / "vibe" / "reasoning"


def vibe_acp_lines(case: str) -> list[bytes]:
    """A captured ``vibe-acp`` transcript as an ``AcpSession`` hands it to the parser: the
    session's notifications, then the prompt's result under ``RESULT_KEY``."""
    out: list[bytes] = []
    for line in (VIBE / f"{case}.jsonl").read_text().splitlines():
        event = json.loads(line)
        msg = event.get("msg") or {}
        if event["dir"] != "recv":
            continue
        if msg.get("method") == "session/update":
            out.append(json.dumps(msg).encode())
        elif "stopReason" in (msg.get("result") or {}):
            out.append(json.dumps({RESULT_KEY: msg["result"]}).encode())
    return out


@pytest.mark.parametrize("case", ["high", "none", "default"])
def test_vibe_reasoning_entry_is_one_reasoning_delta(case: str) -> None:
    # vibe -p --output streaming prints the thinking whole, as a `reasoning` entry before
    # the assistant message (the mock streams it whatever the level)
    events = replay(VibeParser(None), VIBE / f"{case}.stdout")  # type: ignore[arg-type]
    assert events == [ReasoningDelta(text="".join(THOUGHT)), TextDelta(text=ANSWER), Stop()]


def test_vibe_reasoning_entries_after_the_first_follow_a_blank_line() -> None:
    parser = VibeParser(None)
    lines = [{"type": "reasoning", "text": text, "outcome": {"type": outcome}}
             for text, outcome in (("First.", "committed"), ("Dropped.", "discarded"),
                                   ("", "committed"), ("Second.", "committed"))]
    events = [e for line in lines for e in parser.feed(json.dumps(line).encode())]
    assert events == [ReasoningDelta(text="First."), ReasoningDelta(text="\n\nSecond.")]


@pytest.mark.parametrize("hold", [False, True])
def test_vibe_acp_thought_chunks_stream_as_reasoning(hold: bool) -> None:
    parser = VibeAcpParser(now=lambda: 0.0, hold_text=hold)
    events = [e for line in vibe_acp_lines("acp_high") for e in parser.feed(line)]
    events += [*parser.trailer(0, b""), parser.finish(0, b"")]
    reasoning = [e for e in events if isinstance(e, ReasoningDelta)]
    text = [e for e in events if isinstance(e, TextDelta)]
    if hold:  # held with the text until the result, then handed over whole
        assert reasoning == [ReasoningDelta(text="".join(THOUGHT))]
        assert text == [TextDelta(text=ANSWER)]
    else:
        assert reasoning == [ReasoningDelta(text=t) for t in THOUGHT]
        assert "".join(t.text for t in text) == ANSWER
    assert events.index(reasoning[-1]) < events.index(text[0])
    assert isinstance(events[-1], Stop)


def test_vibe_acp_a_retry_drops_held_thinking() -> None:
    parser = VibeAcpParser(now=lambda: 0.0, hold_text=True)
    thought = {"method": "session/update", "params": {"update": {
        "sessionUpdate": "agent_thought_chunk", "messageId": "r1",
        "content": {"type": "text", "text": "Old."}}}}
    retry = {"method": "_session/retrying", "params": {"category": "rate_limit"}}
    for line in (thought, retry):
        parser.feed(json.dumps(line).encode())
    new = json.loads(json.dumps(thought))
    new["params"]["update"]["content"]["text"] = "New."
    assert parser.feed(json.dumps(new).encode()) == ()
    result = parser.feed(json.dumps({RESULT_KEY: {"stopReason": "end_turn"}}).encode())
    assert result == (ReasoningDelta(text="New."),)
