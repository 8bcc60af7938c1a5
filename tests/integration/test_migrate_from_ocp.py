"""An OCP household after ``olp migrate-from-ocp``: the OCP key, unchanged, works through
``olp start`` with the official ``openai`` SDK, and its OCP daily quota is its limit."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path

import trio
from olp_harness import FAKE_CLAUDE, in_thread, run_proxy

KID = "ocp_" + "Kq3" * 10 + "x_"


async def test_an_ocp_key_works_unchanged_with_its_quota(tmp_path: Path) -> None:
    ocp = tmp_path / ".ocp" / "ocp.db"
    ocp.parent.mkdir()
    with closing(sqlite3.connect(ocp)) as c, c:
        c.execute("CREATE TABLE api_keys (id INTEGER PRIMARY KEY AUTOINCREMENT, key TEXT "
                  "UNIQUE NOT NULL, name TEXT NOT NULL, created_at TEXT NOT NULL DEFAULT "
                  "(datetime('now')), revoked INTEGER NOT NULL DEFAULT 0, quota_daily INTEGER)")
        c.execute("INSERT INTO api_keys (key, name, quota_daily) VALUES (?, 'kid', 40)", (KID,))
    home = tmp_path / "olp"
    done = await in_thread(lambda: subprocess.run(
        [sys.executable, "-m", "olp", "migrate-from-ocp"], timeout=30, capture_output=True,
        text=True, env={"PATH": "/usr/bin:/bin", "OLP_HOME": str(home), "HOME": str(tmp_path)}))
    assert done.returncode == 0, done.stderr
    assert "Imported 1 key(s)" in done.stdout and "ocp:1 -> key" in done.stdout
    config = {"providers": {"enabled": {"openai": False, "mistral": False},
                            "anthropic": {"binary": str(FAKE_CLAUDE),
                                          "env": {"CLAUDE_CODE_OAUTH_TOKEN": "oauth-fake"}}}}
    with trio.fail_after(60):
        async with run_proxy(home, config) as proxy:
            client = proxy.client(KID)
            raw = await in_thread(lambda: client.chat.completions.with_raw_response.create(
                model="claude-sonnet-4-6", messages=[{"role": "user", "content": "hi"}]))
    answer = raw.parse()
    assert answer.choices[0].message.content == "Hello from the mock upstream."
    assert raw.headers["x-ratelimit-limit-requests"] == "40"
    assert raw.headers["x-ratelimit-remaining-requests"] == "39"
