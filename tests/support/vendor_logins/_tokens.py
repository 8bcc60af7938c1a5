"""The vendors' side of a login: single-use refresh tokens and an API that takes only the
newest access token, as the public reports describe the real ones (issue #41).

A :class:`Vendor` holds one :class:`Family` per login it issued (an account). Refreshing with
a family's current refresh token rotates both tokens; a refresh token that was already used is
refused the vendor's way (claude: 400 ``invalid_grant``; codex: 401 ``refresh_token_reused``)
and so is an unknown one. An access token is accepted by the API only while it is its family's
newest and has not expired. Every refresh attempt is recorded (:attr:`Vendor.refreshes`).

Times are wall-clock seconds (``time.time()``): the CLIs read the expiry from the files.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime
import json
import secrets
import time
from collections.abc import Mapping
from typing import Any, Literal

import h11

Kind = Literal["claude", "codex"]

#: claude's scopes in a subscription login (what `claude auth login` asks for).
CLAUDE_SCOPES = ("user:inference", "user:profile", "user:sessions:claude_code")


@dataclasses.dataclass(slots=True)
class Family:
    """One login at the vendor: the tokens it issued, newest last."""

    name: str
    access: str
    refresh: str
    expires_at: float
    id_token: str = ""  # codex
    generation: int = 0
    spent: set[str] = dataclasses.field(default_factory=set)
    old_access: set[str] = dataclasses.field(default_factory=set)


@dataclasses.dataclass(slots=True)
class Vendor:
    """One vendor's token endpoint and API check. ``lifetime_s``: how long an access token
    it issues lives."""

    kind: Kind
    lifetime_s: float = 3600.0
    families: dict[str, Family] = dataclasses.field(default_factory=dict)
    refreshes: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    api_refusals: list[dict[str, Any]] = dataclasses.field(default_factory=list)

    # --- issuing ----------------------------------------------------------------------------

    def login(self, name: str = "default", *, expires_in: float | None = None) -> Family:
        """A new login (as after ``claude auth login`` / ``codex login``) whose access token
        expires in ``expires_in`` (default :attr:`lifetime_s`) seconds."""
        family = Family(name, "", "", 0.0)
        self.families[name] = family
        self._rotate(family, self.lifetime_s if expires_in is None else expires_in)
        return family

    def login_file(self, family: Family) -> dict[str, Any]:
        """The CLI's own login file for ``family`` (claude ``.credentials.json``, codex
        ``auth.json``), as the CLI writes it after signing in."""
        if self.kind == "claude":
            return {"claudeAiOauth": {
                "accessToken": family.access, "refreshToken": family.refresh,
                "expiresAt": int(family.expires_at * 1000), "scopes": list(CLAUDE_SCOPES),
                "subscriptionType": "max", "rateLimitTier": "default_claude_max_20x"}}
        return {"auth_mode": "chatgpt", "OPENAI_API_KEY": None,
                "tokens": {"id_token": family.id_token, "access_token": family.access,
                           "refresh_token": family.refresh, "account_id": _account(family)},
                "last_refresh": _iso(time.time())}

    def _rotate(self, family: Family, expires_in: float) -> None:
        family.generation += 1
        tag = f"{family.name}-{family.generation}-{secrets.token_hex(4)}"
        if family.access:
            family.old_access.add(family.access)
        family.expires_at = time.time() + expires_in
        if self.kind == "claude":
            family.access, family.refresh = f"sk-ant-oat01-{tag}", f"sk-ant-ort01-{tag}"
        else:
            claims = {**_codex_claims(family), "jti": tag}
            family.access = jwt({**claims, "exp": int(family.expires_at)})
            family.id_token = jwt({**claims, "exp": int(time.time()) + 3600,
                                   "email": f"{family.name}@example.test"})
            family.refresh = f"rt-{tag}"

    # --- the token endpoint -----------------------------------------------------------------

    def refresh(self, body: Mapping[str, Any], headers: Mapping[str, str]) -> tuple[int, Any]:
        """Answer one refresh request (the parsed body); records it."""
        token = body.get("refresh_token")
        family = next((f for f in self.families.values() if f.refresh == token), None)
        spent = next((f for f in self.families.values() if token in f.spent), None)
        record: dict[str, Any] = {"at": time.time(), "body": dict(body),
                                  "headers": dict(headers),
                                  "family": (family or spent).name if (family or spent) else None}
        self.refreshes.append(record)
        if family is None:
            record["outcome"] = "reused" if spent is not None else "unknown"
            return self._refused(reused=spent is not None)
        family.spent.add(family.refresh)
        self._rotate(family, self.lifetime_s)
        record["outcome"] = "ok"
        if self.kind == "claude":
            return 200, {"token_type": "Bearer", "access_token": family.access,
                         "expires_in": int(self.lifetime_s), "refresh_token": family.refresh,
                         "scope": " ".join(CLAUDE_SCOPES),
                         "organization": {"uuid": "org-mock", "name": "Mock Org"},
                         "account": {"uuid": f"acct-{family.name}",
                                     "email_address": f"{family.name}@example.test"}}
        return 200, {"id_token": family.id_token, "access_token": family.access,
                     "refresh_token": family.refresh}

    def _refused(self, *, reused: bool) -> tuple[int, Any]:
        if self.kind == "claude":
            return 400, {"error": "invalid_grant",
                         "error_description": "Refresh token not found or invalid"}
        code = "refresh_token_reused" if reused else "refresh_token_invalidated"
        return 401, {"error": {
            "message": "Your refresh token has already been used to generate a new access "
                       "token. Please try signing in again." if reused else
                       "Your refresh token has been invalidated.",
            "type": "invalid_request_error", "param": None, "code": code}}

    def ok_refreshes(self, family: str | None = None) -> int:
        return sum(1 for r in self.refreshes if r.get("outcome") == "ok"
                   and (family is None or r["family"] == family))

    # --- the API ----------------------------------------------------------------------------

    def gate(self, request: h11.Request) -> tuple[int, Any] | None:
        """A mock's ``gate`` (``mockhttp.RequestLog.gate``): its API takes only this vendor's
        newest access tokens."""
        value = next((v for k, v in request.headers if k.lower() == b"authorization"), b"")
        return self.check_bearer(value.decode("latin-1") or None)

    def check_bearer(self, authorization: str | None) -> tuple[int, Any] | None:
        """``None`` when ``authorization`` carries an access token the API takes now (its
        family's newest, unexpired); else the vendor's 401."""
        token = (authorization or "").removeprefix("Bearer ").strip()
        for family in self.families.values():
            if token == family.access and family.expires_at > time.time():
                return None
        why = "expired" if any(token == f.access for f in self.families.values()) else \
            "superseded" if any(token in f.old_access for f in self.families.values()) \
            else "unknown"
        self.api_refusals.append({"at": time.time(), "why": why})
        if self.kind == "claude":
            return 401, {"type": "error", "error": {
                "type": "authentication_error",
                "message": "OAuth token has expired. Please obtain a new token or refresh "
                           "your existing token." if why == "expired"
                else "Invalid bearer token"}}
        return 401, {"error": {"message": "Provided authentication token is expired. Please "
                               "try signing in again." if why == "expired" else
                               "Invalid authentication token.",
                               "type": "invalid_request_error", "param": None,
                               "code": "token_expired" if why == "expired"
                               else "invalid_api_key"}}


def jwt(claims: Mapping[str, Any]) -> str:
    """An unsigned JWT (``alg: none``) carrying ``claims``: codex reads them, never checks a
    signature."""
    def part(obj: Any) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()
    return f"{part({'alg': 'none', 'typ': 'JWT'})}.{part(dict(claims))}.sig"


def _codex_claims(family: Family) -> dict[str, Any]:
    return {"iat": int(time.time()), "sub": f"user-{family.name}",
            "https://api.openai.com/auth": {"chatgpt_plan_type": "plus",
                                            "chatgpt_account_id": _account(family),
                                            "chatgpt_user_id": f"user-{family.name}"}}


def _account(family: Family) -> str:
    return f"acct-{family.name}"


def _iso(when: float) -> str:
    return datetime.datetime.fromtimestamp(when, datetime.UTC).strftime(
        "%Y-%m-%dT%H:%M:%S.%fZ")
