"""A model name longer than any real one is a 400 in every dialect (#29: a 4 MB model name
was echoed in the 404's message, the log line and the audit row)."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from olp.ir import ChatRequest
from olp.ir._anthropic_request import decode_count_tokens_request, decode_messages_request
from olp.ir._openai_request import decode_chat_request
from olp.ir._responses_request import decode_responses_request
from olp.ir._validation import MAX_MODEL_CHARS, InvalidRequest

MESSAGES = [{"role": "user", "content": "hi"}]
DECODERS: list[tuple[Callable[[bytes], ChatRequest], dict[str, object]]] = [
    (decode_chat_request, {"messages": MESSAGES}),
    (decode_messages_request, {"messages": MESSAGES, "max_tokens": 5}),
    (decode_count_tokens_request, {"messages": MESSAGES}),
    (decode_responses_request, {"input": "hi"}),
]


@pytest.mark.parametrize(("decode", "rest"), DECODERS)
def test_a_model_name_past_the_bound_is_invalid(decode: Callable[[bytes], ChatRequest],
                                                rest: dict[str, object]) -> None:
    longest = "m" * MAX_MODEL_CHARS
    assert decode(json.dumps({"model": longest, **rest}).encode()).model == longest
    with pytest.raises(InvalidRequest) as caught:
        decode(json.dumps({"model": "m" * 4_000_000, **rest}).encode())
    assert caught.value.param == "model" and len(str(caught.value)) < 200
