"""codex's ChatGPT login and its refresh, as the pinned codex 0.171.0 does them (issue #41).

Measured (``tests/fixtures/cli-reference/login_refresh/README.md``): the login is ``auth.json``
in ``CODEX_HOME``, ``{"auth_mode": "chatgpt", "OPENAI_API_KEY": null, "tokens": {"id_token",
"access_token", "refresh_token", "account_id"}, "last_refresh"}``, the tokens JWTs whose ``exp``
says when they end. codex refreshes when fewer than 300 s remain on the access token (290 s: it
refreshed; 310 s: it did not; an old ``last_refresh`` alone no longer triggers one) and after a
401 from the API, holding ``flock`` on ``auth.lock`` beside the file, by posting JSON
``{client_id, grant_type, refresh_reason, refresh_token}`` to
``https://auth.openai.com/oauth/token``; it writes the new tokens and ``last_refresh`` through a
temporary ``.auth-XXXXXX`` renamed over the file. A spent refresh token is answered 401
``refresh_token_reused``. Given an ``auth.json`` whose refresh token is empty, codex answers
normally while the access token lasts (a refresh it tries then is refused and spends nothing):
so that is what a spawn gets.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from olp.providers._login_format import LockSpec, Tokens

from ._credentials import AUTH_IN_HOME, KEY_VARS, _jwt_exp, api_key_mode, auth_file

#: codex's OAuth client in 0.171.0.
CLIENT_ID: Final = "app_EMoamEEZ73f0CkXaXp7hrann"
#: The codes of a 401 that end the login (codex's own list: ``refresh_token_expired``,
#: ``refresh_token_reused``, ``refresh_token_invalidated``).
ENDED: Final = frozenset({"refresh_token_expired", "refresh_token_reused",
                          "refresh_token_invalidated"})


class CodexLogin:
    """:class:`~olp.providers._login_format.LoginFormat` of codex."""

    cli = "codex"
    margin_s = 300.0
    token_url = "https://auth.openai.com/oauth/token"
    indent: int | None = 2
    lock = LockSpec("flock", "auth.lock")

    def path(self, env: Mapping[str, str], real_home: Path) -> Path | None:
        if any(env.get(k, "").strip() for k in KEY_VARS):
            return None
        return auth_file(env, real_home)

    def parse(self, data: object) -> Tokens | None:
        if not isinstance(data, dict) or api_key_mode(data):
            return None
        tokens = data.get("tokens")
        access = tokens.get("access_token") if isinstance(tokens, dict) else None
        if not isinstance(tokens, dict) or not isinstance(access, str) or not access:
            return None
        refresh = tokens.get("refresh_token")
        return Tokens(access, refresh if isinstance(refresh, str) and refresh else None,
                      _jwt_exp(access), data)

    def refresh_body(self, tokens: Tokens) -> dict[str, Any]:
        return {"client_id": CLIENT_ID, "grant_type": "refresh_token",
                "refresh_reason": "proactive_expiry", "refresh_token": tokens.refresh}

    def refreshed(self, tokens: Tokens, answer: Mapping[str, Any], now: float
                  ) -> dict[str, Any]:
        access = answer.get("access_token")
        if not isinstance(access, str) or not access:
            raise ValueError("the token endpoint's answer has no access_token")
        kept = dict(tokens.data["tokens"])
        for name in ("id_token", "access_token", "refresh_token"):
            value = answer.get(name)
            if isinstance(value, str) and value:
                kept[name] = value
        stamp = datetime.datetime.fromtimestamp(now, datetime.UTC)
        return {**tokens.data, "tokens": kept,
                "last_refresh": stamp.strftime("%Y-%m-%dT%H:%M:%S.%fZ")}

    def refused_for_good(self, status: int, answer: object) -> str | None:
        error = answer.get("error") if isinstance(answer, dict) else None
        code = error.get("code") if isinstance(error, dict) else error
        if not isinstance(code, str) and isinstance(answer, dict):
            code = answer.get("code")
        if status == 401 and isinstance(code, str) and code.lower() in ENDED:
            return f"the refresh token was refused ({code.lower()})"
        return None

    def spawn_env(self, tokens: Tokens) -> dict[str, str]:
        return {}

    def spawn_files(self, tokens: Tokens) -> dict[str, bytes]:
        data = dict(tokens.data)
        data["tokens"] = {**data["tokens"], "refresh_token": ""}
        return {AUTH_IN_HOME: json.dumps(data, indent=2).encode()}


LOGIN: Final = CodexLogin()
