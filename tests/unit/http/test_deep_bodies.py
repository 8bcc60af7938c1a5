"""A body nested thousands deep is a 400 on every endpoint that reads one, the same error
everywhere (issue #29, item 6): ``/v1/messages/count_tokens`` decodes through the one path the
chat endpoints use, so it no longer answers 500 with a ``RecursionError``."""

from __future__ import annotations

import json
from typing import Any

import pytest
import trio
import trio.testing
from test_chat_app import AUTH, make_app

DEPTH = 5000
NEST = "[" * DEPTH + "]" * DEPTH
DEEP_OBJECT = '{"a":' * DEPTH + "1" + "}" * DEPTH
#: Deep where a list of messages is expected, and deep inside a tool's free-form schema.
BODIES = {
    "messages": {
        "/v1/chat/completions": f'{{"model":"sonnet","messages":{NEST}}}',
        "/v1/messages": f'{{"model":"sonnet","max_tokens":5,"messages":{NEST}}}',
        "/v1/messages/count_tokens": f'{{"model":"sonnet","messages":{NEST}}}',
        "/v1/responses": f'{{"model":"sonnet","input":{NEST}}}',
    },
    "schema": {
        "/v1/chat/completions": '{"model":"sonnet","messages":[{"role":"user","content":"hi"}],'
                                '"tools":[{"type":"function","function":{"name":"f",'
                                f'"parameters":{DEEP_OBJECT}}}}}]}}',
        "/v1/messages": '{"model":"sonnet","max_tokens":5,"messages":[{"role":"user",'
                        '"content":"hi"}],"tools":[{"name":"f","input_schema":'
                        f'{DEEP_OBJECT}}}]}}',
        "/v1/messages/count_tokens": '{"model":"sonnet","messages":[{"role":"user",'
                                     '"content":"hi"}],"tools":[{"name":"f","input_schema":'
                                     f'{DEEP_OBJECT}}}]}}',
        "/v1/responses": '{"model":"sonnet","input":"hi","tools":[{"type":"function",'
                         f'"name":"f","parameters":{DEEP_OBJECT}}}]}}',
    },
}


async def post(path: str, body: str) -> tuple[int, Any]:
    app, _, spawner = make_app([], max_body=1 << 20)
    resp = await app.test_client().post(path, data=body.encode(), headers={
        **AUTH, "Content-Type": "application/json"})
    assert spawner.runs == []
    return resp.status_code, json.loads(await resp.get_data())


@pytest.mark.parametrize("kind", sorted(BODIES))
@pytest.mark.parametrize("path", sorted(BODIES["messages"]))
async def test_a_deeply_nested_body_is_a_400(autojump_clock: trio.testing.MockClock,
                                             kind: str, path: str) -> None:
    json.loads(BODIES[kind]["/v1/chat/completions"].replace(NEST, "[]")
               .replace(DEEP_OBJECT, "{}"))  # the shape is right: only the depth is wrong
    status, body = await post(path, BODIES[kind][path])
    assert status == 400, body
    error = body["error"]
    assert error["type"] == "invalid_request_error" and error["message"]
    if path.startswith("/v1/messages"):
        assert body["type"] == "error"


@pytest.mark.parametrize("kind", sorted(BODIES))
async def test_count_tokens_answers_a_deep_body_as_messages_does(
        autojump_clock: trio.testing.MockClock, kind: str) -> None:
    counted = await post("/v1/messages/count_tokens", BODIES[kind]["/v1/messages/count_tokens"])
    answered = await post("/v1/messages", BODIES[kind]["/v1/messages"])
    assert counted == answered


@pytest.mark.parametrize("kind", sorted(BODIES))
async def test_the_openai_dialects_give_the_same_code(autojump_clock: trio.testing.MockClock,
                                                      kind: str) -> None:
    """Chat Completions and Responses: same status, type and code (the param names differ:
    ``messages`` there, ``input`` here)."""
    chat = await post("/v1/chat/completions", BODIES[kind]["/v1/chat/completions"])
    responses = await post("/v1/responses", BODIES[kind]["/v1/responses"])
    assert chat[0] == responses[0] == 400
    assert (chat[1]["error"]["type"], chat[1]["error"]["code"]) == \
        (responses[1]["error"]["type"], responses[1]["error"]["code"])
