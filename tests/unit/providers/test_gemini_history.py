"""gemini's conversation continuity (issue #25, ``olp/providers/gemini/_history.py``): the
earlier text turns as a session file in the private home (``--session-file`` on argv, a path),
only the last user turn on stdin; deterministic and prefix-stable from turn to turn; anything
the file cannot express keeps the flattened prompt. And what a refused file or a run that
sent nothing upstream becomes. Measured: ``tests/fixtures/cli-reference/gemini/sessions``."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from olp.actors import CapabilityMissing, Invocation
from olp.engine._walk import DEFAULT_ON
from olp.failures import Code
from olp.ir import ChatRequest, Error, ImagePart, Message, Stop, TextPart, ToolCall, ToolSpec
from olp.providers.gemini import ADAPTER, GeminiParser
from olp.providers.gemini._classify import Failure, classify
from olp.providers.gemini._history import (
    COMMAND_GUARD,
    NO_COMPRESSION,
    SESSION_FILE,
    SESSION_FLAG,
    guard_turn,
    session_text,
    split_history,
)
from olp.providers.gemini._invocation import SETTINGS, SETTINGS_FILE, SETTINGS_TEXT, SYSTEM_FILE
from olp.providers.gemini._invocation import build_prompt as flattened

WORKDIR = Path("/olp/job/work")  # the job as a confined spawn sees it
HOME = WORKDIR.parent / "home"
SESSIONS = (Path(__file__).resolve().parents[2] / "fixtures" / "cli-reference" / "gemini"
            / "sessions")
NOISE = ("Warning: Basic terminal detected (TERM=dumb). Visual rendering will be limited.\n"
         "Warning: 256-color support not detected.\n")


def msg(role: str, text: str, **extra: Any) -> Message:
    return Message(role=role, content=(TextPart(text=text),), **extra)  # type: ignore[arg-type]


def request(*messages: Message, **fields: Any) -> ChatRequest:
    return ChatRequest(model="gemini", messages=messages, **fields)


def invoke(req: ChatRequest) -> Invocation:
    return ADAPTER.invocation(req, binary="/opt/gemini", model="gemini-2.5-pro",
                              workdir=WORKDIR)


def records(inv: Invocation) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = json.loads(inv.home_files[SESSION_FILE])["messages"]
    return messages


def conversation(k: int, system: str = "SYS-7f: terse.") -> ChatRequest:
    """An agent's turn ``k``: the system text, ``k`` user turns, ``k - 1`` answers."""
    messages = [msg("system", system)]
    for i in range(1, k + 1):
        messages.append(msg("user", f"USER-TEXT turn {i}: notes " + "lorem " * i))
        if i < k:
            messages.append(msg("assistant", f"ANSWER-TEXT {i}"))
    return request(*messages)


def test_earlier_turns_go_to_the_session_file_and_the_last_to_stdin() -> None:
    inv = invoke(conversation(3))
    path = str(HOME / SESSION_FILE)
    assert list(inv.argv) == ["/opt/gemini", "-p", "", "-o", "stream-json", "-m",
                              "gemini-2.5-pro", "--skip-trust", SESSION_FLAG, path]
    assert inv.stdin.decode() == "USER-TEXT turn 3: notes " + "lorem " * 3
    assert inv.env["GEMINI_SYSTEM_MD"] == str(HOME / SYSTEM_FILE)  # the same home
    assert inv.home_files[SYSTEM_FILE] == "SYS-7f: terse."
    assert [(r["type"], r["content"]) for r in records(inv)] == [
        ("user", [{"text": "USER-TEXT turn 1: notes lorem "}]), ("gemini", "ANSWER-TEXT 1"),
        ("user", [{"text": "USER-TEXT turn 2: notes lorem lorem "}]), ("gemini", "ANSWER-TEXT 2")]
    assert inv.files == {}  # the working directory stays empty


def test_no_prompt_text_on_argv_or_in_the_environment() -> None:
    inv = invoke(conversation(4))
    for needle in ("USER-TEXT", "ANSWER-TEXT", "SYS-7f", "lorem"):
        assert not any(needle in a for a in inv.argv)
        assert not any(needle in v for v in inv.env.values())


