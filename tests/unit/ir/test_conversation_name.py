"""A client's own name for a conversation (issue #25): chat and Responses
``prompt_cache_key`` and Messages ``metadata.user_id`` reach ``ChatRequest.conversation``,
are part of the conversation's identity (the same history under another name never
continues), and are not part of the response cache's key."""

from __future__ import annotations

import json

import msgspec
import pytest

from olp.cache import cache_key
from olp.ir import ChatRequest, Message, TextPart
from olp.ir._anthropic_request import decode_messages_request
from olp.ir._conversation import continuation, resume_points
from olp.ir._openai_request import decode_chat_request
from olp.ir._responses_request import decode_responses_request
from olp.ir._validation import InvalidRequest

SCOPE = "1|anthropic|claude-sonnet-4-6"
MESSAGES = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "Hello!"},
            {"role": "user", "content": "and now?"}]


def named(chat: ChatRequest, name: str | None) -> ChatRequest:
    return msgspec.structs.replace(chat, conversation=name)


def test_each_dialect_carries_the_name() -> None:
    chat = decode_chat_request(json.dumps({"model": "m", "messages": MESSAGES,
                                           "prompt_cache_key": "conv-1"}).encode())
    responses = decode_responses_request(json.dumps({
        "model": "m", "input": "hi", "prompt_cache_key": "conv-2",
        "previous_response_id": "resp_x", "store": False}).encode())
    messages = decode_messages_request(json.dumps({
        "model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}],
        "metadata": {"user_id": "user_abc_session_123"}}).encode())
    assert chat.conversation == "conv-1"
    assert (responses.conversation, responses.previous_response_id, responses.store) == \
        ("conv-2", "resp_x", False)
    assert messages.conversation == "user_abc_session_123" == messages.user
    plain = decode_responses_request(b'{"model": "m", "input": "hi"}')
    assert (plain.conversation, plain.previous_response_id, plain.store) == (None, None, True)


@pytest.mark.parametrize("body", [
    {"model": "m", "messages": MESSAGES, "prompt_cache_key": ""},
    {"model": "m", "messages": MESSAGES, "prompt_cache_key": "k" * 513},
])
def test_a_bad_name_is_a_400_naming_it(body: dict[str, object]) -> None:
    with pytest.raises(InvalidRequest) as info:
        decode_chat_request(json.dumps(body).encode())
    assert info.value.param == "prompt_cache_key"


def test_the_name_is_part_of_the_conversation_not_of_the_cache_key() -> None:
    follow = decode_chat_request(json.dumps({"model": "m", "messages": MESSAGES}).encode())
    first = ChatRequest(model="m", messages=(Message(role="user",
                                                     content=(TextPart(text="hi"),)),))
    answer = Message(role="assistant", content=(TextPart(text="Hello!"),))
    kept = continuation(named(first, "a"), SCOPE, answer)
    assert resume_points(named(follow, "a"), SCOPE)[0].digest == kept
    assert resume_points(named(follow, "b"), SCOPE)[0].digest != kept  # another name
    assert resume_points(follow, SCOPE)[0].digest != kept  # no name at all
    assert continuation(first, SCOPE, answer) == resume_points(follow, SCOPE)[0].digest
    key = cache_key(follow, provider="anthropic", model="claude-sonnet-4-6")
    assert cache_key(named(follow, "a"), provider="anthropic", model="claude-sonnet-4-6") == key
