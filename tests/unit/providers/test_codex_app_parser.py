"""The app-server parser on the real codex 0.171.0's own lines
(``tests/fixtures/cli-reference/codex/app_server/``) and on the error shapes its schema gives."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from olp.ir import Error, QuotaReport, Retrying, Stop, TextDelta, Usage
from olp.providers.codex._app_parser import CodexAppParser, window_name
from olp.providers.codex._app_thread import KILLED, TURN_START_FAILED

FIXTURES = Path(__file__).parents[2] / "fixtures" / "cli-reference" / "codex" / "app_server"


def thread_lines(case: str) -> dict[str, list[bytes]]:
    """Each thread's notifications in ``case``'s captured stdout, as the server routes them."""
    by_thread: dict[str, list[bytes]] = {}
    for raw in (FIXTURES / f"{case}.stdout.jsonl").read_bytes().splitlines():
        message = json.loads(raw)
        params = message.get("params")
        if "method" in message and isinstance(params, dict) and "threadId" in params:
            by_thread.setdefault(params["threadId"], []).append(raw)
        elif message.get("method") == "account/rateLimits/updated":
            for lines in by_thread.values():
                if not any(b'"turn/completed"' in line for line in lines):
                    lines.append(raw)
    return by_thread


def line(method: str, **params: Any) -> bytes:
    return json.dumps({"method": method, "params": {"threadId": "t", **params}}).encode()


def test_the_captured_sequence_gives_deltas_usage_windows_and_a_stop() -> None:
    threads = thread_lines("sequence")
    assert len(threads) == 2
    answers = []
    for lines in threads.values():
        parser = CodexAppParser()
        events = [e for raw in lines for e in parser.feed(raw)]
        answers.append("".join(e.text for e in events if isinstance(e, TextDelta)))
        assert [e for e in events if isinstance(e, Usage)] == [
            Usage(prompt_tokens=25, completion_tokens=7)]
        assert isinstance(events[-1], Stop) and parser.finish(0, b"") is events[-1]
        windows = [e for e in events if isinstance(e, QuotaReport)]
        assert [(w.window, w.utilization) for w in windows] == [("five_hour", 0.42),
                                                                ("seven_day", 0.13)]
    assert answers == ["ANSWER-ONE-MARKER hello.", "ANSWER-TWO-MARKER goodbye."]


def test_a_second_message_follows_a_blank_line() -> None:
    parser = CodexAppParser()
    events = [e for raw in (line("item/agentMessage/delta", itemId="a", delta="One"),
                            line("item/agentMessage/delta", itemId="a", delta=" more"),
                            line("item/agentMessage/delta", itemId="b", delta="Two"))
              for e in parser.feed(raw)]
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["One", " more", "\n\nTwo"]


def test_a_failed_turn_is_classified_and_a_retry_is_not_terminal() -> None:
    parser = CodexAppParser(now=lambda: 0.0)
    retry = parser.feed(line("error", willRetry=True, error={
        "message": "Reconnecting... 1/5", "codexErrorInfo": {
            "responseStreamDisconnected": {"httpStatusCode": 503}}}))
    assert [type(e) for e in retry] == [Retrying]
    end = parser.feed(line("turn/completed", turn={"id": "u", "status": "failed", "error": {
        "message": "You've hit your usage limit.", "codexErrorInfo": "usageLimitExceeded"}}))
    assert isinstance(end[-1], Error) and end[-1].code == "USAGE_WINDOW"
    assert parser.finish(0, b"") is end[-1]


def test_codex_s_own_error_kind_explains_a_message_the_text_rules_cannot() -> None:
    parser = CodexAppParser()
    end = parser.feed(line("turn/completed", turn={"id": "u", "status": "failed", "error": {
        "message": "something odd", "codexErrorInfo": "unauthorized"}}))
    assert isinstance(end[-1], Error) and (end[-1].code, end[-1].category) == (
        "UPSTREAM_AUTH", "auth")


def test_a_server_that_died_or_a_refused_turn_ends_with_an_error() -> None:
    died = CodexAppParser()
    died.feed(line("item/agentMessage/delta", itemId="a", delta="half"))
    end = died.finish(KILLED, b"")
    assert isinstance(end, Error) and end.code == "CLI_FAILED" and "ended" in end.message
    refused = CodexAppParser()
    [error] = refused.feed(json.dumps({"method": TURN_START_FAILED, "params": {
        "code": -32600, "message": "bad input"}}).encode())
    assert isinstance(error, Error) and "bad input" in error.message


def test_windows_are_named_by_length() -> None:
    assert (window_name(300, "primary"), window_name(10080, "secondary"),
            window_name(60, "primary"), window_name(None, "secondary")) == (
        "five_hour", "seven_day", "primary", "secondary")