def test_the_file_is_one_ascii_json_line_with_a_fixed_header() -> None:
    text = invoke(request(msg("user", "é 漢字 \u2028 😀"), msg("assistant", "ok\r\n"),
                          msg("user", "next"))).home_files[SESSION_FILE]
    assert text.isascii() and text.endswith("\n") and text.count("\n") == 1
    session = json.loads(text)
    assert {k: v for k, v in session.items() if k != "messages"} == {
        "sessionId": "00000000-0000-4000-8000-000000000025", "projectHash": "olp",
        "startTime": "1970-01-01T00:00:00.000Z", "lastUpdated": "1970-01-01T00:00:00.000Z",
        "kind": "main"}
    assert [m["id"] for m in session["messages"]] == ["olp-0", "olp-1"]  # unique: gemini
    assert session["messages"][0]["content"] == [{"text": "é 漢字 \u2028 😀"}]  # keys by id
    assert session["messages"][1]["content"] == "ok\r\n"


@pytest.mark.parametrize("k", [2, 3, 4, 5])
def test_turn_k_plus_1s_file_is_turn_ks_plus_its_prompt_and_answer(k: int) -> None:
    before, after = invoke(conversation(k)), invoke(conversation(k + 1))
    assert records(after)[:-2] == records(before)
    turn, answer = records(after)[-2:]
    # the stdin of turn k is, byte for byte, the user content in turn k+1's file
    assert turn["content"] == [{"text": before.stdin.decode()}]
    assert answer["type"] == "gemini" and answer["content"] == f"ANSWER-TEXT {k}"
    assert invoke(conversation(k)) == before  # deterministic


def test_turn_2_begins_with_turn_1s_prompt() -> None:
    first, second = invoke(conversation(1)), invoke(conversation(2))
    assert SESSION_FILE not in first.home_files and SESSION_FLAG not in first.argv
    assert records(second)[0]["content"] == [{"text": first.stdin.decode()}]


texts = st.text(min_size=1).filter(lambda t: not re.fullmatch(r"[\s\ufeff]*", t))


@given(st.lists(st.tuples(texts, texts), min_size=2, max_size=5), texts)
def test_any_text_history_is_prefix_stable(pairs: list[tuple[str, str]], last: str) -> None:
    messages = [msg(role, text) for user, answer in pairs
                for role, text in (("user", user), ("assistant", answer))]
    before = invoke(request(*messages[:-1]))
    after = invoke(request(*messages, msg("user", last)))
    assert split_history(request(*messages, msg("user", last))) is not None
    assert records(after)[:-2] == records(before)
    assert records(after)[-2]["content"] == [{"text": before.stdin.decode()}]
    assert json.loads(after.home_files[SESSION_FILE])["messages"] == records(after)


@pytest.mark.parametrize("text", ["/init", "?help", "<session_context>x", "<hook_context>y",
                                  "  /bug", "\ufeff\n?x", "\u00a0<session_context>"])
def test_a_turn_gemini_would_drop_or_run_is_guarded_in_the_file_and_on_stdin(
        text: str) -> None:
    inv = invoke(request(msg("user", text), msg("assistant", "ok"), msg("user", text)))
    assert records(inv)[0]["content"] == [{"text": COMMAND_GUARD + text}]
    assert inv.stdin.decode() == COMMAND_GUARD + text
    for plain in ("a/b", "why?", "say /init", "@notes"):
        assert guard_turn(plain) == plain


def test_a_history_spawn_never_compresses_and_others_keep_the_settings() -> None:
    settings = json.loads(invoke(conversation(2)).home_files[SETTINGS_FILE])
    assert settings == {**SETTINGS, "model": {"compressionThreshold": NO_COMPRESSION}}
    assert NO_COMPRESSION > 1  # a fraction of the window no history reaches
    assert invoke(conversation(1)).home_files[SETTINGS_FILE] == SETTINGS_TEXT


WEATHER = ToolSpec(name="get_weather", parameters={"type": "object", "properties": {}})
CALL = ToolCall(id="c1", name="get_weather", arguments="{}")
BASE = (msg("user", "one"), msg("assistant", "two"))


