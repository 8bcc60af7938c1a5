"""Bad input always gets a 4xx (never a 5xx or a hang) — fuzzed with hypothesis."""

from __future__ import annotations

import json
from typing import Any

import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_chat_app import AUTH, make_app

from olp.actors.testing import Exit, Line, event_line
from olp.ir import TextDelta

JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                 max_size=4),
    max_leaves=12)
FIELDS = ["model", "messages", "stream", "temperature", "max_tokens", "stop", "tools", "n",
          "stream_options", "response_format", "tool_choice", "top_p", "reasoning_effort"]


def near_valid() -> st.SearchStrategy[dict[str, Any]]:
    base = {"model": "sonnet", "messages": [{"role": "user", "content": "hi"}]}
    return st.builds(lambda key, value: {**base, key: value}, st.sampled_from(FIELDS), JSONISH)


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=st.one_of(st.binary(max_size=64), JSONISH.map(lambda v: json.dumps(v).encode()),
                      near_valid().map(lambda v: json.dumps(v).encode())))
async def test_any_body_gets_a_clear_answer(body: bytes) -> None:
    app, actor, spawner = make_app([Line(0.1, event_line(TextDelta(text="ok"))), Exit(0, 0)])
    async with trio.open_nursery() as nursery:
        await nursery.start(actor.run)
        with trio.fail_after(30):
            resp = await app.test_client().post(
                "/v1/chat/completions", data=body,
                headers={**AUTH, "Content-Type": "application/json"})
        data = await resp.get_data()
        assert resp.status_code == 200 or 400 <= resp.status_code < 500, (resp.status_code, data)
        if resp.status_code != 200:
            assert json.loads(data)["error"]["message"]
        nursery.cancel_scope.cancel()
    assert spawner.alive == 0
