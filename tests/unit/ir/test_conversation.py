"""Conversation identity (issue #25): a request continues an answer exactly when its messages
are that answer's request, the answer as the client echoes it back, then new turns; within
one scope (key, provider, model) and one system text and tool set."""

from __future__ import annotations

import json

from olp.ir import ChatRequest, Message, TextPart, ToolCall, ToolSpec
from olp.ir._anthropic_request import decode_messages_request
from olp.ir._conversation import continuation, digest_chain, resume_points
from olp.ir._openai_request import decode_chat_request

SCOPE = "key 1|anthropic|claude-sonnet-4-6"


def user(text: str) -> Message:
    return Message(role="user", content=(TextPart(text=text),))


def assistant(text: str = "", *calls: ToolCall) -> Message:
    return Message(role="assistant", content=(TextPart(text=text),) if text else (),
                   tool_calls=calls)


def request(*messages: Message, system: str = "Be brief.",
            tools: tuple[ToolSpec, ...] = ()) -> ChatRequest:
    return ChatRequest(model="sonnet", tools=tools, messages=(
        Message(role="system", content=(TextPart(text=system),)), *messages))


def test_the_next_turn_continues_the_answer_it_echoes() -> None:
    first = request(user("hi"))
    answer = assistant("Hello!")
    follow = request(user("hi"), assistant("Hello!"), user("and now?"))
    [point] = resume_points(follow, SCOPE)
    assert point.digest == continuation(first, SCOPE, answer)
    assert point.index == 1 and point.new_turns == (user("and now?"),)


def test_whitespace_and_argument_order_do_not_matter_but_content_does() -> None:
    call = ToolCall(id="call_1", name="read", arguments='{"path": "a", "n": 1}')
    first = request(user("read a"))
    expected = continuation(first, SCOPE, assistant("Reading.\n", call))
    echoed = ToolCall(id="call_1", name="read", arguments='{"n":1,"path":"a"}')
    result = Message(role="tool", tool_call_id="call_1", content=(TextPart(text="data"),))
    [point] = resume_points(request(user("read a"), assistant("  Reading.", echoed), result),
                            SCOPE)
    assert point.digest == expected
    changed = ToolCall(id="call_1", name="read", arguments='{"n":2,"path":"a"}')
    [other] = resume_points(request(user("read a"), assistant("Reading.", changed), result),
                            SCOPE)
    assert other.digest != expected


def test_another_key_system_text_tools_or_history_never_match() -> None:
    answer = assistant("Hello!")
    expected = continuation(request(user("hi")), SCOPE, answer)
    follow = (user("hi"), answer, user("more"))
    tool = ToolSpec(name="read", parameters={"type": "object"})
    for scope, req in [("key 2|anthropic|claude-sonnet-4-6", request(*follow)),
                       (SCOPE, request(*follow, system="Be long.")),
                       (SCOPE, request(*follow, tools=(tool,))),
                       (SCOPE, request(user("hi!"), answer, user("more"))),
                       (SCOPE, request(user("hi"), assistant("Hello"), user("more")))]:
        assert [p.digest for p in resume_points(req, scope)] != [expected]


def test_every_assistant_message_is_a_candidate_latest_first() -> None:
    req = request(user("1"), assistant("a"), user("2"), assistant("b"), user("3"))
    points = resume_points(req, SCOPE)
    assert [p.index for p in points] == [3, 1]
    assert [len(p.new_turns) for p in points] == [1, 3]
    chain = digest_chain(req, SCOPE)
    assert [p.digest for p in points] == [chain[4], chain[2]]
    assert resume_points(request(user("1"), assistant("a")), SCOPE) == []  # nothing new


def test_a_tool_call_echoed_in_either_dialect_is_the_same_conversation() -> None:
    """An OpenAI client echoes a call as ``tool_calls`` with a JSON string, an Anthropic one
    as a ``tool_use`` block with an object: both continue the same answer."""
    openai = decode_chat_request(json.dumps({"model": "m", "messages": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "read a"},
        {"role": "assistant", "content": None, "tool_calls": [{
            "id": "toolu_1", "type": "function",
            "function": {"name": "read", "arguments": "{\"path\": \"a\"}"}}]},
        {"role": "tool", "tool_call_id": "toolu_1", "content": "data"}]}).encode())
    anthropic = decode_messages_request(json.dumps({
        "model": "m", "max_tokens": 10, "system": "Be brief.", "messages": [
            {"role": "user", "content": "read a"},
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": "toolu_1", "name": "read", "input": {"path": "a"}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "data"}]}]}).encode())
    [a] = resume_points(openai, SCOPE)
    [b] = resume_points(anthropic, SCOPE)
    assert a.digest == b.digest
