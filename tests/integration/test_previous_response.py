"""Responses ``previous_response_id`` through ``olp start`` with the official ``openai`` SDK
and the fake ``claude`` (real subprocesses; issue #25, ADR 0023): a request naming an earlier
answer is answered exactly as if it had sent that conversation whole (streamed or not), a
streamed answer can be continued at once, ``store: false`` keeps nothing, and another key
can never continue this key's answer."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import openai
import trio
from olp_harness import FAKE_CLAUDE, in_thread, run_proxy

MODEL = "claude-sonnet-4-6"


def config() -> dict[str, Any]:
    return {"providers": {
        "enabled": {"openai": False, "mistral": False},
        "anthropic": {"binary": str(FAKE_CLAUDE), "max_concurrent": 2,
                      "env": {"FAKE_CLAUDE_ECHO": "1", "CLAUDE_CODE_OAUTH_TOKEN": "oauth-fake"},
                      "timeouts": {"first_output_s": 20, "idle_s": 10, "total_s": 60}}},
        "server": {"kill_grace_s": 30}}


def prompt_of(text: str) -> tuple[str, int]:
    """What the fake CLI was given: the hash and length of its stdin (its echo digest)."""
    echo = json.loads(text)
    return echo["stdin_sha256"], echo["stdin_chars"]


def new_key(home: Path) -> str:
    made = subprocess.run([sys.executable, "-m", "olp", "keys", "create", "kid", "--json"],
                          env={"PATH": "/usr/bin:/bin", "OLP_HOME": str(home)},
                          capture_output=True, text=True, timeout=30, check=True)
    return str(json.loads(made.stdout)["key"])


async def test_a_named_answer_continues_as_if_sent_whole(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with trio.fail_after(120):
        async with run_proxy(home, config()) as proxy:
            client = proxy.client()

            def converse() -> dict[str, Any]:
                first = client.responses.create(model=MODEL, instructions="Be terse.",
                                                input="My word is MANGO.")
                second = client.responses.create(
                    model=MODEL, instructions="Be terse.", input="What was my word?",
                    previous_response_id=first.id)
                # the same conversation sent whole (no-cache: answered by a spawn of its own)
                whole = client.responses.create(
                    model=MODEL, instructions="Be terse.", input=[
                        {"role": "user", "content": "My word is MANGO."},
                        {"role": "assistant", "content": first.output_text},
                        {"role": "user", "content": "What was my word?"}],
                    extra_headers={"Cache-Control": "no-cache"})
                streamed = list(client.responses.create(
                    model=MODEL, instructions="Be terse.", input="And again?",
                    previous_response_id=second.id, stream=True))
                done = streamed[-1].response
                at_once = client.responses.create(  # continued the moment its stream ended
                    model=MODEL, instructions="Be terse.", input="Once more?",
                    previous_response_id=done.id)
                return {"first": first, "second": second, "whole": whole, "done": done,
                        "at_once": at_once}

            got = await in_thread(converse)
            kid = await in_thread(lambda: new_key(home))

            def refused(token: str | None, **extra: Any) -> openai.APIStatusError:
                try:
                    proxy.client(token).responses.create(model=MODEL, input="Hi.", **extra)
                except openai.APIStatusError as exc:
                    return exc
                raise AssertionError("continued")

            stolen = await in_thread(lambda: refused(kid, previous_response_id=got["first"].id))

            def unkept() -> openai.APIStatusError:
                kept_not = client.responses.create(model=MODEL, input="Forget me.", store=False)
                return refused(None, previous_response_id=kept_not.id)

            not_stored = await in_thread(unkept)
    assert got["second"].id != got["first"].id
    second, whole = prompt_of(got["second"].output_text), prompt_of(got["whole"].output_text)
    assert second == whole  # the CLI was given exactly what a whole conversation gives it
    assert second[1] > prompt_of(got["first"].output_text)[1]
    assert got["done"].status == "completed"
    at_once = json.loads(got["at_once"].output_text)
    assert "Once more?" in at_once["stdin_tail"]
    assert at_once["stdin_chars"] > json.loads(got["done"].output_text)["stdin_chars"]
    for exc in (stolen, not_stored):  # another key's answer is as good as unknown
        assert exc.status_code == 400
        assert exc.body["code"] == "previous_response_not_found"  # type: ignore[index]
        assert exc.body["param"] == "previous_response_id"  # type: ignore[index]
