"""claude's and codex's kept sessions (issue #25), on the files the pinned CLIs wrote
(``tests/fixtures/cli-reference/{claude,codex}/sessions``): which file is the new one,
whether it is whole and ends with the answer OLP gave (each CLI skips a damaged line
silently), and codex's running usage total."""

from __future__ import annotations

from pathlib import Path

from olp.providers.anthropic._sessions import SESSIONS, complete

CAPTURED = (Path(__file__).parents[2] / "fixtures" / "cli-reference" / "claude" / "sessions"
            / "resume_fixed_path" / "session-after-last-turn.jsonl")
ANSWER = "Hello from the mock upstream."


def test_a_whole_session_ending_with_the_answer_is_complete() -> None:
    data = CAPTURED.read_bytes()
    assert complete(data, ANSWER) and complete(data, f"  {ANSWER}\n")
    assert not complete(data, "Another answer.")


def test_a_cut_or_damaged_session_is_not() -> None:
    data = CAPTURED.read_bytes()
    lines = data.splitlines(keepends=True)
    last_assistant = max(i for i, line in enumerate(lines) if b'"type":"assistant"' in line)
    assert not complete(data[:-1], ANSWER)  # the last line not ended
    assert not complete(b"".join(lines[:last_assistant]), ANSWER)  # the answer missing
    assert not complete(b"".join([*lines[:3], b"{garbage\n", *lines[3:]]), ANSWER)
    assert not complete(b"", ANSWER)


def test_the_new_session_is_the_one_not_resumed(tmp_path: Path) -> None:
    project = tmp_path / ".claude" / "projects" / "-olp-job-work"
    project.mkdir(parents=True)
    (project / "old.jsonl").write_bytes(b"{}\n")
    only = SESSIONS.written(tmp_path, resumed=None)
    assert only is not None and only[0] == "old"
    (project / "new.jsonl").write_bytes(CAPTURED.read_bytes())
    found = SESSIONS.written(tmp_path, resumed="old")
    assert found is not None and found[0] == "new"
    assert found[1] == {".claude/projects/-olp-job-work/new.jsonl": CAPTURED.read_bytes()}
    assert SESSIONS.written(tmp_path, resumed=None) is None  # two candidates: not sure which
    argv = ["claude", "-p", "--no-session-persistence", "--model", "m"]
    assert SESSIONS.fresh_argv(argv) == ["claude", "-p", "--model", "m"]
    assert SESSIONS.resume_argv(argv, "old") == ["claude", "-p", "--model", "m", "--resume",
                                                  "old", "--fork-session"]


CODEX_ROLLOUT = (Path(__file__).parents[2] / "fixtures" / "cli-reference" / "codex" / "sessions"
                 / "resume_fixed_path" / "rollout-after-last-turn.jsonl")


def test_codex_rollouts_are_checked_and_their_running_total_read(tmp_path: Path) -> None:
    from olp.ir import Usage
    from olp.providers.codex._sessions import SESSIONS as CODEX
    from olp.providers.codex._sessions import complete as codex_complete

    data = CODEX_ROLLOUT.read_bytes()
    assert codex_complete(data, ANSWER) and not codex_complete(data[:-1], ANSWER)
    assert not codex_complete(data, "Something else.")
    assert CODEX.usage_before({"r": data}) == Usage(prompt_tokens=100, completion_tokens=28,
                                                    cached_tokens=80)
    thread = "01a237b4-00ae-7bb0-9f9f-904a3dd428f0"
    day = tmp_path / ".codex" / "sessions" / "2026" / "12" / "02"
    day.mkdir(parents=True)
    (day / f"rollout-2026-12-02T17-01-13-{thread}.jsonl").write_bytes(data)
    found = CODEX.written(tmp_path, resumed=thread)
    assert found is not None and found[0] == thread
    assert CODEX.written(tmp_path, resumed="another-thread") is None
    argv = ["codex", "exec", "--json", "--ephemeral", "-m", "gpt-5.5", "-"]
    assert CODEX.fresh_argv(argv) == ["codex", "exec", "--json", "-m", "gpt-5.5", "-"]
    assert CODEX.resume_argv(argv, thread) == ["codex", "exec", "--json", "-m", "gpt-5.5",
                                               "resume", thread, "-"]


CODEX_CALLED = (Path(__file__).parents[2] / "fixtures" / "cli-reference" / "codex" / "sessions"
                / "tools_resume" / "text_only.rollout-before-resume.jsonl")


def test_a_tool_result_is_written_into_codexs_rollout_as_codex_writes_one() -> None:
    """After OLP's kill at the call the rollout holds the ``function_call``; the client's
    result goes in as a ``function_call_output`` with the next ordinal (measured: sent
    upstream as the real result)."""
    import json

    from olp.ir import Message, ToolCall
    from olp.providers.codex._sessions import SESSIONS as CODEX
    from olp.providers.codex._sessions import last_calls

    data = CODEX_CALLED.read_bytes()
    [call] = last_calls(data) or []
    answer = Message(role="assistant", tool_calls=(
        ToolCall(id="call_olp_1", name="get_weather", arguments='{"city":"Paris"}'),))
    assert CODEX.complete({"r": data}, answer)
    assert not CODEX.complete({"r": data}, Message(role="assistant", tool_calls=(
        ToolCall(id="x", name="other_tool", arguments="{}"),)))
    written = CODEX.with_tool_results({"r": data}, ["Paris: 18 C"])
    assert written is not None
    added = json.loads(written["r"][len(data):])
    last = json.loads(data.splitlines()[-1])
    assert added["ordinal"] == max(json.loads(x).get("ordinal", -1)
                                   for x in data.splitlines()) + 1
    assert added["payload"]["type"] == "function_call_output"
    assert added["payload"]["call_id"] == call["call_id"]
    assert added["payload"]["output"] == "Paris: 18 C" and last["ordinal"] < added["ordinal"]
    assert CODEX.with_tool_results({"r": data}, ["a", "b"]) is None  # one call, two results
    assert CODEX.with_tool_results(written, ["again"]) is None  # already answered
    assert last_calls(data[:-1]) is None  # not whole
