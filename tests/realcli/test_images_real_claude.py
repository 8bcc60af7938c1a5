"""Images on claude hops, with the real claude through ``olp start`` against the loopback mock:
an OpenAI ``image_url`` data URL (and an Anthropic image block through the Messages dialect)
reaches the upstream request as an Anthropic base64 image block; a remote URL is a clear 400.
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest
import trio
from olp_harness import in_thread, real_cli, run_proxy
from test_proxy_real_claude import config, start

#: A 1×1 transparent PNG.
PNG = base64.b64encode(bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000001e221bc330000000049454e44ae426082")).decode()


def image_blocks(mock: Any) -> list[dict[str, Any]]:
    [request] = [r for r in mock.requests if r["path"].split("?")[0] == "/v1/messages"]
    [user] = [m for m in request["body"]["messages"] if m["role"] == "user"]
    return [b for b in user["content"] if isinstance(b, dict) and b.get("type") == "image"]


async def test_an_openai_data_url_image_reaches_claudes_upstream(
        tmp_path: Path, nursery: trio.Nursery) -> None:
    claude = real_cli("OLP_REAL_CLAUDE")
    with trio.fail_after(90):
        mock = await start(nursery, "success")
        async with run_proxy(tmp_path / "home", config(claude, mock)) as proxy:
            answer = await in_thread(lambda: proxy.client().chat.completions.create(
                model="sonnet", messages=[{"role": "user", "content": [
                    {"type": "text", "text": "What is in this picture?"},
                    {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}},
                ]}]))

            def remote() -> openai.BadRequestError:
                with pytest.raises(openai.BadRequestError) as info:
                    proxy.client().chat.completions.create(model="sonnet", messages=[
                        {"role": "user", "content": [
                            {"type": "text", "text": "and this?"},
                            {"type": "image_url",
                             "image_url": {"url": "https://example.com/cat.png"}}]}])
                return info.value

            refused = await in_thread(remote)
    assert answer.choices[0].message.content == "Hello from the mock upstream."
    # claude may add its own cache_control to the block; the image itself is unchanged
    assert [b["source"] for b in image_blocks(mock)] == [
        {"type": "base64", "media_type": "image/png", "data": PNG}]
    assert refused.status_code == 400 and "does not fetch" in refused.message


async def test_an_anthropic_image_block_reaches_claudes_upstream(
        tmp_path: Path, nursery: trio.Nursery) -> None:
    claude = real_cli("OLP_REAL_CLAUDE")
    with trio.fail_after(90):
        mock = await start(nursery, "success")
        async with run_proxy(tmp_path / "home", config(claude, mock)) as proxy:
            client = anthropic.Anthropic(base_url=proxy.url, api_key=proxy.token)
            message = await in_thread(lambda: client.messages.create(
                model="sonnet", max_tokens=100, messages=[{"role": "user", "content": [
                    {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                                 "data": PNG}},
                    {"type": "text", "text": "Describe it."}]}]))
    assert message.content[0].type == "text"
    assert image_blocks(mock)[0]["source"]["data"] == PNG
