"""claude's kept session across a tool call (issue #25), against the captured files
(``tests/fixtures/cli-reference/claude/sessions/tools_inject``): a session ending in the
answer's ``tool_use`` is complete for that answer, the client's result is appended as the
``user`` entry claude itself writes (the captured injected line, ids and time aside), and a
session whose call already has its result, or that is cut, takes none."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from olp.ir import Message, TextPart, ToolCall
from olp.providers.anthropic._sessions import SESSIONS, last_calls

INJECTED = (Path(__file__).parents[2] / "fixtures" / "cli-reference" / "claude" / "sessions"
            / "tools_inject" / "text_continue.session-injected.jsonl")
PATH = ".claude/projects/-olp-job-work/be2e0cd7-a948-47fa-9b83-2c5aca8cd6b4.jsonl"
RESULT = "Paris: 18 C, light rain"


def captured() -> tuple[bytes, dict[str, Any]]:
    """The session as claude left it at the call, and the result line the capture added."""
    lines = INJECTED.read_bytes().splitlines(keepends=True)
    return b"".join(lines[:-1]), json.loads(lines[-1])


def call_answer(*names: str) -> Message:
    return Message(role="assistant", content=(TextPart(text="Let me check the weather."),),
                   tool_calls=tuple(ToolCall(id=f"call_{i}", name=n, arguments="{}")
                                    for i, n in enumerate(names)))


def test_a_session_ending_in_the_call_is_complete_for_that_answer() -> None:
    session, _ = captured()
    files = {PATH: session}
    assert SESSIONS.complete(files, call_answer("get_weather"))
    assert not SESSIONS.complete(files, call_answer("get_time"))
    assert not SESSIONS.complete(files, call_answer("get_weather", "get_weather"))
    assert not SESSIONS.complete(files, Message(role="assistant", content=(
        TextPart(text="Let me check the weather."),)))  # the text alone is not the answer


def test_the_result_is_written_as_claude_writes_it() -> None:
    session, expected = captured()
    files = SESSIONS.with_tool_results({PATH: session}, [RESULT])
    assert files is not None and list(files) == [PATH]
    written = files[PATH]
    assert written.startswith(session) and written.endswith(b"\n")
    [line] = written[len(session):].splitlines()
    entry = json.loads(line)
    ids = ("uuid", "timestamp")
    assert {k: v for k, v in entry.items() if k not in ids} == \
        {k: v for k, v in expected.items() if k not in ids}
    assert entry["uuid"] != expected["uuid"]
    assert last_calls(written) == []  # answered: nothing more to give it
    assert SESSIONS.with_tool_results({PATH: written}, [RESULT]) is None


def test_results_that_do_not_fit_the_calls_or_a_cut_file_take_nothing() -> None:
    session, _ = captured()
    assert SESSIONS.with_tool_results({PATH: session}, [RESULT, RESULT]) is None
    assert SESSIONS.with_tool_results({PATH: session[:-1]}, [RESULT]) is None
    assert SESSIONS.with_tool_results({PATH: session, "other.jsonl": b"\n"}, [RESULT]) is None
    assert not SESSIONS.complete({PATH: session[:-5]}, call_answer("get_weather"))