@pytest.mark.parametrize(("name", "req"), [
    ("a single user turn", request(msg("system", "S"), msg("user", "hi"))),
    ("only system text", request(msg("system", "S"), msg("developer", "D"))),
    ("tools", request(*BASE, msg("user", "three"), tools=(WEATHER,))),
    ("tools refused", request(*BASE, msg("user", "three"), tools=(WEATHER,),
                              tool_choice="none")),
    ("json mode", request(*BASE, msg("user", "three"),
                          response_format={"type": "json_object"})),
    ("a tool call", request(msg("user", "one"),
                            Message(role="assistant", content=(), tool_calls=(CALL,)),
                            msg("tool", "sunny", tool_call_id="c1"), msg("user", "three"))),
    ("a tool result", request(*BASE, msg("tool", "sunny", tool_call_id="c1"),
                              msg("user", "three"))),
    ("a named message", request(msg("user", "one", name="ann"), msg("assistant", "two"),
                                msg("user", "three"))),
    ("a blank turn", request(msg("user", "one"), msg("assistant", " \n"),
                             msg("user", "three"))),
    ("an empty answer", request(msg("user", "one"), msg("assistant", ""),
                                msg("user", "three"))),
    ("a blank last turn", request(*BASE, msg("user", "\ufeff "))),
    ("the last turn not the user's", request(*BASE, msg("user", "three"),
                                             msg("assistant", "prefill"))),
])
def test_what_the_file_cannot_express_keeps_the_flattened_prompt(name: str,
                                                                 req: ChatRequest) -> None:
    assert split_history(req) is None, name
    inv = invoke(req)
    assert SESSION_FILE not in inv.home_files and SESSION_FLAG not in inv.argv
    assert inv.stdin == flattened(req).encode()  # exactly today's prompt


def test_images_are_still_a_missing_capability() -> None:
    image = Message(role="user", content=(TextPart(text="what"), ImagePart(url="data:,x")))
    with pytest.raises(CapabilityMissing):
        invoke(request(*BASE, image))


def test_system_messages_anywhere_go_to_the_system_file_not_the_session() -> None:
    inv = invoke(request(msg("system", "S1"), msg("user", "one"), msg("developer", "D2"),
                         msg("assistant", "two"), msg("user", "three"), msg("system", "S3")))
    assert inv.home_files[SYSTEM_FILE] == "S1\n\nD2\n\nS3"
    assert [r["type"] for r in records(inv)] == ["user", "gemini"]
    assert inv.stdin == b"three"


def test_consecutive_turns_of_one_role_are_kept_in_order() -> None:
    inv = invoke(request(msg("user", "a"), msg("user", "b"), msg("assistant", "c"),
                         msg("assistant", "d"), msg("user", "e")))
    assert [(r["type"], r["content"]) for r in records(inv)] == [
        ("user", [{"text": "a"}]), ("user", [{"text": "b"}]), ("gemini", "c"), ("gemini", "d")]


def test_session_text_of_no_turns_is_a_valid_empty_session() -> None:
    assert json.loads(session_text(()))["messages"] == []


def refused_stderr() -> bytes:
    """gemini's stderr for a session file it cannot read (captured, exit 42)."""
    summary = json.loads((SESSIONS / "resume_missing" / "summary.json").read_text())
    stderr: str = summary["session_file_missing"]["stderr"]
    return (NOISE + stderr).encode()


def test_a_refused_session_file_is_olps_config_error_and_moves_the_chain_on() -> None:
    parser = GeminiParser()
    assert parser.trailer(42, refused_stderr()) == ()
    terminal = parser.finish(42, refused_stderr())
    assert isinstance(terminal, Error)
    assert (terminal.code, terminal.category) == (Code.CONFIG_ERROR, "unknown")
    assert terminal.message.startswith("Error importing session from file")
    assert terminal.category in DEFAULT_ON  # the next hop, not the client's 400
    # gemini's other exit 42 is still the client's
    no_input = classify(Failure(text="No input provided via stdin.", exit_code=42))
    assert (no_input.code, no_input.category) == (Code.UPSTREAM_CLIENT_ERROR, "client_error")


def result_line(models: dict[str, Any]) -> bytes:
    stats = {"total_tokens": 0, "input_tokens": 0, "output_tokens": 0, "cached": 0,
             "input": 0, "duration_ms": 217, "tool_calls": 0, "models": models}
    return json.dumps({"type": "result", "status": "success", "stats": stats}).encode()


def test_a_success_without_an_upstream_call_is_a_context_length_failure() -> None:
    """Measured: a history over the model's window → gemini sends nothing and reports a
    ``success`` whose stats name no model (an empty answer, were it a Stop)."""
    parser = GeminiParser()
    assert parser.feed(b'{"type":"init","session_id":"s","model":"gemini-2.5-pro"}') == ()
    assert parser.feed(result_line({})) == ()  # no usage
    terminal = parser.finish(0, NOISE.encode())
    assert isinstance(terminal, Error)
    assert (terminal.code, terminal.category) == (Code.CONTEXT_LENGTH, "context_length")
    called = GeminiParser()
    assert called.feed(result_line({"gemini-2.5-pro": {"input_tokens": 0}})) != ()
    assert called.finish(0, b"") == Stop(finish_reason="stop")
