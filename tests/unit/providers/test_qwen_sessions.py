"""qwen's kept sessions (issue #25), on the files the pinned qwen wrote
(``tests/fixtures/cli-reference/qwen/sessions``): recording switched on and ``--resume``,
which file is the session, whether it is whole and ends with the answer OLP gave (a killed
run leaves an orphan user turn; qwen skips a damaged line silently), and the running usage
total qwen rebuilds from the file's ``ui_telemetry`` records."""

from __future__ import annotations

import json
from pathlib import Path

from olp.ir import ChatRequest, Message, TextPart, ToolCall, Usage
from olp.providers.qwen import ADAPTER, SPEC
from olp.providers.qwen._invocation import build_invocation
from olp.providers.qwen._sessions import SESSIONS, complete, without_running_total

SESSIONS_DIR = Path(__file__).parents[2] / "fixtures" / "cli-reference" / "qwen" / "sessions"
CAPTURED = SESSIONS_DIR / "resume_fixed_path" / "session-after-last-turn.jsonl"
KILLED = SESSIONS_DIR / "killed_mid_answer" / "session-after-kill.jsonl"
SESSION_ID = "ba78c91d-c321-45d1-89ea-b748aff65381"
CHATS = Path(".qwen") / "projects" / "-tmp-olp-job-work" / "chats"
ANSWER = "Hello from the mock upstream."


def answer(text: str = ANSWER) -> Message:
    return Message(role="assistant", content=(TextPart(text=text),))


def telemetry(data: bytes) -> list[dict[str, object]]:
    return [e["systemPayload"]["uiEvent"] for e in map(json.loads, data.splitlines())
            if e.get("subtype") == "ui_telemetry"]


def test_recording_is_switched_on_by_the_flag_and_resume_names_the_session() -> None:
    request = ChatRequest(model="qwen-coder",
                          messages=(Message(role="user", content=(TextPart(text="Hi."),)),))
    argv = build_invocation(request, binary="qwen", model="m", workdir=Path("/olp/job/work")).argv
    assert argv[argv.index("--chat-recording") + 1] == "false"  # no session without the kit
    fresh = SESSIONS.fresh_argv(argv)
    assert fresh[fresh.index("--chat-recording") + 1] == "true" and len(fresh) == len(argv)
    assert [a for a in fresh if a != "true"] == [a for a in argv if a != "false"]
    assert SESSIONS.resume_argv(argv, SESSION_ID) == [*fresh, "--resume", SESSION_ID]
    assert SESSIONS.fresh_argv(["qwen", "-m", "m"]) == ["qwen", "-m", "m",
                                                       "--chat-recording", "true"]
    assert not SESSIONS.system_in_prompt and not SESSIONS.takes_tool_results
    assert ADAPTER.sessions is SESSIONS and not SPEC.sessions  # opt-in (ADR 0023)


def test_a_whole_session_ending_with_the_answer_is_complete() -> None:
    data = CAPTURED.read_bytes()
    assert complete(data, ANSWER) and complete(data, f"  {ANSWER}\n")
    assert not complete(data, "Another answer.")
    assert SESSIONS.complete({"f": data}, answer())
    assert not SESSIONS.complete({"f": data, "g": data}, answer())
    called = Message(role="assistant", content=(TextPart(text=ANSWER),),
                     tool_calls=(ToolCall(id="c", name="f", arguments="{}"),))
    assert not SESSIONS.complete({"f": data}, called)  # a call's session is not kept


def test_a_cut_or_damaged_session_is_not() -> None:
    data = CAPTURED.read_bytes()
    lines = data.splitlines(keepends=True)
    last_assistant = max(i for i, line in enumerate(lines) if b'"type":"assistant"' in line)
    assert not complete(data[:-1], ANSWER)  # the last line not ended
    assert not complete(b"".join(lines[:last_assistant]), ANSWER)  # the answer missing
    assert not complete(b"".join([*lines[:3], b"{garbage\n", *lines[3:]]), ANSWER)
    assert not complete(b"".join([*lines[:3], b"[1]\n", *lines[3:]]), ANSWER)
    assert not complete(b"", ANSWER)


def test_a_killed_runs_orphan_user_turn_is_not_complete() -> None:
    """qwen SIGKILLed mid-answer: the file ends with the user turn and no answer to it, yet
    its last assistant text is the earlier answer."""
    data = KILLED.read_bytes()
    assert data.endswith(b"\n") and ANSWER.encode() in data
    assert not complete(data, ANSWER)
    assert not SESSIONS.complete({"f": data}, answer())


def test_thoughts_are_not_the_answer() -> None:
    data = CAPTURED.read_bytes()
    entry = json.loads(data.splitlines()[-1])
    entry["message"]["parts"].insert(0, {"text": "Let me think.", "thought": True})
    thinking = b"\n".join([*data.splitlines()[:-1], json.dumps(entry).encode()]) + b"\n"
    assert complete(thinking, ANSWER)


def test_the_session_is_the_one_file_and_kept_without_its_running_total(tmp_path: Path) -> None:
    data = CAPTURED.read_bytes()
    assert SESSIONS.written(tmp_path, resumed=None) is None  # no recording, no session
    (tmp_path / CHATS).mkdir(parents=True)
    (tmp_path / CHATS / f"{SESSION_ID}.jsonl").write_bytes(data)
    found = SESSIONS.written(tmp_path, resumed=None)
    assert found is not None and found[0] == SESSION_ID
    [(path, kept)] = found[1].items()
    assert path == str(CHATS / f"{SESSION_ID}.jsonl")
    assert SESSIONS.written(tmp_path, resumed=SESSION_ID) == found  # appended to, same id
    assert SESSIONS.written(tmp_path, resumed="another-session") is None
    # only the ui_telemetry token counts change: every other line byte for byte
    changed = [(a, b) for a, b in zip(data.splitlines(), kept.splitlines(), strict=True)
               if a != b]
    assert len(changed) == 4 and all(b'"ui_telemetry"' in a for a, _ in changed)
    assert all(e["input_token_count"] == e["output_token_count"] == 0 for e in telemetry(kept))
    assert [e["response_id"] for e in telemetry(kept)] == \
        [e["response_id"] for e in telemetry(data)]
    assert b'"promptTokenCount":21' in kept  # the context size qwen resumes with stays
    assert complete(kept, ANSWER) and kept.endswith(b"\n")
    (tmp_path / CHATS / "other.jsonl").write_bytes(data)
    assert SESSIONS.written(tmp_path, resumed=None) is None  # two candidates: not sure which


def test_usage_before_is_the_total_qwen_replays_from_the_file() -> None:
    """qwen's ``result`` on a resumed run counts the file's ``ui_telemetry`` API responses
    (input 21, 42, 63, 84 over the captured turns): a file as qwen wrote it has 84 + 16 so
    far; a file as OLP keeps it has nothing to subtract."""
    data = CAPTURED.read_bytes()
    assert SESSIONS.usage_before({"f": data}) == Usage(prompt_tokens=84, completion_tokens=16)
    kept = without_running_total(data)
    assert kept is not None and SESSIONS.usage_before({"f": kept}) is None
    assert without_running_total(kept) == kept
    assert without_running_total(data + b"{cut") is None
    assert SESSIONS.with_tool_results({"f": data}, ["result"]) is None
