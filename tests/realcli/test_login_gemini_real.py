"""The real gemini's Google-account login through ``olp start`` (issue #41): the spawn
refreshes its own token and the new one lands in the owner's real ``oauth_creds.json``.

Unlike claude and codex (whose logins OLP keeps, ``test_logins_real.py``), gemini refreshes
itself: OLP symlinks the owner's ``~/.gemini/oauth_creds.json`` and ``google_accounts.json``
into the spawn's private home and binds them writable into bubblewrap, gemini rewrites the file
in place through the link, and Google's refresh tokens can be used again
(``tests/fixtures/cli-reference/gemini/login_refresh/README.md``). Google is played by the
interceptor in ``tests/support/vendor_logins`` (token endpoint and Code Assist), reached through
gemini's own ``HTTPS_PROXY`` and ``NODE_EXTRA_CA_CERTS``; its API takes only the newest access
token.

Needs ``OLP_REAL_GEMINI`` (printed by ``scripts/install-real-clis``).
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from subprocess import CompletedProcess
from typing import Any

import trio
from olp_harness import in_thread, real_cli, run_proxy
from test_logins_real import ANSWER, answered, ask, health
from vendor_logins import Family, GoogleVendor, Interceptor, serve_interceptor

MODEL = "gemini-2.5-pro"  # a model of the registry's gemini block


def write_login(owner: Path, google: GoogleVendor, family: Family) -> Path:
    """The owner's ``~/.gemini`` after signing in with Google in ``gemini``: the token, the
    cached account and the chosen login; returns the token file."""
    directory = owner / ".gemini"
    directory.mkdir(parents=True, mode=0o700)
    files = {"oauth_creds.json": google.login_file(family),
             "google_accounts.json": google.accounts_file(family),
             "settings.json": {"security": {"auth": {"selectedType": "oauth-personal"}}}}
    for name, data in files.items():
        (directory / name).write_text(json.dumps(data, indent=2))
        (directory / name).chmod(0o600)
    return directory / "oauth_creds.json"


def config(gemini: str, interceptor: Interceptor) -> dict[str, Any]:
    """gemini alone (risk tier C: enabled explicitly), on the owner's Google login, its HTTPS
    through the interceptor; the sandbox shows it the test CA."""
    return {"providers": {
        "enabled": {"gemini": True, "anthropic": False, "openai": False, "mistral": False,
                    "qwen": False},
        "gemini": {"binary": gemini, "env": interceptor.env_for("gemini"),
                   "sandbox_read_only": [str(interceptor.ca.ca_file.parent)],
                   "timeouts": {"first_output_s": 45, "idle_s": 20, "total_s": 55}}},
        "routing": {"chains": {"c": [{"provider": "gemini", "model": MODEL}]}},
        "server": {"kill_grace_s": 1}}


async def owners_gemini(gemini: str, owner: Path,
                        interceptor: Interceptor) -> CompletedProcess[bytes]:
    """The owner's own ``gemini -p``, as they run it at home (their ``~/.gemini``), answering
    one prompt against the same Google."""
    env = {"PATH": os.environ["PATH"], "HOME": str(owner), "LANG": "C.UTF-8", "TERM": "dumb",
           "NO_COLOR": "1", **interceptor.env_for("gemini")}
    return await trio.run_process(
        [gemini, "-p", "Say hello.", "-o", "stream-json", "-m", MODEL, "--skip-trust"],
        env=env, cwd=str(owner), stdin=b"", capture_stdout=True, capture_stderr=True,
        check=False)


async def test_a_spawn_refreshes_into_the_owners_file_and_the_owners_gemini_keeps_working(
        tmp_path: Path, nursery: trio.Nursery) -> None:
    gemini = real_cli("OLP_REAL_GEMINI")
    interceptor: Interceptor = await nursery.start(serve_interceptor, tmp_path / "ca")
    google = interceptor.google
    family = google.login("owner", expires_in=60)  # inside gemini's 5-min refresh window
    first, refresh = family.access, family.refresh
    owner = tmp_path / "owner"
    creds = write_login(owner, google, family)
    inode = creds.stat().st_ino
    with trio.fail_after(60):
        async with run_proxy(tmp_path / "olp", config(gemini, interceptor),
                             env={"HOME": str(owner)}) as proxy:
            response = await in_thread(lambda: ask(proxy))
            confined = health(proxy)["providers"]["gemini"]["sandbox"]
        assert answered(response), response.text
        assert confined == "bubblewrap"
        spawns, saved, st = list(google.refreshes), json.loads(creds.read_text()), creds.lstat()
        own = await owners_gemini(gemini, owner, interceptor)
    assert spawns and all(r["outcome"] == "ok" for r in spawns), spawns
    # gemini's own refresh (google-auth-library), not OLP's
    assert all(r["headers"]["user-agent"].startswith("google-api-nodejs-client/")
               for r in spawns), spawns
    assert saved["access_token"] == family.access != first  # the newest Google issued
    assert saved["refresh_token"] == refresh
    assert stat.S_ISREG(st.st_mode) and st.st_ino == inode  # rewritten in place, not replaced
    assert stat.S_IMODE(st.st_mode) == 0o600
    assert own.returncode == 0, own.stderr.decode()[-2000:]
    assert ANSWER in own.stdout.decode()
    assert google.refreshes == spawns  # none of its own: its token has about an hour left
    assert json.loads(creds.read_text())["access_token"] == family.access
    assert google.api_refusals == []  # every call carried the newest token
