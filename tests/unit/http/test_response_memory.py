"""``previous_response_id`` (issue #25): a Responses request naming an earlier answer of its
key gets that conversation in front of its own turns, after its own instructions; an unknown,
another key's or a ``store: false`` answer is a 400 naming the field; the answer kept is
what the client saw (its text and its function calls, by ``call_id``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import trio

from olp.http._dialect import OpenAIResponses
from olp.http._errors import ApiError
from olp.http._response_memory import ResponseMemory
from olp.ir import ChatRequest, Event, Message, Stop, TextDelta, TextPart, ToolCall, ToolCallDelta
from olp.ir.responses import decode_responses_request
from olp.store import Database


def text(role: str, value: str) -> Message:
    return Message(role=role, content=(TextPart(text=value),))  # type: ignore[arg-type]


def request(**body: Any) -> ChatRequest:
    return decode_responses_request(json.dumps({"model": "m", **body}).encode())


async def answer(db: Database, chat: ChatRequest, *, key: str = "1",
                 calls: bool = False) -> tuple[str, ChatRequest]:
    """One request through a fresh memory: the id it answered with and what it asked."""
    dialect = OpenAIResponses(ResponseMemory(db, key=key))
    asked = await dialect.prepare(chat)
    events: list[Event] = [TextDelta(text="Noted.")]
    if calls:
        events += [ToolCallDelta(index=0, id="call_1", name="lookup", arguments='{"q": 1}')]
    body = dialect.complete([*events, Stop(finish_reason="stop")], "m")
    await dialect.answered()
    assert dialect._memory is not None and dialect._memory.id.encode() in body
    return dialect._memory.id, asked


async def test_a_named_answer_comes_first_after_the_new_instructions(tmp_path: Path) -> None:
    with Database(tmp_path / "olp.db") as db, trio.fail_after(10):
        first, _ = await answer(db, request(instructions="Old.", input="My word is MANGO."),
                                calls=True)
        _, asked = await answer(db, request(
            instructions="New.", previous_response_id=first, input=[
                {"type": "function_call_output", "call_id": "call_1", "output": "42"}]))
    assert asked.previous_response_id is None
    assert asked.messages == (
        text("system", "New."), text("user", "My word is MANGO."),
        Message(role="assistant", content=(TextPart(text="Noted."),),
                tool_calls=(ToolCall(id="call_1", name="lookup", arguments='{"q": 1}'),)),
        Message(role="tool", content=(TextPart(text="42"),), tool_call_id="call_1"))


@pytest.mark.parametrize("case", ["unknown", "other key", "store false", "no database"])
async def test_what_was_not_kept_for_this_key_is_a_400(tmp_path: Path, case: str) -> None:
    with Database(tmp_path / "olp.db") as db, trio.fail_after(10):
        first, _ = await answer(db, request(input="hi", store=case != "store false"))
        named = request(input="again",
                        previous_response_id="resp_0" if case == "unknown" else first)
        memory = ResponseMemory(None if case == "no database" else db,
                                key="2" if case == "other key" else "1")
        with pytest.raises(ApiError) as info:
            await memory.expand(named)
    assert info.value.status == 400
    assert (info.value.code, info.value.param) == ("previous_response_not_found",
                                                   "previous_response_id")


async def test_an_answer_that_did_not_end_is_not_kept(tmp_path: Path) -> None:
    with Database(tmp_path / "olp.db") as db, trio.fail_after(10):
        dialect = OpenAIResponses(ResponseMemory(db, key="1"))
        await dialect.prepare(request(input="hi"))
        writer = dialect.writer("m", include_usage=False)
        writer.begin()
        writer.text("partial")  # the hop failed here: ``answered`` is never called
        assert dialect._memory is not None
        with pytest.raises(ApiError):
            await ResponseMemory(db, key="1").expand(request(
                input="x", previous_response_id=dialect._memory.id))
