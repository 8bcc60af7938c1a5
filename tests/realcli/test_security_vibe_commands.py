"""A key holder's prompt is text for the model, never a vibe command: the real ``vibe``
through ``olp start`` against the loopback mock, with a prompt that is one of vibe's own
slash commands. ``/proxy-setup`` would write ``HTTPS_PROXY`` into ``$VIBE_HOME/.env``, which
OLP links to the owner's real ``~/.vibe/.env`` (where the API key lives).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import trio
from olp_harness import in_thread, real_cli, run_proxy
from test_proxy_real_vibe import KEY, config, start

COMMANDS = ["/proxy-setup HTTPS_PROXY http://127.0.0.1:9", "  /reload", "/teleport"]


@pytest.mark.parametrize("prompt", COMMANDS, ids=["proxy-setup", "reload", "teleport"])
async def test_a_slash_command_reaches_the_model_as_text_and_changes_no_file(
        tmp_path: Path, nursery: trio.Nursery, prompt: str) -> None:
    vibe = real_cli("OLP_REAL_VIBE")
    real_home = tmp_path / "realhome"
    (real_home / ".vibe").mkdir(parents=True)
    dotenv = real_home / ".vibe" / ".env"
    dotenv.write_text(f"MISTRAL_API_KEY={KEY}\n")
    with trio.fail_after(60):
        mock = await start(nursery, "success")
        async with run_proxy(tmp_path / "home", config(vibe, mock, key_in_env=False),
                             env={"HOME": str(real_home)}) as proxy:
            answer = await in_thread(lambda: proxy.client().chat.completions.create(
                model="devstral", messages=[{"role": "user", "content": prompt}]))
    assert dotenv.read_text() == f"MISTRAL_API_KEY={KEY}\n"
    assert answer.choices[0].message.content  # the model answered
    [chat] = mock.chat_requests()
    [user] = [m for m in chat["body"]["messages"] if m.get("role") == "user"]
    assert prompt.strip() in str(user["content"])
