"""The bounded audit trail against a real ``olp start`` over real sockets (issue #29,
docs/adr/0021-bounded-audit.md): a flood of keyless requests down one connection, each with a
12 KB path, leaves the burst and summary rows that count the rest exactly; a 4 MB model name
is a 400 and a 250-character one a 404 whose row is cut; ``DELETE /cache?key=`` records its
action. The counts are read after a clean stop (the last summaries are written at shutdown),
so nothing here depends on timing."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import httpx
import trio
from olp_harness import FAKE_CLAUDE, in_thread, run_proxy

from olp.accounting import MAX_ENDPOINT_CHARS, MAX_MODEL_CHARS

FLOOD = 300


def config() -> dict[str, Any]:
    return {"providers": {"enabled": {"openai": False, "mistral": False},
                          "anthropic": {"binary": str(FAKE_CLAUDE),
                                        "env": {"CLAUDE_CODE_OAUTH_TOKEN": "oauth-fake"}}},
            "routing": {"chains": {"smart": [
                {"name": "sub", "provider": "anthropic", "model": "claude-sonnet-4-6"}]}}}


async def test_a_flood_a_huge_model_and_an_action_leave_a_bounded_trail(tmp_path: Path) -> None:
    home = tmp_path / "home"
    # 12 KB: under h11's 16 KiB limit on an incomplete head, so never a 431 however the
    # request line is split into segments (a longer path is refused 431, or not, by chance)
    path = "/v1/" + "p" * 12_000
    huge = "m" * (4 * 1024 * 1024)
    with trio.fail_after(120):
        async with run_proxy(home, config()) as proxy:
            def flood() -> set[int]:
                with httpx.Client(base_url=proxy.url, timeout=30) as client:  # one connection
                    return {client.get(path).status_code for _ in range(FLOOD)}

            assert await in_thread(flood) == {401}
            owner = {"Authorization": f"Bearer {proxy.token}"}
            missing = await in_thread(lambda: httpx.post(
                f"{proxy.url}/v1/chat/completions", headers=owner, timeout=60,
                json={"model": huge, "messages": [{"role": "user", "content": "hi"}]}))
            assert missing.status_code == 400 and len(missing.content) < 1000
            unknown = await in_thread(lambda: httpx.post(
                f"{proxy.url}/v1/chat/completions", headers=owner, timeout=60,
                json={"model": "m" * 250, "messages": [{"role": "user", "content": "hi"}]}))
            assert unknown.status_code == 404 and len(unknown.content) < 1000
            cleared = await in_thread(lambda: httpx.delete(
                f"{proxy.url}/cache", params={"key": "3"}, headers=owner, timeout=30))
            assert cleared.status_code == 200
    with sqlite3.connect(home / "olp.db") as db:
        db.row_factory = sqlite3.Row
        rows = [dict(r) for r in db.execute("SELECT * FROM audit ORDER BY id")]
    flood_rows = [r for r in rows if r["status"] == 401]
    kept = [r for r in flood_rows if r["outcome"] != "suppressed"]
    [summary] = [r for r in flood_rows if r["outcome"] == "suppressed"]
    assert len(kept) == 10 and len(kept) + summary["suppressed"] == FLOOD
    assert all(len(r["endpoint"]) <= MAX_ENDPOINT_CHARS for r in rows)
    assert kept[0]["endpoint"].startswith("GET /v1/ppp") and "…[+" in kept[0]["endpoint"]
    [model_row] = [r for r in rows if r["status"] == 404]
    assert len(model_row["requested_model"]) <= MAX_MODEL_CHARS
    assert "…[+" in model_row["requested_model"]
    [invalid] = [r for r in rows if r["status"] == 400]
    assert invalid["requested_model"] is None
    [action] = [r for r in rows if r["endpoint"] == "DELETE /cache"]
    assert (action["action"], action["key_name"]) == ("clear_cache 3", "owner-env")
    assert sum(len(str(v)) for r in rows for v in r.values()) < 50_000  # not megabytes
