"""claude's OAuth login and its refresh, as the pinned claude 2.1.332 does them (issue #41).

Measured (``tests/fixtures/cli-reference/login_refresh/README.md``): the login is
``.credentials.json`` in claude's config dir, ``{"claudeAiOauth": {"accessToken",
"refreshToken", "expiresAt" (milliseconds), "scopes", "subscriptionType", "rateLimitTier"}}``.
claude refreshes when fewer than 300 s remain (its check is ``now + 300000 >= expiresAt``),
holding the directory lock ``.oauth_refresh.lock`` in the config dir, by posting JSON
``{grant_type, refresh_token, client_id, scope}`` to
``https://platform.claude.com/v1/oauth/token``; it writes ``expiresAt = now + expires_in`` and
keeps the old refresh token when the answer has none. A spent refresh token is answered 400
``invalid_grant``. Given only ``CLAUDE_CODE_OAUTH_TOKEN`` (no file), claude never calls the
token endpoint, not within its margin and not after a 401: so that is what a spawn gets.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final, TypeGuard

from olp.providers._login_format import LockSpec, Tokens

from ._credentials import TOKEN_VARS, credentials_file

#: claude's OAuth client (its ``CLIENT_ID``) and the scopes its refresh asks for (its
#: default list, whatever the file holds), in 2.1.332.
CLIENT_ID: Final = "9d1c250a-e61b-44d9-88ed-5944d1962f5e"
SCOPES: Final = ("user:profile user:inference user:sessions:claude_code user:mcp_servers "
                 "user:file_upload user:plugins")
OAUTH_KEY: Final = "claudeAiOauth"


class ClaudeLogin:
    """:class:`~olp.providers._login_format.LoginFormat` of claude."""

    cli = "claude"
    margin_s = 300.0
    token_url = "https://platform.claude.com/v1/oauth/token"
    indent: int | None = None
    lock = LockSpec("mkdir", ".oauth_refresh.lock")

    def path(self, env: Mapping[str, str], real_home: Path) -> Path | None:
        if any(env.get(k) for k in TOKEN_VARS):
            return None
        return credentials_file(env, real_home)

    def parse(self, data: object) -> Tokens | None:
        if not isinstance(data, dict) or not isinstance(oauth := data.get(OAUTH_KEY), dict):
            return None
        access, refresh = oauth.get("accessToken"), oauth.get("refreshToken")
        if not isinstance(access, str) or not access:
            return None  # none, or the logged-out stub claude writes after a failed refresh
        expires = oauth.get("expiresAt")
        return Tokens(access, refresh if isinstance(refresh, str) and refresh else None,
                      expires / 1000 if _number(expires) else None, data)

    def refresh_body(self, tokens: Tokens) -> dict[str, Any]:
        return {"grant_type": "refresh_token", "refresh_token": tokens.refresh,
                "client_id": CLIENT_ID, "scope": SCOPES}

    def refreshed(self, tokens: Tokens, answer: Mapping[str, Any], now: float
                  ) -> dict[str, Any]:
        access, lifetime = answer.get("access_token"), answer.get("expires_in")
        if not isinstance(access, str) or not access or not _number(lifetime):
            raise ValueError("the token endpoint's answer has no access_token/expires_in")
        refresh = answer.get("refresh_token")
        oauth = dict(tokens.data[OAUTH_KEY])
        oauth.update(accessToken=access, expiresAt=int((now + lifetime) * 1000),
                     refreshToken=refresh if isinstance(refresh, str) and refresh
                     else tokens.refresh)
        scope = answer.get("scope")
        if isinstance(scope, str) and scope.strip():
            oauth["scopes"] = scope.split()
        return {**tokens.data, OAUTH_KEY: oauth}

    def refused_for_good(self, status: int, answer: object) -> str | None:
        error = answer.get("error") if isinstance(answer, dict) else None
        if status in (400, 401) and error in ("invalid_grant", "invalid_client"):
            return f"the refresh token was refused ({error})"
        return None

    def spawn_env(self, tokens: Tokens) -> dict[str, str]:
        return {"CLAUDE_CODE_OAUTH_TOKEN": tokens.access}

    def spawn_files(self, tokens: Tokens) -> dict[str, bytes]:
        return {}


def _number(value: object) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


LOGIN: Final = ClaudeLogin()
